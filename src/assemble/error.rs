//! Why the assembler could not read or use a project: one type for the
//! errors that pass between its files (`project`, `doc`, `schema`,
//! `sources`, `stored`, `mod`). `assemble` sorts them into the request's
//! fault (exit 2) or the project's (exit 1) by variant; each prints the
//! text it printed when it was a `String` (the CLI and MCP tests check it).

use std::fmt;
use std::path::PathBuf;

use super::project::ReadError;
use super::recipe::{PathTemplateError, RECIPE_FILE, RecipeError};

#[derive(Debug)]
pub(crate) enum ProjectError {
    /// The project root `root` could not be opened.
    Open {
        root: PathBuf,
        source: std::io::Error,
    },
    /// The project root is not a folder.
    NotAFolder(PathBuf),
    /// A project path was not read.
    Read(ReadError),
    /// A file the assembler needs does not exist.
    Missing(String),
    /// A file could not be read (`source`), without its path: the caller
    /// names it.
    Unreadable(std::io::Error),
    /// A file over the byte `limit` (of `len` bytes, when known).
    TooLarge { len: Option<u64>, limit: u64 },
    /// A file or folder that could not be opened, created or written:
    /// `action` (`cannot open`, …) and the path as the message shows it.
    Io {
        action: &'static str,
        path: String,
        source: std::io::Error,
    },
    /// A path template that does not expand.
    Template(PathTemplateError),
    /// The project's recipe could not be read (for the store's image).
    RecipeUnreadable(ReadError),
    /// The project's recipe is refused (for the store's image).
    Recipe(RecipeError),
    /// A bindings file that is not YAML of its shape.
    BindingsSyntax { path: String, error: String },
    /// A bindings file naming a library that is not one folder name.
    NotALibraryName { path: String, library: String },
    /// A document whose frontmatter does not parse.
    Frontmatter { path: String, error: String },
    /// A schema that is not YAML of its shape.
    SchemaSyntax { path: String, error: String },
    /// A schema field whose name is not text.
    FieldNameNotText { path: String },
    /// A schema field whose rule does not parse.
    FieldRule {
        path: String,
        field: String,
        error: String,
    },
    /// Two schemas in `dir` define one type.
    DuplicateType { dir: String, type_name: String },
    /// The recipe reads a type (at `place`) that no schema in `dir` defines.
    NoSchema {
        dir: String,
        type_name: String,
        place: String,
    },
    /// A schema names a purpose no agent of the recipe has.
    UnknownPurpose {
        path: String,
        field: String,
        purpose: String,
    },
    /// A field the shared baseline would show to a purpose that may not
    /// see it.
    BaselineLeak {
        type_name: String,
        field: String,
        baseline: String,
        purpose: String,
    },
    /// The unit `offset` away from `unit` does not exist.
    NoUnit { unit: i64, offset: i64 },
    /// The unit to process (`heading`, at `path`) is not written.
    UnitNotWritten { heading: String, path: String },
    /// No candidate to review at `path`.
    NoCandidate { path: String },
    /// The review copy's path has no folder.
    BadReviewPath(String),
    /// The review copy's folder leads outside the project root.
    ReviewOutside(String),
    /// A project with more than `limit` files and folders, not synced as
    /// a project.
    TooManyEntries { limit: usize },
    /// The store failed (its message with every cause).
    Store(anyhow::Error),
}

impl ProjectError {
    /// Whether the request named what is not there (a unit, a candidate):
    /// the user's to fix, not the project's.
    pub(crate) fn is_missing_input(&self) -> bool {
        matches!(
            self,
            ProjectError::NoUnit { .. }
                | ProjectError::UnitNotWritten { .. }
                | ProjectError::NoCandidate { .. }
        )
    }
}

