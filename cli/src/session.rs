//! Where a command's report goes, handed to it explicitly: the `bertqa` binary prints
//! it on stdout. (A host program calls the library, or `embed`'s values, instead.)

use std::io::Write as _;

use bertqa::report::Render;

use super::common::report_format;

/// A command's run in the binary: see the module's documentation.
pub(crate) struct Session;

impl Session {
    /// The binary's run: reports printed, its own signal handler.
    pub(crate) fn binary() -> Self {
        Session
    }

    /// The finished report, printed as `--json` (`json`) or text.
    pub(crate) fn report<R: Render>(&mut self, report: &R, json: bool) -> anyhow::Result<()> {
        self.print(|| report.render(report_format(json)))
    }

    /// Prints `text()` on stdout.
    pub(crate) fn print(&self, text: impl FnOnce() -> String) -> anyhow::Result<()> {
        print_stdout(&text())
    }
}

/// Writes `text` to stdout; a closed pipe is reported as an io error that
/// `cli::main` turns into a clean exit.
fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
