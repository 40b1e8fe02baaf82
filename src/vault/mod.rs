//! A vault: every note read from a folder, plus the role files
//! (`index.md`, `hot.md`) and the problems met on the way.

pub(crate) mod changes;
pub(crate) mod log;
pub(crate) mod obsidian;
mod resolve;
pub(crate) mod walk;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use rayon::prelude::*;

pub(crate) use resolve::LinkResolver;

use crate::note::MatchKeys;
use crate::note::{Diagnostic, Note};
use crate::note_tables::{KeysTable, MetaTable};
use crate::parse::markdown::Link;
use crate::privacy::Policy;
use crate::text::collapse_whitespace;

/// Files larger than this are skipped with a diagnostic.
pub(crate) const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct VaultOptions {
    pub max_file_bytes: u64,
    /// Folders (relative, `/`-separated) that are not part of the vault:
    /// never listed, indexed or read.
    pub hidden: Vec<String>,
    /// What of each note may be seen at all.
    pub policy: Arc<Policy>,
}

impl Default for VaultOptions {
    fn default() -> Self {
        VaultOptions {
            max_file_bytes: MAX_FILE_BYTES,
            hidden: Vec::new(),
            policy: Arc::new(Policy::default()),
        }
    }
}

/// A note's text from somewhere other than the vault folder (a store that
/// holds it), with the privacy policy already applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourcedText {
    pub text: String,
    pub redactions: Vec<crate::privacy::Redaction>,
}

/// Where a vault whose folder is elsewhere reads its notes' texts.
pub trait NoteSource: Send + Sync + std::fmt::Debug {
    /// The texts of the notes at `paths` (`None` for one it does not have).
    fn fetch(&self, paths: &[&str]) -> Vec<Option<SourcedText>>;
    /// The text of the Bases file at `path`, if it has one of at most
    /// `max_bytes`.
    fn fetch_base(&self, _path: &str, _max_bytes: u64) -> Option<String> {
        None
    }
}

/// A vault: the metadata of every packable note (sorted by path), and
/// the notes themselves, parsed on first use.
#[derive(Debug)]
pub struct Vault {
    /// The canonical vault root.
    pub root: PathBuf,
    /// Every packable note's metadata, sorted by path.
    pub metas: Arc<MetaTable>,
    notes: Vec<OnceLock<Arc<Note>>>,
    max_file_bytes: u64,
    /// Folders never read (see [`VaultOptions::hidden`]).
    hidden: Vec<String>,
    policy: Arc<Policy>,
    /// The description beside each note's entry in `index.md` (empty for
    /// a vault from an index, whose match keys already hold them).
    pub index_descriptions: HashMap<usize, String>,
    /// Notes linked from `hot.md`, in the order of their first link.
    pub hot: Vec<usize>,
    /// The Bases files the walk lists (sorted): read only as embeds.
    bases: Vec<String>,
    pub diagnostics: Vec<Diagnostic>,
    tables: SharedTables,
    /// Set when the notes' texts come from a store, not the folder.
    source: Option<Arc<dyn NoteSource>>,
}

/// The tables a vault builds on first use from its notes' metadata,
/// shareable between vaults over the same notes.
#[derive(Clone, Debug, Default)]
pub struct SharedTables {
    resolver: Arc<OnceLock<Arc<LinkResolver>>>,
    match_keys: Arc<OnceLock<Arc<KeysTable>>>,
}

