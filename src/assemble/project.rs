//! The only way the assembler touches a project: reads that stay inside the
//! root, never enter a library the bindings do not bind, and are recorded,
//! so tests can prove what was never opened.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use serde::Deserialize;

use super::error::ProjectError;
use crate::vault::walk;

/// Files larger than this are refused rather than read.
const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

pub(crate) struct Project {
    root: PathBuf,
    /// Every relative path read or listed, in order.
    touched: Mutex<Vec<String>>,
    /// Closed libraries: (canonical folder, relative path). Nothing whose
    /// canonical target lies inside one is opened or listed.
    closed: Vec<(PathBuf, String)>,
    /// Paths refused because they lead into a closed library, with it.
    refused: Mutex<Vec<(String, String)>>,
    /// Entries a listing left out because they lead nowhere readable: a
    /// symlink out of the root, or one that resolves to nothing (path, why).
    skipped: Mutex<Vec<(String, &'static str)>>,
    /// What every Markdown file read goes through.
    policy: crate::privacy::Policy,
    /// Secrets taken out of the files read: (path, redaction).
    redacted: Mutex<Vec<(String, crate::privacy::Redaction)>>,
    /// The Markdown files the vault's walk lists (sorted), walked once, the
    /// first time a note is read.
    listed: std::sync::OnceLock<Vec<String>>,
    /// Where the files are: the folder, or one snapshot of the store.
    files: Files,
    /// The schemas and the recipe's type key, once read: the fields they
    /// hide from every purpose are cut from each note read.
    hidden_from_all: Option<(super::schema::Schemas, String)>,
}

/// The two places a project's files can be: the same gate stands in front
/// of both, so a pack is the same whichever it was read from.
enum Files {
    Folder,
    Store(Box<super::stored::StoreFiles>),
}

/// Why a project path was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// `path` leads (maybe through a symlink) into `library`, which the
    /// bindings do not bind; it was not opened.
    NotAuthorized { path: String, library: String },
    /// The path itself is refused (empty, absolute, or with a `..` part).
    Refused(String),
    /// The file exists but is not readable text.
    Unreadable { path: String, why: String },
    /// The privacy policy keeps the file out; its text was not used.
    Private { path: String },
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::NotAuthorized { path, library } if path == library => {
                write!(
                    f,
                    "{path} is a library the bindings do not bind; not opened"
                )
            }
            ReadError::NotAuthorized { path, library } => write!(
                f,
                "{path} leads into library {library}, which the bindings do not bind; not opened"
            ),
            ReadError::Refused(message) => f.write_str(message),
            ReadError::Unreadable { path, why } => write!(f, "{path}: {why}"),
            ReadError::Private { path } => {
                write!(f, "{path} is private under the privacy policy; not read")
            }
        }
    }
}

impl std::error::Error for ReadError {}

impl Project {
    pub(crate) fn open(root: &Path) -> Result<Project, ProjectError> {
        let root = root.canonicalize().map_err(|source| ProjectError::Open {
            root: root.to_path_buf(),
            source,
        })?;
        if !root.is_dir() {
            return Err(ProjectError::NotAFolder(root));
        }
        // Before anything counts tokens: a cache set inside the project
        // would be a write in it.
        crate::tokens::never_cache_inside(&root);
        Ok(Project {
            root,
            touched: Mutex::new(Vec::new()),
            closed: Vec::new(),
            refused: Mutex::new(Vec::new()),
            skipped: Mutex::new(Vec::new()),
            policy: crate::privacy::Policy::default(),
            redacted: Mutex::new(Vec::new()),
            listed: std::sync::OnceLock::new(),
            files: Files::Folder,
            hidden_from_all: None,
        })
    }

    /// The project one snapshot of the store holds: its texts were read
    /// through the privacy policy when it was synced, so none is applied
    /// again.
    pub(crate) fn from_store(files: super::stored::StoreFiles) -> Project {
        Project {
            root: PathBuf::from(super::stored::STORE_ROOT),
            touched: Mutex::new(Vec::new()),
            closed: Vec::new(),
            refused: Mutex::new(Vec::new()),
            skipped: Mutex::new(Vec::new()),
            policy: crate::privacy::Policy::default(),
            redacted: Mutex::new(Vec::new()),
            listed: std::sync::OnceLock::new(),
            files: Files::Store(Box::new(files)),
            hidden_from_all: None,
        }
    }

