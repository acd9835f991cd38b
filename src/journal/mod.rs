//! The eval journal: every answered feature's logits, appended as they arrive, so an
//! interrupted `eval` (SIGKILL, Ctrl-C, a dead server) continues with `--resume`
//! without sending any journaled feature again.
//!
//! Format (little-endian), append-only:
//! - the 8 bytes `BQJRNL03`, `u32 len`, `len` bytes of header JSON (the [`Fingerprint`]:
//!   an object of strings), `u64` checksum of those bytes (CRC-32, zero-extended);
//! - then one record per feature: `u32 len`, `u64` checksum of the payload, and the
//!   payload `u64 unique_id`, `u32 n` (positions), `u32 k`, then
//!   - `k = u32::MAX`, a full record: `n` × f32 start logits, `n` × f32 end logits (the
//!     exact values the server returned, padded positions included, as in
//!     [`crate::logits_io`]);
//!   - otherwise a compact record: f32 start and end logits of position 0, then `k` ×
//!     (`u32` position, f32 value) for the start logits and the same for the end logits:
//!     the first `k` positions of each in the decoder's order ([`best_indexes`](crate::decode::best_indexes)).
//!
//! A run against a model that takes text journals what the model said about each
//! question, whole, in records of their own kinds (`text.rs`).
//!
//! The padding probe's decision is a full record of its own under `unique_id`
//! `u64::MAX` (no feature's): one position, `1.0` for dynamic padding, `0.0` for the full
//! length; it is read back as [`Contents::padding_decision`], not as logits.
//!
//! A compact record holds everything decoding reads when `k` is the n-best size (a
//! fingerprint setting): the candidates of §6.2, their logits and the null score's
//! position 0. It is read back as logits in which every other position holds `f32::MIN`,
//! below every kept value, so the decoder picks the same positions in the same order
//! and the answers are byte-identical. It is written only when that holds (every value
//! finite, every kept one above `f32::MIN`) and saves space (`2k < n`); a journal made
//! for `--save-logits` keeps full records, and a run with `--save-logits` sends the
//! compact records' features again. Compact records keep the journal's writes, a
//! visible part of the client's CPU, small.
//!
//! Records are gathered and written [`WRITE_BYTES`] or [`WRITE_RECORDS`] at a time,
//! whichever comes first, with one `write` call (fewer system calls than one per
//! record), so a killed process leaves at most one torn
//! record at the end and loses at most the records not yet written, which a resumed run
//! simply sends again; reading stops at the first incomplete or mis-checksummed record
//! and [`Journal::resume`] cuts the file back to the last good one. Records left are
//! written by [`Journal::flush`], [`Journal::sync`] and on drop.
//!
//! A journal lives only until its run completes, so only this format is read: a journal
//! of an earlier bertqa (magic `BQJRNL01` or `BQJRNL02`) is refused with an error that
//! says to rerun without `--resume` (or delete it). Records are not fsync'd one by one:
//! the kernel keeps them when the process dies; a machine crash may lose the tail, which
//! is then simply sent again.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::backend::text::TextReply;
use crate::decode::{Candidates, Scores};
use crate::error::{Error, Location, Result};
use crate::types::Logits;

mod fingerprint;
mod text;
pub use fingerprint::Fingerprint;

/// Records gathered before they are written (one `write` call).
pub const WRITE_BYTES: usize = 64 * 1024;

/// Records gathered at most before they are written: what a killed process loses
/// stays a few batches however small the records are (about as many as 64 KiB of full
/// records of 384 positions).
pub const WRITE_RECORDS: u64 = 24;

/// The journal's file name inside the output directory.
pub const FILE_NAME: &str = "journal.bqj";

/// The magic of this format.
const MAGIC: &[u8; 8] = b"BQJRNL03";

/// The magics of the formats of earlier versions, which are not read.
const OLDER_MAGICS: [&[u8; 8]; 2] = [b"BQJRNL01", b"BQJRNL02"];

/// The checksum of the header and of each record: CRC-32 (IEEE), zero-extended.
fn checksum(bytes: &[u8]) -> u64 {
    u64::from(crc32fast::hash(bytes))
}

/// `k` of a full record.
const FULL: u32 = u32::MAX;

