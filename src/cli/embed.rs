//! The command line run inside another program (the Python package, python/): the same
//! flags, code and files as the binary, with three differences that a host process
//! needs. What a command prints on stdout is handed back instead of printed; Ctrl-C
//! and SIGTERM are the host's (no signal handler is installed: the host cancels the
//! run through a token, as the binary's first interrupt does); and a failure comes back
//! as its [`Reason`] and sentence, not as a line on stderr.
//!
//! The state lives in a thread-local of the thread that runs the command: the command's
//! own thread is the one that prints and watches for interrupts.

use std::cell::RefCell;
use std::ffi::OsString;

use clap::Parser as _;
use tokio_util::sync::CancellationToken;

use super::common::Outcome;
use super::{errors, execute, Cli};

/// Why an embedded command failed: one per exit reason of the command line (exit 2,
/// or 1 for [`Reason::GateFailed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Flags or options that cannot work (unknown, missing, out of range, conflicting).
    Usage,
    /// An input file that cannot be read or is malformed, or nothing to work on.
    Input,
    /// The server cannot be reached: refused, DNS, TLS, timeouts, credentials.
    Connection,
    /// The server answered with an error or with something its protocol does not allow.
    Server,
    /// The model is not there, not ready, or its tensors cannot be bound.
    Model,
    /// The run completed but a gate failed (exit 1).
    GateFailed,
    /// A fault of bertqa itself.
    Internal,
}

impl Reason {
    /// The name the Python package gives it (its exception class is named after it).
    pub fn name(self) -> &'static str {
        match self {
            Reason::Usage => "usage",
            Reason::Input => "input",
            Reason::Connection => "connection",
            Reason::Server => "server",
            Reason::Model => "model",
            Reason::GateFailed => "gate_failed",
            Reason::Internal => "internal",
        }
    }
}

/// How an embedded command ended.
#[derive(Debug)]
pub struct Embedded {
    /// The binary's exit status for the same run.
    pub code: u8,
    /// What the command printed on stdout (its report: `--json` or text).
    pub stdout: String,
    /// Why it failed (`None` on success).
    pub reason: Option<Reason>,
    /// The sentence the binary writes on stderr after `error: ` (one per failed gate,
    /// as `gate failed: ` lines, for [`Reason::GateFailed`]).
    pub message: Vec<String>,
}

struct Host {
    stdout: String,
    stop: CancellationToken,
}

thread_local! {
    static HOST: RefCell<Option<Host>> = const { RefCell::new(None) };
}

/// Runs the command line `args` (the program's name first) on this thread for a host
/// program: see the module's documentation. Cancelling `stop` stops a run as the
/// binary's first Ctrl-C does.
pub fn run(args: Vec<OsString>, stop: CancellationToken) -> Embedded {
    HOST.with(|h| {
        *h.borrow_mut() = Some(Host {
            stdout: String::new(),
            stop,
        })
    });
    let (code, reason, message) = match Cli::try_parse_from(args) {
        Err(e) if e.use_stderr() => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or_default();
            let sentence = first.strip_prefix("error: ").unwrap_or(first).to_string();
            (2, Some(Reason::Usage), vec![sentence])
        }
        Err(e) => {
            // --help or --version: the binary prints it on stdout and exits 0.
            captured(&e.render().to_string());
            (0, None, Vec::new())
        }
        Ok(cli) => match execute(cli) {
            Ok(Outcome::Success) => (0, None, Vec::new()),
            Ok(Outcome::GateFailed(gates)) => (1, Some(Reason::GateFailed), gates),
            Err(e) => {
                let line = errors::render(&e, false, &[]);
                let sentence = line.strip_prefix("error: ").unwrap_or(&line).to_string();
                (errors::exit_code(&e), Some(reason(&e)), vec![sentence])
            }
        },
    };
    let host = HOST.with(|h| h.borrow_mut().take());
    Embedded {
        code,
        stdout: host.map(|h| h.stdout).unwrap_or_default(),
        reason,
        message,
    }
}

/// One flag of a command, as a host names its options (python/bertqa/_api.py).
#[derive(Debug, Clone)]
pub struct Flag {
    /// The long name, without `--` (`min-exact`).
    pub long: String,
    /// It takes a value (else it is a switch).
    pub takes_value: bool,
    /// It may be given several times.
    pub repeated: bool,
    /// Its default, as the help shows it.
    pub default: Option<String>,
    /// The values it accepts, when they are a list.
    pub choices: Vec<String>,
    /// Its help line.
    pub help: String,
    /// Hidden from the command's help.
    pub hidden: bool,
}

