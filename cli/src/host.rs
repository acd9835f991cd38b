//! The state of a command run inside another program (`embed`), read where the
//! command prints and where it watches for interrupts: what it printed on stdout, and
//! the host's stop token. It lives in a thread-local of the thread that runs the
//! command (the one that prints and watches for interrupts); elsewhere there is none
//! and the command acts as the binary.

use std::cell::RefCell;

use tokio_util::sync::CancellationToken;

struct Host {
    stdout: String,
    stop: CancellationToken,
}

thread_local! {
    static HOST: RefCell<Option<Host>> = const { RefCell::new(None) };
}

/// Starts an embedded command on this thread.
pub(super) fn enter(stop: CancellationToken) {
    HOST.with(|h| {
        *h.borrow_mut() = Some(Host {
            stdout: String::new(),
            stop,
        })
    });
}

/// Ends it: what it printed on stdout.
pub(super) fn leave() -> String {
    HOST.with(|h| h.borrow_mut().take())
        .map(|h| h.stdout)
        .unwrap_or_default()
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
    stoppable_by(run, stop_token())
}

/// `run`, stopped by `stop` (the host's token, read on the command's thread) when given.
pub(crate) fn stoppable_by<B: bertqa::Infer>(
    run: bertqa::Run<'_, B>,
    stop: Option<CancellationToken>,
) -> bertqa::Run<'_, B> {
    match stop {
        Some(stop) => run.stop_on(stop),
        None => run,
    }
}
