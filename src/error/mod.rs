//! The library's one error type. Each variant carries what a user needs to act, as
//! values: the file and line/column, the question id, the model and tensor, the status
//! [`Code`] (and HTTP status) and the server's message. Its sentence is rendered from
//! them; decisions (retry, hints) read the values, never the sentence. Binaries print it
//! once as `error: …` and exit 2.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// Result with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where in an input file a problem is: the file, and a line/column (1-based, from
/// serde_json) or a question id for semantic problems.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// The input file, as it was given.
    pub path: PathBuf,
    /// The 1-based line of a syntax or type error; `None` for a problem not tied to a
    /// position in the text.
    pub line: Option<usize>,
    /// The 1-based column on `line`; `None` when `line` is.
    pub column: Option<usize>,
    /// The id of the question the problem is about; `None` when it is not about one.
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
        /// The file or directory the operation was on.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },

    /// An input file (SQuAD data, predictions, na-prob, vocab) is malformed.
    #[error("{location}: {message}")]
    Input {
        /// The file, and the line/column or question where the problem is.
        location: Location,
        /// What is wrong there.
        message: String,
    },

    /// Logits and features that do not fit together while decoding (a feature without
    /// logits, logits shorter than the feature, a word index outside the paragraph).
    #[error("feature {unique_id}: {message}")]
    Decode {
        /// The unique id of the feature (window) concerned.
        unique_id: u64,
        /// What does not fit.
        message: String,
    },

    /// Options that cannot work together (e.g. a question longer than the window).
    #[error("invalid configuration: {0}")]
    Config(String),

    /// A call that cannot go ahead as asked, said in full: a setting that does not apply
    /// to the model (naming the setting), a request larger than the model takes, data
    /// that gives nothing to send.
    #[error("{0}")]
    Refused(String),

    /// There is nothing to work on (e.g. a dataset without questions to score).
    #[error("{0}")]
    Empty(String),

    /// Inputs that do not go together, or a record that contradicts what it came with
    /// (e.g. the output directories of shards of different evaluations).
    #[error("{0}")]
    Inconsistent(String),

    /// Stopped on request (an interrupt) before the end.
    #[error("stopped before the end")]
    Stopped,

    /// An evaluation that could not finish, after writing what it had: `summary` says
    /// what ended it, how far it got, where its partial results are and how to go on
    /// (settings in backticks); `cause` is the error that ended it (none: a stop on
    /// request, or answers that could not be scored).
    #[error("{summary}")]
    Incomplete {
        /// The whole sentence the user reads (the error's display).
        summary: String,
        /// The error that ended the run; `None` for a stop on request or answers that
        /// could not be scored.
        cause: Option<Box<Error>>,
    },

    /// One deployment of a comparison failed: `name` as the comparison names it.
    #[error("model {name:?}: {error}")]
    Deployment {
        /// The deployment's name in the comparison.
        name: String,
        /// What went wrong with it.
        error: Box<Error>,
    },

    /// A fault of bertqa itself (a worker task that panicked): a bug to report.
    #[error("internal error: {0}")]
    Internal(String),

    /// The server could not be reached (connection refused, DNS, TLS, timeout on
    /// connect) or answered UNAVAILABLE; `cause` says which, `message` is what the user
    /// reads (the transport's or the server's words, with bertqa's hints).
    #[error("cannot reach Triton at {url}: {message}")]
    Unavailable {
        /// The server's address, as the user gave it.
        url: String,
        /// Why it could not be reached; decisions (retry, fail over) read this.
        cause: Unreachable,
        /// The transport's or the server's words, with bertqa's hints (TLS, the other
        /// protocol's port); never a header's value.
        message: String,
    },

    /// The request ran past its deadline.
    #[error("request to {url} timed out after {timeout_ms} ms")]
    Timeout {
        /// The server's address, as the user gave it.
        url: String,
        /// The deadline of each request (`request_timeout`), in milliseconds.
        timeout_ms: u64,
    },

    /// The model is not in the repository.
    #[error("model {model:?} not found on {url}; {}", ready_there(available.as_deref()))]
    ModelNotFound {
        /// The server's address, as the user gave it.
        url: String,
        /// The model asked for.
        model: String,
        /// The ready models, or `None` when the server does not list its models.
        available: Option<Vec<String>>,
    },

    /// The model exists but cannot take inference.
    #[error(
        "model {model:?} is not ready on {url} (state {state}); ready models: {}",
        list_or_none(ready)
    )]
    ModelNotReady {
        /// The server's address, as the user gave it.
        url: String,
        /// The model asked for.
        model: String,
        /// Its state in the repository index, with the server's reason when it gives
        /// one (`UNAVAILABLE: …`), or `not loaded`.
        state: String,
        /// The models of the repository that are ready (may be empty).
        ready: Vec<String>,
    },

    /// A tensor did not have the shape or dtype bertqa expected.
    #[error("model {model:?}, tensor {tensor:?}: expected {expected}, got {actual}")]
    TensorMismatch {
        /// The model.
        model: String,
        /// The tensor's name.
        tensor: String,
        /// What bertqa takes there (a datatype, per-row dims, an element count), as words.
        expected: String,
        /// What the model declares or the answer holds, as words.
        actual: String,
    },

    /// The model's inputs/outputs could not be mapped to BERT QA roles: one line naming
    /// the tensors it could not place; `tensors` lists them all (name, datatype, shape),
    /// for `-v`.
    #[error("model {model:?}: {message}")]
    Binding {
        /// The model.
        model: String,
        /// What could not be placed, and the settings that place it.
        message: String,
        /// Each of the model's tensors as `name datatype shape` (after `input `/`output`
        /// for a text model); empty when there is nothing to list.
        tensors: Vec<String>,
    },

    /// The server refused the credentials (the header name is given, never its value).
    #[error("permission denied by {url}: {message}")]
    PermissionDenied {
        /// The server's address, as the user gave it.
        url: String,
        /// The server's words (over HTTP after `HTTP 401: ` or `HTTP 403: `), then the
        /// names of the headers bertqa sent; never their values.
        message: String,
    },

    /// Any other error status from the server: its code (over HTTP, the code of the
    /// same meaning as the HTTP status, which is kept too), for a model-specific call
    /// the model, and the server's message.
    #[error(
        "{} at {url} answered {code}{}{}: {message}",
        who(server.as_deref()),
        http_suffix(*http),
        model_suffix(model.as_deref())
    )]
    Server {
        /// The server's name and version when it is not Triton (`mlserver 1.7.1`).
        server: Option<String>,
        /// The server's address, as the user gave it.
        url: String,
        /// The status, as gRPC's code.
        code: Code,
        /// The HTTP status, when the server was spoken to over HTTP.
        http: Option<u16>,
        /// The model of a model-specific call; `None` for a call about the server.
        model: Option<String>,
        /// The server's message (over HTTP, the text of the error body).
        message: String,
    },

    /// A core call of the protocol (health, metadata, inference) was answered as one the
    /// server does not have (gRPC UNIMPLEMENTED, HTTP 404 of a route): the URL does not
    /// reach a server of the Open Inference Protocol (`backend/extensions.rs`).
    #[error(
        "no Open Inference Protocol (KServe v2) server at {url}{}: {call} answered {code}{}: \
         {message}; no route matched: check the URL (host, port, path), \
         `authority` and `protocol`",
        routed_by.as_ref().map(|r| format!(" ({r})")).unwrap_or_default(),
        http_suffix(*http)
    )]
    NoServer {
        /// The address, as the user gave it.
        url: String,
        /// What the calls were routed by when not the URL's host (`Host NAME`,
        /// `:authority NAME`).
        routed_by: Option<String>,
        /// The call, as `GET /v2/health/ready` or `ServerReady`.
        call: String,
        /// The status it was answered with, as gRPC's code (`Unimplemented`, `NotFound`).
        code: Code,
        /// The HTTP status, when the server was spoken to over HTTP.
        http: Option<u16>,
        /// The answer's words.
        message: String,
    },

    /// The server answered something its protocol does not allow (JSON of another
    /// shape, an inference answer whose binary data does not add up): a server bug or
    /// not a Triton server; `message` is why it cannot be read.
    #[error("{} at {url} answered {}: {message}", who(server.as_deref()), answer.describe())]
    InvalidAnswer {
        /// As [`Error::Server`]'s.
        server: Option<String>,
        /// The server's address, as the user gave it.
        url: String,
        /// The call the answer was to.
        answer: AnswerTo,
        /// Why the answer cannot be read.
        message: String,
    },

    /// A request kept failing with transient errors until the retry budget was spent.
    #[error(
        "a request failed {attempts} times ({}; `retries` {retries} spent); last error: {last}",
        summarize_codes(codes)
    )]
    RetriesExhausted {
        /// How many times the request was sent (the first try and its retries).
        attempts: u32,
        /// The retry budget (`retries`) that was spent.
        retries: u32,
        /// The failed attempts' codes (as the retry policy names them, e.g.
        /// `UNAVAILABLE`) with counts.
        codes: BTreeMap<&'static str, u32>,
        /// The last attempt's error.
        last: Box<Error>,
    },

    /// A run ended without decoding this question: some of its windows were never
    /// answered.
    #[error("question {qas_id:?} was not decoded (its windows were not all answered)")]
    NotDecoded {
        /// The question's id.
        qas_id: String,
    },

    /// A dataset whose question names a paragraph it does not have (a dataset built by
    /// hand: the reader never makes one).
    #[error("question {qas_id:?} refers to paragraph {paragraph} of {paragraphs}")]
    MissingParagraph {
        /// The question's id.
        qas_id: String,
        /// The 0-based index of the paragraph it names.
        paragraph: usize,
        /// How many paragraphs the dataset has.
        paragraphs: usize,
    },

    /// The system refused what a run needs: a runtime or a thread could not be started
    /// (`what` says which; `source` is the system's error, often too many threads or too
    /// little memory).
    #[error("cannot start {what}: {source}")]
    System {
        /// What could not be started (`the client's runtime`, `a run's decoding thread`).
        what: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },

    /// A worker task that did not finish: it panicked (a fault of bertqa itself: a bug
    /// to report) or was cancelled (its runtime shut down). `message` is the runtime's.
    #[error("internal error: {task} failed: {message}")]
    TaskFailed {
        /// The task, as words (`inference task`).
        task: String,
        /// It panicked (a bug); `false`: it was cancelled.
        panicked: bool,
        /// The runtime's words for the failure.
        message: String,
    },
}

