//! Nothing lost: an evaluation's journal, resuming from it, and its fingerprint.
//!
//! - Every answered feature's logits (a text model's reply, whole) are appended to
//!   `DIR/journal.bqj` ([`crate::journal`]) under a fingerprint of everything that
//!   determines the answers.
//! - Resuming ([`EvalOptions::resume`](super::EvalOptions::resume)) rebuilds the
//!   windows, takes the journaled ones' logits from the journal (they are not sent
//!   again), sends the rest, and decodes from both: the files are byte-identical to an
//!   uninterrupted run's (on a dynamic-length model the padding probe's decision is
//!   journaled too and applied again). A journal written with other settings is refused,
//!   naming what differs; resuming without a journal starts fresh (said in a note), so a
//!   batch job can always ask for it.
//! - A run that stops (on request) or fails keeps the journal and writes its partial
//!   results ([`super::partial`]); after a complete run the journal is removed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::EvalHooks;
use crate::decode::{DecodeConfig, Scores};
use crate::error::{Error, Result};
use crate::features::FeatureConfig;
use crate::journal::{self, Fingerprint, Journal};
use crate::pipeline::{AnswerNeeds, Padding};
use crate::shard::Shard;

/// The journal of a running evaluation, as its caller may hold it
/// ([`EvalHooks::on_journal`]): a process that must quit at once (a second interrupt)
/// writes what the journal gathered with [`flush_now`](Self::flush_now) first.
#[derive(Clone)]
pub struct JournalHandle(pub(crate) Arc<Mutex<Journal>>);

impl JournalHandle {
    /// Writes the records gathered so far, unless the journal is in a write of its own
    /// (never waits: a quit must not hang on it).
    pub fn flush_now(&self) {
        if let Ok(mut j) = self.0.try_lock() {
            let _ = j.flush();
        }
    }
}

impl std::fmt::Debug for JournalHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JournalHandle")
    }
}

/// Appends a run's answers and its padding decision to the journal as they come.
pub(crate) struct Recorder {
    journal: Arc<Mutex<Journal>>,
    /// The journal writes compact records for the run's n-best size: candidates do
    /// where they stand for the logits.
    from_candidates: bool,
}

impl Recorder {
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

    pub(crate) fn answer(&self, scores: &Scores) -> Result<()> {
        lock(&self.journal).append_answer(scores)
    }

    pub(crate) fn padding_decided(&self, dynamic: bool) -> Result<()> {
        lock(&self.journal).append_padding_decision(dynamic)
    }
}

/// The journal's path in an output directory.
fn journal_path(dir: &Path) -> PathBuf {
    dir.join(journal::FILE_NAME)
}

/// Opens the journal of a run: continued when `resume` (checking the fingerprint),
/// otherwise a new one. Returns it with what it already holds.
pub(crate) fn open(
    dir: &Path,
    resume: bool,
    fingerprint: &Fingerprint,
    hooks: &dyn EvalHooks,
) -> Result<(Journal, journal::Contents)> {
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
        hooks.note(&format!(
            "resuming from {}: {answered} already answered{torn}",
            path.display()
        ));
        return Ok((j, contents));
    }
    if resume {
        hooks.note(&format!(
            "note: `resume`: no journal in {}; starting from the beginning",
            dir.display()
        ));
    } else if exists {
        hooks.note(&format!(
            "note: replacing the journal of an earlier interrupted run in {} (pass `resume` to continue it)",
            dir.display()
        ));
    }
    Ok((Journal::create(&path, fingerprint)?, Default::default()))
}

/// The journal behind a lock shared with the caller's quit (a panic elsewhere does not
/// stop it from being written).
pub(crate) fn lock(journal: &Mutex<Journal>) -> MutexGuard<'_, Journal> {
    journal
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Removes the journal after a complete run.
pub(crate) fn remove(dir: &Path) -> Result<()> {
    let path = journal_path(dir);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// The fingerprint of the settings every run has (data, questions, tokenizer, windows,
/// decoding); a server run adds the model, its binding and the padding. `data_sha256`:
/// the digest of the data's bytes as they were read; `tokenizer`: the vocabulary or
/// tokenizer.json read (`None`: the run reads none).
pub(crate) fn base_fingerprint(
    data_sha256: &str,
    limit: Option<usize>,
    shard: Option<Shard>,
    questions: usize,
    features: &FeatureConfig,
    decode: &DecodeConfig,
    tokenizer: Option<&Path>,
) -> Result<Fingerprint> {
    let d = decode;
    let mut f = Fingerprint::default()
        .with("data_sha256", data_sha256)
        .with("limit", limit.map_or("all".to_string(), |n| n.to_string()))
        .with("shard", shard.map_or("all".to_string(), |s| s.to_string()))
        .with("questions", questions);
    if let Some(vocab) = tokenizer {
        f = f
            .with("tokenizer_sha256", crate::sha256::of_file(vocab)?)
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
/// server tokenizes). Padding without the probe (which can change answers) is a setting
/// of its own.
pub(crate) fn model_fingerprint(
    base: Fingerprint,
    model: &crate::backend::Model,
    padding: Option<(Padding, bool)>,
) -> Fingerprint {
    let f = base
        .with("model", model.name())
        .with("model_version", model.version())
        .with("binding", model.to_json().to_string());
    match padding {
        None => f,
        Some((padding, unprobed)) => {
            let padding = match padding {
                Padding::Longest { .. } if unprobed => format!("{padding:?} unprobed"),
                _ => format!("{padding:?}"),
            };
            f.with("padding", padding)
        }
    }
}
