//! The library's one error type. Each variant carries what a user needs to act: the file
//! and line/column, the question id, the model and tensor, the gRPC code and message.
//! Binaries print it once as `error: …` and exit 2.

use std::fmt;
use std::path::PathBuf;

/// Result with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where in an input file a problem is: the file, and a line/column (1-based, from
/// serde_json) or a question id for semantic problems.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub qas_id: Option<String>,
}

impl Location {
    /// A location naming only the file.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Location {
            path: path.into(),
            ..Default::default()
        }
    }

    /// The file plus a line and column.
    pub fn at(path: impl Into<PathBuf>, line: usize, column: usize) -> Self {
        Location {
            path: path.into(),
            line: Some(line),
            column: Some(column),
            qas_id: None,
        }
    }

    /// The file plus a question id.
    pub fn question(path: impl Into<PathBuf>, qas_id: impl Into<String>) -> Self {
        Location {
            path: path.into(),
            qas_id: Some(qas_id.into()),
            ..Default::default()
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        if let Some(id) = &self.qas_id {
            write!(f, " (question id {id:?})")?;
        }
        Ok(())
    }
}

/// Everything that can go wrong in the library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// An input file (SQuAD data, predictions, na-prob, vocab) is malformed.
    #[error("{location}: {message}")]
    Input { location: Location, message: String },

    /// Logits and features that do not fit together while decoding (a feature without
    /// logits, logits shorter than the feature, a word index outside the paragraph).
    #[error("feature {unique_id}: {message}")]
    Decode { unique_id: u64, message: String },

    /// Options that cannot work together (e.g. a question longer than the window).
    #[error("invalid configuration: {0}")]
    Config(String),

    /// There is nothing to work on (e.g. a dataset without questions to score).
    #[error("{0}")]
    Empty(String),

    /// A fault of bertqa itself (a worker task that panicked): a bug to report.
    #[error("internal error: {0}")]
    Internal(String),

    /// The server could not be reached (connection refused, DNS, TLS, timeout on
    /// connect) or answered UNAVAILABLE.
    #[error("cannot reach Triton at {url}: {message}")]
    Unavailable { url: String, message: String },

    /// The request ran past its deadline.
    #[error("request to {url} timed out after {timeout_ms} ms")]
    Timeout { url: String, timeout_ms: u64 },

    /// The model is not in the repository.
    #[error(
        "model {model:?} not found on {url}; ready models there: {}",
        list_or_none(available)
    )]
    ModelNotFound {
        url: String,
        model: String,
        available: Vec<String>,
    },

    /// The model exists but cannot take inference.
    #[error(
        "model {model:?} is not ready on {url} (state {state}); ready models: {}",
        list_or_none(ready)
    )]
    ModelNotReady {
        url: String,
        model: String,
        state: String,
        ready: Vec<String>,
    },

    /// A tensor did not have the shape or dtype bertqa expected.
    #[error("model {model:?}, tensor {tensor:?}: expected {expected}, got {actual}")]
    TensorMismatch {
        model: String,
        tensor: String,
        expected: String,
        actual: String,
    },

    /// The model's inputs/outputs could not be mapped to BERT QA roles.
    #[error("model {model:?}: {message}")]
    Binding { model: String, message: String },

    /// The server refused the credentials (the header name is given, never its value).
    #[error("permission denied by {url}: {message}")]
    PermissionDenied { url: String, message: String },

    /// Any other error status from the server.
    #[error("Triton at {url} answered {code}: {message}")]
    Server {
        url: String,
        code: String,
        message: String,
    },

    /// A request kept failing with transient errors until the retry budget was spent.
    #[error("a request failed {attempts} times ({summary}; `retries` {retries} spent); last error: {last}")]
    RetriesExhausted {
        attempts: u32,
        retries: u32,
        /// The failed attempts' codes with counts, e.g. `UNAVAILABLE ×4`.
        summary: String,
        last: Box<Error>,
    },
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".to_string()
    } else {
        names.join(", ")
    }
}

impl Error {
    /// An input error at a location.
    pub fn input(location: Location, message: impl Into<String>) -> Self {
        Error::Input {
            location,
            message: message.into(),
        }
    }

    /// A serde_json error in `path`, located at its line and column (serde_json's own
    /// " at line L column C" suffix is dropped: the location says it).
    pub fn json(path: &std::path::Path, e: &serde_json::Error) -> Self {
        let text = e.to_string();
        let message = match text.rfind(" at line ") {
            Some(i) if e.line() > 0 => text[..i].to_string(),
            _ => text,
        };
        let location = if e.line() > 0 {
            Location::at(path, e.line(), e.column())
        } else {
            Location::file(path)
        };
        Error::input(location, message)
    }

    /// An I/O error on a path.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