/// The `unique_id` (no feature's) of the record that keeps the padding probe's decision:
/// a full record of one position, logit `1.0` for dynamic padding, `0.0` for the full
/// length.
const PADDING_DECISION_ID: u64 = u64::MAX;

/// The most positions a compact record describes (far above any model's sequence), so
/// that a record cannot make the reader allocate more than a few MB per side.
const MAX_COMPACT_POSITIONS: usize = 1 << 20;

/// What a journal held.
#[derive(Debug, Default)]
pub struct Contents {
    /// Logits by unique id (a compact record's as described in the module header).
    pub logits: HashMap<u64, Logits>,
    /// Unique ids whose last record is compact: their logits hold only what decoding
    /// reads.
    pub compact: Vec<u64>,
    /// The padding probe's decision, when journaled (true: dynamic padding).
    pub padding_decision: Option<bool>,
    /// A text model's run: what the model said, by question index.
    pub text: HashMap<u64, TextReply>,
    /// Bytes after the last good record (a torn or corrupt tail), dropped.
    pub torn_bytes: u64,
    /// Length of the good part of the file.
    pub good_len: u64,
}

impl Contents {
    /// What was answered: features' logits, or a text model's questions.
    pub fn answered(&self) -> usize {
        self.logits.len() + self.text.len()
    }
}

/// An open journal, appending.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
    /// Feature records (the padding decision's is not one).
    features: u64,
    /// Records gathered in `buffer`, not yet written.
    gathered: u64,
    /// Of them, feature records.
    gathered_features: u64,
    /// Records not yet written, reused.
    buffer: Vec<u8>,
    /// Compact records of this many candidates where possible (see the module header).
    compact: Option<usize>,
    /// Scratch for ranking candidates.
    scratch: Vec<usize>,
}

impl Journal {
    /// Starts a new journal at `path` (replacing any file there).
    pub fn create(path: &Path, fingerprint: &Fingerprint) -> Result<Journal> {
        let mut file = File::create(path).map_err(|e| Error::io(path, e))?;
        let header = fingerprint.to_json().to_string().into_bytes();
        let mut bytes = Vec::with_capacity(header.len() + 20);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(&checksum(&header).to_le_bytes());
        file.write_all(&bytes).map_err(|e| Error::io(path, e))?;
        Ok(Journal {
            file,
            path: path.to_path_buf(),
            features: 0,
            gathered: 0,
            gathered_features: 0,
            buffer: Vec::new(),
            compact: None,
            scratch: Vec::new(),
        })
    }

    /// Opens an existing journal to continue it: checks that it was written for the same
    /// `fingerprint` (an error naming every difference otherwise), drops a torn tail, and
    /// returns the journaled logits.
    pub fn resume(path: &Path, fingerprint: &Fingerprint) -> Result<(Journal, Contents)> {
        let (recorded, contents) = read(path)?;
        let diffs = recorded.differences(fingerprint);
        if !diffs.is_empty() {
            return Err(Error::input(
                Location::file(path),
                format!(
                    "the journal was written by a different run ({}); rerun with the same \
                     settings, or without `resume` to start over",
                    diffs.join("; ")
                ),
            ));
        }
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        file.set_len(contents.good_len)
            .map_err(|e| Error::io(path, e))?;
        let mut journal = Journal {
            file,
            path: path.to_path_buf(),
            features: contents.answered() as u64,
            gathered: 0,
            gathered_features: 0,
            buffer: Vec::new(),
            compact: None,
            scratch: Vec::new(),
        };
        use std::io::Seek;
        journal
            .file
            .seek(std::io::SeekFrom::End(0))
            .map_err(|e| Error::io(path, e))?;
        Ok((journal, contents))
    }

    /// From now on, writes compact records of the first `k` candidates where they save
    /// space and decode exactly as the logits do (module header): for a run that decodes
    /// with n-best size `k` and keeps no logits.
    pub fn compact_to(&mut self, k: usize) {
        self.compact = Some(k);
    }

    /// The n-best size of the compact records it writes, if it writes any
    /// ([`Journal::compact_to`]).
    pub fn compacts(&self) -> Option<usize> {
        self.compact
    }