impl fmt::Display for ProjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProjectError::Open { root, source } => {
                write!(f, "cannot open project {}: {source}", root.display())
            }
            ProjectError::NotAFolder(root) => {
                write!(f, "project root {} is not a folder", root.display())
            }
            ProjectError::Read(err) => err.fmt(f),
            ProjectError::Missing(path) => write!(f, "{path} does not exist"),
            ProjectError::Unreadable(err) => write!(f, "cannot read: {err}"),
            ProjectError::TooLarge {
                len: Some(len),
                limit,
            } => write!(f, "file is {len} bytes, over the {limit} byte limit"),
            ProjectError::TooLarge { len: None, limit } => {
                write!(f, "file is over the {limit} byte limit")
            }
            ProjectError::Io {
                action,
                path,
                source,
            } => write!(f, "{action} {path}: {source}"),
            ProjectError::Template(err) => err.fmt(f),
            ProjectError::RecipeUnreadable(err) => write!(f, "cannot read {RECIPE_FILE}: {err}"),
            ProjectError::Recipe(err) => write!(f, "{RECIPE_FILE}: {err}"),
            ProjectError::BindingsSyntax { path, error } => {
                write!(f, "bad bindings file {path}: {error}")
            }
            ProjectError::NotALibraryName { path, library } => write!(
                f,
                "bad bindings file {path}: '{library}' is not a library name (one folder name \
                 inside the libraries folder: no '/', '\\', '..' or absolute path)"
            ),
            ProjectError::Frontmatter { path, error } => write!(f, "{path}: {error}"),
            ProjectError::SchemaSyntax { path, error } => write!(f, "bad schema {path}: {error}"),
            ProjectError::FieldNameNotText { path } => {
                write!(f, "bad schema {path}: a field name is not text")
            }
            ProjectError::FieldRule { path, field, error } => {
                write!(f, "bad schema {path}: field '{field}': {error}")
            }
            ProjectError::DuplicateType { dir, type_name } => {
                write!(f, "two schemas in {dir} define type '{type_name}'")
            }
            ProjectError::NoSchema {
                dir,
                type_name,
                place,
            } => write!(
                f,
                "{place} reads type '{type_name}', but no schema in {dir} defines it: which of \
                 its fields may be seen is unknown (write one with `type: {type_name}`; \
                 `default: true` shows every field)"
            ),
            ProjectError::UnknownPurpose {
                path,
                field,
                purpose,
            } => write!(
                f,
                "bad schema {path}: field '{field}' names purpose '{purpose}', which no agent of \
                 the recipe has (a misspelt purpose would hide the field without a word)"
            ),
            ProjectError::BaselineLeak {
                type_name,
                field,
                baseline,
                purpose,
            } => write!(
                f,
                "schema {type_name}: field '{field}' is visible to {baseline} (the shared \
                 baseline) but hidden from {purpose}; the baseline would leak it"
            ),
            ProjectError::NoUnit { unit, offset } => write!(
                f,
                "unit {unit} {offset:+} does not exist; there is nothing to process"
            ),
            ProjectError::UnitNotWritten { heading, path } => write!(
                f,
                "{heading} ({path}) does not exist; there is nothing to process"
            ),
            ProjectError::NoCandidate { path } => write!(
                f,
                "no candidate to review: {path} does not exist (pass --candidate PATH)"
            ),
            ProjectError::BadReviewPath(rel) => write!(f, "bad review path {rel}"),
            ProjectError::ReviewOutside(rel) => {
                write!(f, "review folder of {rel} leads outside the project root")
            }
            ProjectError::TooManyEntries { limit } => write!(
                f,
                "the project has more than {limit} files and folders; it is not synced as a \
                 project"
            ),
            ProjectError::Store(err) => write!(f, "{err:#}"),
        }
    }
}

impl std::error::Error for ProjectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ProjectError::Open { source, .. }
            | ProjectError::Io { source, .. }
            | ProjectError::Unreadable(source) => Some(source),
            ProjectError::Read(err) | ProjectError::RecipeUnreadable(err) => Some(err),
            ProjectError::Template(err) => Some(err),
            ProjectError::Recipe(err) => Some(err),
            ProjectError::Store(err) => Some(err.as_ref()),
            _ => None,
        }
    }
}

impl From<ReadError> for ProjectError {
    fn from(err: ReadError) -> Self {
        ProjectError::Read(err)
    }
}

impl From<PathTemplateError> for ProjectError {
    fn from(err: PathTemplateError) -> Self {
        ProjectError::Template(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_the_old_text_and_causes_are_sources() {
        let gone = std::io::Error::from(std::io::ErrorKind::NotFound);
        let text = gone.to_string();
        let err = ProjectError::Io {
            action: "cannot create",
            path: "/p/reviews".into(),
            source: gone,
        };
        assert_eq!(err.to_string(), format!("cannot create /p/reviews: {text}"));
        let source = std::error::Error::source(&err).expect("the I/O error");
        assert_eq!(source.to_string(), text);

        let err = ProjectError::NotALibraryName {
            path: "works/w/bindings.yaml".into(),
            library: "../x".into(),
        };
        assert_eq!(
            err.to_string(),
            "bad bindings file works/w/bindings.yaml: '../x' is not a library name (one folder \
             name inside the libraries folder: no '/', '\\', '..' or absolute path)"
        );
        assert!(std::error::Error::source(&err).is_none());

        let read = ReadError::Refused("path '../a.md' leaves the project root".into());
        let err = ProjectError::RecipeUnreadable(read.clone());
        assert_eq!(
            err.to_string(),
            "cannot read meta/recipe.yaml: path '../a.md' leaves the project root"
        );
        let source = std::error::Error::source(&err).expect("the read error");
        assert_eq!(source.downcast_ref::<ReadError>(), Some(&read));

        let missing = ProjectError::NoUnit {
            unit: 1,
            offset: -3,
        };
        assert_eq!(
            missing.to_string(),
            "unit 1 -3 does not exist; there is nothing to process"
        );
        assert!(missing.is_missing_input());
        assert!(!ProjectError::Missing("a.md".into()).is_missing_input());
    }
}