/// A status code of Triton's protocols: gRPC's codes, which KServe v2 uses; an HTTP
/// error status is read as the code of the same meaning (`500` as [`Code::Internal`]).
/// Shown by its name (`ResourceExhausted`); [`Code::as_str`] is the proto name reports
/// use (`RESOURCE_EXHAUSTED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// The call was cancelled (gRPC `CANCELLED`).
    Cancelled,
    /// An error of no other code, and any HTTP status without a mapping (gRPC `UNKNOWN`).
    Unknown,
    /// The request is malformed or names something wrongly (gRPC `INVALID_ARGUMENT`;
    /// HTTP 400).
    InvalidArgument,
    /// The deadline passed before the answer (gRPC `DEADLINE_EXCEEDED`).
    DeadlineExceeded,
    /// Something the call named (a model, a shared memory region) does not exist (gRPC
    /// `NOT_FOUND`; HTTP 404 in the protocol's error form).
    NotFound,
    /// What the call would create exists already (gRPC `ALREADY_EXISTS`; HTTP 409).
    AlreadyExists,
    /// The caller may not make the call (gRPC `PERMISSION_DENIED`).
    PermissionDenied,
    /// The server is out of a resource: memory, queue room, a rate limit (gRPC
    /// `RESOURCE_EXHAUSTED`; HTTP 429).
    ResourceExhausted,
    /// The server is not in a state to do the call (gRPC `FAILED_PRECONDITION`).
    FailedPrecondition,
    /// The call was aborted, often by a conflict (gRPC `ABORTED`).
    Aborted,
    /// A value is outside its valid range (gRPC `OUT_OF_RANGE`).
    OutOfRange,
    /// The server does not have the call (gRPC `UNIMPLEMENTED`; HTTP 501, and a 404 not
    /// in the protocol's error form: a route the server does not have).
    Unimplemented,
    /// The server failed (gRPC `INTERNAL`; HTTP 500).
    Internal,
    /// The server cannot take the call now (gRPC `UNAVAILABLE`).
    Unavailable,
    /// Data was lost or corrupted (gRPC `DATA_LOSS`).
    DataLoss,
    /// The call carried no valid credentials (gRPC `UNAUTHENTICATED`).
    Unauthenticated,
}

