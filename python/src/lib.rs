//! `bertqa._native`: the extension module of the Python package (python/bertqa). The
//! client (`bertqa.Client`, [`client`]) holds the library's blocking client. The
//! `bertqa` command of the wheel is [`cli_main`]; the module functions
//! (`bertqa.evaluate`, ...) are [`api`]'s: each reads its options into the library's
//! values ([`settings`]) and makes one library call, whose report comes back as a value;
//! `Client.perf` and `Client.tune` are [`measure`]'s.

use std::ffi::OsString;
use std::time::Duration;

mod api;
mod client;
mod compare;
mod measure;
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
    m.add_function(wrap_pyfunction!(measure::perf, m)?)?;
    m.add_function(wrap_pyfunction!(measure::tune, m)?)?;
    m.add_function(wrap_pyfunction!(measure::client_settings, m)?)?;
    m.add_function(wrap_pyfunction!(api::evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(api::ask, m)?)?;
    m.add_function(wrap_pyfunction!(api::score, m)?)?;
    m.add_function(wrap_pyfunction!(api::compare, m)?)?;
    m.add_function(wrap_pyfunction!(api::option_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(flags, m)?)?;
    m.add_function(wrap_pyfunction!(compare::compare_evaluations, m)?)?;
    m.add_function(wrap_pyfunction!(client::evaluation_of_answers, m)?)?;
    m.add_class::<client::Client>()?;
    m.add_class::<client::Answer>()?;
    m.add_class::<client::Candidate>()?;
    m.add_class::<client::Evaluation>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
