//! A project in the PostgreSQL store: what `index --store` records of a
//! writing project's folder ([`image`]), and the files `assemble --store`
//! reads back ([`StoreFiles`]), behind the same door as the folder
//! (`project.rs`).
//!
//! The image is the project's tree as the folder's own door sees it: each
//! entry's kind, where a symlink leads, which library folders it lies in
//! or leads into, and, for each file the assembler may read, exactly what
//! reading it through the door gives (the text after the privacy policy,
//! the secrets redacted, or why it cannot be read). Replaying those reads
//! through the same gate is what makes a pack from the store byte-identical
//! to one from the folder.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::error::ProjectError;
use super::project::{self, Project};
use super::recipe::{RECIPE_FILE, Recipe};
use crate::privacy::{Policy, Redaction};
use crate::store::postgres::project::{ProjectEntry, ProjectSnapshot};
use crate::vault::walk;

/// The root every stored project's paths hang from (never on disk).
pub(super) const STORE_ROOT: &str = "/ctxpack-store";

/// The most entries a project's image may have.
const MAX_ENTRIES: usize = 200_000;

/// What reading a file through the project's door gives, in the order the
/// door finds out (see `Project::read_optional`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Stored {
    /// Not a regular file (refused without being opened).
    Special(String),
    /// Over the size limit.
    TooLarge(String),
    /// Not UTF-8.
    NotText(String),
    /// The project's YAML, as written.
    Config(String),
    /// A note, as the privacy policy lets it be seen.
    Note {
        text: String,
        redactions: Vec<Redaction>,
    },
}

/// A project's tree for the store, and the libraries some work binds.
pub(super) struct Image {
    pub entries: Vec<ProjectEntry>,
    /// `(name, folder relative to the root)` of each library some work
    /// binds: each is synced as a vault of its own, for L3's ranking.
    pub libraries: Vec<(String, String)>,
}

/// A project's recipe and library folders, read before its tree.
struct Plan {
    project: Project,
    recipe: Recipe,
    /// (name, real folder relative to the root, bound by some work)
    libraries: Vec<(String, String, bool)>,
}

impl Plan {
    fn read(root: &Path, policy: &Policy) -> Result<Option<Plan>, ProjectError> {
        let mut project = Project::open(root)?;
        project.set_policy(policy.clone());
        let text = match project.read_optional(RECIPE_FILE) {
            Ok(None) => return Ok(None),
            Ok(Some(text)) => text,
            Err(err) => return Err(ProjectError::RecipeUnreadable(err)),
        };
        let recipe = Recipe::parse(&text).map_err(ProjectError::Recipe)?;
        let library_folders = project
            .library_folders(&recipe.libraries_dir)
            .unwrap_or_default();
        // A work whose bindings cannot be read binds nothing here: what no
        // work may read is not copied into the store.
        let bound = super::bound_libraries(&project, &recipe.bindings).unwrap_or_default();
        let libraries = library_folders
            .iter()
            .filter_map(|e| {
                let real = relative(root, &e.real)?;
                Some((e.name.clone(), real, bound.contains(&e.name)))
            })
            .collect();
        Ok(Some(Plan {
            project,
            recipe,
            libraries,
        }))
    }

    fn closed_to_all(&self, rel: &str) -> bool {
        self.libraries
            .iter()
            .any(|(_, real, bound)| !bound && Path::new(rel).starts_with(real))
    }

    /// `(name, folder relative to the root)` of each library some work
    /// binds. A bound name of a library another, unbound name also reaches
    /// is closed by the gate: it is not synced either.
    fn synced_libraries(&self) -> Vec<(String, String)> {
        self.libraries
            .iter()
            .filter(|(_, real, bound)| *bound && !self.closed_to_all(real))
            .map(|(name, _, _)| {
                let folder = format!("{}/{name}", self.recipe.libraries_dir);
                (name.clone(), folder)
            })
            .collect()
    }
}

fn relative(root: &Path, real: &Path) -> Option<String> {
    real.strip_prefix(root)
        .ok()
        .map(|p| p.to_string_lossy().replace('\\', "/"))
}

/// The libraries some work of the writing project at `root` binds (see
/// [`Image::libraries`]), without reading its tree; `None` when `root` has
/// no recipe.
pub(super) fn synced_libraries(
    root: &Path,
    policy: &Policy,
) -> Result<Option<Vec<(String, String)>>, ProjectError> {
    Ok(Plan::read(root, policy)?.map(|plan| plan.synced_libraries()))
}