impl Vault {
    /// Reads every note under `root`. Fails only when `root` itself cannot
    /// be read; a bad note becomes a diagnostic.
    pub fn load(root: &Path, options: &VaultOptions) -> Result<Vault> {
        let root = root
            .canonicalize()
            .with_context(|| format!("cannot open vault {}", root.display()))?;
        if !root.is_dir() {
            bail!("vault {} is not a folder", root.display());
        }
        let walked = walk::walk(&root, &options.hidden);
        let mut diagnostics = crate::analysis::walk_diagnostics(walked.problems, &options.policy);

        let (base_files, files): (Vec<_>, Vec<_>) = walked
            .files
            .into_iter()
            .partition(|f| walk::is_base(&f.rel_path));
        let (role_files, note_files): (Vec<_>, Vec<_>) = files
            .into_iter()
            .partition(|f| walk::ROLE_FILES.contains(&f.rel_path.as_str()));

        let read: Vec<(Option<Note>, Vec<Diagnostic>)> = note_files
            .par_iter()
            .map(|found| read_note(&root, found, options.max_file_bytes, &options.policy))
            .collect();
        let mut notes = Vec::with_capacity(read.len());
        for (note, problems) in read {
            notes.extend(note);
            diagnostics.extend(problems);
        }

        let mut roles = Vec::new();
        for found in role_files {
            if found.rel_path == log::LOG_FILE {
                continue;
            }
            let (role_note, problems) =
                read_note(&root, &found, options.max_file_bytes, &options.policy);
            diagnostics.extend(problems);
            roles.extend(role_note);
        }
        let mut vault = Vault::assemble(root, notes, roles, diagnostics);
        vault.max_file_bytes = options.max_file_bytes;
        vault.hidden = options.hidden.clone();
        vault.policy = Arc::clone(&options.policy);
        vault.bases = base_files.into_iter().map(|f| f.rel_path).collect();
        Ok(vault)
    }

    /// Builds a vault from texts in memory (`(relative path, text)` pairs),
    /// as if they had been read from `root`: for tests and embedders.
    pub fn from_texts(root: PathBuf, files: &[(String, String)]) -> Vault {
        Vault::from_texts_with(root, files, Arc::new(Policy::default()))
    }

