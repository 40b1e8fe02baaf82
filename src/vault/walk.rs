//! Finding the note files of a vault, and reading them safely.

use std::fs;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use rayon::prelude::*;

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::safe_fs;

/// Folders never read, at any depth.
pub(crate) const SKIPPED_DIRS: [&str; 5] =
    ["_raw", "_staging", "_archives", "_archived", "_readouts"];
/// Agent tool files that are not notes.
pub(crate) const SKIPPED_FILES: [&str; 3] = ["AGENTS.md", "CLAUDE.md", "GEMINI.md"];
/// Files at the vault root read for their role, never packed as pages.
pub(crate) const ROLE_FILES: [&str; 3] = ["index.md", "hot.md", "log.md"];
/// A file with its own ignore patterns (gitignore syntax), in any folder.
pub(crate) const IGNORE_FILE: &str = ".okignore";
/// How many folders deep the walk goes.
const MAX_FOLDER_DEPTH: usize = 100;
/// What becomes of a folder whose `.okignore` cannot be used.
const FOLDER_NOT_READ: &str = "nothing in its folder is read (fail closed)";
/// An `.okignore` larger than this is not read.
const MAX_IGNORE_FILE_BYTES: u64 = 1024 * 1024;

/// A Markdown file found under the root.
#[derive(Clone, Debug)]
pub struct Found {
    /// Relative, `/`-separated.
    pub rel_path: String,
    /// For a symlink, its target's relative path (a policy that makes the
    /// target private makes every link to it private too).
    pub target: Option<String>,
    /// Size in bytes and modification time in nanoseconds since the epoch.
    pub stat: Option<(u64, i128)>,
}

impl Found {
    /// Where to read it, under the vault's `root`: the file itself, or the
    /// in-vault target of a symlink (a path kept per file was an allocation
    /// per note on every walk, for the few files a call reads).
    pub(crate) fn read_path(&self, root: &Path) -> PathBuf {
        root.join(self.target.as_deref().unwrap_or(&self.rel_path))
    }
}

pub(crate) struct WalkResult {
    pub files: FoundFiles,
    pub problems: Vec<(String, String)>,
}

/// The files a walk found, in path order, in the runs the folders gave
/// (joining them into one list copied every file once more: on a 10k-note
/// vault, a megabyte of fresh memory on the way of every call that only
/// compares the walk with the index).
#[derive(Clone, Debug, Default)]
pub(crate) struct FoundFiles {
    runs: Vec<Vec<Found>>,
}

impl FoundFiles {
    pub(crate) fn len(&self) -> usize {
        self.runs.iter().map(Vec::len).sum()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Found> + Clone {
        self.runs.iter().flatten()
    }

    pub(crate) fn par_iter(&self) -> impl ParallelIterator<Item = &Found> {
        self.runs.par_iter().flat_map(|run| run.par_iter())
    }

    /// The files in one list.
    pub(crate) fn into_vec(mut self) -> Vec<Found> {
        self.runs.retain(|run| !run.is_empty());
        if self.runs.len() <= 1 {
            return self.runs.pop().unwrap_or_default();
        }
        let mut files = Vec::with_capacity(self.len());
        for run in self.runs {
            files.extend(run);
        }
        files
    }

    /// The files sorted by path (a walk lists them so; a list put
    /// together otherwise may not be).
    pub(crate) fn sorted(self) -> FoundFiles {
        if self.iter().is_sorted_by(|a, b| a.rel_path <= b.rel_path) {
            return self;
        }
        let mut files = self.into_vec();
        files.sort_by(|a, b| a.rel_path.cmp(&b.rel_path));
        files.into()
    }
}

impl From<Vec<Found>> for FoundFiles {
    fn from(files: Vec<Found>) -> FoundFiles {
        FoundFiles { runs: vec![files] }
    }
}

impl IntoIterator for FoundFiles {
    type Item = Found;
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<Vec<Found>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.runs.into_iter().flatten()
    }
}