/// The image of the writing project at `root` (canonical), read under
/// `policy`; `None` when `root` has no recipe. A recipe that cannot be read
/// or parsed is an error: which folder holds the libraries is then unknown.
pub(super) fn image(root: &Path, policy: &Policy) -> Result<Option<Image>, ProjectError> {
    let Some(mut plan) = Plan::read(root, policy)? else {
        return Ok(None);
    };
    // What no purpose may see is not copied: the fields the schemas hide
    // from all are cut as the folder's door cuts them. Schemas that cannot
    // be read stop every pack (the store's as the folder's), so then
    // nothing is cut here.
    if let Ok(schemas) = super::schema::Schemas::load(&plan.project, &plan.recipe.schemas_dir) {
        let type_key = plan.recipe.cards.type_key.clone();
        plan.project.hide_fields_from_all(schemas, type_key);
    }
    let (project, recipe, libraries) = (&plan.project, &plan.recipe, &plan.libraries);
    let relative = |real: &Path| relative(root, real);
    let holding = |rel: &str| -> (Vec<String>, Option<String>) {
        let mut names: Vec<String> = Vec::new();
        let mut innermost: Option<&str> = None;
        for (name, real, _) in libraries {
            if Path::new(rel).starts_with(real) {
                names.push(name.clone());
                if innermost.is_none_or(|i| real.len() > i.len()) {
                    innermost = Some(real);
                }
            }
        }
        names.sort();
        names.dedup();
        (names, innermost.map(str::to_string))
    };
    let closed_to_all = |rel: &str| plan.closed_to_all(rel);
    // The YAML the assembler reads: the recipe, the schemas, each work's
    // bindings. Other YAML files may hold anything (credentials, data):
    // they are listed, never copied.
    let (bindings_before, bindings_after) = recipe
        .bindings
        .split_once("{work}")
        .unwrap_or((recipe.bindings.as_str(), ""));
    let schemas_prefix = format!("{}/", recipe.schemas_dir.trim_end_matches('/'));
    let configuration = |rel: &str| {
        rel == RECIPE_FILE
            || rel == recipe.bindings
            || rel
                .strip_prefix(schemas_prefix.as_str())
                .is_some_and(|name| !name.contains('/'))
            || (recipe.bindings.contains("{work}")
                && rel
                    .strip_prefix(bindings_before)
                    .and_then(|rest| rest.strip_suffix(bindings_after))
                    .is_some_and(project::is_plain_name))
    };
    let listed: BTreeSet<String> = walk::walk(root, &[])
        .files
        .into_iter()
        .map(|found| found.rel_path)
        .collect();

    let mut entries = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        let Ok(read) = fs::read_dir(root.join(&dir)) else {
            continue;
        };
        for child in read.flatten() {
            let name = child.file_name().to_string_lossy().into_owned();
            let path = if dir.is_empty() {
                name.clone()
            } else {
                format!("{dir}/{name}")
            };
            let Ok(file_type) = child.file_type() else {
                continue;
            };
            // Nothing in a private folder is named, not even a folder: no
            // row (the folder's door lists none of it either).
            if policy.is_private_path(&path)
                || file_type.is_dir() && policy.is_private_folder(&path)
            {
                continue;
            }
            let (inside, _) = holding(&dir);
            let mut entry = ProjectEntry {
                path: path.clone(),
                listed: listed.contains(&path),
                inside,
                ..ProjectEntry::default()
            };
            let real_rel = if file_type.is_symlink() {
                match child.path().canonicalize() {
                    Ok(real) => match relative(&real) {
                        Some(target) => {
                            entry.kind = kind_of(&real);
                            entry.target = Some(target.clone());
                            Some(target)
                        }
                        None => {
                            entry.kind = 'o';
                            None
                        }
                    },
                    Err(_) => {
                        entry.kind = 'x';
                        None
                    }
                }
            } else {
                entry.kind = kind_of(&child.path());
                Some(path.clone())
            };
            if let Some(real_rel) = &real_rel {
                // A link into a private folder leads nowhere the door
                // opens: absent, its target unnamed.
                if file_type.is_symlink()
                    && (policy.is_private_path(real_rel)
                        || entry.kind == 'd' && policy.is_private_folder(real_rel))
                {
                    continue;
                }
                let (reaches, library) = holding(real_rel);
                entry.reaches = reaches;
                entry.library = library;
            }
            let hidden = name.starts_with('.');
            match entry.kind {
                // What no work may read is neither walked nor copied.
                'd' if !file_type.is_symlink() && !hidden && !closed_to_all(&path) => {
                    stack.push(path.clone());
                }
                'f' if !file_type.is_symlink() && !closed_to_all(&path) => {
                    match content(project, &path, listed.contains(&path), &configuration) {
                        Some(Ok(stored)) => {
                            entry.content =
                                Some(postcard::to_allocvec(&stored).unwrap_or_default());
                        }
                        // A private file has no row at all, as in the
                        // vault's own rows: its path is not shown either.
                        Some(Err(Private)) => continue,
                        None => {}
                    }
                }
                's' => {
                    let why = crate::safe_fs::open_regular(&child.path())
                        .err()
                        .map(|err| err.to_string())
                        .unwrap_or_default();
                    entry.content =
                        Some(postcard::to_allocvec(&Stored::Special(why)).unwrap_or_default());
                }
                _ => {}
            }
            entries.push(entry);
            if entries.len() > MAX_ENTRIES {
                return Err(ProjectError::TooManyEntries { limit: MAX_ENTRIES });
            }
        }
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Some(Image {
        entries,
        libraries: plan.synced_libraries(),
    }))
}

