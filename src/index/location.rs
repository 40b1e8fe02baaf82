//! Where a vault's index lives: outside the vault, in the user's cache.

use std::path::{Path, PathBuf};

/// `--index-dir`, then `CTXPACK_INDEX_DIR`, then
/// `${XDG_CACHE_HOME:-~/.cache}/ctxpack/<vault id>`.
pub(crate) fn index_dir(root: &Path, flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = flag {
        return Some(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os("CTXPACK_INDEX_DIR").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    Some(crate::xdg::Base::Cache.ctxpack()?.join(vault_id(root)))
}

/// The index folder of a view of the vault without the `hidden` folders:
/// a folder of its own inside `dir`, so that the whole vault's index and
/// the view's are never rebuilt into one another.
pub(crate) fn view_dir(dir: PathBuf, hidden: &[String]) -> PathBuf {
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
pub(crate) fn vault_id(root: &Path) -> String {
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

/// The file ctxpack writes into every index folder it creates or adopts.
/// ctxpack deletes or clears only inside a folder that carries it, so an
/// `--index-dir` pointed at a folder of the user's is never emptied.
pub(crate) const MARKER_FILE: &str = ".ctxpack-index";
const MARKER_TEXT: &str = "This folder is a ctxpack index; ctxpack may delete what is in it.\n";

/// An index folder ctxpack will not use: inside the vault, around it, or a
/// folder of someone else's. A configuration error (the command line's or
/// `CTXPACK_INDEX_DIR`'s), not a failure while running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexDirError(pub String);

impl std::fmt::Display for IndexDirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for IndexDirError {}

/// `path` made absolute with symlinks and `..` resolved, also when its
/// last components do not exist yet: the deepest existing ancestor is
/// canonicalized and the rest appended one component at a time. A
/// component that does not exist is no symlink, so `..` after it is taken
/// lexically (as creating the folders makes it); one that exists (reached
/// through such a `..`) is resolved again, since it may be a symlink.
pub(crate) fn resolved(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    let base = loop {
        if let Ok(canonical) = existing.canonicalize() {
            break canonical;
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last.as_os_str().to_os_string());
                existing = parent;
            }
            // Not even the file system's root resolves: keep the text.
            _ => break existing.to_path_buf(),
        }
    };
    let mut out = base;
    for name in rest.into_iter().rev() {
        match Path::new(&name).components().next() {
            Some(std::path::Component::ParentDir) => {
                out.pop();
            }
            Some(std::path::Component::CurDir) | None => {}
            Some(_) => {
                out.push(name);
                if let Ok(canonical) = out.canonicalize() {
                    out = canonical;
                }
            }
        }
    }
    out
}

/// Refuses an index folder equal to the vault, inside it, or holding it:
/// ctxpack writes and deletes in its index folder, and never in a vault.
pub(crate) fn check_outside(given_root: &Path, dir: &Path) -> Result<(), IndexDirError> {
    let root = resolved(given_root);
    let resolved_dir = resolved(dir);
    let relation = if resolved_dir == root {
        "is the vault"
    } else if resolved_dir.starts_with(&root) {
        "is inside the vault"
    } else if root.starts_with(&resolved_dir) {
        "contains the vault"
    } else if let Some(file) = resolved_dir
        .ancestors()
        .find_map(|path| std::fs::metadata(path).ok().map(|meta| (path, meta)))
        .filter(|(_, meta)| !meta.is_dir() && is_chosen(given_root, dir))
    {
        // The folder, or the deepest part of its path that exists, is a
        // file: no folder can be made there. A folder the user chose is
        // then a mistake to say (exit 2); the cache folder ctxpack picks
        // itself being unusable only means working without an index.
        return Err(IndexDirError(format!(
            "the index folder {} cannot be made: {} is a file, not a folder; choose a \
             folder (--index-dir or CTXPACK_INDEX_DIR)",
            dir.display(),
            file.0.display()
        )));
    } else {
        return Ok(());
    };
    Err(IndexDirError(format!(
        "the index folder {} {relation} ({}); choose a folder outside the vault \
         (--index-dir or CTXPACK_INDEX_DIR)",
        dir.display(),
        root.display()
    )))
}

/// Whether `dir` is an index folder the user chose (`--index-dir`,
/// `CTXPACK_INDEX_DIR`), not the one in the cache folder.
fn is_chosen(root: &Path, dir: &Path) -> bool {
    crate::xdg::Base::Cache
        .ctxpack()
        .is_none_or(|cache| cache.join(vault_id(root)) != dir)
}

/// Makes `dir` the index folder of the vault at `root`: refused when it
/// overlaps the vault or is a non-empty folder without ctxpack's marker;
/// created (with the marker) when missing; marked when empty (or holding
/// only marked views' indexes, see [`view_dir`]) or when it is an index
/// an older ctxpack made (it holds `legacy_lock`, and its
/// `tantivy` folder, if any, is a tantivy index).
pub(crate) fn claim(root: &Path, dir: &Path, legacy_lock: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    check_outside(root, dir)?;
    let marker = dir.join(MARKER_FILE);
    if fs_is_file(&marker) {
        return Ok(());
    }
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            // A view's index, marked itself, is ctxpack's own too.
            let empty = entries.flatten().all(|entry| {
                entry.file_name().to_string_lossy().starts_with("view-")
                    && fs_is_file(&entry.path().join(MARKER_FILE))
            });
            let tantivy = dir.join("tantivy");
            let legacy = fs_is_file(&dir.join(legacy_lock))
                && (!tantivy.exists() || fs_is_file(&tantivy.join("meta.json")));
            if !empty && !legacy {
                return Err(IndexDirError(format!(
                    "the index folder {} is not empty and is not a ctxpack index (no {MARKER_FILE}); \
                     ctxpack clears its index folder, so it uses only a new or empty one",
                    dir.display()
                ))
                .into());
            }
            if legacy && !empty {
                // Recognised without it each time: a full disk must not
                // stop the last index from serving.
                let _ = std::fs::write(&marker, MARKER_TEXT);
                return Ok(());
            }
        }
        // A link to nowhere (a missing folder, a loop): creating through it
        // would make a folder wherever it points (inside the vault, even),
        // and failing to would leave every answer without an index.
        Err(_) if let Ok(link) = std::fs::read_link(dir) => {
            return Err(IndexDirError(format!(
                "the index folder {} is a symlink to {}, which leads to no folder; \
                 ctxpack does not create a folder through a link: name a folder instead",
                dir.display(),
                link.display()
            ))
            .into());
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create index folder {}", dir.display()))?;
        }
        Err(err) => {
            return Err(err).with_context(|| format!("cannot read index folder {}", dir.display()));
        }
    }
    std::fs::write(&marker, MARKER_TEXT)
        .with_context(|| format!("cannot write {}", marker.display()))
}