impl<'a> IntoIterator for &'a FoundFiles {
    type Item = &'a Found;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<Found>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.runs.iter().flatten()
    }
}

/// The extension of Obsidian Bases files: listed, but only ever read as
/// the target of an embed (never a note).
pub(crate) const BASE_EXTENSION: &str = "base";

/// Whether the walk lists a file of this name: Markdown notes, canvases
/// (read as notes) and Bases files (read only when a note embeds one).
fn is_listed_kind(name: &str) -> bool {
    // As `Path::extension` reads a file name (a leading dot starts no
    // extension), without parsing it as a path.
    let extension = name
        .rsplit_once('.')
        .and_then(|(stem, ext)| (!stem.is_empty()).then_some(ext));
    extension.is_some_and(|ext| {
        ext.eq_ignore_ascii_case("md")
            || ext.eq_ignore_ascii_case(crate::parse::canvas::EXTENSION)
            || ext.eq_ignore_ascii_case(BASE_EXTENSION)
    })
}

fn extension_of(rel_path: &str) -> &str {
    rel_path
        .rsplit('/')
        .next()
        .and_then(|name| name.rsplit_once('.'))
        .map_or("", |(_, ext)| ext)
}

/// Whether a listed file is a Bases file (not a note).
pub(crate) fn is_base(rel_path: &str) -> bool {
    rel_path
        .rsplit_once('.')
        .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case(BASE_EXTENSION))
}

