//! Finding the note files of a vault, and reading them safely.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use ignore::WalkBuilder;

/// Folders never read, at any depth.
pub const SKIPPED_DIRS: [&str; 5] = ["_raw", "_staging", "_archives", "_archived", "_readouts"];
/// Agent tool files that are not notes.
pub const SKIPPED_FILES: [&str; 3] = ["AGENTS.md", "CLAUDE.md", "GEMINI.md"];
/// Files at the vault root read for their role, never packed as pages.
pub const ROLE_FILES: [&str; 3] = ["index.md", "hot.md", "log.md"];
/// A file with its own ignore patterns (gitignore syntax), in any folder.
pub const IGNORE_FILE: &str = ".okignore";

/// A Markdown file found under the root.
pub struct Found {
    /// Relative, `/`-separated.
    pub rel_path: String,
    /// Where to read it: the file itself, or the in-vault target of a symlink.
    pub read_path: PathBuf,
}

pub struct WalkResult {
    pub files: Vec<Found>,
    pub problems: Vec<(String, String)>,
}

/// Lists the Markdown files of the vault at `root` (which must be canonical),
/// sorted by relative path.
pub fn walk(root: &Path) -> WalkResult {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    let walker = WalkBuilder::new(root)
        .hidden(true)
        .parents(false)
        .ignore(false)
        .git_ignore(false)
        .git_global(false)
        .git_exclude(false)
        .require_git(false)
        .follow_links(false)
        .add_custom_ignore_filename(IGNORE_FILE)
        .filter_entry(|entry| {
            let name = entry.file_name().to_string_lossy();
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            if is_dir {
                !SKIPPED_DIRS.contains(&name.as_ref())
            } else {
                !SKIPPED_FILES.contains(&name.as_ref())
            }
        })
        .build();
    for entry in walker {
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                problems.push((String::new(), format!("cannot walk: {err}")));
                continue;
            }
        };
        let path = entry.path();
        let is_markdown = path
            .extension()
            .is_some_and(|ext| ext.eq_ignore_ascii_case("md"));
        let Some(file_type) = entry.file_type() else {
            continue;
        };
        if !is_markdown || file_type.is_dir() {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap_or(path);
        let Some(rel_path) = rel_string(rel) else {
            problems.push((
                rel.to_string_lossy().into_owned(),
                "file name is not valid UTF-8; skipped".into(),
            ));
            continue;
        };
        let read_path = if file_type.is_symlink() {
            match fs::canonicalize(path) {
                Ok(target) if target.starts_with(root) && target.is_file() => target,
                Ok(_) => {
                    problems.push((rel_path, "symlink leads outside the vault; skipped".into()));
                    continue;
                }
                Err(err) => {
                    problems.push((rel_path, format!("broken symlink: {err}; skipped")));
                    continue;
                }
            }
        } else {
            path.to_path_buf()
        };
        files.push(Found {
            rel_path,
            read_path,
        });
    }
    files.sort_by(|a, b| a.rel_path.cmp(&b.rel_path));
    WalkResult { files, problems }
}

fn rel_string(rel: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for component in rel.components() {
        parts.push(component.as_os_str().to_str()?);
    }
    Some(parts.join("/"))
}

/// Reads a note file as text, refusing files over `max_bytes`, binary files
/// and invalid UTF-8 with a message saying why.
pub fn read_text(
    path: &Path,
    max_bytes: u64,
) -> Result<(String, Option<std::time::SystemTime>), String> {
    let file = fs::File::open(path).map_err(|err| format!("cannot read: {err}"))?;
    let meta = file
        .metadata()
        .map_err(|err| format!("cannot read: {err}"))?;
    if meta.len() > max_bytes {
        return Err(format!(
            "file is {} bytes, over the {} byte limit; skipped",
            meta.len(),
            max_bytes
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("cannot read: {err}"))?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!("file is over the {max_bytes} byte limit; skipped"));
    }
    if bytes[..bytes.len().min(8192)].contains(&0) {
        return Err("binary file (contains NUL bytes); skipped".into());
    }
    let text = String::from_utf8(bytes).map_err(|err| {
        format!(
            "invalid UTF-8 at byte {}; skipped",
            err.utf8_error().valid_up_to()
        )
    })?;
    Ok((text, meta.modified().ok()))
}
