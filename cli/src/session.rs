//! Where a command's report goes, handed to it explicitly: the `bertqa` binary prints
//! it on stdout. (A host program calls the library, or `embed`'s values, instead.)
//! The run's `-v` travels here too: nothing about a run is process-wide.

use std::io::Write as _;

use bertqa::report::Render;

use bertqa::report::Format;

/// A command's run in the binary: see the module's documentation.
pub(crate) struct Session {
    verbose: bool,
}

impl Session {
    /// The binary's run: reports printed, its own signal handler; `verbose`: `-v`.
    pub(crate) fn binary(verbose: bool) -> Self {
        Session { verbose }
    }

    /// Whether `-v` was given: reports add the lines that describe bertqa's own
    /// workings, errors their causes and context.
    pub(crate) fn verbose(&self) -> bool {
        self.verbose
    }

    /// How a report is shown: `--json` (`json`), or the text (`-v`: verbose).
    pub(crate) fn format(&self, json: bool) -> Format {
        if json {
            Format::Json
        } else {
            Format::Text {
                verbose: self.verbose,
            }
        }
    }

    /// The finished report, printed as `--json` (`json`) or text.
    pub(crate) fn report<R: Render>(&mut self, report: &R, json: bool) -> anyhow::Result<()> {
        let format = self.format(json);
        self.print(|| report.render(format))
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
