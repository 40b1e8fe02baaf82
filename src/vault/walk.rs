//! Finding the note files of a vault, and reading them safely.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use std::sync::Mutex;

use ignore::{WalkBuilder, WalkState};

/// Folders never read, at any depth.
pub const SKIPPED_DIRS: [&str; 5] = ["_raw", "_staging", "_archives", "_archived", "_readouts"];
/// Agent tool files that are not notes.
pub const SKIPPED_FILES: [&str; 3] = ["AGENTS.md", "CLAUDE.md", "GEMINI.md"];
/// Files at the vault root read for their role, never packed as pages.
pub const ROLE_FILES: [&str; 3] = ["index.md", "hot.md", "log.md"];
/// A file with its own ignore patterns (gitignore syntax), in any folder.
pub const IGNORE_FILE: &str = ".okignore";

/// A Markdown file found under the root.
#[derive(Clone, Debug)]
pub struct Found {
    /// Relative, `/`-separated.
    pub rel_path: String,
    /// Where to read it: the file itself, or the in-vault target of a symlink.
    pub read_path: PathBuf,
    /// Size in bytes and modification time in nanoseconds since the epoch.
    pub stat: Option<(u64, i128)>,
}

pub struct WalkResult {
    pub files: Vec<Found>,
    pub problems: Vec<(String, String)>,
}

/// Lists the Markdown files of the vault at `root` (which must be canonical),
/// with their size and mtime, sorted by relative path. Two threads walk and
/// stat in parallel.
pub fn walk(root: &Path) -> WalkResult {
    let found: Mutex<Vec<Found>> = Mutex::new(Vec::new());
    let problems: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    let walker = WalkBuilder::new(root)
        .hidden(true)
        .parents(false)
        .ignore(false)
        .git_ignore(false)
        .git_global(false)
        .git_exclude(false)
        .require_git(false)
        .follow_links(false)
        .threads(2)
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
        .build_parallel();
    walker.run(|| {
        Box::new(|entry| {
            match entry {
                Ok(entry) => match visit(root, &entry) {
                    Some(Ok(file)) => found.lock().expect("walk results").push(file),
                    Some(Err(problem)) => problems.lock().expect("walk problems").push(problem),
                    None => {}
                },
                Err(err) => problems
                    .lock()
                    .expect("walk problems")
                    .push((String::new(), format!("cannot walk: {err}"))),
            }
            WalkState::Continue
        })
    });
    let mut files = found.into_inner().unwrap_or_default();
    files.sort_by(|a, b| a.rel_path.cmp(&b.rel_path));
    let mut problems = problems.into_inner().unwrap_or_default();
    problems.sort();
    WalkResult { files, problems }
}

/// A Markdown file, a problem, or nothing (folders and other files).
fn visit(root: &Path, entry: &ignore::DirEntry) -> Option<Result<Found, (String, String)>> {
    let path = entry.path();
    let is_markdown = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("md"));
    let file_type = entry.file_type()?;
    if !is_markdown || file_type.is_dir() {
        return None;
    }
    let rel = path.strip_prefix(root).unwrap_or(path);
    let Some(rel_path) = rel_string(rel) else {
        return Some(Err((
            rel.to_string_lossy().into_owned(),
            "file name is not valid UTF-8; skipped".into(),
        )));
    };
    let read_path = if file_type.is_symlink() {
        match fs::canonicalize(path) {
            Ok(target) if target.starts_with(root) && target.is_file() => target,
            Ok(_) => {
                return Some(Err((
                    rel_path,
                    "symlink leads outside the vault; skipped".into(),
                )));
            }
            Err(err) => return Some(Err((rel_path, format!("broken symlink: {err}; skipped")))),
        }
    } else {
        path.to_path_buf()
    };
    let stat = stat(&read_path);
    Some(Ok(Found {
        rel_path,
        read_path,
        stat,
    }))
}

/// Size and modification time (ns since the epoch) of a file.
pub fn stat(path: &Path) -> Option<(u64, i128)> {
    let meta = fs::metadata(path).ok()?;
    let mtime = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0);
    Some((meta.len(), mtime))
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