/// The private marker of [`content`].
struct Private;

/// What reading the regular file `rel` through the door gives, when the
/// assembler may read it at all (the project's own YAML, or a listed note).
fn content(
    project: &Project,
    rel: &str,
    listed: bool,
    configuration: &dyn Fn(&str) -> bool,
) -> Option<Result<Stored, Private>> {
    let hidden_part = rel.split('/').any(|part| part.starts_with('.'));
    let config = project::is_config_file(rel) && !hidden_part && configuration(rel);
    if !(config || listed && project::is_markdown(rel)) {
        return None;
    }
    let path = project.root().join(rel);
    let file = crate::safe_fs::open_regular(&path).ok()?;
    let bytes = match project::read_limited(file) {
        Ok(bytes) => bytes,
        Err(why) => return Some(Ok(Stored::TooLarge(why.to_string()))),
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) => text.replace("\r\n", "\n"),
        Err(err) => {
            return Some(Ok(Stored::NotText(format!(
                "not valid UTF-8 (at byte {})",
                err.utf8_error().valid_up_to()
            ))));
        }
    };
    if config {
        return Some(Ok(Stored::Config(text)));
    }
    Some(match project.prepare(rel, rel, &text) {
        Some((text, redactions)) => Ok(Stored::Note { text, redactions }),
        None => Err(Private),
    })
}

fn kind_of(path: &Path) -> char {
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => 'd',
        Ok(meta) if meta.is_file() => 'f',
        Ok(_) => 's',
        Err(_) => 'x',
    }
}

/// A project's files as one snapshot of the store holds them: the rows
/// outside the libraries at first, the rows of the libraries the work
/// binds once they are opened. Paths are absolute under [`STORE_ROOT`].
pub(crate) struct StoreFiles {
    snapshot: ProjectSnapshot,
    rows: BTreeMap<String, ProjectEntry>,
    children: BTreeMap<String, Vec<String>>,
    /// The libraries opened so far (names).
    open: Vec<String>,
    /// Contents fetched so far, by real path: a pack fetches what it reads,
    /// not the whole project.
    contents: Mutex<HashMap<String, Option<Stored>>>,
    /// Folders whose contents were fetched at once.
    fetched: Mutex<BTreeSet<String>>,
}

/// A path as the store resolves it.
pub(crate) enum Resolved {
    /// Inside the root: the real path (relative) and its kind.
    Inside(String, char),
    /// Through a symlink leading outside the root.
    Outside,
}

impl StoreFiles {
    pub(crate) fn new(snapshot: ProjectSnapshot) -> Result<StoreFiles, ProjectError> {
        let rows = snapshot.outside_libraries().map_err(ProjectError::Store)?;
        let mut files = StoreFiles {
            snapshot,
            rows: BTreeMap::new(),
            children: BTreeMap::new(),
            open: Vec::new(),
            contents: Mutex::new(HashMap::new()),
            fetched: Mutex::new(BTreeSet::new()),
        };
        files.add(rows);
        Ok(files)
    }

    pub(crate) fn snapshot(&self) -> &ProjectSnapshot {
        &self.snapshot
    }

    fn add(&mut self, rows: Vec<ProjectEntry>) {
        for row in rows {
            let (parent, name) = match row.path.rsplit_once('/') {
                Some((parent, name)) => (parent.to_string(), name.to_string()),
                None => (String::new(), row.path.clone()),
            };
            let names = self.children.entry(parent).or_default();
            if let Err(at) = names.binary_search(&name) {
                names.insert(at, name);
            }
            self.rows.insert(row.path.clone(), row);
        }
    }

