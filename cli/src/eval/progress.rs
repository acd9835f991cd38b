//! What `eval` shows while the library's evaluation runs: the progress bar on stderr,
//! the notes, and Ctrl-C / SIGTERM: the first stops the run (the library writes the
//! partial results and keeps the journal), the second flushes the journal and quits at
//! once.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::super::flags::name_flags;
use bertqa::evaluation::JournalHandle;
use bertqa::EvalHooks;
use tokio_util::sync::CancellationToken;

/// The command's [`EvalHooks`]: the bar (shown once the journal is open, as the run
/// starts), notes on stderr with the flags named, and the journal for a quit.
pub(crate) struct Hooks {
    quiet: bool,
    bar: OnceLock<indicatif::ProgressBar>,
    journal: Mutex<Option<JournalHandle>>,
}

impl Hooks {
    /// Hooks whose bar is hidden with `quiet` (`--quiet`, `--json`) and off a TTY.
    pub(crate) fn new(quiet: bool) -> Hooks {
        Hooks {
            quiet,
            bar: OnceLock::new(),
            journal: Mutex::new(None),
        }
    }

    fn bar(&self) -> &indicatif::ProgressBar {
        self.bar.get_or_init(|| {
            if self.quiet || !std::io::stderr().is_terminal() {
                return indicatif::ProgressBar::hidden();
            }
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} features answered \
                     ({per_sec}, eta {eta})",
                )
                .expect("valid template"),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        })
    }
}

impl EvalHooks for Hooks {
    fn note(&self, text: &str) {
        eprintln!("{}", name_flags(text));
    }

    fn wording(&self, text: &str) -> String {
        name_flags(text)
    }

    fn on_journal(&self, journal: JournalHandle) {
        *self.journal.lock().unwrap_or_else(|p| p.into_inner()) = Some(journal);
        self.bar();
    }

    fn built(&self, n: u64) {
        self.bar().inc_length(n);
    }

    fn answered(&self, n: u64) {
        self.bar().inc(n);
    }

    fn run_ended(&self) {
        self.bar().finish_and_clear();
    }
}

/// The token that the first SIGINT or SIGTERM cancels; the second flushes the journal
/// `hooks` holds and quits at once ([`crate::resume::stop_on_signals`]).
pub(super) fn stop_on_signals(hooks: Arc<Hooks>) -> anyhow::Result<CancellationToken> {
    crate::resume::stop_on_signals(move || {
        // Never wait: a journal stuck in a write must not stop the quit.
        if let Ok(Some(journal)) = hooks.journal.try_lock().as_deref() {
            journal.flush_now();
        }
        eprintln!(
            "quitting at once; the journal keeps every answered feature (rerun with --resume)"
        );
    })
}