/// Whether `rel_path` is one of the `hidden` folders or lies inside one.
pub(crate) fn is_hidden(rel_path: &str, hidden: &[String]) -> bool {
    hidden.iter().any(|folder| {
        rel_path == folder
            || rel_path
                .strip_prefix(folder.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// Lists the Markdown, canvas and Bases files of the vault at `root` (which must be canonical),
/// with their size and mtime, sorted by relative path, leaving out the
/// `hidden` folders (relative, `/`-separated) and symlinks into them.
/// Folders are listed first; the files are then stat-ed in parallel, since
/// on a large vault the stat calls are most of the cost of a no-op update.
pub(crate) fn walk(root: &Path, hidden: &[String]) -> WalkResult {
    let Listing {
        files,
        problems,
        links,
        ..
    } = Listing::of(root, hidden, None);
    finish_walk(files, problems, links, hidden)
}

/// The paths a file watcher reported changed (files or folders, relative),
/// for walking only them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scope {
    paths: Vec<String>,
}

impl Scope {
    pub(crate) fn new(mut paths: Vec<String>) -> Scope {
        paths.sort_unstable();
        paths.dedup();
        Scope { paths }
    }

    /// Whether `rel_path` is one of the paths or lies inside one.
    pub(crate) fn covers(&self, rel_path: &str) -> bool {
        let mut prefix = rel_path;
        loop {
            if self
                .paths
                .binary_search_by(|p| p.as_str().cmp(prefix))
                .is_ok()
            {
                return true;
            }
            match prefix.rfind('/') {
                Some(slash) => prefix = &prefix[..slash],
                None => return false,
            }
        }
    }

    /// Whether the folder `rel_dir` must be entered: it is covered, or a
    /// path lies below it.
    fn enters(&self, rel_dir: &str) -> bool {
        if rel_dir.is_empty() || self.covers(rel_dir) {
            return true;
        }
        let below = format!("{rel_dir}/");
        let start = self.paths.partition_point(|p| p.as_str() < below.as_str());
        self.paths.get(start).is_some_and(|p| p.starts_with(&below))
    }
}

/// Walks only what `scope` covers, with the same rules as [`walk`] (the
/// `.okignore` files of every folder on the way are read). `None` when a
/// symlink is in scope: whether it is listed depends on its target, which
/// only a whole walk knows.
pub(crate) fn walk_scope(root: &Path, hidden: &[String], scope: &Scope) -> Option<WalkResult> {
    let Listing {
        files,
        mut problems,
        links,
        ..
    } = Listing::of(root, hidden, Some(scope));
    if !links.is_empty() {
        return None;
    }
    // Folders on the way were entered only to reach the scope; what they
    // hold outside it is not this walk's to report.
    problems.retain(|(path, _)| scope.covers(path));
    Some(finish_walk(files, problems, links, hidden))
}

/// Resolves symlinks against the listed files, stats everything in
/// parallel and sorts.
fn finish_walk(
    files: FoundFiles,
    mut problems: Vec<(String, String)>,
    links: Vec<(String, String, PathBuf)>,
    hidden: &[String],
) -> WalkResult {
    problems.sort();
    if links.is_empty() {
        // Folders are listed in path order.
        return WalkResult { files, problems };
    }
    // A symlink is read only when its target is itself a file the walk
    // lists: never a hidden, skipped, ignored or non-Markdown file.
    let mut listed: Vec<&str> = files.iter().map(|f| f.rel_path.as_str()).collect();
    listed.sort_unstable();
    let mut linked = Vec::new();
    for (rel_path, target_rel, target) in links {
        // A link is read as what its target is: a note's name on a Bases
        // file (or the other way round) would read data as a note.
        let same_kind = extension_of(&rel_path).eq_ignore_ascii_case(extension_of(&target_rel));
        if same_kind && listed.binary_search(&target_rel.as_str()).is_ok() {
            linked.push((
                Found {
                    rel_path,
                    target: Some(target_rel),
                    stat: None,
                },
                target,
            ));
        } else if !is_hidden(&target_rel, hidden) {
            problems.push((
                rel_path,
                "symlink leads to a file the vault does not read; skipped".into(),
            ));
        }
    }
    drop(listed);
    // Regular files were stat-ed as they were listed; links are stat-ed
    // through to their targets.
    let mut files = files.into_vec();
    files.extend(linked.into_iter().map(|(mut found, target)| {
        found.stat = stat(&target);
        found
    }));
    // Only links need placing.
    files.sort_by(|a, b| a.rel_path.cmp(&b.rel_path));
    problems.sort();
    WalkResult {
        files: files.into(),
        problems,
    }
}

/// What a walk found in one folder and below it.
#[derive(Default)]
struct Listing {
    files: FoundFiles,
    /// Symlinks to Markdown names: relative path, the target's relative
    /// path and the canonical target.
    links: Vec<(String, String, PathBuf)>,
    problems: Vec<(String, String)>,
}

impl Listing {
    /// Lists the vault at `root` (only what `scope` covers, when given).
    fn of(root: &Path, hidden: &[String], scope: Option<&Scope>) -> Listing {
        // Obsidian's templates and Excluded files, under the vault's
        // policy (a policy that does not load stops the run elsewhere;
        // here its defaults apply).
        let settings = crate::privacy::Policy::load_without_project(root)
            .map(|policy| policy.obsidian().clone())
            .unwrap_or_else(|_| super::obsidian::ObsidianSettings::read(root, &Default::default()));
        let walker = Walker {
            root,
            hidden,
            scope,
            settings: &settings,
        };
        let Visited {
            runs,
            links,
            mut problems,
        } = walker.visit_dir(root.to_path_buf(), String::new(), Vec::new());
        problems.extend(settings.problems.iter().cloned());
        Listing {
            files: FoundFiles { runs },
            links,
            problems,
        }
    }
}

/// What a walk found in one folder and below it, its files in runs that
/// follow one another in path order. Splicing each subfolder's files into
/// its parent's list copied every file once per level; the runs are joined
/// once, at the end.
#[derive(Default)]
struct Visited {
    runs: Vec<Vec<Found>>,
    links: Vec<(String, String, PathBuf)>,
    problems: Vec<(String, String)>,
}

struct Walker<'a> {
    root: &'a Path,
    hidden: &'a [String],
    /// When set, only folders leading into the scope are entered and only
    /// files inside it listed.
    scope: Option<&'a Scope>,
    /// Notes these settings leave out (templates, Excluded files) are not
    /// listed; Bases files there are.
    settings: &'a super::obsidian::ObsidianSettings,
}

impl Walker<'_> {
    /// Lists one folder; its files are stat-ed and its subfolders listed in
    /// parallel (a vault's notes are spread over folders, or all in one).
    fn visit_dir(
        &self,
        dir: PathBuf,
        rel_dir: String,
        mut ignores: Vec<Arc<Gitignore>>,
    ) -> Visited {
        let mut here = Visited::default();
        // Each level is a frame of the walk's recursion (on rayon's
        // threads, whose stacks are small): a folder nested deeper than any
        // vault keeps its notes is not entered.
        if rel_dir.matches('/').count() >= MAX_FOLDER_DEPTH {
            here.problems.push((
                rel_dir,
                format!("folder nested more than {MAX_FOLDER_DEPTH} levels deep; not read"),
            ));
            return here;
        }
        let (folder, listed) = match FolderEntries::list(&dir) {
            Ok(listed) => listed,
            Err(err) => {
                here.problems
                    .push((rel_dir, format!("cannot read folder: {err}")));
                return here;
            }
        };
        let okignore = dir.join(IGNORE_FILE);
        if listed.names().any(|name| name == IGNORE_FILE.as_bytes()) {
            let rel_okignore = join(&rel_dir, IGNORE_FILE);
            // An `.okignore` that cannot be read, or has a pattern that
            // does not parse, hides what it was written to hide: nothing
            // in its folder is listed (fail closed).
            let mut failed = false;
            match self.read_ignore_file(&okignore) {
                Ok(text) => {
                    let mut builder = GitignoreBuilder::new(&dir);
                    // As git reads it: a byte order mark is not a pattern.
                    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
                    for line in text.lines() {
                        if let Err(err) = builder.add_line(None, line) {
                            failed = true;
                            here.problems.push((
                                rel_okignore.clone(),
                                format!("bad pattern: {err}; {FOLDER_NOT_READ}"),
                            ));
                        }
                    }
                    match builder.build() {
                        Ok(matcher) => ignores.push(Arc::new(matcher)),
                        Err(err) => {
                            failed = true;
                            here.problems
                                .push((rel_okignore, format!("{err}; {FOLDER_NOT_READ}")));
                        }
                    }
                }
                Err(message) => {
                    failed = true;
                    here.problems
                        .push((rel_okignore, format!("{message}; {FOLDER_NOT_READ}")));
                }
            }
            if failed {
                return here;
            }
        }
        // This folder's files and, for each subfolder in path order, how
        // many of them come before it.
        let mut files: Vec<Found> = Vec::with_capacity(listed.entries.len());
        let mut folders: Vec<(PathBuf, String, usize)> = Vec::new();
        for (file_name, kind) in listed.in_path_order() {
            let Ok(name) = std::str::from_utf8(file_name) else {
                here.problems.push((
                    join(&rel_dir, &String::from_utf8_lossy(file_name)),
                    "file name is not valid UTF-8; skipped".into(),
                ));
                continue;
            };
            if name.chars().any(char::is_control) {
                here.problems.push((
                    join(&rel_dir, &name.escape_debug().to_string()),
                    "file name contains control characters; skipped".into(),
                ));
                continue;
            }
            // Hidden files, and the vault's own log, which ctxpack appends
            // to and never reads (tracking it would make every pack look
            // like a change to the vault).
            if name.starts_with('.') || (rel_dir.is_empty() && name == "log.md") {
                continue;
            }
            if kind == EntryKind::Folder {
                let path = child_path(&dir, name);
                let rel_path = join(&rel_dir, name);
                if self.scope.is_none_or(|scope| scope.enters(&rel_path))
                    && !SKIPPED_DIRS.contains(&name)
                    && !is_hidden(&rel_path, self.hidden)
                    && !is_ignored(&ignores, &path, true)
                {
                    folders.push((path, rel_path, files.len()));
                }
                continue;
            }
            if !is_listed_kind(name)
                || SKIPPED_FILES.contains(&name)
                || (!ignores.is_empty() && is_ignored(&ignores, &child_path(&dir, name), false))
            {
                continue;
            }
            let rel_path = join(&rel_dir, name);
            if self.scope.is_some_and(|scope| !scope.covers(&rel_path))
                || self.settings.is_left_out(&rel_path)
            {
                continue;
            }
            if kind == EntryKind::Symlink {
                match fs::canonicalize(child_path(&dir, name)) {
                    Ok(target) if target.starts_with(self.root) => {
                        let inside = target.strip_prefix(self.root).unwrap_or(&target);
                        here.links.push((
                            rel_path,
                            inside.to_string_lossy().replace('\\', "/"),
                            target,
                        ));
                    }
                    Ok(_) => here
                        .problems
                        .push((rel_path, "symlink leads outside the vault; skipped".into())),
                    Err(err) => here
                        .problems
                        .push((rel_path, format!("broken symlink: {err}; skipped"))),
                }
                continue;
            }
            if let EntryKind::Special(kind) = kind {
                here.problems
                    .push((rel_path, format!("{kind}, not a regular file; skipped")));
                continue;
            }
            files.push(Found {
                rel_path,
                target: None,
                stat: None,
            });
        }
        drop(listed);
        let before: Vec<usize> = folders.iter().map(|(_, _, at)| *at).collect();
        // Each file's name follows its folder's path and a `/`.
        let name_from = if rel_dir.is_empty() {
            0
        } else {
            rel_dir.len() + 1
        };
        let (_, below) = rayon::join(
            || stat_files(&FolderStat { folder }, &dir, name_from, &mut files),
            || {
                folders
                    .into_par_iter()
                    .map(|(path, rel_path, _)| self.visit_dir(path, rel_path, ignores.clone()))
                    .collect::<Vec<Visited>>()
            },
        );
        // This folder's files cut where its subfolders go (from the end, so
        // each cut moves only the files after it), then interleaved.
        let mut own: Vec<Vec<Found>> = Vec::with_capacity(before.len() + 1);
        for &at in before.iter().rev() {
            own.push(files.split_off(at));
        }
        own.push(files);
        own.reverse();
        let mut own = own.into_iter();
        here.runs.extend(own.next());
        for (visited, after) in below.into_iter().zip(own) {
            here.runs.extend(visited.runs);
            here.links.extend(visited.links);
            here.problems.extend(visited.problems);
            here.runs.push(after);
        }
        here
    }

    /// An `.okignore` is read like a note: a regular file inside the vault,
    /// never through a symlink leading out, never a FIFO.
    fn read_ignore_file(&self, path: &Path) -> Result<String, String> {
        let real = fs::canonicalize(path).map_err(|err| format!("cannot read: {err}"))?;
        if !real.starts_with(self.root) {
            return Err("symlink leads outside the vault".into());
        }
        safe_fs::read_text(&real, MAX_IGNORE_FILE_BYTES)
            .map(|(text, _)| text)
            .map_err(|err| err.to_string())
    }
}

/// Stats the regular files just listed, by name in their open `folder`
/// (their relative paths' tails from `name_from`), in parallel, since on a
/// large vault the stat calls are most of the cost of a no-op update.
fn stat_files(folder: &FolderStat, dir: &Path, name_from: usize, files: &mut [Found]) {
    files.par_iter_mut().with_min_len(512).for_each(|found| {
        let name = found.rel_path.get(name_from..).unwrap_or_default();
        found.stat = folder.stat(dir, std::ffi::OsStr::new(name));
    });
}

/// `dir/name` in one allocation of the right size (`Path::join` copies the
/// folder, then grows the copy for the name: two allocations a file).
fn child_path(dir: &Path, name: &str) -> PathBuf {
    let mut path = PathBuf::with_capacity(dir.as_os_str().len() + 1 + name.len());
    path.push(dir);
    path.push(name);
    path
}

/// What a folder entry is, as the folder's listing says (a symlink is not
/// followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EntryKind {
    Folder,
    File,
    Symlink,
    /// A FIFO, socket or device: never read, and said so.
    Special(&'static str),
}

impl EntryKind {
    #[cfg(not(target_os = "linux"))]
    fn of(file_type: &fs::FileType) -> EntryKind {
        if file_type.is_symlink() {
            EntryKind::Symlink
        } else if file_type.is_dir() {
            EntryKind::Folder
        } else {
            match safe_fs::special_kind(file_type) {
                Some(kind) => EntryKind::Special(kind),
                None => EntryKind::File,
            }
        }
    }
}

/// One folder's entries, their names back to back in one buffer: `std`'s
/// listing allocated each name twice (the entry's, then the copy it hands
/// out), 20,000 allocations on every walk of a 10k-note vault.
struct FolderEntries {
    names: Vec<u8>,
    /// Each entry's name as a range of `names`, and its kind.
    entries: Vec<(u32, u32, EntryKind)>,
}

impl FolderEntries {
    fn push(&mut self, name: &[u8], kind: EntryKind) {
        if name == b"." || name == b".." {
            return;
        }
        // Names are at most 255 bytes, and a folder's listing is far below
        // 4 GB; an entry past that is not listed.
        let (Ok(start), Ok(len)) = (u32::try_from(self.names.len()), u32::try_from(name.len()))
        else {
            return;
        };
        self.names.extend_from_slice(name);
        self.entries.push((start, len, kind));
    }

    fn name(&self, (start, len, _): (u32, u32, EntryKind)) -> &[u8] {
        &self.names[start as usize..][..len as usize]
    }

    fn names(&self) -> impl Iterator<Item = &[u8]> {
        self.entries.iter().map(|&entry| self.name(entry))
    }

    /// The entries in the order of the paths they lead to (a folder's name
    /// followed by `/`), so that the walk lists files in path order.
    fn in_path_order(&self) -> impl Iterator<Item = (&[u8], EntryKind)> {
        fn tail(name: &[u8], kind: EntryKind) -> impl Iterator<Item = u8> + '_ {
            let slash: &'static [u8] = if kind == EntryKind::Folder { b"/" } else { b"" };
            name.iter().chain(slash).copied()
        }
        let mut order: Vec<(u32, u32, EntryKind)> = self.entries.clone();
        order.sort_unstable_by(|&a, &b| {
            let (a_name, b_name) = (self.name(a), self.name(b));
            let common = a_name.len().min(b_name.len());
            // Names compare as bytes; only past a common prefix does the
            // `/` count.
            a_name[..common]
                .cmp(&b_name[..common])
                .then_with(|| tail(&a_name[common..], a.2).cmp(tail(&b_name[common..], b.2)))
        });
        order.into_iter().map(|entry| (self.name(entry), entry.2))
    }

    /// Opens the folder at `dir` (never through a symlink: a folder swapped
    /// for a link after its parent was listed is not entered) and lists it.
    #[cfg(target_os = "linux")]
    fn list(dir: &Path) -> std::io::Result<(Option<fs::File>, FolderEntries)> {
        use rustix::fs::FileType;
        use std::os::unix::fs::OpenOptionsExt;
        let folder = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(dir)?;
        let mut listed = FolderEntries {
            names: Vec::new(),
            entries: Vec::new(),
        };
        let mut buffer = vec![std::mem::MaybeUninit::<u8>::uninit(); 32 * 1024];
        let mut entries = rustix::fs::RawDir::new(&folder, &mut buffer);
        // Not an iterator: each entry borrows the buffer until the next.
        while let Some(entry) = entries.next() {
            let entry = entry?;
            let name = entry.file_name();
            let file_type = match entry.file_type() {
                // Some file systems do not say what an entry is in the
                // listing: ask.
                FileType::Unknown => {
                    match rustix::fs::statat(&folder, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                        Err(_) => continue,
                    }
                }
                known => known,
            };
            let kind = match file_type {
                FileType::Directory => EntryKind::Folder,
                FileType::RegularFile => EntryKind::File,
                FileType::Symlink => EntryKind::Symlink,
                FileType::Fifo => EntryKind::Special("a FIFO"),
                FileType::Socket => EntryKind::Special("a socket"),
                FileType::CharacterDevice | FileType::BlockDevice => EntryKind::Special("a device"),
                FileType::Unknown => EntryKind::Special("not a regular file"),
            };
            listed.push(name.to_bytes(), kind);
        }
        Ok((Some(folder), listed))
    }

    #[cfg(not(target_os = "linux"))]
    fn list(dir: &Path) -> std::io::Result<(Option<fs::File>, FolderEntries)> {
        let mut listed = FolderEntries {
            names: Vec::new(),
            entries: Vec::new(),
        };
        for entry in fs::read_dir(dir)?.flatten() {
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            listed.push(
                entry.file_name().as_encoded_bytes(),
                EntryKind::of(&file_type),
            );
        }
        #[cfg(unix)]
        let folder = fs::File::open(dir).ok();
        #[cfg(not(unix))]
        let folder = None;
        Ok((folder, listed))
    }
}

