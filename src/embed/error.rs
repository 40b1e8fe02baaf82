//! Why a model could not be imported, loaded or asked for vectors: one
//! type for every error that leaves `embed`, each variant naming the kind
//! of failure and holding the message the user reads (unchanged from the
//! days these were plain text: the CLI and MCP tests check them).

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelError {
    /// No such model in the store, or a name that cannot name one.
    Name(String),
    /// A file or folder that could not be read or written.
    Io(String),
    /// Files that are not a model of their kind, or are damaged.
    Invalid(String),
    /// A model or reranker this build cannot run.
    Unsupported(String),
    /// A served model that is unreachable, refused or answered wrongly.
    Remote(String),
    /// A loaded model that failed on its input (tokenizing, scoring).
    Run(String),
    /// An error of the stored model `name`.
    InModel {
        name: String,
        error: Box<ModelError>,
    },
    /// An error of the file or source `source` (shown as a prefix).
    InSource {
        source: String,
        error: Box<ModelError>,
    },
}

impl ModelError {
    /// The error as one of the stored model `name`'s.
    pub fn in_model(self, name: &str) -> ModelError {
        ModelError::InModel {
            name: name.to_string(),
            error: Box::new(self),
        }
    }

    /// The error as one of the file or source `source`.
    pub fn in_source(self, source: impl fmt::Display) -> ModelError {
        ModelError::InSource {
            source: source.to_string(),
            error: Box::new(self),
        }
    }

    /// The kind of failure, past any model or source it is about.
    pub fn root(&self) -> &ModelError {
        match self {
            ModelError::InModel { error, .. } | ModelError::InSource { error, .. } => error.root(),
            other => other,
        }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Name(message)
            | ModelError::Io(message)
            | ModelError::Invalid(message)
            | ModelError::Unsupported(message)
            | ModelError::Remote(message)
            | ModelError::Run(message) => f.write_str(message),
            ModelError::InModel { name, error } => write!(f, "model '{name}': {error}"),
            ModelError::InSource { source, error } => write!(f, "{source}: {error}"),
        }
    }
}

impl std::error::Error for ModelError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_the_text_with_the_model_or_source_before_it() {
        let error = ModelError::Invalid("damaged model.bin".into()).in_model("tiny");
        assert_eq!(error.to_string(), "model 'tiny': damaged model.bin");
        let error = ModelError::Io("cannot read e5.bin: gone".into()).in_source("/m/x.whl");
        assert_eq!(error.to_string(), "/m/x.whl: cannot read e5.bin: gone");
        assert_eq!(
            error.root(),
            &ModelError::Io("cannot read e5.bin: gone".into())
        );
    }
}