    /// The store's files, when the project is read from the store.
    pub(crate) fn store_files(&self) -> Option<&super::stored::StoreFiles> {
        match &self.files {
            Files::Store(files) => Some(files),
            Files::Folder => None,
        }
    }

    /// Opens the libraries named in `names` for reading (their rows leave
    /// the store only now, and only theirs); nothing to do for a folder.
    pub(crate) fn open_libraries(&mut self, names: &[String]) -> Result<(), ProjectError> {
        match &mut self.files {
            Files::Store(files) => files.open_libraries(names),
            Files::Folder => Ok(()),
        }
    }

    /// `path` (under the root) with its symlinks resolved, wherever the
    /// files are.
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        match &self.files {
            Files::Folder => path.canonicalize(),
            Files::Store(files) => {
                let not_found = || std::io::Error::from(std::io::ErrorKind::NotFound);
                let rel = path.strip_prefix(&self.root).map_err(|_| not_found())?;
                match files.resolve(rel).ok_or_else(not_found)? {
                    super::stored::Resolved::Inside(real, _) => Ok(super::stored::absolute(&real)),
                    super::stored::Resolved::Outside => Ok(PathBuf::from("/")),
                }
            }
        }
    }

    /// Reads every Markdown file under `policy` from now on: a private one
    /// is refused, secrets are redacted, comments and private sections cut.
    pub(crate) fn set_policy(&mut self, policy: crate::privacy::Policy) {
        self.policy = policy;
    }

    /// Cuts from every note read from now on the `##` fields `schemas`
    /// show to no purpose (`aiContext: false`), their headings kept: no
    /// pack could hold them, so neither does a read, nor the store's copy
    /// of one (each card's type is its `type_key` field, else its folder's
    /// name, as the assembler reads cards).
    pub(crate) fn hide_fields_from_all(
        &mut self,
        schemas: super::schema::Schemas,
        type_key: String,
    ) {
        self.hidden_from_all = Some((schemas, type_key));
    }

    /// `text` without the fields shown to no purpose (see
    /// [`hide_fields_from_all`](Self::hide_fields_from_all)).
    fn without_hidden_fields(&self, rel: &str, text: String) -> String {
        let Some((schemas, type_key)) = &self.hidden_from_all else {
            return text;
        };
        let fields = crate::parse::frontmatter::split(&text)
            .yaml
            .and_then(|yaml| crate::parse::frontmatter::parse(yaml).ok());
        let type_name = fields
            .as_ref()
            .and_then(|fields| crate::parse::frontmatter::get(fields, type_key))
            .and_then(crate::parse::frontmatter::scalar)
            .or_else(|| {
                Path::new(rel)
                    .parent()
                    .and_then(|p| p.file_name())
                    .map(|name| name.to_string_lossy().into_owned())
            });
        // A type no schema defines shows nothing anyway (the assembler says
        // so): only rules a schema writes are read here.
        let Some(type_name) = type_name.filter(|t| schemas.by_type.contains_key(t)) else {
            return text;
        };
        let to_none = |title: &str, body: &str| {
            use super::schema::AiContext;
            match super::sources::field_rule(schemas, &type_name, title, body) {
                AiContext::All(all) => !all,
                AiContext::Only(purposes) => purposes.is_empty(),
                AiContext::NoSchema => false,
            }
        };
        super::doc::without_section_bodies(&text, to_none).unwrap_or(text)
    }

    /// `text` with every secret the policy finds replaced by its
    /// placeholder (for what the request itself says: an intent or a
    /// comment is printed as given, but never a secret pasted into it).
    pub(crate) fn redacted(&self, text: &str) -> String {
        self.policy.redact(text).0
    }

    /// The secrets redacted in the files read so far, by path and line.
    pub(crate) fn redactions(&self) -> Vec<(String, crate::privacy::Redaction)> {
        let mut redacted = self.redacted.lock().map(|r| r.clone()).unwrap_or_default();
        redacted.sort();
        redacted.dedup();
        redacted
    }

    /// What listings left out because it leads nowhere readable, sorted.
    pub(crate) fn skipped(&self) -> Vec<(String, &'static str)> {
        let mut skipped = self.skipped.lock().map(|s| s.clone()).unwrap_or_default();
        skipped.sort();
        skipped.dedup();
        skipped
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The paths read or listed so far.
    pub(crate) fn touched(&self) -> Vec<String> {
        self.touched.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// The paths refused so far because they lead into a closed library,
    /// each once, with that library.
    pub(crate) fn refused(&self) -> Vec<(String, String)> {
        let mut seen = BTreeSet::new();
        self.refused
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|(path, _)| seen.insert(path.clone()))
            .collect()
    }

    fn record(&self, rel: &str) {
        if let Ok(mut touched) = self.touched.lock() {
            touched.push(rel.to_string());
        }
    }

    /// Closes `libraries` (folders listed by `list`): from now on nothing
    /// whose canonical target lies inside one of them is opened or listed,
    /// whatever path or symlink leads there. Replaces the previous set.
    pub(crate) fn close_libraries(&mut self, libraries: &[&Entry]) {
        self.closed = libraries
            .iter()
            .map(|e| (e.real.clone(), e.path.clone()))
            .collect();
    }

    /// The closed library a canonical path lies inside, if any.
    fn closed_library(&self, real: &Path) -> Option<&str> {
        self.closed
            .iter()
            .find(|(folder, _)| real.starts_with(folder))
            .map(|(_, rel)| rel.as_str())
    }

    /// The closed library `rel` leads into, if any (without recording it).
    pub(crate) fn closed_library_of(&self, rel: &str) -> Option<String> {
        let real = self.canonical(rel).ok()?;
        self.closed_library(&real).map(str::to_string)
    }

    /// `rel` under the root with every existing part's symlinks resolved,
    /// refused when it leaves the root (by `..`, an absolute path or a
    /// symlink).
    fn canonical(&self, rel: &str) -> Result<PathBuf, ReadError> {
        let path = Path::new(rel);
        if rel.is_empty() {
            return Err(ReadError::Refused("an empty path names no file".into()));
        }
        if path.is_absolute() {
            return Err(ReadError::Refused(format!(
                "path '{rel}' is absolute: give it relative to the project root"
            )));
        }
        // A path is read as written, never normalised: each `..` is
        // refused, and the message says whether it would have left the root.
        if path
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            let mut depth = 0usize;
            let leaves = path.components().any(|c| match c {
                Component::Normal(_) => {
                    depth += 1;
                    false
                }
                Component::CurDir => false,
                _ => depth.checked_sub(1).map(|d| depth = d).is_none(),
            });
            return Err(ReadError::Refused(if leaves {
                format!("path '{rel}' leaves the project root")
            } else {
                format!("path '{rel}' has a '..' part: write it without one")
            }));
        }
        let joined = self.root.join(path);
        // A path that does not exist (yet) is judged by its nearest existing
        // ancestor: a symlinked folder on the way decides where it would be.
        let mut existing = joined.as_path();
        let mut rest = Vec::new();
        let real = loop {
            match self.canonicalize(existing) {
                Ok(real) => {
                    break rest
                        .iter()
                        .rev()
                        .fold(real, |p: PathBuf, part| p.join(part));
                }
                Err(_) => match (existing.parent(), existing.file_name()) {
                    (Some(parent), Some(name)) => {
                        rest.push(name.to_owned());
                        existing = parent;
                    }
                    _ => break joined.clone(),
                },
            }
        };
        if !real.starts_with(&self.root) {
            return Err(ReadError::Refused(format!(
                "path '{rel}' leads outside the project root"
            )));
        }
        Ok(real)
    }

    /// The canonical path of `rel`, refused when it leaves the root or
    /// leads into a closed library (the refusal is recorded).
    pub(crate) fn resolve(&self, rel: &str) -> Result<PathBuf, ReadError> {
        let real = self.canonical(rel)?;
        self.refuse_if_closed(rel, &real)?;
        Ok(real)
    }

    /// Reads `rel` as UTF-8 text; `Ok(None)` when it does not exist. A
    /// FIFO, socket or device is refused without being opened in a way
    /// that blocks.
    pub(crate) fn read_optional(&self, rel: &str) -> Result<Option<String>, ReadError> {
        let path = self.resolve(rel)?;
        let unreadable = |why: String| ReadError::Unreadable {
            path: rel.to_string(),
            why,
        };
        if let Files::Store(files) = &self.files {
            return self.read_stored(files, rel, &path);
        }
        let file = match crate::safe_fs::open_regular(&path) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) if err.kind() == std::io::ErrorKind::InvalidInput => {
                return Err(unreadable(err.to_string()));
            }
            Err(err) => return Err(unreadable(format!("cannot read: {err}"))),
        };
        self.check_opened(rel, &file)?;
        self.check_listed(rel)?;
        let bytes = read_limited(file).map_err(|err| unreadable(err.to_string()))?;
        self.record(rel);
        let text = String::from_utf8(bytes)
            .map(|text| text.replace("\r\n", "\n"))
            .map_err(|err| {
                unreadable(format!(
                    "not valid UTF-8 (at byte {})",
                    err.utf8_error().valid_up_to()
                ))
            })?;
        if is_config_file(rel) {
            return Ok(Some(text));
        }
        let target = path
            .strip_prefix(&self.root)
            .map(|t| t.to_string_lossy().replace('\\', "/"))
            .unwrap_or_default();
        let Some((text, redactions)) = self.prepare(rel, &target, &text) else {
            return Err(ReadError::Private {
                path: rel.to_string(),
            });
        };
        self.note_redactions(rel, redactions);
        Ok(Some(text))
    }

    /// A note's text as the privacy policy lets it be seen, with the
    /// secrets taken out; `None` when the note (read as `rel`, lying at
    /// `target`) is private.
    pub(super) fn prepare(
        &self,
        rel: &str,
        target: &str,
        text: &str,
    ) -> Option<(String, Vec<crate::privacy::Redaction>)> {
        let prepared = self
            .policy
            .prepare(rel, text, None)
            .filter(|_| !self.policy.is_private_path(target))?;
        Some((
            self.without_hidden_fields(rel, prepared.text),
            prepared.note.redactions,
        ))
    }

    fn note_redactions(&self, rel: &str, redactions: Vec<crate::privacy::Redaction>) {
        if let Ok(mut redacted) = self.redacted.lock() {
            redacted.extend(redactions.into_iter().map(|r| (rel.to_string(), r)));
        }
    }

    /// `read_optional` from the store: the reads the sync recorded,
    /// replayed through the same checks in the same order.
    fn read_stored(
        &self,
        files: &super::stored::StoreFiles,
        rel: &str,
        path: &Path,
    ) -> Result<Option<String>, ReadError> {
        use super::stored::Stored;
        let unreadable = |why: String| ReadError::Unreadable {
            path: rel.to_string(),
            why,
        };
        let real = path
            .strip_prefix(&self.root)
            .map(|t| t.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(content) = files
            .content(&real)
            .map_err(|err| unreadable(err.to_string()))?
        else {
            return Ok(None);
        };
        if let Some(Stored::Special(why)) = &content {
            return Err(unreadable(why.clone()));
        }
        self.check_listed(rel)?;
        let content = match content {
            Some(Stored::TooLarge(why)) => return Err(unreadable(why)),
            Some(content) => content,
            None => return Err(unreadable("not held by the store".into())),
        };
        self.record(rel);
        match content {
            Stored::NotText(why) => Err(unreadable(why)),
            Stored::Config(text) => Ok(Some(text)),
            Stored::Note { text, redactions } => {
                self.note_redactions(rel, redactions);
                Ok(Some(text))
            }
            Stored::Special(_) | Stored::TooLarge(_) => Ok(None),
        }
    }

    /// Refuses `rel` unless it is the project's YAML configuration (outside
    /// hidden folders) or a note the vault's walk lists: the same rules as
    /// every other read (hidden, skipped and ignored files, case-insensitive
    /// extensions), so `--candidate .env` or a slot naming `.git/config`
    /// reads nothing.
    pub(crate) fn check_listed(&self, rel: &str) -> Result<(), ReadError> {
        let rel = rel.trim_start_matches("./");
        let exists = match &self.files {
            Files::Folder => fs::symlink_metadata(self.root.join(rel)).is_ok(),
            Files::Store(files) => files.entry_exists(Path::new(rel)),
        };
        if !exists {
            // Nothing there: reading it finds nothing, whatever its name.
            return Ok(());
        }
        let hidden_part = rel.split('/').any(|part| part.starts_with('.'));
        let listed = !hidden_part
            && (is_config_file(rel)
                || (is_markdown(rel)
                    && match &self.files {
                        Files::Store(files) => files.listed(rel),
                        Files::Folder => {
                            let listed = self.listed.get_or_init(|| {
                                let mut listed: Vec<String> = walk::walk(&self.root, &[])
                                    .files
                                    .into_iter()
                                    .map(|found| found.rel_path)
                                    .collect();
                                listed.sort_unstable();
                                listed
                            });
                            listed.binary_search_by(|p| p.as_str().cmp(rel)).is_ok()
                        }
                    }));
        if listed {
            Ok(())
        } else {
            Err(ReadError::Refused(format!(
                "'{rel}' is not a note the project lists (hidden, skipped, ignored or not \
                 Markdown); not read"
            )))
        }
    }

    /// Refuses (and records) `rel` when its canonical path `real` lies in a
    /// closed library.
    fn refuse_if_closed(&self, rel: &str, real: &Path) -> Result<(), ReadError> {
        let Some(library) = self.closed_library(real) else {
            return Ok(());
        };
        let library = library.to_string();
        if let Ok(mut refused) = self.refused.lock() {
            refused.push((rel.to_string(), library.clone()));
        }
        Err(ReadError::NotAuthorized {
            path: rel.to_string(),
            library,
        })
    }

    /// Checks where the opened file really is: a symlink swapped in after
    /// `resolve` looked would otherwise lead the read around the gate.
    fn check_opened(&self, rel: &str, file: &fs::File) -> Result<(), ReadError> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            if let Ok(real) = fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
                if !real.starts_with(&self.root) {
                    return Err(ReadError::Refused(format!(
                        "path '{rel}' leads outside the project root"
                    )));
                }
                self.refuse_if_closed(rel, &real)?;
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (rel, file);
        Ok(())
    }

    /// Reads `rel`, which must exist.
    pub(crate) fn read(&self, rel: &str) -> Result<String, ProjectError> {
        self.read_optional(rel)?
            .ok_or_else(|| ProjectError::Missing(rel.to_string()))
    }

    /// The entries of folder `rel` (files and folders, sorted by name, not
    /// hidden ones), or nothing when it does not exist. Entries leading
    /// outside the root or into a closed library are left out.
    pub(crate) fn list(&self, rel: &str) -> Result<Vec<Entry>, ReadError> {
        self.list_entries(rel, false)
    }

    fn list_entries(&self, rel: &str, with_hidden: bool) -> Result<Vec<Entry>, ReadError> {
        let path = self.resolve(rel)?;
        let Some(children) = self.read_dir(&path) else {
            return Ok(Vec::new());
        };
        self.record(&format!("{rel}/"));
        let mut entries = Vec::new();
        for (name, child) in children {
            if name.starts_with('.') && !with_hidden {
                continue;
            }
            let rel_child = format!("{rel}/{name}");
            let skip = |why: &'static str| {
                if let Ok(mut skipped) = self.skipped.lock() {
                    skipped.push((rel_child.clone(), why));
                }
            };
            let Some((real, is_dir)) = child else {
                skip("a symlink that leads nowhere; not read");
                continue;
            };
            if !real.starts_with(&self.root) {
                skip("leads outside the project root; not read");
                continue;
            }
            if self.resolve(&rel_child).is_err() {
                continue;
            }
            // A file in a private folder is never listed, so never opened
            // nor named in a report (privacy.md promises as much).
            let inside = real
                .strip_prefix(&self.root)
                .map(|t| t.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            if !is_dir
                && (self.policy.is_private_path(&rel_child) || self.policy.is_private_path(&inside))
            {
                continue;
            }
            entries.push(Entry {
                is_dir,
                name,
                path: rel_child,
                real,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// Whether `rel` is a folder (through symlinks), refused paths not.
    pub(crate) fn is_folder(&self, rel: &str) -> bool {
        let Ok(real) = self.resolve(rel) else {
            return false;
        };
        match &self.files {
            Files::Folder => real.is_dir(),
            Files::Store(_) => self.read_dir(&real).is_some(),
        }
    }

    /// The entries of the real folder `path`: each name with its canonical
    /// path and whether that is a folder (`None` when it cannot be
    /// resolved); `None` when the folder cannot be read.
    #[allow(clippy::type_complexity)]
    fn read_dir(&self, path: &Path) -> Option<Vec<(String, Option<(PathBuf, bool)>)>> {
        match &self.files {
            Files::Folder => {
                let read = fs::read_dir(path).ok()?;
                Some(
                    read.flatten()
                        .map(|entry| {
                            let name = entry.file_name().to_string_lossy().into_owned();
                            let real = entry.path().canonicalize().ok();
                            (name, real.map(|real| (real.clone(), real.is_dir())))
                        })
                        .collect(),
                )
            }
            Files::Store(files) => {
                let real = path.strip_prefix(&self.root).ok()?.to_string_lossy();
                match files.resolve(Path::new(real.as_ref()))? {
                    super::stored::Resolved::Inside(_, 'd') => {}
                    _ => return None,
                }
                Some(
                    files
                        .children(&real)
                        .into_iter()
                        .map(|(name, child)| {
                            let resolved = match files.resolve(Path::new(&child)) {
                                Some(super::stored::Resolved::Inside(real, kind)) => {
                                    Some((super::stored::absolute(&real), kind == 'd'))
                                }
                                Some(super::stored::Resolved::Outside) => {
                                    Some((PathBuf::from("/"), false))
                                }
                                None => None,
                            };
                            (name, resolved)
                        })
                        .collect(),
                )
            }
        }
    }

    /// The folders of the libraries folder `rel`, hidden ones included (a
    /// library is closed whatever its name).
    pub(crate) fn library_folders(&self, rel: &str) -> Result<Vec<Entry>, ReadError> {
        Ok(self
            .list_entries(rel, true)?
            .into_iter()
            .filter(|e| e.is_dir)
            .collect())
    }

    /// Every Markdown file under folder `rel`, recursively, sorted by path;
    /// a folder reached twice (a symlink loop) is listed once.
    pub(crate) fn markdown_files(&self, rel: &str) -> Result<Vec<String>, ReadError> {
        let mut files = Vec::new();
        let real = self.resolve(rel)?;
        if let (Files::Store(stored), Ok(inside)) = (&self.files, real.strip_prefix(&self.root)) {
            // Every file listed here is read next: one query, not one each.
            stored
                .prefetch(&inside.to_string_lossy())
                .map_err(|err| ReadError::Unreadable {
                    path: rel.to_string(),
                    why: err.to_string(),
                })?;
        }
        let mut seen = BTreeSet::from([real]);
        let mut stack = vec![rel.to_string()];
        while let Some(dir) = stack.pop() {
            for entry in self.list(&dir)? {
                if entry.is_dir {
                    if seen.insert(entry.real) {
                        stack.push(entry.path);
                    }
                } else if entry.name.ends_with(".md") {
                    files.push(entry.path);
                }
            }
        }
        files.sort();
        Ok(files)
    }

    /// Whether a `.gitignore` in the root or on the way to `rel` ignores it.
    pub(crate) fn is_git_ignored(&self, rel: &str) -> bool {
        if let Files::Store(_) = self.files {
            // A pack from the store is never written into the project.
            return false;
        }
        let mut dir = self.root.clone();
        let mut ignored = false;
        let parts: Vec<&str> = rel.split('/').collect();
        for depth in 0..parts.len() {
            let gitignore = dir.join(".gitignore");
            if let Ok(real) = gitignore.canonicalize()
                && real.starts_with(&self.root)
                && self.closed_library(&real).is_none()
                && let Ok((text, _)) = crate::safe_fs::read_text(&real, MAX_FILE_BYTES)
            {
                let mut builder = ignore::gitignore::GitignoreBuilder::new(&dir);
                for line in text.lines() {
                    let _ = builder.add_line(None, line);
                }
                let Ok(matcher) = builder.build() else {
                    dir = dir.join(parts[depth]);
                    continue;
                };
                let below = parts[depth..].join("/");
                let matched = matcher.matched_path_or_any_parents(&below, false);
                if matched.is_ignore() {
                    ignored = true;
                } else if matched.is_whitelist() {
                    ignored = false;
                }
            }
            dir = dir.join(parts[depth]);
        }
        ignored
    }
}

/// The bytes of an opened regular file, refused over `MAX_FILE_BYTES`.
pub(super) fn read_limited(file: fs::File) -> Result<Vec<u8>, ProjectError> {
    use std::io::Read;
    let len = file.metadata().map_err(ProjectError::Unreadable)?.len();
    if len > MAX_FILE_BYTES {
        return Err(ProjectError::TooLarge {
            len: Some(len),
            limit: MAX_FILE_BYTES,
        });
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(ProjectError::Unreadable)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ProjectError::TooLarge {
            len: None,
            limit: MAX_FILE_BYTES,
        });
    }
    Ok(bytes)
}

pub(crate) struct Entry {
    pub name: String,
    pub path: String,
    pub is_dir: bool,
    /// The canonical path (symlinks resolved).
    pub real: PathBuf,
}

/// The project's own YAML (recipe, schemas, bindings, outlines).
pub(super) fn is_config_file(rel: &str) -> bool {
    rel.rsplit_once('.')
        .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case("yaml") || ext.eq_ignore_ascii_case("yml"))
}

pub(super) fn is_markdown(rel: &str) -> bool {
    rel.rsplit_once('.')
        .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case("md"))
}