impl Code {
    /// The proto name (`UNAVAILABLE`), as reports and retry summaries write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Why a server could not be reached ([`Error::Unavailable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unreachable {
    /// The connection was refused: nothing listens at the address.
    Refused,
    /// No connection within the connect timeout.
    ConnectTimeout,
    /// The connection failed otherwise (DNS, TLS, a reset): the transport's words.
    Transport,
    /// The server closed the connection (a TLS server closes a plain-text one).
    Closed,
    /// The server answered UNAVAILABLE (HTTP 502 or 503): its own words.
    Answered,
    /// The server speaks the other protocol (Triton's HTTP port asked for gRPC, or the
    /// reverse).
    WrongProtocol,
    /// The server (or the model) did not become ready within `wait_ready`.
    NotReady,
}

/// What an answer that cannot be read ([`Error::InvalidAnswer`]) was the answer to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnswerTo {
    /// A call other than inference, by its HTTP path.
    Call {
        /// The call's HTTP path (`/v2/models/NAME`).
        path: String,
    },
    /// An inference request for the model.
    Inference {
        /// The model asked.
        model: String,
    },
}

impl AnswerTo {
    fn describe(&self) -> String {
        match self {
            AnswerTo::Call { path } => format!("an answer to {path} that is not the JSON expected"),
            AnswerTo::Inference { model } => {
                format!("an inference answer for model {model:?} that cannot be read")
            }
        }
    }
}