    /// For a run that keeps every feature's logits (`--save-logits`): drops from
    /// `contents` the features whose last record is compact (it holds only what decoding
    /// reads) and counts them out of the journal, so that they are sent and journaled
    /// again in full. Returns how many.
    pub fn resend_compact(&mut self, contents: &mut Contents) -> usize {
        for id in &contents.compact {
            contents.logits.remove(id);
        }
        let n = std::mem::take(&mut contents.compact).len();
        self.features = self.features.saturating_sub(n as u64);
        n
    }

    /// Appends one feature's logits in a full record, or in a compact one where the
    /// journal compacts ([`Journal::compact_to`]) and one is exact (written once
    /// [`WRITE_BYTES`] or [`WRITE_RECORDS`] have gathered).
    pub fn append(&mut self, logits: &Logits) -> Result<()> {
        self.append_parts(logits.unique_id, Some(logits), None)
    }

    /// [`Journal::append`] for an answer as the run keeps it: its candidates make the
    /// compact record when ranked for the journal's n-best size (ranked here from the
    /// logits otherwise). An answer without logits whose candidates cannot make a
    /// compact record ([`stands_alone`]) is an error, not a record.
    pub fn append_answer(&mut self, scores: &Scores) -> Result<()> {
        self.append_parts(scores.unique_id(), scores.logits(), scores.candidates())
    }

    /// Appends feature `unique_id`'s record from its logits, its candidates, or both.
    fn append_parts(
        &mut self,
        unique_id: u64,
        logits: Option<&Logits>,
        candidates: Option<&Candidates>,
    ) -> Result<()> {
        // The candidates of a compact record: those given, or ranked here; none when a
        // compact record would not be smaller or exact (module header).
        let owned;
        let compact = match self.compact {
            Some(k) => match (candidates.filter(|c| c.k() == k), logits) {
                (Some(c), _) => stands_alone(c, k).then_some(c),
                (None, Some(l)) => {
                    owned = Candidates::of(l, k, &mut self.scratch);
                    stands_alone(&owned, k).then_some(&owned)
                }
                (None, None) => None,
            },
            None => None,
        };
        let body = match (compact, logits) {
            (Some(c), _) => Body::Compact(c),
            // Logits of unequal lengths (a malformed answer) are kept to the shorter.
            (None, Some(l)) => {
                let n = l.start.len().min(l.end.len());
                Body::Full(&l.start[..n], &l.end[..n])
            }
            (None, None) => {
                return Err(Error::Decode {
                    unique_id,
                    message: "its logits were not kept for a full journal record".into(),
                })
            }
        };
        self.push(unique_id, body)?;
        self.features += 1;
        self.gathered_features += 1;
        self.flush_if_full()
    }

    /// Appends what a text model said about question `question` (its index in the run's
    /// data), read back as [`Contents::text`]; counted as a feature.
    pub fn append_text(&mut self, question: u64, record: &TextReply) -> Result<()> {
        self.push(question, Body::Text(record))?;
        self.features += 1;
        self.gathered_features += 1;
        self.flush_if_full()
    }

    /// Appends the padding probe's decision (true: dynamic padding), read back as
    /// [`Contents::padding_decision`].
    pub fn append_padding_decision(&mut self, dynamic: bool) -> Result<()> {
        let v = if dynamic { 1.0 } else { 0.0 };
        self.push(PADDING_DECISION_ID, Body::Full(&[v], &[v]))?;
        self.flush_if_full()
    }

    /// Gathers one record.
    fn push(&mut self, unique_id: u64, body: Body<'_>) -> Result<()> {
        let record = &mut self.buffer;
        let at = record.len();
        // Length and checksum first, filled in once the payload is there.
        record.resize(at + 12, 0);
        record.extend_from_slice(&unique_id.to_le_bytes());
        match body {
            Body::Compact(c) => {
                let (first_start, first_end) = c.first();
                record.extend_from_slice(&(c.lens().0 as u32).to_le_bytes());
                record.extend_from_slice(&(c.k() as u32).to_le_bytes());
                record.extend_from_slice(&first_start.to_le_bytes());
                record.extend_from_slice(&first_end.to_le_bytes());
                // Room for every (position, logit) pair at once, then filled in place.
                let pairs = c.starts().len() + c.ends().len();
                let from = record.len();
                record.resize(from + 8 * pairs, 0);
                let scores = c.start_scores().chain(c.end_scores());
                for (to, (i, v)) in record[from..].chunks_exact_mut(8).zip(scores) {
                    to[..4].copy_from_slice(&(i as u32).to_le_bytes());
                    to[4..].copy_from_slice(&v.to_le_bytes());
                }
            }
            Body::Text(r) => text::encode(r, record),
            Body::Full(start, end) => {
                let n = start.len();
                record.extend_from_slice(&(n as u32).to_le_bytes());
                record.extend_from_slice(&FULL.to_le_bytes());
                for values in [start, end] {
                    let from = record.len();
                    record.resize(from + 4 * n, 0);
                    for (to, v) in record[from..].chunks_exact_mut(4).zip(values) {
                        to.copy_from_slice(&v.to_le_bytes());
                    }
                }
            }
        }
        let len = (record.len() - at - 12) as u32;
        let sum = checksum(&record[at + 12..]);
        record[at..at + 4].copy_from_slice(&len.to_le_bytes());
        record[at + 4..at + 12].copy_from_slice(&sum.to_le_bytes());
        self.gathered += 1;
        Ok(())
    }

