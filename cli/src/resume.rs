//! Ctrl-C and SIGTERM for the commands that stop a run cleanly (`eval`, `compare`,
//! `tune`): the first stops it, the second quits at once.

/// A token cancelled at the first SIGINT or SIGTERM; the second one runs `on_quit` (which
/// says what is left behind) and exits the process at once (code 2). The signals are
/// watched by a thread of their own, with its own small runtime, registered before this
/// returns: they are seen whether or not the pipeline's runtime (a current-thread one,
/// driven only inside its `block_on`) is running, for instance while the answers are
/// written. A SIGINT that the process ignores (inherited so: a script's `cmd &`, whose
/// Ctrl-C is not meant for it) stays ignored, as in commands that watch for no signal;
/// registering would replace the ignore with a handler.
pub(crate) fn stop_on_signals(
    on_quit: impl FnOnce() + Send + 'static,
) -> anyhow::Result<tokio_util::sync::CancellationToken> {
    use tokio::signal::unix::{signal, SignalKind};
    let stop = tokio_util::sync::CancellationToken::new();
    let tx = stop.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let watch_int = !ignored(libc::SIGINT);
    // Registered here, in the runtime's context, before the caller goes on.
    let (int, mut term) = rt.block_on(async {
        (
            watch_int.then(|| signal(SignalKind::interrupt())),
            signal(SignalKind::terminate()).ok(),
        )
    });
    let mut int = int
        .transpose()
        .map_err(|e| anyhow::anyhow!("cannot watch for interrupts: {e}"))?;
    std::thread::Builder::new()
        .name("bertqa-signals".into())
        .spawn(move || {
            rt.block_on(async move {
                any_signal(&mut int, &mut term).await;
                eprintln!(
                    "\nstopping: no new requests; waiting for those in flight (interrupt again to quit at once)"
                );
                tx.cancel();
                any_signal(&mut int, &mut term).await;
                on_quit();
                std::process::exit(2);
            })
        })?;
    Ok(stop)
}

/// Whether `sig`'s disposition is "ignore" now (false where it cannot be read).
fn ignored(sig: libc::c_int) -> bool {
    let mut current = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: with a null new action, sigaction(2) only writes the current one into
    // `current`, which is zeroed and the size the call expects.
    unsafe {
        libc::sigaction(sig, std::ptr::null(), current.as_mut_ptr()) == 0
            && current.assume_init().sa_sigaction == libc::SIG_IGN
    }
}

async fn any_signal(
    int: &mut Option<tokio::signal::unix::Signal>,
    term: &mut Option<tokio::signal::unix::Signal>,
) {
    /// The next signal of `s`; never, without one.
    async fn next(s: &mut Option<tokio::signal::unix::Signal>) {
        match s.as_mut() {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
    tokio::select! {
        _ = next(int) => {}
        _ = next(term) => {}
    }
}