    /// [`from_texts`](Self::from_texts) under `policy`.
    pub fn from_texts_with(
        root: PathBuf,
        files: &[(String, String)],
        policy: Arc<Policy>,
    ) -> Vault {
        let mut notes = Vec::new();
        let mut roles = Vec::new();
        let mut diagnostics = Vec::new();
        let mut files: Vec<&(String, String)> = files.iter().collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, text) in files {
            if path == log::LOG_FILE {
                continue;
            }
            let Some(prepared) = policy.prepare(path, text, None) else {
                continue;
            };
            diagnostics.extend(prepared.problems.into_iter().map(|message| Diagnostic {
                path: path.clone(),
                message,
            }));
            if walk::ROLE_FILES.contains(&path.as_str()) {
                roles.push(prepared.note);
            } else {
                notes.push(prepared.note);
            }
        }
        let mut vault = Vault::assemble(root, notes, roles, diagnostics);
        vault.policy = policy;
        vault
    }

    fn assemble(
        root: PathBuf,
        mut notes: Vec<Note>,
        roles: Vec<Note>,
        diagnostics: Vec<Diagnostic>,
    ) -> Vault {
        // Dated as both stores date them (a vault read without an index
        // is the fallback when none can be opened).
        let mut metas: Vec<_> = notes.iter().map(|n| n.meta.clone()).collect();
        for note in crate::analysis::mark_shared_file_times(&mut metas) {
            notes[note].meta.updated_source = metas[note].updated_source;
        }
        let metas = Arc::new(MetaTable::new(metas));
        let loaded = notes
            .into_iter()
            .map(|note| OnceLock::from(Arc::new(note)))
            .collect();
        let mut vault = Vault::with_metas(root, metas, loaded, diagnostics);
        for role in roles {
            match role.meta.path.as_str() {
                "index.md" => vault.index_descriptions = vault.read_index(&role),
                "hot.md" => vault.hot = vault.read_hot(&role),
                _ => {}
            }
        }
        vault
    }

    /// A vault known by its notes' metadata only (from an index); each
    /// note is read from disk the first time it is asked for.
    pub fn from_metas(
        root: PathBuf,
        metas: Arc<MetaTable>,
        index_descriptions: HashMap<usize, String>,
        hot: Vec<usize>,
        diagnostics: Vec<Diagnostic>,
    ) -> Vault {
        let unloaded = (0..metas.len()).map(|_| OnceLock::new()).collect();
        let mut vault = Vault::with_metas(root, metas, unloaded, diagnostics);
        vault.index_descriptions = index_descriptions;
        vault.hot = hot;
        vault
    }

    fn with_metas(
        root: PathBuf,
        metas: Arc<MetaTable>,
        notes: Vec<OnceLock<Arc<Note>>>,
        mut diagnostics: Vec<Diagnostic>,
    ) -> Vault {
        diagnostics.sort();
        Vault {
            root,
            metas,
            notes,
            max_file_bytes: MAX_FILE_BYTES,
            hidden: Vec::new(),
            policy: Arc::new(Policy::default()),
            index_descriptions: HashMap::new(),
            hot: Vec::new(),
            bases: Vec::new(),
            diagnostics,
            tables: SharedTables::default(),
            source: None,
        }
    }

    /// The whole note `idx`, read and parsed on first use. A note that can
    /// no longer be read comes back with its metadata and an empty body.
    pub fn note(&self, idx: usize) -> Arc<Note> {
        self.notes[idx]
            .get_or_init(|| {
                let meta = &self.metas[idx];
                if let Some(source) = &self.source {
                    let text = source.fetch(&[meta.path.as_str()]).pop().flatten();
                    return Arc::new(self.sourced_note(idx, text));
                }
                let mut note = match self.read_prepared(&meta.path) {
                    Some(prepared) => prepared.note,
                    None => crate::parse::parse_note(&meta.path, "", None).0,
                };
                note.meta = meta.clone();
                Arc::new(note)
            })
            .clone()
    }

    /// How many notes have been read so far (tests bound what a call reads).
    #[cfg(test)]
    pub(crate) fn notes_read(&self) -> usize {
        self.notes
            .iter()
            .filter(|note| note.get().is_some())
            .count()
    }

    /// Reads the notes at `indexes` ahead of their use: from a store in
    /// one batch; from the folder on every core, since each is a file read,
    /// the privacy pass and a parse, and a pack reads dozens.
    pub fn preload(&self, indexes: &[usize]) {
        let Some(source) = &self.source else {
            use rayon::prelude::*;
            indexes
                .par_iter()
                .filter(|&&idx| self.notes.get(idx).is_some_and(|n| n.get().is_none()))
                .for_each(|&idx| {
                    self.note(idx);
                });
            return;
        };
        let wanted: Vec<usize> = indexes
            .iter()
            .copied()
            .filter(|&idx| self.notes.get(idx).is_some_and(|n| n.get().is_none()))
            .collect();
        let paths: Vec<&str> = wanted
            .iter()
            .map(|&i| self.metas[i].path.as_str())
            .collect();
        for (idx, text) in wanted.iter().zip(source.fetch(&paths)) {
            let _ = self.notes[*idx].set(Arc::new(self.sourced_note(*idx, text)));
        }
    }

    fn sourced_note(&self, idx: usize, text: Option<SourcedText>) -> Note {
        let meta = &self.metas[idx];
        let (mut note, redactions) = match text {
            Some(text) => (
                crate::parse::parse_note(&meta.path, &text.text, None).0,
                text.redactions,
            ),
            None => (crate::parse::parse_note(&meta.path, "", None).0, Vec::new()),
        };
        note.meta = meta.clone();
        note.redactions = redactions;
        note
    }

    /// Makes `source` where this vault's notes are read from.
    pub fn set_source(&mut self, source: Arc<dyn NoteSource>) {
        self.source = Some(source);
    }

    /// Reads `index.md` and `hot.md` from disk: the description of each
    /// note's index entry, and the notes linked from `hot.md`.
    pub fn read_role_files(&self) -> (HashMap<usize, String>, Vec<usize>) {
        let read = |name: &str| self.read_prepared(name).map(|prepared| prepared.note);
        let descriptions = read("index.md")
            .map(|note| self.read_index(&note))
            .unwrap_or_default();
        let hot = read("hot.md")
            .map(|note| self.read_hot(&note))
            .unwrap_or_default();
        (descriptions, hot)
    }

    /// Reads a note of the vault (or `index.md`, `hot.md`), refusing every
    /// other file: whatever the path or symlink, only what the walker
    /// lists is ever read (never a hidden, skipped or ignored file, nor one
    /// outside the root).
    pub fn read_inside(&self, rel_path: &str) -> Option<String> {
        if !self.is_listed(rel_path) {
            return None;
        }
        if self.source.is_some() {
            // Never the folder: on a server it may be another vault's.
            return self.read_prepared(rel_path).map(|prepared| prepared.text);
        }
        let path = self.root.join(rel_path).canonicalize().ok()?;
        let target = path.strip_prefix(&self.root).ok()?;
        let target = target.to_string_lossy().replace('\\', "/");
        if target != rel_path && !self.is_listed(&target) {
            return None;
        }
        let (text, _) = walk::read_text(&path, self.max_file_bytes).ok()?;
        Some(text)
    }

    /// A note's text and parse as the privacy policy lets them be seen
    /// (`None` for a private, unlisted or unreadable note).
    pub fn read_prepared(&self, rel_path: &str) -> Option<crate::privacy::Prepared> {
        if let Some(source) = &self.source {
            // A store holds notes only, each as the policy let it be seen.
            let idx = self.metas.position(rel_path)?;
            let text = source.fetch(&[rel_path]).pop().flatten()?;
            let note = self.sourced_note(idx, Some(text.clone()));
            return Some(crate::privacy::Prepared {
                text: text.text,
                note,
                problems: Vec::new(),
            });
        }
        let raw = self.read_inside(rel_path)?;
        let target = self.root.join(rel_path).canonicalize().ok()?;
        let target = target
            .strip_prefix(&self.root)
            .ok()?
            .to_string_lossy()
            .replace('\\', "/");
        if self.policy.is_private_path(&target) {
            return None;
        }
        self.policy.prepare(rel_path, &raw, None)
    }

    /// The Bases files of the vault a note may embed, in path order: none
    /// in a hidden or private folder, so that an embed of one reads as an
    /// embed of nothing (no path, no "cannot be read" to tell it exists).
    pub fn bases(&self) -> impl Iterator<Item = &String> {
        self.bases.iter().filter(|path| {
            !walk::is_hidden(path, &self.hidden) && !self.policy.is_private_path(path)
        })
    }

    /// Makes `paths` (sorted, as the walk lists them) the vault's Bases files.
    pub fn set_bases(&mut self, paths: Vec<String>) {
        self.bases = paths;
    }

    /// Reads a Bases file the walk lists, with the checks of
    /// [`read_inside`](Self::read_inside) and at most `max_bytes`; `None`
    /// for any other path or a private one. A vault read from a store
    /// asks the store, which holds what its sync read this way.
    pub fn read_base(&self, rel_path: &str, max_bytes: u64) -> Option<String> {
        let listed = self
            .bases
            .binary_search_by(|p| p.as_str().cmp(rel_path))
            .is_ok();
        if let Some(source) = &self.source {
            // A store keeps only the bases its sync read under the policy.
            return listed
                .then(|| source.fetch_base(rel_path, max_bytes))
                .flatten();
        }
        if !listed
            || walk::is_hidden(rel_path, &self.hidden)
            || self.policy.is_private_path(rel_path)
        {
            return None;
        }
        let path = self.root.join(rel_path).canonicalize().ok()?;
        let target = path.strip_prefix(&self.root).ok()?;
        let target = target.to_string_lossy().replace('\\', "/");
        if target != rel_path
            && (self.bases.binary_search(&target).is_err() || self.policy.is_private_path(&target))
        {
            return None;
        }
        let (text, _) = walk::read_text(&path, max_bytes).ok()?;
        // A Bases file is shown as data (view names, filters, formulas):
        // its secrets are redacted like a note's.
        Some(self.policy.redact(&text).0)
    }

    /// The privacy policy every read goes through.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Reads this vault's notes under `policy` from now on.
    pub fn set_policy(&mut self, policy: Arc<Policy>) {
        self.policy = policy;
    }

    /// Whether `rel_path` is a note of this vault or one of its role files.
    pub fn is_listed(&self, rel_path: &str) -> bool {
        let is_note = self.metas.position(rel_path).is_some();
        (is_note || matches!(rel_path, "index.md" | "hot.md"))
            && !walk::is_hidden(rel_path, &self.hidden)
    }

    /// Resolves a link written in the note at path `from`.
    pub fn resolve(&self, from: &str, link: &Link) -> Option<usize> {
        self.resolver().resolve(&self.metas, from, link)
    }

    /// The link resolver over every note, built on first use unless the
    /// index supplied it.
    pub fn resolver(&self) -> &LinkResolver {
        self.tables
            .resolver
            .get_or_init(|| Arc::new(LinkResolver::new(&self.metas)))
    }

    /// Supplies the resolver an index stored for these notes.
    pub fn set_resolver(&mut self, resolver: Arc<LinkResolver>) {
        self.tables.resolver = Arc::new(OnceLock::from(resolver));
    }

    /// Every note's folded match keys for the relevance pass, built on
    /// first use unless the index supplied them.
    pub fn match_keys(&self) -> &KeysTable {
        self.tables.match_keys.get_or_init(|| {
            let keys: Vec<MatchKeys> = self
                .metas
                .iter()
                .enumerate()
                .map(|(idx, meta)| {
                    MatchKeys::new(meta, self.index_descriptions.get(&idx).map(String::as_str))
                })
                .collect();
            Arc::new(KeysTable::new(&keys))
        })
    }

    /// Builds the resolver and match keys at most once for every vault
    /// given `tables` (vaults over the same notes and descriptions: a
    /// server answers each call from a new vault of one store snapshot).
    pub fn share_tables(&mut self, tables: SharedTables) {
        self.tables = tables;
    }

    /// Folders this vault does not read (see [`VaultOptions::hidden`]).
    pub fn hidden(&self) -> &[String] {
        &self.hidden
    }

    /// Whether the notes' texts come from a store, not the vault's folder.
    pub fn is_sourced(&self) -> bool {
        self.source.is_some()
    }

    /// Folders this vault does not read (see [`VaultOptions::hidden`]).
    pub fn set_hidden(&mut self, hidden: Vec<String>) {
        self.hidden = hidden;
    }

    /// Supplies precomputed match keys (one per note, in order).
    pub fn set_match_keys(&mut self, keys: Arc<KeysTable>) {
        if keys.len() == self.metas.len() {
            self.tables.match_keys = Arc::new(OnceLock::from(keys));
        }
    }

    /// Each line of `index.md` that links to a note describes it with the
    /// rest of the line (list markers, separators and table pipes removed).
    fn read_index(&self, index: &Note) -> HashMap<usize, String> {
        let mut descriptions = HashMap::new();
        // The links by where they start, each line taking the run that
        // starts on it: filtering every link for every line was quadratic
        // (a 10k-line index took 0.1 s, a 100k-line one more than 10 s).
        let mut by_start: Vec<usize> = (0..index.links.len()).collect();
        by_start.sort_by_key(|&i| index.links[i].range.start);
        let mut next = 0;
        let mut line_start = 0;
        for line in index.body.split_inclusive('\n') {
            let line_range = line_start..line_start + line.len();
            line_start += line.len();
            let first = next;
            while next < by_start.len() && index.links[by_start[next]].range.start < line_range.end
            {
                next += 1;
            }
            let mut on_line: Vec<usize> = by_start[first..next]
                .iter()
                .copied()
                .filter(|&i| line_range.contains(&index.links[i].range.start))
                .collect();
            // In the order the note gives them, as before.
            on_line.sort_unstable();
            let links: Vec<&Link> = on_line.iter().map(|&i| &index.links[i]).collect();
            if links.is_empty() {
                continue;
            }
            let mut rest = String::new();
            let mut cursor = line_range.start;
            for link in &links {
                rest.push_str(&index.body[cursor..link.range.start]);
                cursor = link.range.end.min(line_range.end);
            }
            rest.push_str(&index.body[cursor..line_range.end]);
            let description = collapse_whitespace(&rest.replace('|', " "));
            let description = description
                .trim_matches(|c: char| {
                    c.is_whitespace() || matches!(c, '-' | '*' | '+' | ':' | '—' | '–' | '·' | '：')
                })
                .to_string();
            if description.is_empty() {
                continue;
            }
            for link in links {
                if let Some(idx) = self.resolve(&index.meta.path, link) {
                    descriptions
                        .entry(idx)
                        .or_insert_with(|| description.clone());
                }
            }
        }
        descriptions
    }

    fn read_hot(&self, hot: &Note) -> Vec<usize> {
        let mut linked = Vec::new();
        for link in &hot.links {
            if let Some(idx) = self.resolve(&hot.meta.path, link)
                && !linked.contains(&idx)
            {
                linked.push(idx);
            }
        }
        linked
    }
}