/// A regular file, not followed through a symlink.
fn fs_is_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_folder_overlapping_the_vault_is_refused_through_links_and_dots() {
        let world = tempfile::tempdir().unwrap();
        let base = world.path().canonicalize().unwrap();
        let vault = base.join("vault");
        std::fs::create_dir_all(vault.join("sub")).unwrap();
        std::os::unix::fs::symlink(&vault, base.join("link")).unwrap();
        let refused = |dir: PathBuf| check_outside(&vault, &dir).unwrap_err().0;
        assert!(refused(vault.clone()).contains("is the vault"));
        assert!(refused(vault.join("sub/new/index")).contains("is inside the vault"));
        std::fs::write(base.join("a-file"), "x").unwrap();
        assert!(refused(base.join("a-file")).contains("is a file, not a folder"));
        assert!(refused(base.join("a-file/below")).contains("is a file, not a folder"));
        assert!(refused(base.join("link/.index")).contains("is inside the vault"));
        assert!(refused(base.join("elsewhere/../vault/x")).contains("is inside the vault"));
        // Past a folder that does not exist, `..` then a symlink: creating
        // the folders would follow the link into the vault.
        assert!(refused(base.join("missing/../link/x")).contains("is inside the vault"));
        assert!(refused(base.join("a/b/../../link")).contains("is the vault"));
        assert!(refused(base.clone()).contains("contains the vault"));
        assert_eq!(check_outside(&vault, &base.join("index")), Ok(()));
        assert_eq!(check_outside(&vault, &base.join("vault2/index")), Ok(()));
    }

    #[test]
    fn a_link_to_a_missing_folder_or_a_loop_is_refused_and_nothing_is_made() {
        let world = tempfile::tempdir().unwrap();
        let base = world.path().canonicalize().unwrap();
        let vault = base.join("vault");
        std::fs::create_dir_all(vault.join("inner")).unwrap();
        let link = base.join("index-link");
        for target in [
            vault.join("inner/missing"),
            base.join("elsewhere"),
            link.clone(),
        ] {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&target, &link).unwrap();
            let error = claim(&vault, &link, "lock").unwrap_err().to_string();
            assert!(error.contains("which leads to no folder"), "{error}");
            assert!(target == link || !target.exists());
        }
    }

    #[test]
    fn only_a_new_empty_or_marked_folder_is_claimed() {
        let world = tempfile::tempdir().unwrap();
        let base = world.path().canonicalize().unwrap();
        let vault = base.join("vault");
        std::fs::create_dir_all(&vault).unwrap();
        let new = base.join("a/b");
        claim(&vault, &new, "ctxpack.lock").unwrap();
        assert!(fs_is_file(&new.join(MARKER_FILE)));
        let empty = base.join("empty");
        std::fs::create_dir(&empty).unwrap();
        claim(&vault, &empty, "ctxpack.lock").unwrap();
        assert!(fs_is_file(&empty.join(MARKER_FILE)));
        let foreign = base.join("foreign");
        std::fs::create_dir_all(foreign.join("tantivy")).unwrap();
        std::fs::write(foreign.join("tantivy/notes.md"), "mine").unwrap();
        let err = claim(&vault, &foreign, "ctxpack.lock").unwrap_err();
        assert!(err.downcast_ref::<IndexDirError>().is_some(), "{err:#}");
        assert!(!foreign.join(MARKER_FILE).exists());
        // A lock file alone does not make a folder of notes an index.
        std::fs::write(foreign.join("ctxpack.lock"), "").unwrap();
        assert!(claim(&vault, &foreign, "ctxpack.lock").is_err());
        // Holding only the index of a view, it is the whole vault's to take.
        let views = base.join("views");
        claim(
            &vault,
            &view_dir(views.clone(), &["private".into()]),
            "ctxpack.lock",
        )
        .unwrap();
        claim(&vault, &views, "ctxpack.lock").unwrap();
        assert!(fs_is_file(&views.join(MARKER_FILE)));
        let legacy = base.join("legacy");
        std::fs::create_dir_all(legacy.join("tantivy")).unwrap();
        std::fs::write(legacy.join("tantivy/meta.json"), "{}").unwrap();
        std::fs::write(legacy.join("ctxpack.lock"), "").unwrap();
        claim(&vault, &legacy, "ctxpack.lock").unwrap();
        assert!(fs_is_file(&legacy.join(MARKER_FILE)));
    }
}
