//! `bertqa._native`: the extension module of the Python package (python/bertqa). The
//! client (`bertqa.Client`, [`client`]) holds the library's blocking client. The
//! `bertqa` command of the wheel is [`cli_main`]; the module functions
//! (`bertqa.evaluate`, ...) are [`api`]'s: each reads its options into the library's
//! values ([`settings`]) and makes one library call, whose report comes back as a value.

use std::ffi::OsString;
use std::time::Duration;

mod api;
mod client;
mod compare;
mod settings;

use bertqa_cli::embed;
use pyo3::prelude::*;

/// The binary's allocator (cli/src/main.rs): the pipeline allocates and frees many small
/// buffers on several threads. Python's own objects keep Python's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How often a waiting call looks for Ctrl-C (Python reads signals only while it holds
/// the GIL, on the main thread).
pub(crate) const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Runs the `bertqa` command line over `argv` (the program's name first) as the binary
/// does: prints, exits with its status (returned). The caller leaves SIGINT to the
/// system's default first (or ignored, where it was ignored on entry), so that Ctrl-C
/// acts as on the binary.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<OsString>) -> u8 {
    no_transparent_huge_pages();
    py.detach(|| {
        let code = bertqa_cli::main_with_args(argv);
        // The binary's stdout is flushed as its `main` returns; Python's exit does not.
        let _ = std::io::Write::flush(&mut std::io::stdout());
        code
    })
}

/// What [`run`] returns: (exit status, the report's document or None, eval's answers
/// (question id to text) or None, reason or None, message lines).
type Ran<'py> = (
    u8,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Option<String>,
    Vec<String>,
);

/// Runs a command for `Client.perf` and `Client.tune` (the last callers of the command
/// line from Python), on a thread of its own, the GIL released.
/// Returns [`Ran`]. Ctrl-C (a
/// KeyboardInterrupt) stops the run as the binary's first Ctrl-C does; the call returns
/// once the run has written what it had (a second Ctrl-C stops waiting), and raises it.
#[pyfunction]
fn run(py: Python<'_>, argv: Vec<OsString>) -> PyResult<Ran<'_>> {
    let stop = tokio_util::sync::CancellationToken::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let token = stop.clone();
    std::thread::Builder::new()
        .name("bertqa".into())
        // The binary runs a command on its main thread's 8 MiB stack.
        .stack_size(8 << 20)
        .spawn(move || {
            let _ = tx.send(embed::run(argv, token));
        })?;
    let mut interrupted: Option<PyErr> = None;
    // Moved into each wait and back: a receiver cannot be shared with it.
    let mut rx = rx;
    let done = loop {
        let (received, back) = py.detach(move || (rx.recv_timeout(SIGNAL_POLL), rx));
        rx = back;
        match received {
            Ok(done) => break done,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(
                    "bertqa: the run's thread ended without a result",
                ))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    if interrupted.is_some() {
                        // The second interrupt: the run goes on in the background.
                        return Err(e);
                    }
                    stop.cancel();
                    interrupted = Some(e);
                }
            }
        }
    };
    if let Some(e) = interrupted {
        return Err(e);
    }
    let kept = done.kept;
    let value = |v: Option<serde_json::Value>| match v {
        Some(v) => client::from_json(py, &v),
        None => Ok(py.None().into_bound(py)),
    };
    Ok((
        done.code,
        value(kept.report)?,
        value(kept.predictions.map(serde_json::Value::Object))?,
        done.reason.map(|r| r.name().to_string()),
        done.message,
    ))
}

/// The flags of a command: (long name, takes a value, repeatable, default, choices,
/// help, hidden), for the API's option names and docstrings.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn flags(
    command: &str,
) -> Vec<(
    String,
    bool,
    bool,
    Option<String>,
    Vec<String>,
    String,
    bool,
)> {
    embed::flags(command)
        .into_iter()
        .map(|f| {
            (
                f.long,
                f.takes_value,
                f.repeated,
                f.default,
                f.choices,
                f.help,
                f.hidden,
            )
        })
        .collect()
}

/// As the binary does at its start (cli/src/main.rs): mimalloc's arenas without
/// transparent huge pages. Only for the command, never for a host's Python process.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) only sets a flag of this process;
    // failure (an old kernel) leaves huge pages on, which is harmless.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(api::evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(api::ask, m)?)?;
    m.add_function(wrap_pyfunction!(api::score, m)?)?;
    m.add_function(wrap_pyfunction!(api::compare, m)?)?;
    m.add_function(wrap_pyfunction!(api::option_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(flags, m)?)?;
    m.add_function(wrap_pyfunction!(compare::compare_evaluations, m)?)?;
    m.add_class::<client::Client>()?;
    m.add_class::<client::Answer>()?;
    m.add_class::<client::Candidate>()?;
    m.add_class::<client::Evaluation>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
