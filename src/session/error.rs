//! Why a session operation refused or failed: one type for the errors that
//! leave `session` (a pack, a note read for a client, a pin, the prompt,
//! the index's place and policy). Each variant prints the text these
//! operations returned when they were plain strings, which the CLI and
//! MCP tests check byte for byte.

use std::fmt;
use std::path::PathBuf;

use crate::pack::template::TemplateError;
use crate::privacy::PolicyError;
use crate::request::{MAX_BUDGET, QueryTooLong, RequestError};
use crate::store::postgres::StoreError;
use crate::vault::PathError;

use super::ops::no_note;

#[derive(Debug)]
pub enum SessionError {
    /// A request the library's rules refuse.
    Request(RequestError),
    /// A query longer than the library accepts.
    TooLong(QueryTooLong),
    /// The `context_pack` prompt without a topic.
    PromptTopic,
    /// The `context_pack` prompt with a budget out of range.
    PromptBudget,
    /// An absolute path (as given) outside the vault at `root`.
    NotInVault { given: String, root: PathBuf },
    /// A relative path that cannot name a file of the vault.
    Path(PathError),
    /// No note by this vault path, with the reasons a file is never packed
    /// (as the command line says it).
    NoSuchNote(String),
    /// Not a note a client may read (the path as given), in the one answer
    /// that does not tell a private note from a missing one.
    NoNote(String),
    /// A pin of the vault's policy file that is refused.
    Pin(Box<SessionError>),
    /// A note that is not there, with the listed notes whose paths are
    /// nearest to what was given (a typo, a name without its folder).
    Suggested(Box<SessionError>, Vec<String>),
    /// No heading by this text (`heading`) in the note `note`.
    NoHeading { heading: String, note: String },
    /// A line range that is not `FROM-TO` (the text given).
    Lines(String),
    /// The pack's template failed.
    Shape(TemplateError),
    /// The vault's privacy policy does not parse.
    Policy(PolicyError),
    /// No folder for the index: neither given nor derivable.
    NoIndexPlace,
    /// An index folder that is refused (inside the vault), in the words
    /// of the index's own refusal (its type is the index's own).
    IndexDir(String),
    /// A store URL that is not one.
    StoreUrl(StoreError),
}

impl SessionError {
    /// The error a client gets for `given` when it names no note it may
    /// read.
    pub(crate) fn no_note(given: &str) -> SessionError {
        SessionError::NoNote(given.to_string())
    }
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::Request(err) => err.fmt(f),
            SessionError::TooLong(err) => err.fmt(f),
            SessionError::PromptTopic => f.write_str("the context_pack prompt needs a topic"),
            SessionError::PromptBudget => write!(
                f,
                "budget must be a whole number between 1 and {MAX_BUDGET}"
            ),
            SessionError::NotInVault { given, root } => {
                write!(f, "'{given}' is not inside the vault {}", root.display())
            }
            SessionError::Path(err) => err.fmt(f),
            SessionError::NoSuchNote(path) => write!(
                f,
                "no note '{path}' in the vault (hidden files, skipped folders such as _raw, \
                 agent files, log.md, ignored, private and non-Markdown files are never packed)"
            ),
            SessionError::NoNote(given) => f.write_str(&no_note(given)),
            SessionError::Pin(err) => write!(f, "{} pins: {err}", crate::privacy::POLICY_FILE),
            SessionError::Suggested(err, nearest) => {
                let quoted: Vec<String> = nearest.iter().map(|path| format!("'{path}'")).collect();
                write!(f, "{err}; did you mean {}?", quoted.join(" or "))
            }
            // What the caller gave is quoted cut short: a 1 MB argument
            // is no 1 MB error.
            SessionError::NoHeading { heading, note } => write!(
                f,
                "no heading '{}' in {note}",
                crate::text::truncate_chars(heading, 200)
            ),
            SessionError::Lines(given) => write!(
                f,
                "lines must be 'FROM-TO', two line numbers with 1 <= FROM <= TO, got '{}'",
                crate::text::truncate_chars(given, 200)
            ),
            SessionError::Shape(err) => err.fmt(f),
            SessionError::Policy(err) => err.fmt(f),
            SessionError::NoIndexPlace => {
                f.write_str("no place for the index: set HOME, XDG_CACHE_HOME or --index-dir")
            }
            SessionError::IndexDir(refusal) => f.write_str(refusal),
            SessionError::StoreUrl(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for SessionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SessionError::Request(err) => Some(err),
            SessionError::TooLong(err) => Some(err),
            SessionError::Path(err) => Some(err),
            SessionError::Pin(err) => Some(err.as_ref()),
            SessionError::Policy(err) => Some(err),
            SessionError::StoreUrl(err) => Some(err),
            SessionError::Shape(err) => Some(err),
            _ => None,
        }
    }
}

impl From<RequestError> for SessionError {
    fn from(err: RequestError) -> SessionError {
        SessionError::Request(err)
    }
}

impl From<QueryTooLong> for SessionError {
    fn from(err: QueryTooLong) -> SessionError {
        SessionError::TooLong(err)
    }
}

impl From<PathError> for SessionError {
    fn from(err: PathError) -> SessionError {
        SessionError::Path(err)
    }
}

impl From<TemplateError> for SessionError {
    fn from(err: TemplateError) -> SessionError {
        SessionError::Shape(err)
    }
}

impl From<PolicyError> for SessionError {
    fn from(err: PolicyError) -> SessionError {
        SessionError::Policy(err)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_pin_refused_names_the_policy_file_and_keeps_the_refusal_as_its_source() {
        let err = SessionError::Pin(Box::new(SessionError::NoSuchNote("gone".into())));
        assert_eq!(
            err.to_string(),
            ".ctxpack.yaml pins: no note 'gone' in the vault (hidden files, skipped folders \
             such as _raw, agent files, log.md, ignored, private and non-Markdown files are \
             never packed)"
        );
        let source = err.source().map(ToString::to_string);
        assert_eq!(
            source,
            Some(SessionError::NoSuchNote("gone".into()).to_string())
        );
        let err = SessionError::from(PathError::Outside("../x".into()));
        assert_eq!(err.to_string(), "'../x' leads outside the vault");
        let source = err.source().and_then(|s| s.downcast_ref::<PathError>());
        assert_eq!(source, Some(&PathError::Outside("../x".into())));
        assert!(SessionError::PromptTopic.source().is_none());
    }

    #[test]
    fn no_model_is_the_status_the_arm_always_printed() {
        use crate::session::{ModelChoice, NoModel};
        assert_eq!(ModelChoice::Off.resolve(None), Err(NoModel::Off));
        assert_eq!(NoModel::Off.to_string(), "off (--model none)");
        assert_eq!(
            ModelChoice::Named("none".into()).resolve(None),
            Err(NoModel::Named)
        );
        assert_eq!(NoModel::Named.to_string(), "off (model none)");
    }
}
