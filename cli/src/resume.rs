//! Nothing lost: `eval`'s journal, `--resume`, Ctrl-C / SIGTERM (`eval` writes the
//! partial results).
//!
//! - Every answered feature's logits are appended to `D/journal.bqj` (see
//!   [`bertqa::journal`]) under a fingerprint of everything that determines the answers.
//! - `--resume` rebuilds the features, takes the journaled ones' logits from the journal
//!   (they are not sent again), sends the rest, and decodes from both: the output files
//!   are byte-identical to an uninterrupted run's (on a dynamic-length model the padding
//!   probe's decision is journaled too and applied again; a run stopped before the probe
//!   decided probes again on the features left). A journal written with other settings
//!   is refused, naming what differs. `--resume` without a journal starts fresh (said on
//!   stderr), so a batch job can always pass it.
//! - The first Ctrl-C (or SIGTERM) stops sending, lets the requests in flight finish
//!   (journaling them), writes the partial results and exits 2 with a summary; a second
//!   one quits at once (the journal still holds everything answered).
//! - A run that fails (server gone, model error) also keeps the journal and writes the
//!   partial results before exiting 2.
//! - After a complete run the journal is removed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bertqa::decode::Scores;
use bertqa::journal::{self, Fingerprint, Journal};
use bertqa::pipeline::AnswerNeeds;

/// Appends a run's answers and its padding decision to the journal as they come (the
/// journal part of `eval`'s [`bertqa::pipeline::RunObserver`]).
pub(crate) struct Recorder {
    journal: Arc<Mutex<Journal>>,
    /// The journal writes compact records for the run's n-best size: candidates do
    /// where they stand for the logits.
    from_candidates: bool,
}

impl Recorder {
    /// Records into `journal` (shared with the signal handler).
    pub(crate) fn new(journal: Arc<Mutex<Journal>>, n_best_size: usize) -> Self {
        let from_candidates = lock(&journal).compacts() == Some(n_best_size);
        Recorder {
            journal,
            from_candidates,
        }
    }

    /// What the journal reads of each answer.
    pub(crate) fn needs(&self) -> AnswerNeeds {
        if self.from_candidates {
            AnswerNeeds::Candidates
        } else {
            AnswerNeeds::Logits
        }
    }

    /// Appends a feature's answer.
    pub(crate) fn answer(&self, scores: &Scores) -> bertqa::Result<()> {
        lock(&self.journal).append_answer(scores)
    }

    /// Appends the padding decision.
    pub(crate) fn padding_decided(&self, dynamic: bool) -> bertqa::Result<()> {
        lock(&self.journal).append_padding_decision(dynamic)
    }
}

/// The journal's path in an output directory.
pub(crate) fn journal_path(dir: &Path) -> PathBuf {
    dir.join(journal::FILE_NAME)
}

/// Opens the journal for a run: continues it with `--resume` (checking the
/// fingerprint), otherwise starts a new one. Returns it with the journaled logits.
pub(crate) fn open(
    dir: &Path,
    resume: bool,
    fingerprint: &Fingerprint,
) -> anyhow::Result<(Journal, journal::Contents)> {
    let path = journal_path(dir);
    let exists = path.exists();
    if resume && exists {
        let (j, contents) = Journal::resume(&path, fingerprint)?;
        let torn = if contents.torn_bytes > 0 {
            format!(
                "; a torn record at the end ({} bytes) was dropped",
                contents.torn_bytes
            )
        } else {
            String::new()
        };
        let answered = if contents.text.is_empty() {
            format!("{} features", contents.logits.len())
        } else {
            format!("{} questions", contents.text.len())
        };
        eprintln!(
            "resuming from {}: {answered} already answered{torn}",
            path.display()
        );
        return Ok((j, contents));
    }
    if resume {
        eprintln!(
            "note: --resume: no journal in {}; starting from the beginning",
            dir.display()
        );
    } else if exists {
        eprintln!(
            "note: replacing the journal of an earlier interrupted run in {} (pass --resume to continue it)",
            dir.display()
        );
    }
    Ok((Journal::create(&path, fingerprint)?, Default::default()))
}

/// The journal behind a lock shared with the signal handler (a panic elsewhere does
/// not stop it from being written).
pub(crate) fn lock(journal: &std::sync::Mutex<Journal>) -> std::sync::MutexGuard<'_, Journal> {
    journal
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Removes the journal after a complete run.
pub(crate) fn finish(dir: &Path) -> anyhow::Result<()> {
    let path = journal_path(dir);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(bertqa::Error::io(&path, e).into()),
    }
}

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

/// The fingerprint of the settings every run has (data, questions, tokenizer, windows,
/// decoding); a server run adds the model, its binding and the padding. `data_sha256`:
/// the digest of the data file's bytes as they were read.
pub(crate) fn base_fingerprint(
    data_sha256: String,
    limit: Option<usize>,
    shard: Option<bertqa::shard::Shard>,
    questions: usize,
    features: &bertqa::features::FeatureConfig,
    decode: &bertqa::decode::DecodeConfig,
    tokenizer: Option<&std::path::Path>,
) -> anyhow::Result<Fingerprint> {
    let d = decode;
    let mut f = Fingerprint::default()
        .with("data_sha256", data_sha256)
        .with("limit", limit.map_or("all".to_string(), |n| n.to_string()))
        .with("shard", shard.map_or("all".to_string(), |s| s.to_string()))
        .with("questions", questions);
    // `None`: the run reads no vocabulary (a text model of the answer contract).
    if let Some(vocab) = tokenizer {
        f = f
            .with("tokenizer_sha256", bertqa::sha256::of_file(vocab)?)
            .with("lower_case", d.lower_case);
    }
    Ok(f.with("max_seq_length", features.max_seq_length)
        .with("doc_stride", features.doc_stride)
        .with("max_query_length", features.max_query_length)
        .with("n_best_size", d.n_best_size)
        .with("max_answer_length", d.max_answer_length)
        .with("version_2_with_negative", d.version_2_with_negative)
        .with("null_score_diff_threshold", d.null_score_diff_threshold)
        .with("postprocess", d.postprocess.as_str()))
}

/// Adds the model and its binding to a fingerprint, and the padding of a model that
/// takes token ids (`padding`: how it pads, and whether without the probe; `None`: the
/// server tokenizes). Padding without the probe (`--dynamic-seq-len`, which can change
/// answers) is a setting of its own.
pub(crate) fn model_fingerprint(
    base: Fingerprint,
    model: &bertqa::Model,
    padding: Option<(bertqa::pipeline::Padding, bool)>,
) -> Fingerprint {
    let f = base
        .with("model", model.name())
        .with("model_version", model.version())
        .with("binding", model.to_json().to_string());
    match padding {
        None => f,
        Some((padding, unprobed)) => {
            let padding = match padding {
                bertqa::pipeline::Padding::Longest { .. } if unprobed => {
                    format!("{padding:?} unprobed")
                }
                _ => format!("{padding:?}"),
            };
            f.with("padding", padding)
        }
    }
}
