//! How a command that failed says so on stderr: one line, `error: ` and the error with
//! its causes joined. With `-v`, each cause on a line of its own, then the context the
//! command ran in (command, server, TLS, timeouts, model, files), so a report or a
//! colleague has what the line leaves out. A Rust backtrace only when one was asked for
//! (`RUST_BACKTRACE` or `RUST_LIB_BACKTRACE`, which make anyhow capture it), and only
//! with `-v`.

use std::backtrace::BacktraceStatus;
use std::fmt::Write as _;
use std::path::Path;

use super::args::{NetArgs, ServerArgs, TransportArg};
use super::flags::name_flags;
use super::Command;

/// What the command was asked to work with, as (label, text) lines for `-v`.
pub(crate) fn context(command: &Command) -> Vec<(&'static str, String)> {
    let mut c = Vec::new();
    let model = |name: &str, version: &str| {
        let version = match version {
            "" => "the server's choice".to_string(),
            v => v.to_string(),
        };
        ("model", format!("{name:?} (version: {version})"))
    };
    let file = |label: &'static str, p: &Path| (label, p.display().to_string());
    let data = |paths: &[std::path::PathBuf]| ("data", super::common::data_label(paths));
    match command {
        Command::Models(a) => {
            c.push(("command", "models".into()));
            c.push(server(&a.server));
            if let Some(m) = &a.model {
                c.push(model(m, &a.model_version));
            }
        }
        Command::Ask(a) => {
            c.push(("command", "ask".into()));
            c.push(server(&a.run.server));
            c.push(requests(&a.run.net));
            c.push(model(&a.model, &a.model_version));
        }
        Command::Compare(a) => {
            c.push(("command", "compare".into()));
            if a.runs.is_empty() {
                c.push(server(&a.run.server));
                c.push(requests(&a.run.net));
                c.push(("models", a.models.join(", ")));
            } else {
                let dirs: Vec<String> = a.runs.iter().map(|d| d.display().to_string()).collect();
                c.push(("runs", dirs.join(", ")));
            }
            c.push(data(&a.data));
            if let Some(dir) = &a.output_dir {
                c.push(file("output", dir));
            }
        }
        Command::Eval(a) => {
            c.push(("command", "eval".into()));
            match (&a.model, &a.from_logits) {
                (Some(m), _) => {
                    c.push(server(&a.run.server));
                    c.push(requests(&a.run.net));
                    c.push(model(m, &a.model_version));
                }
                (None, Some(logits)) => c.push(file("logits", logits)),
                (None, None) => {}
            }
            c.push(data(&a.data));
            c.push(file("output", &a.output_dir));
        }
        Command::Features(a) => {
            c.push(("command", "features".into()));
            c.push(data(&a.data));
        }
        Command::Merge(a) => {
            c.push(("command", "merge".into()));
            let dirs: Vec<String> = a.dirs.iter().map(|d| d.display().to_string()).collect();
            c.push(("shards", dirs.join(", ")));
            c.push(file("output", &a.output_dir));
        }
        Command::Tune(a) => {
            c.push(("command", "tune".into()));
            c.push(server(&a.server));
            if let Some(m) = &a.model {
                c.push(model(m, ""));
            }
            c.push(data(&a.data));
            c.push(file("output", &a.output_dir));
        }
        Command::Perf(a) => {
            c.push(("command", "perf".into()));
            c.push(server(&a.server));
            c.push(model(&a.model, &a.model_version));
            c.push(data(&a.data));
        }
        Command::Score(a) => {
            c.push(("command", "score".into()));
            c.push(data(&a.data));
            c.push(file("predictions", &a.predictions));
        }
    }
    c
}

