//! Where a command runs, handed to it explicitly: the `bertqa` binary, which prints the
//! report and stops a run at its own signal handler, or a host program (`embed`: the
//! Python package), which takes the report back as a value and stops a run through a
//! token. Nothing of it lives in thread-locals: a command may run its work on any
//! thread.

use std::io::Write as _;

use bertqa::report::Render;
use tokio_util::sync::CancellationToken;

use super::common::report_format;

/// A command's run: see the module's documentation.
pub(crate) struct Session {
    /// The host's stop token; `None` for the binary (its signal handlers stop runs).
    stop: Option<CancellationToken>,
    /// What the command hands its host; `None` for the binary, which prints instead.
    kept: Option<Kept>,
}

/// What a command run for a host program hands back.
#[derive(Debug, Default)]
pub struct Kept {
    /// The report's JSON document (`--json`'s), for the commands that have one.
    pub report: Option<serde_json::Value>,
    /// `eval`'s answers: question id to answer text, as predictions.json holds them.
    pub predictions: Option<serde_json::Map<String, serde_json::Value>>,
}

impl Session {
    /// The binary's run: reports printed, its own signal handler.
    pub(crate) fn binary() -> Self {
        Session {
            stop: None,
            kept: None,
        }
    }

    /// A host program's run: reports kept, stopped by `stop`.
    pub(crate) fn host(stop: CancellationToken) -> Self {
        Session {
            stop: Some(stop),
            kept: Some(Kept::default()),
        }
    }

    /// The host's stop token (`None` for the binary).
    pub(crate) fn stop(&self) -> Option<CancellationToken> {
        self.stop.clone()
    }

    /// The finished report: printed as `--json` (`json`) or text for the binary, its
    /// document kept for a host.
    pub(crate) fn report<R: Render>(&mut self, report: &R, json: bool) -> anyhow::Result<()> {
        self.keep(report);
        self.print(|| report.render(report_format(json)))
    }

    /// Keeps the report's document for a host (nothing for the binary).
    pub(crate) fn keep<R: Render>(&mut self, report: &R) {
        self.keep_document(&report.json());
    }

    /// Keeps `doc`, a report's JSON document, for a host (nothing for the binary), as
    /// `--json` writes it ([`bertqa::report::json::to_value`]).
    pub(crate) fn keep_document(&mut self, doc: &impl serde::Serialize) {
        if let Some(kept) = &mut self.kept {
            kept.report = Some(bertqa::report::json::to_value(doc));
        }
    }

    /// Prints `text()` on stdout for the binary (nothing for a host).
    pub(crate) fn print(&self, text: impl FnOnce() -> String) -> anyhow::Result<()> {
        match self.kept {
            Some(_) => Ok(()),
            None => print_stdout(&text()),
        }
    }

    /// `eval`'s answers, kept for a host (the binary has them in its files).
    pub(crate) fn predictions(&mut self, predictions: &[bertqa::decode::Prediction]) {
        if let Some(kept) = &mut self.kept {
            kept.predictions = Some(
                predictions
                    .iter()
                    .map(|p| (p.qas_id.clone(), p.answer.clone().into()))
                    .collect(),
            );
        }
    }

    /// What the command kept for its host (empty for the binary).
    pub(crate) fn into_kept(self) -> Kept {
        self.kept.unwrap_or_default()
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
