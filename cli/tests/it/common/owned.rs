//! A server process of the tests' own (MLServer, KServe's model server, nginx): started
//! from a thread that lives as long as the test process, so that `PR_SET_PDEATHSIG`
//! ends the server with the tests, and waited for until it is ready. (Triton's start,
//! which also retries transient python-backend failures, is `triton.rs`'s.)

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::triton::log_tail;

/// Spawns `cmd` (its output already directed to `logs`), then waits up to `limit` for
/// `ready(pid)`. Panics with the tail of each log when it exits first or is not ready
/// in time.
pub fn start_owned(
    name: &str,
    mut cmd: Command,
    logs: Vec<PathBuf>,
    limit: Duration,
    ready: impl Fn(u32) -> bool + Send + 'static,
) {
    let name = name.to_string();
    let (tx, rx) = mpsc::channel();
    // The spawning thread must outlive the server: PR_SET_PDEATHSIG fires when the
    // thread that forked the child exits.
    std::thread::spawn(move || {
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let tails = || {
            logs.iter()
                .map(|l| log_tail(l, 30))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return tx.send(Err(format!("cannot spawn {name}: {e}"))).unwrap(),
        };
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let why = format!("{name} exited during start-up ({status}):\n{}", tails());
                return tx.send(Err(why)).unwrap();
            }
            if ready(child.id()) {
                tx.send(Ok(())).unwrap();
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let why = format!("{name} not ready after {} s:\n{}", limit.as_secs(), tails());
                return tx.send(Err(why)).unwrap();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.wait();
        loop {
            std::thread::park();
        }
    });
    if let Err(e) = rx.recv().expect("server thread") {
        panic!("{e}");
    }
}