/// Stats files by name relative to an open folder (one path component for
/// the kernel to look up, not the whole path), without following links.
struct FolderStat {
    #[cfg_attr(not(unix), allow(dead_code))]
    folder: Option<fs::File>,
}

impl FolderStat {
    #[cfg(unix)]
    fn stat(&self, dir: &Path, name: &std::ffi::OsStr) -> Option<(u64, i128)> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::io::AsRawFd;
        let Some(folder) = &self.folder else {
            return stat_no_follow(&dir.join(name));
        };
        // The name NUL-terminated on the stack: a file name is at most 255
        // bytes on the file systems a vault lives on (a longer one, or one
        // holding a NUL, cannot name a file: no stat).
        let name = name.as_bytes();
        let mut buf = [0u8; 256];
        if name.len() >= buf.len() || name.contains(&0) {
            return None;
        }
        buf[..name.len()].copy_from_slice(name);
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `buf` is NUL-terminated, `st` is written by the call
        // and read only when it succeeds.
        let st = unsafe {
            if libc::fstatat(
                folder.as_raw_fd(),
                buf.as_ptr().cast(),
                st.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            ) != 0
            {
                return None;
            }
            st.assume_init()
        };
        // As `Metadata::modified` since the epoch gives it: before 1970, 0.
        let mtime = if st.st_mtime >= 0 {
            i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec)
        } else {
            0
        };
        Some((st.st_size as u64, mtime))
    }

    #[cfg(not(unix))]
    fn stat(&self, dir: &Path, name: &std::ffi::OsStr) -> Option<(u64, i128)> {
        stat_no_follow(&dir.join(name))
    }
}

