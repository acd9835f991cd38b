//! The threads a client's async calls run on, kept from one call to the next: a run
//! must not run on the caller's executor, and starting a thread per call costs more
//! than a one-question call itself (docs/performance.md, "A single `Client.ask`").
//!
//! Contract: a call takes a waiting thread, or starts one when none waits, so calls
//! never wait for each other; a thread left waiting [`KEEP_ALIVE`] ends (unless a call
//! has just counted on it), and so do all once the client is dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{Error, Result};

type Job = Box<dyn FnOnce() + Send>;

/// How long a thread waits for the next call before it ends: calls in a burst reuse it,
/// an idle client keeps none.
const KEEP_ALIVE: Duration = Duration::from_secs(2);

pub(crate) struct Workers {
    jobs: Sender<Job>,
    queue: Arc<Mutex<Receiver<Job>>>,
    /// Threads that finished a job and wait for the next, less those a call has taken.
    idle: Arc<AtomicUsize>,
}

impl Workers {
    pub(crate) fn new() -> Workers {
        let (jobs, queue) = channel();
        Workers {
            jobs,
            queue: Arc::new(Mutex::new(queue)),
            idle: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Runs `job` on a waiting thread, or on a new one when none waits.
    pub(crate) fn run(&self, job: impl FnOnce() + Send + 'static) -> Result<()> {
        let taken = self
            .idle
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if !taken {
            let (queue, idle) = (self.queue.clone(), self.idle.clone());
            std::thread::Builder::new()
                .name("bertqa-run".into())
                .spawn(move || work(&queue, &idle))
                .map_err(|e| Error::Config(format!("cannot start a run's thread: {e}")))?;
        }
        self.jobs
            .send(Box::new(job))
            .map_err(|_| Error::Config("the client's threads are gone".into()))
    }
}

/// A thread's life: jobs one after another, until it has waited [`KEEP_ALIVE`] with no
/// call counting on it, or the client is dropped.
fn work(queue: &Mutex<Receiver<Job>>, idle: &AtomicUsize) {
    loop {
        let next = match queue.lock() {
            Ok(q) => q.recv_timeout(KEEP_ALIVE),
            Err(_) => return,
        };
        match next {
            Ok(job) => {
                job();
                idle.fetch_add(1, Ordering::SeqCst);
            }
            Err(RecvTimeoutError::Disconnected) => return,
            // Leave only with a waiting thread's place no call has taken.
            Err(RecvTimeoutError::Timeout) => {
                let left =
                    idle.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
                if left.is_ok() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    #[test]
    fn calls_at_once_each_get_a_thread_and_threads_are_kept() {
        let workers = Workers::new();
        // Four jobs that only finish together: each needs a thread of its own.
        let barrier = Arc::new(Barrier::new(5));
        let (done, finished) = channel();
        for _ in 0..4 {
            let (b, done) = (barrier.clone(), done.clone());
            workers
                .run(move || {
                    b.wait();
                    done.send(std::thread::current().id()).unwrap();
                })
                .unwrap();
        }
        barrier.wait();
        let first: std::collections::HashSet<_> =
            (0..4).map(|_| finished.recv().unwrap()).collect();
        assert_eq!(first.len(), 4);
        // Once they wait again, a later call runs on one of them.
        while workers.idle.load(Ordering::SeqCst) < 4 {
            std::thread::yield_now();
        }
        let done = done.clone();
        workers
            .run(move || done.send(std::thread::current().id()).unwrap())
            .unwrap();
        assert!(first.contains(&finished.recv().unwrap()));
    }
}