fn read_note(
    root: &Path,
    found: &walk::Found,
    max_bytes: u64,
    policy: &Policy,
) -> (Option<Note>, Vec<Diagnostic>) {
    let diagnostic = |message: String| Diagnostic {
        path: found.rel_path.clone(),
        message,
    };
    let target_private = found
        .target
        .as_deref()
        .is_some_and(|target| policy.is_private_path(target));
    // A file in a private folder is never opened, so nothing about it (not
    // even that it cannot be read) reaches a diagnostic.
    if target_private || policy.is_private_path(&found.rel_path) {
        return (None, Vec::new());
    }
    match walk::read_text(&found.read_path(root), max_bytes) {
        Ok((text, mtime)) => {
            let mtime = mtime.map(DateTime::<Utc>::from);
            match policy.prepare(&found.rel_path, &text, mtime) {
                Some(prepared) => (
                    Some(prepared.note),
                    prepared.problems.into_iter().map(diagnostic).collect(),
                ),
                None => (
                    None,
                    Policy::unreadable(&found.rel_path, &text)
                        .map(|why| diagnostic(why.to_string()))
                        .into_iter()
                        .collect(),
                ),
            }
        }
        Err(error) => (None, vec![diagnostic(error.to_string())]),
    }
}

/// Why a note path given by a client is refused; each variant holds the
/// path as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathError {
    Empty,
    Absolute(String),
    NotUtf8(String),
    /// Through `..` past the root, or a symlink leading out.
    Outside(String),
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::Empty => f.write_str("path is empty"),
            PathError::Absolute(given) => {
                write!(
                    f,
                    "'{given}' is absolute; give a path relative to the vault"
                )
            }
            PathError::NotUtf8(given) => write!(f, "'{given}' is not valid UTF-8"),
            PathError::Outside(given) => write!(f, "'{given}' leads outside the vault"),
        }
    }
}