fn stat_no_follow(path: &Path) -> Option<(u64, i128)> {
    size_and_mtime(&fs::symlink_metadata(path).ok()?)
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        return name.to_string();
    }
    let mut path = String::with_capacity(dir.len() + 1 + name.len());
    path.push_str(dir);
    path.push('/');
    path.push_str(name);
    path
}

/// The deepest `.okignore` with an opinion decides.
fn is_ignored(ignores: &[Arc<Gitignore>], path: &Path, is_dir: bool) -> bool {
    for matcher in ignores.iter().rev() {
        match matcher.matched(path, is_dir) {
            ignore::Match::Ignore(_) => return true,
            ignore::Match::Whitelist(_) => return false,
            ignore::Match::None => {}
        }
    }
    false
}

/// Whether a change to `paths` (from a file watcher) can change what the
/// vault holds: not when it only touches the vault's `log.md`, which
/// ctxpack itself appends to.
pub(crate) fn affects_notes(root: &Path, paths: &[PathBuf]) -> bool {
    let log = root.join("log.md");
    paths.is_empty() || paths.iter().any(|p| *p != log)
}

/// Size and modification time (ns since the epoch) of a file.
pub(crate) fn stat(path: &Path) -> Option<(u64, i128)> {
    size_and_mtime(&fs::metadata(path).ok()?)
}