/// The server line: endpoints, TLS and its files, headers (counted, never shown),
/// deadlines.
fn server(s: &ServerArgs) -> (&'static str, String) {
    let sec = &s.security;
    let https = s.url.iter().any(|u| u.starts_with("https://"));
    let mut tls = if sec.ssl
        || https
        || sec.ssl_root_cert.is_some()
        || sec.ssl_client_cert.is_some()
        || sec.ssl_target_name.is_some()
    {
        "TLS".to_string()
    } else {
        "no TLS".to_string()
    };
    if let Some(ca) = &sec.ssl_root_cert {
        let _ = write!(tls, ", CA {}", ca.display());
    }
    if let Some(cert) = &sec.ssl_client_cert {
        let _ = write!(tls, ", client certificate {}", cert.display());
    }
    if let Some(name) = &sec.ssl_target_name {
        let _ = write!(tls, ", server name {name:?}");
    }
    let headers = sec.headers.len() + sec.header_env.len() + sec.header_file.len();
    if headers > 0 {
        let _ = write!(tls, ", {headers} header(s), values not shown");
    }
    (
        "server",
        format!(
            "{} ({tls}; connect timeout {} ms, request timeout {} ms)",
            s.url.join(", "),
            s.connect_timeout_ms,
            s.timeout_ms
        ),
    )
}

/// The requests line: transport, connections and retries.
fn requests(n: &NetArgs) -> (&'static str, String) {
    let transport = match n.transport {
        TransportArg::Stream => "one stream per connection",
        TransportArg::Unary => "one call per request",
    };
    (
        "requests",
        format!(
            "{transport}, {} connection(s) per server, {} retries, waiting {} s for readiness",
            n.connections, n.retries, n.wait_ready
        ),
    )
}

/// The exit status of a command that failed: 0 for a broken pipe on stdout (the reader
/// went away: `bertqa … | head`), else 2 (README.md, "Exit codes"). Known by the
/// error's value (an `io::Error` of that kind in its chain), never by its text.
pub(crate) fn exit_code(e: &anyhow::Error) -> u8 {
    let broken_pipe = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    });
    if broken_pipe {
        0
    } else {
        2
    }
}