/// A work's bindings: the libraries L3 may read and the identity slots.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Bindings {
    #[serde(default, alias = "知识绑定")]
    pub libraries: Vec<String>,
    #[serde(default, alias = "槽位")]
    pub slots: BTreeMap<String, String>,
}

impl Bindings {
    pub(crate) fn parse(path: &str, text: &str) -> Result<Bindings, ProjectError> {
        if text.trim().is_empty() {
            return Ok(Bindings::default());
        }
        let bindings: Bindings =
            crate::parse::yaml::from_str(text).map_err(|err| ProjectError::BindingsSyntax {
                path: path.to_string(),
                error: err.to_string(),
            })?;
        for library in &bindings.libraries {
            if !is_plain_name(library) {
                return Err(ProjectError::NotALibraryName {
                    path: path.to_string(),
                    library: library.clone(),
                });
            }
        }
        Ok(bindings)
    }
}

/// Whether `name` is one plain path component: not empty, not `.` or
/// `..`, without separators or NUL, so it names a folder inside another.
pub(crate) fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_paths_leaving_the_root() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.md"), "x").unwrap();
        let project = Project::open(dir.path()).unwrap();
        assert!(project.resolve("../a.md").is_err());
        assert!(project.resolve("/etc/passwd").is_err());
        assert!(project.resolve("sub/../../a.md").is_err());
        // Each refusal says why: `sub/../a.md` stays inside but is refused
        // as written, not for leaving the root.
        let why = |rel: &str| project.read(rel).unwrap_err().to_string();
        assert!(
            why("../a.md").contains("leaves the project root"),
            "{}",
            why("../a.md")
        );
        assert!(why("sub/../../a.md").contains("leaves the project root"));
        assert!(
            why("sub/../a.md").contains("has a '..' part"),
            "{}",
            why("sub/../a.md")
        );
        assert!(why("/etc/passwd").contains("is absolute"));
        assert!(why("").contains("empty path"));
        assert_eq!(project.read("a.md").unwrap(), "x");
        assert_eq!(project.touched(), ["a.md"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_closed_library_is_reached_by_no_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("lib/open")).unwrap();
        fs::create_dir_all(root.join("lib/secret")).unwrap();
        fs::create_dir_all(root.join("cards")).unwrap();
        fs::write(root.join("lib/secret/s.md"), "secret").unwrap();
        fs::write(root.join("lib/open/o.md"), "open").unwrap();
        std::os::unix::fs::symlink("secret", root.join("lib/alias")).unwrap();
        std::os::unix::fs::symlink("../lib/secret/s.md", root.join("cards/leak.md")).unwrap();
        std::os::unix::fs::symlink("../lib/secret", root.join("cards/dir")).unwrap();
        std::os::unix::fs::symlink(".", root.join("cards/loop")).unwrap();
        fs::write(root.join("cards/c.md"), "card").unwrap();
        let mut project = Project::open(root).unwrap();
        let libraries = project.library_folders("lib").unwrap();
        let names: Vec<&str> = libraries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["alias", "open", "secret"]);
        let secret: Vec<&Entry> = libraries.iter().filter(|e| e.name == "secret").collect();
        project.close_libraries(&secret);

        for path in [
            "lib/secret/s.md",
            "lib/alias/s.md",
            "cards/leak.md",
            "cards/dir/s.md",
            "lib/secret/not-there.md",
        ] {
            assert_eq!(
                project.read_optional(path),
                Err(ReadError::NotAuthorized {
                    path: path.into(),
                    library: "lib/secret".into()
                }),
                "{path}"
            );
        }
        assert_eq!(project.read("lib/open/o.md").unwrap(), "open");
        assert_eq!(
            project.markdown_files("cards").unwrap(),
            ["cards/c.md"],
            "no closed entry, and the loop listed once"
        );
        assert!(project.list("lib/alias").is_err());
        assert!(
            project
                .touched()
                .iter()
                .all(|p| !p.contains("secret") && !p.contains("alias") && !p.contains("leak"))
        );
        let refused: Vec<String> = project.refused().into_iter().map(|(p, _)| p).collect();
        assert!(
            refused.contains(&"cards/leak.md".to_string()),
            "{refused:?}"
        );
        assert!(refused.contains(&"cards/dir".to_string()), "{refused:?}");

        // A symlink swapped in after the path was checked: the opened file
        // is checked again.
        #[cfg(target_os = "linux")]
        {
            let swapped = fs::File::open(root.join("lib/secret/s.md")).unwrap();
            assert!(matches!(
                project.check_opened("cards/c.md", &swapped),
                Err(ReadError::NotAuthorized { .. })
            ));
            let fine = fs::File::open(root.join("cards/c.md")).unwrap();
            assert_eq!(project.check_opened("cards/c.md", &fine), Ok(()));
        }
    }

    #[test]
    fn unreadable_files_say_why() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("bad.md"), b"ok\xff").unwrap();
        let project = Project::open(dir.path()).unwrap();
        assert_eq!(
            project.read_optional("bad.md"),
            Err(ReadError::Unreadable {
                path: "bad.md".into(),
                why: "not valid UTF-8 (at byte 2)".into()
            })
        );
        assert_eq!(project.read_optional("missing.md"), Ok(None));
    }

    #[test]
    fn library_names_are_one_folder_name() {
        for name in ["../x", "/etc", "a/b", "..", ".", "", "a\\b"] {
            let err = Bindings::parse("b.yaml", &format!("libraries: ['{name}']\n")).unwrap_err();
            assert!(
                matches!(&err, ProjectError::NotALibraryName { library, .. } if library == name),
                "{name}: {err}"
            );
            assert!(
                err.to_string().contains("is not a library name"),
                "{name}: {err}"
            );
        }
        assert!(Bindings::parse("b.yaml", "libraries: [甲, .hidden]\n").is_ok());
    }

    #[test]
    fn bindings_accept_chinese_keys() {
        let b = Bindings::parse("b", "知识绑定: [甲]\n槽位:\n  writer: a.md\n").unwrap();
        assert_eq!(b.libraries, ["甲"]);
        assert_eq!(b.slots["writer"], "a.md");
    }
}