fn size_and_mtime(meta: &fs::Metadata) -> Option<(u64, i128)> {
    let mtime = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    Some((meta.len(), mtime))
}

/// Reads a note file as text, refusing non-regular files, files over
/// `max_bytes`, binary files and invalid UTF-8 with a message saying why.
/// `path` is where the walk found the note (the file, or a symlink's
/// in-vault target) under the canonical root: nothing on it is a symlink,
/// and a symlink swapped in since is not followed.
pub(crate) fn read_text(
    path: &Path,
    max_bytes: u64,
) -> Result<(String, Option<std::time::SystemTime>), safe_fs::ReadError> {
    safe_fs::read_text_unlinked(path, max_bytes).map(|(text, meta)| (text, meta.modified().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_listed_in_path_order_and_files_stat_ed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        // `-`, `.`, `/` and `0` are neighbours in byte order: a folder's
        // files sort as if its name ended in `/`.
        let paths = [
            "a-b.md",
            "a.md",
            "a/b/c.md",
            "a/x.md",
            "a0.md",
            "ab.md",
            "a.md.d/z.md",
        ];
        for path in paths {
            let path = root.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, "text").unwrap();
        }
        let listing = Listing::of(&root, &[], None);
        let listed: Vec<&str> = listing.files.iter().map(|f| f.rel_path.as_str()).collect();
        let mut sorted = paths.to_vec();
        sorted.sort_unstable();
        assert_eq!(listed, sorted);
        assert!(
            listing
                .files
                .iter()
                .all(|f| f.stat.is_some_and(|(size, _)| size == 4))
        );
        // Stat-ed by name in the folder, as the standard library stats a path.
        for found in &listing.files {
            assert_eq!(
                found.stat,
                stat(&found.read_path(&root)),
                "{}",
                found.rel_path
            );
        }
    }

    #[test]
    fn listed_kinds_are_read_from_the_name_as_path_extension_reads_it() {
        for name in [
            "a.md", "A.MD", "a.b.md", ".md", "..md", "md", "a.", "a.canvas", "a.base", "a.md.txt",
            "a.mdx", ".a.md",
        ] {
            let by_path = Path::new(name).extension().is_some_and(|ext| {
                ["md", "canvas", "base"]
                    .iter()
                    .any(|kind| ext.eq_ignore_ascii_case(kind))
            });
            assert_eq!(is_listed_kind(name), by_path, "{name}");
        }
        assert!(is_listed_kind("..md") && !is_listed_kind(".md") && !is_listed_kind("a.mdx"));
        assert_eq!(
            child_path(Path::new("/v/notes"), "a.md"),
            Path::new("/v/notes").join("a.md")
        );
    }

    #[test]
    fn hidden_folders_and_links_into_them_are_not_listed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for path in [
            "open/a.md",
            "closed/b.md",
            "closed-too/c.md",
            "open/closed/d.md",
        ] {
            let path = root.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, "text").unwrap();
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.join("closed/b.md"), root.join("open/link.md")).unwrap();
        let listed: Vec<String> = walk(&root, &["closed".to_string()])
            .files
            .into_iter()
            .map(|f| f.rel_path)
            .collect();
        assert_eq!(listed, ["closed-too/c.md", "open/a.md", "open/closed/d.md"]);
        assert!(is_hidden("closed", &["closed".into()]));
        assert!(!is_hidden("closed-too/c.md", &["closed".into()]));
    }
}