/// The text for stderr (without the final newline).
pub(crate) fn render(
    e: &anyhow::Error,
    verbose: bool,
    context: &[(&'static str, String)],
) -> String {
    if !verbose {
        // One line: the error and its causes joined.
        let mut line = e.to_string();
        for cause in e.chain().skip(1) {
            let c = cause.to_string();
            if !line.contains(&c) {
                line.push_str(": ");
                line.push_str(&c);
            }
        }
        return format!("error: {}", name_flags(&line.replace('\n', " ")));
    }
    let mut s = format!("error: {}", name_flags(&e.to_string()));
    for cause in e.chain().skip(1) {
        // A cause the message already quotes (an io error's) is not repeated.
        let c = cause.to_string();
        if !s.contains(&c) {
            let _ = write!(s, "\n  caused by: {}", name_flags(&c));
        }
    }
    // A binding error's tensors, each on its line.
    let tensors = e
        .chain()
        .find_map(|c| c.downcast_ref::<bertqa::Error>()?.model_tensors());
    if let Some((model, tensors)) = tensors {
        let _ = write!(s, "\n  tensors of model {model:?}:");
        for t in tensors {
            let _ = write!(s, "\n    {t}");
        }
    }
    for (label, text) in context {
        let _ = write!(s, "\n  {label:<12}{text}");
    }
    if e.backtrace().status() == BacktraceStatus::Captured {
        let _ = write!(s, "\n\nStack backtrace:\n{}", e.backtrace());
    }
    s
}

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

/// The exit reason of a library error (a spent retry budget: its last error's).
pub(crate) fn library_reason(e: &bertqa::Error) -> Reason {
    use bertqa::Error as E;
    match e {
        E::Config(_) | E::Refused(_) => Reason::Usage,
        E::Io { .. }
        | E::Input { .. }
        | E::Decode { .. }
        | E::Empty(_)
        | E::Inconsistent(_)
        | E::MissingParagraph { .. } => Reason::Input,
        E::Unavailable { .. } | E::Timeout { .. } | E::PermissionDenied { .. } => {
            Reason::Connection
        }
        E::NoServer { .. } | E::Server { .. } | E::InvalidAnswer { .. } | E::NotDecoded { .. } => {
            Reason::Server
        }
        e if e.is_model_error() => Reason::Model,
        E::RetriesExhausted { last, .. } => library_reason(last),
        E::Deployment { error, .. } => library_reason(error),
        _ => Reason::Internal,
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use bertqa::error::{Code, Unreachable};
    use bertqa::Error;

    use super::*;

    /// A binding error is one line; `-v` lists the model's tensors under it.
    #[test]
    fn a_binding_error_lists_the_tensors_only_under_v() {
        let e = anyhow::Error::from(Error::binding(
            "trt",
            "cannot tell which of its outputs (x FP32 [-1, 7]) hold the start and end logits",
            vec![
                "input  input_ids INT32 [-1, 384]".into(),
                "output x FP32 [-1, 7]".into(),
            ],
        ));
        let line = render(&e, false, &[]);
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(
            line.contains("(x FP32 [-1, 7])") && !line.contains("input_ids"),
            "{line}"
        );
        let verbose = render(&e, true, &[]);
        assert!(verbose.contains(
            "\n  tensors of model \"trt\":\n    input  input_ids INT32 [-1, 384]\n    output x FP32 [-1, 7]"
        ), "{verbose}");
    }

    #[test]
    fn a_broken_pipe_exits_0_and_every_other_error_2() {
        let pipe = || io::Error::from(io::ErrorKind::BrokenPipe);
        let quiet = [
            anyhow::Error::from(pipe()),
            anyhow::Error::from(Error::io("-", pipe())),
            anyhow::Error::from(Error::io("-", pipe())).context("writing the predictions"),
        ];
        for e in &quiet {
            assert_eq!(exit_code(e), 0, "{e:#}");
        }
        let failed = [
            Error::Config("`batch_size` must be at least 1".into()),
            Error::unavailable("h:1", Unreachable::Refused, "Connection refused"),
            Error::Server {
                server: None,
                url: "h:1".into(),
                code: Code::Internal,
                http: None,
                model: None,
                // A server's words never decide: only the error's value does.
                message: "Broken pipe (os error 32)".into(),
            },
            Error::io("out.json", io::Error::from(io::ErrorKind::PermissionDenied)),
            Error::NotDecoded { qas_id: "q".into() },
        ];
        for e in failed {
            assert_eq!(exit_code(&anyhow::Error::from(e)), 2);
        }
        assert_eq!(exit_code(&anyhow::anyhow!("broken pipe")), 2);
    }

    #[test]
    fn each_library_error_has_its_exit_reason() {
        let refused = Error::unavailable("h:1", Unreachable::Refused, "refused");
        assert_eq!(library_reason(&refused), Reason::Connection);
        let retried = Error::RetriesExhausted {
            attempts: 4,
            retries: 3,
            codes: Default::default(),
            last: Box::new(refused),
        };
        assert_eq!(library_reason(&retried), Reason::Connection);
        let missing = Error::ModelNotFound {
            url: "h:1".into(),
            model: "m".into(),
            available: None,
        };
        let bound = anyhow::Error::from(missing).context("binding");
        assert_eq!(reason(&bound), Reason::Model);
        assert_eq!(reason(&anyhow::anyhow!("--limit: no")), Reason::Usage);
        let io = io::Error::from(io::ErrorKind::NotFound);
        assert_eq!(reason(&anyhow::Error::from(io)), Reason::Input);
        let stopped = Classified::error(Some(Reason::Server), "0/16 questions done".into());
        assert_eq!(reason(&stopped), Reason::Server);
        assert_eq!(render(&stopped, false, &[]), "error: 0/16 questions done");
    }

    #[test]
    fn the_line_names_flags_and_joins_causes() {
        let e = anyhow::Error::from(Error::unavailable(
            "h:1",
            Unreachable::NotReady,
            "not ready within `wait_ready` 0.5 s: the server is not ready",
        ));
        assert_eq!(
            render(&e, false, &[]),
            "error: cannot reach Triton at h:1: not ready within --wait-ready 0.5 s: the \
             server is not ready"
        );
    }
}