/// The flags of `command` (`eval`, `ask`, ...), in the order of its help; empty for
/// an unknown command.
pub fn flags(command: &str) -> Vec<Flag> {
    use clap::CommandFactory as _;
    let mut cli = Cli::command();
    let Some(sub) = cli.find_subcommand_mut(command) else {
        return Vec::new();
    };
    let sub = sub.clone();
    sub.get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            if long == "help" {
                return None;
            }
            let action = a.get_action();
            let defaults: Vec<String> = a
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            Some(Flag {
                long: long.to_string(),
                takes_value: action.takes_values(),
                repeated: matches!(action, clap::ArgAction::Append),
                default: (!defaults.is_empty() && action.takes_values())
                    .then(|| defaults.join(",")),
                choices: a
                    .get_possible_values()
                    .iter()
                    .filter(|p| !p.is_hide_set())
                    .map(|p| p.get_name().to_string())
                    .collect(),
                help: a.get_help().map(|h| h.to_string()).unwrap_or_default(),
                hidden: a.is_hide_set(),
            })
        })
        .collect()
}

/// Keeps `text` for the host when this thread runs an embedded command: true when it
/// was kept (then nothing is printed).
pub(crate) fn captured(text: &str) -> bool {
    HOST.with(|h| match h.borrow_mut().as_mut() {
        Some(host) => {
            host.stdout.push_str(text);
            true
        }
        None => false,
    })
}

/// The host's stop token when this thread runs an embedded command.
pub(crate) fn stop_token() -> Option<CancellationToken> {
    HOST.with(|h| h.borrow().as_ref().map(|host| host.stop.clone()))
}

/// `run`, stopped by the host's token when this thread runs an embedded command (the
/// binary's `ask` and `compare` end with the process at Ctrl-C).
pub(crate) fn stoppable<B: bertqa::Infer>(run: bertqa::Run<'_, B>) -> bertqa::Run<'_, B> {
    match stop_token() {
        Some(stop) => run.stop_on(stop),
        None => run,
    }
}

/// An error whose sentence is the command's own summary (a run that stopped on an
/// error, its partial results written) and whose reason is that of the library error
/// that stopped it.
#[derive(Debug)]
pub(crate) struct Classified {
    reason: Option<Reason>,
    message: String,
}

impl Classified {
    pub(crate) fn error(reason: Option<Reason>, message: String) -> anyhow::Error {
        anyhow::Error::new(Classified { reason, message })
    }
}

impl std::fmt::Display for Classified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Classified {}

/// The exit reason of a failed command, by the library error in its chain (by value,
/// never by text). Errors of the command line's own checks (flags that cannot work
/// together) are usage errors.
pub(crate) fn reason(e: &anyhow::Error) -> Reason {
    if let Some(reason) = e
        .chain()
        .find_map(|c| c.downcast_ref::<Classified>())
        .and_then(|c| c.reason)
    {
        return reason;
    }
    if let Some(e) = e.chain().find_map(|c| c.downcast_ref::<bertqa::Error>()) {
        return library_reason(e);
    }
    if e.chain().any(|c| c.is::<std::io::Error>()) {
        return Reason::Input;
    }
    Reason::Usage
}

pub(crate) fn library_reason(e: &bertqa::Error) -> Reason {
    use bertqa::Error as E;
    match e {
        E::Config(_) => Reason::Usage,
        E::Io { .. }
        | E::Input { .. }
        | E::Decode { .. }
        | E::Empty(_)
        | E::MissingParagraph { .. } => Reason::Input,
        E::Unavailable { .. } | E::Timeout { .. } | E::PermissionDenied { .. } => {
            Reason::Connection
        }
        E::NoServer { .. } | E::Server { .. } | E::InvalidAnswer { .. } | E::NotDecoded { .. } => {
            Reason::Server
        }
        E::ModelNotFound { .. }
        | E::ModelNotReady { .. }
        | E::TensorMismatch { .. }
        | E::Binding { .. } => Reason::Model,
        E::RetriesExhausted { last, .. } => library_reason(last),
        _ => Reason::Internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bertqa::error::Unreachable;

    #[test]
    fn each_library_error_has_its_exit_reason() {
        let refused = bertqa::Error::unavailable("h:1", Unreachable::Refused, "refused");
        assert_eq!(library_reason(&refused), Reason::Connection);
        let retried = bertqa::Error::RetriesExhausted {
            attempts: 4,
            retries: 3,
            codes: Default::default(),
            last: Box::new(refused),
        };
        assert_eq!(library_reason(&retried), Reason::Connection);
        let missing = bertqa::Error::ModelNotFound {
            url: "h:1".into(),
            model: "m".into(),
            available: None,
        };
        assert_eq!(
            reason(&anyhow::Error::from(missing).context("binding")),
            Reason::Model
        );
        assert_eq!(reason(&anyhow::anyhow!("--limit: no")), Reason::Usage);
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert_eq!(reason(&anyhow::Error::from(io)), Reason::Input);
    }

    #[test]
    fn stdout_is_kept_and_usage_errors_come_back_as_sentences() {
        let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        let done = run(args(&["bertqa", "--version"]), CancellationToken::new());
        assert_eq!((done.code, done.reason), (0, None));
        assert!(done.stdout.starts_with("bertqa "), "{}", done.stdout);
        let bad = run(
            args(&["bertqa", "score", "--nope"]),
            CancellationToken::new(),
        );
        assert_eq!((bad.code, bad.reason), (2, Some(Reason::Usage)));
        assert!(bad.message[0].contains("--nope"), "{:?}", bad.message);
        assert!(!captured("x"), "the state ends with the command");
    }
}
