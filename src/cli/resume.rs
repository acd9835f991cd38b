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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bertqa::decode::Candidates;
use bertqa::journal::{self, Fingerprint, Journal};
use bertqa::pipeline::AnswerNeeds;
use bertqa::types::Logits;

/// The journal keeps the padding probe's decision ([`bertqa::pipeline::PaddingGuard`]) as
/// a record of its own, under this `unique_id` (no feature's): logits `[1.0]` for
/// dynamic padding, `[0.0]` for the full length.
const PADDING_DECISION_ID: u64 = u64::MAX;

/// The journal record of the padding decision.
fn padding_decision_record(dynamic: bool) -> Logits {
    let v = if dynamic { 1.0 } else { 0.0 };
    Logits {
        unique_id: PADDING_DECISION_ID,
        start: vec![v],
        end: vec![v],
    }
}

/// Takes the padding decision an earlier run's journal kept, if any, out of the
/// journaled logits (true: dynamic padding).
pub fn take_padding_decision(journaled: &mut HashMap<u64, Logits>) -> Option<bool> {
    journaled
        .remove(&PADDING_DECISION_ID)
        .and_then(|l| l.start.first().map(|&v| v > 0.5))
}

/// Appends a run's answers and its padding decision to the journal as they come (the
/// journal part of `eval`'s [`bertqa::pipeline::RunObserver`]).
pub struct Recorder {
    journal: Arc<Mutex<Journal>>,
    /// The journal holds the padding decision (from the earlier run, or this one's).
    decision_journaled: AtomicBool,
    /// The journal writes compact records for the run's n-best size: candidates do
    /// where they stand for the logits.
    from_candidates: bool,
}

impl Recorder {
    /// Records into `journal` (shared with the signal handler); `decided`: the journal
    /// already holds the padding decision.
    pub fn new(journal: Arc<Mutex<Journal>>, n_best_size: usize, decided: bool) -> Self {
        let from_candidates = lock(&journal).compacts() == Some(n_best_size);
        Recorder {
            journal,
            decision_journaled: AtomicBool::new(decided),
            from_candidates,
        }
    }

    /// What the journal reads of each answer.
    pub fn needs(&self) -> AnswerNeeds {
        if self.from_candidates {
            AnswerNeeds::Candidates
        } else {
            AnswerNeeds::Logits
        }
    }

    /// Appends a feature's answer.
    pub fn answer(&self, logits: &Logits, candidates: Option<&Candidates>) -> bertqa::Result<()> {
        lock(&self.journal).append_ranked(logits, candidates)
    }

    /// Appends the padding decision.
    pub fn padding_decided(&self, dynamic: bool) -> bertqa::Result<()> {
        self.decision_journaled.store(true, Ordering::Relaxed);
        lock(&self.journal).append_ranked(&padding_decision_record(dynamic), None)
    }

    /// Features in the journal (the padding decision is a record too).
    pub fn features(&self) -> u64 {
        lock(&self.journal).records() - u64::from(self.decision_journaled.load(Ordering::Relaxed))
    }
}

/// The journal's path in an output directory.
pub fn journal_path(dir: &Path) -> PathBuf {
    dir.join(journal::FILE_NAME)
}

/// Opens the journal for a run: continues it with `--resume` (checking the
/// fingerprint), otherwise starts a new one. Returns it with the journaled logits.
pub fn open(
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
        eprintln!(
            "resuming from {}: {} features already answered{torn}",
            path.display(),
            // Features only: the padding probe's decision is a record too.
            contents.logits.len() - usize::from(contents.logits.contains_key(&PADDING_DECISION_ID))
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
pub fn lock(journal: &std::sync::Mutex<Journal>) -> std::sync::MutexGuard<'_, Journal> {
    journal
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Removes the journal after a complete run.
pub fn finish(dir: &Path) -> anyhow::Result<()> {
    let path = journal_path(dir);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(bertqa::Error::io(&path, e).into()),
    }
}

/// A token cancelled at the first SIGINT or SIGTERM; the second one exits the process
/// at once (code 2). The signals are watched by a thread of their own, with
/// its own small runtime, registered before this returns: they are seen whether or not
/// the pipeline's runtime (a current-thread one, driven only inside its `block_on`) is
/// running, for instance while the answers are written.
pub fn stop_on_signals(
    on_quit: impl FnOnce() + Send + 'static,
) -> anyhow::Result<tokio_util::sync::CancellationToken> {
    use tokio::signal::unix::{signal, SignalKind};
    let stop = tokio_util::sync::CancellationToken::new();
    let tx = stop.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Registered here, in the runtime's context, before the caller goes on.
    let (int, mut term) = rt.block_on(async {
        (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()).ok(),
        )
    });
    let mut int = int.map_err(|e| anyhow::anyhow!("cannot watch for interrupts: {e}"))?;
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
                eprintln!("quitting at once; the journal keeps every answered feature (rerun with --resume)");
                std::process::exit(2);
            })
        })?;
    Ok(stop)
}

async fn any_signal(
    int: &mut tokio::signal::unix::Signal,
    term: &mut Option<tokio::signal::unix::Signal>,
) {
    tokio::select! {
        _ = int.recv() => {}
        _ = async {
            match term.as_mut() {
                Some(t) => { t.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
}

/// The fingerprint of the settings every run has (data, questions, tokenizer, windows,
/// decoding); a server run adds the model, its binding and the padding. `data_sha256`:
/// the digest of the data file's bytes as they were read.
pub fn base_fingerprint(
    data_sha256: String,
    limit: Option<usize>,
    shard: Option<bertqa::shard::Shard>,
    questions: usize,
    run: &super::args::PipelineArgs,
    version_2: bool,
    lower_case: bool,
) -> anyhow::Result<Fingerprint> {
    let vocab = run
        .tokenizer
        .tokenizer
        .as_deref()
        .unwrap_or(&run.tokenizer.vocab);
    let d = &run.decode;
    Ok(Fingerprint::default()
        .with("data_sha256", data_sha256)
        .with("limit", limit.map_or("all".to_string(), |n| n.to_string()))
        .with("shard", shard.map_or("all".to_string(), |s| s.to_string()))
        .with("questions", questions)
        .with("tokenizer_sha256", bertqa::sha256::of_file(vocab)?)
        .with("lower_case", lower_case)
        .with("max_seq_length", run.window.max_seq_length)
        .with("doc_stride", run.window.doc_stride)
        .with("max_query_length", run.window.max_query_length)
        .with("n_best_size", d.n_best_size)
        .with("max_answer_length", d.max_answer_length)
        .with("version_2_with_negative", version_2)
        .with("null_score_diff_threshold", d.null_score_diff_threshold)
        .with(
            "postprocess",
            match d.postprocess {
                super::args::Postprocess::Nvidia => "nvidia",
                super::args::Postprocess::Hf => "hf",
            },
        ))
}

/// Adds the model, its binding and the padding to a fingerprint. Padding without the
/// probe (`--dynamic-seq-len`, which can change answers) is a setting of its own.
pub fn model_fingerprint(
    base: Fingerprint,
    binding: &bertqa::backend::Binding,
    padding: bertqa::pipeline::Padding,
    unprobed: bool,
) -> Fingerprint {
    let padding = match padding {
        bertqa::pipeline::Padding::Longest { .. } if unprobed => format!("{padding:?} unprobed"),
        _ => format!("{padding:?}"),
    };
    base.with("model", &binding.model)
        .with("model_version", &binding.version)
        .with(
            "binding",
            serde_json::to_string(binding).unwrap_or_default(),
        )
        .with("padding", padding)
}
