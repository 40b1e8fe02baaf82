//! Where a vault's index lives: outside the vault, in the user's cache.

use std::path::{Path, PathBuf};

/// `--index-dir`, then `CTXPACK_INDEX_DIR`, then
/// `${XDG_CACHE_HOME:-~/.cache}/ctxpack/<vault id>`.
pub fn index_dir(root: &Path, flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = flag {
        return Some(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os("CTXPACK_INDEX_DIR").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    Some(cache_root()?.join(vault_id(root)))
}

/// `${XDG_CACHE_HOME:-~/.cache}/ctxpack`: ctxpack's own folder in the
/// user's cache (none when neither variable is set).
pub fn cache_root() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".cache"))
        })?;
    Some(cache.join("ctxpack"))
}

/// The index folder of a view of the vault without the `hidden` folders:
/// a folder of its own inside `dir`, so that the whole vault's index and
/// the view's are never rebuilt into one another.
pub fn view_dir(dir: PathBuf, hidden: &[String]) -> PathBuf {
    if hidden.is_empty() {
        return dir;
    }
    let mut sorted = hidden.to_vec();
    sorted.sort();
    let hash = blake3::hash(sorted.join("\n").as_bytes()).to_hex();
    dir.join(format!("view-{}", &hash[..16]))
}

/// A readable, collision-free name for a vault: its folder name and a hash
/// of its canonical path.
pub fn vault_id(root: &Path) -> String {
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "vault".into())
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let hash = blake3::hash(root.as_os_str().as_encoded_bytes());
    format!("{name}-{}", &hash.to_hex()[..16])
}