impl std::error::Error for PathError {}

/// The message, for callers whose own errors are still text.
impl From<PathError> for String {
    fn from(err: PathError) -> String {
        err.to_string()
    }
}

/// A note path given by a client, checked to stay inside the vault: no
/// absolute paths, no `..`, and (when it exists) no symlink leading out.
pub(crate) fn inside_vault(root: &Path, given: &str) -> Result<String, PathError> {
    let path = Path::new(given.trim());
    if given.trim().is_empty() {
        return Err(PathError::Empty);
    }
    if path.is_absolute() {
        return Err(PathError::Absolute(given.to_string()));
    }
    let mut parts: Vec<String> = Vec::new();
    for component in path.components() {
        match component {
            std::path::Component::Normal(part) => parts.push(
                part.to_str()
                    .ok_or_else(|| PathError::NotUtf8(given.to_string()))?
                    .to_string(),
            ),
            std::path::Component::CurDir => {}
            // `..` inside the vault (`a/../a/b.md`) is fine; past its root is not.
            std::path::Component::ParentDir if parts.pop().is_some() => {}
            _ => return Err(PathError::Outside(given.to_string())),
        }
    }
    let relative = parts.join("/");
    if let Ok(real) = root.join(&relative).canonicalize()
        && !real.starts_with(root)
    {
        return Err(PathError::Outside(given.to_string()));
    }
    Ok(relative)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::fs;

    #[test]
    fn a_path_leaving_the_vault_is_refused_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let refused = |given: &str| inside_vault(&root, given).unwrap_err();
        assert_eq!(refused("  "), PathError::Empty);
        assert_eq!(
            refused("/etc/passwd"),
            PathError::Absolute("/etc/passwd".into())
        );
        assert_eq!(
            refused("a/../../x.md"),
            PathError::Outside("a/../../x.md".into())
        );
        assert_eq!(refused("  ").to_string(), "path is empty");
        assert_eq!(
            refused("/etc/passwd").to_string(),
            "'/etc/passwd' is absolute; give a path relative to the vault"
        );
        assert_eq!(
            String::from(refused("../x.md")),
            "'../x.md' leads outside the vault"
        );
        assert_eq!(inside_vault(&root, "a/../a/b.md").unwrap(), "a/b.md");
    }

    #[test]
    fn each_index_line_describes_the_notes_it_links() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a", "b", "c"] {
            fs::write(dir.path().join(format!("{name}.md")), "Text.\n").unwrap();
        }
        fs::write(
            dir.path().join("index.md"),
            "# Index\n\n- [[a]] — the first\n- [[b]] and [[c]]: a pair\n\
             no link here\n- [[missing]] — nowhere\n- [[a]] — said again\n- [[c]]\n",
        )
        .unwrap();
        let vault = Vault::load(dir.path(), &VaultOptions::default()).unwrap();
        let described: BTreeMap<&str, &str> = vault
            .index_descriptions
            .iter()
            .map(|(&idx, text)| (vault.metas[idx].path.as_str(), text.as_str()))
            .collect();
        assert_eq!(
            described,
            BTreeMap::from([
                ("a.md", "the first"),
                ("b.md", "and : a pair"),
                ("c.md", "and : a pair")
            ])
        );
    }

    #[test]
    fn a_vault_read_without_an_index_dates_its_notes_as_the_stores_do() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..6 {
            fs::write(dir.path().join(format!("s{i}.md")), "Undated.\n").unwrap();
        }
        fs::write(
            dir.path().join("dated.md"),
            "---\nupdated: 2026-05-01\n---\nDated.\n",
        )
        .unwrap();
        let vault = Vault::load(dir.path(), &VaultOptions::default()).unwrap();
        let order: Vec<&str> = crate::retrieve::recent::recent_order(&vault)
            .iter()
            .map(|c| vault.metas[c.note].path.as_str())
            .collect();
        assert_eq!(
            order,
            [
                "dated.md", "s0.md", "s1.md", "s2.md", "s3.md", "s4.md", "s5.md"
            ]
        );
        let shared = vault.metas.search_path("s3.md").unwrap();
        assert_eq!(vault.metas[shared].date(), None);
        assert_eq!(
            vault.note(shared).meta.updated_source,
            crate::note::UpdatedSource::SharedFileTime
        );
    }
}