    /// Writes the gathered records once [`WRITE_BYTES`] or [`WRITE_RECORDS`] have
    /// gathered.
    fn flush_if_full(&mut self) -> Result<()> {
        if self.buffer.len() >= WRITE_BYTES || self.gathered >= WRITE_RECORDS {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the gathered records (one `write` call). When that fails they are
    /// dropped and no longer counted (a part written is a torn tail that reading
    /// drops); a resumed run sends them again.
    pub fn flush(&mut self) -> Result<()> {
        if !self.buffer.is_empty() {
            let written = self.file.write_all(&self.buffer);
            self.buffer.clear();
            if let Err(e) = written {
                self.features -= self.gathered_features;
                self.gathered = 0;
                self.gathered_features = 0;
                return Err(Error::io(&self.path, e));
            }
        }
        self.gathered = 0;
        self.gathered_features = 0;
        Ok(())
    }

    /// Features in the journal (journaled before plus appended; the padding decision is
    /// not one).
    pub fn features(&self) -> u64 {
        self.features
    }

    /// Writes the gathered records and flushes the journal to disk (at the end of an
    /// interrupted run).
    pub fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file.sync_data().map_err(|e| Error::io(&self.path, e))
    }

    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What a record holds.
enum Body<'a> {
    /// The start and end logits, as many of each.
    Full(&'a [f32], &'a [f32]),
    /// The candidates.
    Compact(&'a Candidates),
    /// What a text model said about a question.
    Text(&'a TextReply),
}

/// Whether candidates `c` alone make an exact compact record for a journal compacting
/// to `k` (module header): ranked for `k` from finite logits, both sides of one length
/// `n` with `2k < n ≤ 2^20` (what a compact record may describe), and the `k`-th candidate of each side
/// above `f32::MIN`, the value the other positions get back. Decoding then reads nothing
/// else either, so the logits need not be kept.
pub fn stands_alone(c: &Candidates, k: usize) -> bool {
    let (n, m) = c.lens();
    let full = |len: usize, last: Option<(usize, f32)>| {
        len == k && last.is_some_and(|(_, v)| v > f32::MIN)
    };
    c.k() == k
        && c.finite()
        && n == m
        && n > 0
        && n <= MAX_COMPACT_POSITIONS
        && k.saturating_mul(2) < n
        && full(c.starts().len(), c.start_scores().last())
        && full(c.ends().len(), c.end_scores().last())
}

impl Drop for Journal {
    fn drop(&mut self) {
        // Best effort: a record not written is sent again by a resumed run.
        let _ = self.flush();
    }
}

/// Reads a journal: its fingerprint and the good records.
pub fn read(path: &Path) -> Result<(Fingerprint, Contents)> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| Error::io(path, e))?;
    parse(&bytes, path)
}

/// Parses journal bytes; `path` names the file in errors.
pub fn parse(bytes: &[u8], path: &Path) -> Result<(Fingerprint, Contents)> {
    let bad = |what: &str| {
        Error::input(
            Location::file(path),
            format!("not a usable bertqa journal: {what}"),
        )
    };
    let magic = bytes.get(..8).unwrap_or_default();
    if OLDER_MAGICS.iter().any(|m| m.as_slice() == magic) {
        return Err(Error::input(
            Location::file(path),
            "the journal was written by an earlier version of bertqa, in a format this \
             version does not read; rerun without `resume` to start over (or delete it)",
        ));
    }
    if magic != MAGIC {
        return Err(bad("bad magic"));
    }
    if bytes.len() < 12 {
        return Err(bad("truncated header"));
    }
    let len = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    let end = 12 + len;
    if bytes.len() < end + 8 {
        return Err(bad("truncated header"));
    }
    let header = &bytes[12..end];
    let sum = u64::from_le_bytes(bytes[end..end + 8].try_into().expect("8 bytes"));
    if sum != checksum(header) {
        return Err(bad("header checksum mismatch"));
    }
    let fingerprint = serde_json::from_slice::<serde_json::Value>(header)
        .ok()
        .and_then(|v| Fingerprint::from_json(&v))
        .ok_or_else(|| bad("header is not an object of strings"))?;
    let mut contents = Contents::default();
    let mut at = end + 8;
    let mut compact = std::collections::HashSet::new();
    while let Some((record, next)) = record_at(bytes, at) {
        at = next;
        let (l, was_compact) = match record {
            Record::Logits(l, was_compact) => (l, was_compact),
            Record::Text(question, r) => {
                contents.text.insert(question, r);
                continue;
            }
        };
        if l.unique_id == PADDING_DECISION_ID {
            contents.padding_decision = l.start.first().map(|&v| v > 0.5);
            continue;
        }
        if was_compact {
            compact.insert(l.unique_id);
        } else {
            compact.remove(&l.unique_id);
        }
        contents.logits.insert(l.unique_id, l);
    }
    contents.compact = compact.into_iter().collect();
    contents.compact.sort_unstable();
    contents.good_len = at as u64;
    contents.torn_bytes = (bytes.len() - at) as u64;
    Ok((fingerprint, contents))
}

/// What one record holds.
enum Record {
    /// A feature's logits, and whether the record was compact.
    Logits(Logits, bool),
    /// What a text model said about a question (by its index).
    Text(u64, TextReply),
}

/// The record at `at` and the offset after it, or `None` at the end or a bad record.
fn record_at(bytes: &[u8], at: usize) -> Option<(Record, usize)> {
    let head = bytes.get(at..at + 12)?;
    let len = u32::from_le_bytes(head[..4].try_into().ok()?) as usize;
    let sum = u64::from_le_bytes(head[4..12].try_into().ok()?);
    let payload = bytes.get(at + 12..at + 12 + len)?;
    if checksum(payload) != sum || len < 16 {
        return None;
    }
    let word = |i: usize| -> Option<u32> {
        Some(u32::from_le_bytes(payload.get(i..i + 4)?.try_into().ok()?))
    };
    let unique_id = u64::from_le_bytes(payload[..8].try_into().ok()?);
    let n = word(8)? as usize;
    let k = word(12)?;
    let values = &payload[16..];
    let float = |c: &[u8]| f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    let next = at + 12 + len;
    if k == text::WINDOWS || k == text::ANSWER {
        if values.len() != n {
            return None;
        }
        return Some((Record::Text(unique_id, text::decode(k, values)?), next));
    }
    if k == FULL {
        if values.len() != n * 8 {
            return None;
        }
        let floats = |b: &[u8]| -> Vec<f32> { b.chunks_exact(4).map(float).collect() };
        let l = Logits {
            unique_id,
            start: floats(&values[..n * 4]),
            end: floats(&values[n * 4..]),
        };
        return Some((Record::Logits(l, false), next));
    }
    let k = k as usize;
    if n == 0 || n > MAX_COMPACT_POSITIONS || k.checked_mul(2)? >= n || values.len() != 8 + 16 * k {
        return None;
    }
    let mut l = Logits {
        unique_id,
        start: vec![f32::MIN; n],
        end: vec![f32::MIN; n],
    };
    l.start[0] = float(&values[..4]);
    l.end[0] = float(&values[4..8]);
    let pairs = values[8..].chunks_exact(8);
    for (j, pair) in pairs.enumerate() {
        let i = u32::from_le_bytes(pair[..4].try_into().ok()?) as usize;
        let target = if j < k { &mut l.start } else { &mut l.end };
        *target.get_mut(i)? = float(&pair[4..]);
    }
    Some((Record::Logits(l, true), next))
}

#[cfg(test)]
mod tests;