    /// Fetches the rows of the libraries named in `open` (every name that
    /// reaches a library must be open for its rows to leave the database).
    pub(crate) fn open_libraries(&mut self, open: &[String]) -> Result<(), ProjectError> {
        let rows = self
            .snapshot
            .in_libraries(open)
            .map_err(ProjectError::Store)?;
        self.add(rows);
        self.open = open.to_vec();
        Ok(())
    }

    /// `rel` (relative, `/`-separated) with every symlink on the way
    /// resolved, as `canonicalize` would: `None` when a part does not exist.
    pub(crate) fn resolve(&self, rel: &Path) -> Option<Resolved> {
        let mut current = String::new();
        let mut kind = 'd';
        for component in rel.components() {
            let name = match component {
                Component::Normal(name) => name.to_string_lossy(),
                Component::CurDir => continue,
                _ => return None,
            };
            if kind != 'd' {
                return None;
            }
            let path = if current.is_empty() {
                name.into_owned()
            } else {
                format!("{current}/{name}")
            };
            let row = self.rows.get(&path)?;
            kind = row.kind;
            match (row.kind, &row.target) {
                ('x', _) => return None,
                ('o', _) => return Some(Resolved::Outside),
                (_, Some(target)) => current = target.clone(),
                (_, None) => current = path,
            }
        }
        Some(Resolved::Inside(current, kind))
    }

    /// Whether `rel` exists as a directory entry (a symlink counts, whatever
    /// it leads to).
    pub(crate) fn entry_exists(&self, rel: &Path) -> bool {
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return false;
        };
        match self.resolve(parent) {
            Some(Resolved::Inside(parent, 'd')) => {
                let name = name.to_string_lossy();
                let path = if parent.is_empty() {
                    name.into_owned()
                } else {
                    format!("{parent}/{name}")
                };
                self.rows.contains_key(&path)
            }
            _ => false,
        }
    }

    /// Whether the vault's walk lists `rel`.
    pub(crate) fn listed(&self, rel: &str) -> bool {
        self.rows.get(rel).is_some_and(|row| row.listed)
    }

    /// The children of folder `real` (relative): `(name, child path)`.
    pub(crate) fn children(&self, real: &str) -> Vec<(String, String)> {
        self.children
            .get(real)
            .map(|names| {
                names
                    .iter()
                    .map(|name| {
                        let path = if real.is_empty() {
                            name.clone()
                        } else {
                            format!("{real}/{name}")
                        };
                        (name.clone(), path)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// What reading the real file `real` gives: `None` when the store has
    /// no such file; `Some(None)` when it has the file but not its text
    /// (the assembler may not read it). The text is fetched the first time.
    pub(crate) fn content(&self, real: &str) -> Result<Option<Option<Stored>>, ProjectError> {
        let Some(row) = self.rows.get(real) else {
            return Ok(None);
        };
        if row.content.is_none() {
            return Ok(Some(None));
        }
        if let Some(known) = self.contents.lock().ok().and_then(|c| c.get(real).cloned()) {
            return Ok(Some(known));
        }
        self.fetch(&[real.to_string()], None)?;
        Ok(Some(
            self.contents
                .lock()
                .ok()
                .and_then(|c| c.get(real).cloned())
                .flatten(),
        ))
    }

    /// Fetches the contents of every file under the real folder `dir` at
    /// once (a source that reads a folder's cards reads them all).
    pub(crate) fn prefetch(&self, dir: &str) -> Result<(), ProjectError> {
        let first = self
            .fetched
            .lock()
            .map(|mut fetched| fetched.insert(dir.to_string()))
            .unwrap_or(true);
        if first {
            self.fetch(&[], Some(dir))?;
        }
        Ok(())
    }

    fn fetch(&self, paths: &[String], under: Option<&str>) -> Result<(), ProjectError> {
        let rows = self
            .snapshot
            .contents(paths, under, &self.open)
            .map_err(ProjectError::Store)?;
        if let Ok(mut contents) = self.contents.lock() {
            for path in paths {
                contents.entry(path.clone()).or_insert(None);
            }
            for (path, bytes) in rows {
                contents.insert(path, postcard::from_bytes(&bytes).ok());
            }
        }
        Ok(())
    }
}

/// The absolute form of a stored path.
pub(super) fn absolute(rel: &str) -> PathBuf {
    let root = PathBuf::from(STORE_ROOT);
    if rel.is_empty() { root } else { root.join(rel) }
}