fn http_suffix(http: Option<u16>) -> String {
    http.map_or_else(String::new, |s| format!(" (HTTP {s})"))
}

fn model_suffix(model: Option<&str>) -> String {
    model.map_or_else(String::new, |m| format!(" for model {m:?}"))
}

/// `UNAVAILABLE ×3, DEADLINE_EXCEEDED ×1`, in the map's order.
pub(crate) fn summarize_codes(codes: &BTreeMap<&'static str, u32>) -> String {
    codes
        .iter()
        .map(|(c, n)| format!("{c} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How a message names a server: its name and version, or Triton (bertqa's server
/// unless told otherwise).
fn who(server: Option<&str>) -> &str {
    server.unwrap_or("Triton")
}

fn ready_there(names: Option<&[String]>) -> String {
    match names {
        Some(names) => format!("ready models there: {}", list_or_none(names)),
        None => "the server does not list its models".into(),
    }
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".to_string()
    } else {
        names.join(", ")
    }
}

impl Error {
    /// The system refused to start `what` (a thread, a runtime).
    pub(crate) fn system(what: &str, source: std::io::Error) -> Error {
        Error::System {
            what: what.into(),
            source,
        }
    }

    /// A model whose tensors cannot be mapped to BERT QA roles ([`Error::Binding`]):
    /// `message` names what could not be placed, `tensors` lists them all.
    pub fn binding(
        model: impl Into<String>,
        message: impl Into<String>,
        tensors: Vec<String>,
    ) -> Self {
        Error::Binding {
            model: model.into(),
            message: message.into(),
            tensors,
        }
    }

    /// The model and its tensors (name, datatype, shape) of an error that lists them
    /// (a binding error's; `None` otherwise, or when it lists none).
    pub fn model_tensors(&self) -> Option<(&str, &[String])> {
        match self {
            Error::Binding { model, tensors, .. } if !tensors.is_empty() => Some((model, tensors)),
            _ => None,
        }
    }

    /// Whether the error is the model's: not found, not ready, or its tensors not what
    /// bertqa takes.
    pub fn is_model_error(&self) -> bool {
        matches!(
            self,
            Error::ModelNotFound { .. }
                | Error::ModelNotReady { .. }
                | Error::TensorMismatch { .. }
                | Error::Binding { .. }
        )
    }

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

    /// A server that cannot be reached, for `cause`.
    pub fn unavailable(
        url: impl Into<String>,
        cause: Unreachable,
        message: impl Into<String>,
    ) -> Self {
        Error::Unavailable {
            url: url.into(),
            cause,
            message: message.into(),
        }
    }

    /// The server's own words when the error is its answer (an error status, or
    /// UNAVAILABLE as it answered it; over HTTP after the status, `HTTP 503: …`); `None` for every error bertqa or a library
    /// worded. For the few decisions the protocol leaves to the message (a lost shared
    /// memory region, an unknown model, both answered with a generic code).
    pub fn server_message(&self) -> Option<&str> {
        match self {
            Error::Server { message, .. } => Some(message),
            Error::Unavailable {
                cause: Unreachable::Answered,
                message,
                ..
            } => Some(message),
            _ => None,
        }
    }

    /// The error with the answering server named, when it is not Triton (`server`
    /// as [`crate::backend::ServerInfo::label`] gives it); other errors are unchanged.
    pub(crate) fn answered_by(mut self, name: Option<String>) -> Self {
        if let Error::Server { server, .. } | Error::InvalidAnswer { server, .. } = &mut self {
            *server = name;
        }
        self
    }

    /// A task's failure to finish, as the runtime reported it.
    pub fn task_failed(task: impl Into<String>, e: &tokio::task::JoinError) -> Self {
        Error::TaskFailed {
            task: task.into(),
            panicked: e.is_panic(),
            message: e.to_string(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
