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

use crate::decode::Candidates;
use crate::error::{Error, Location, Result};
use crate::types::Logits;

mod fingerprint;
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
    /// Bytes after the last good record (a torn or corrupt tail), dropped.
    pub torn_bytes: u64,
    /// Length of the good part of the file.
    pub good_len: u64,
}

/// An open journal, appending.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
    records: u64,
    /// Records gathered in `buffer`, not yet written.
    gathered: u64,
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
            records: 0,
            gathered: 0,
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
            records: contents.logits.len() as u64,
            gathered: 0,
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

    /// Counts `n` fewer records: journaled features that will be sent (and journaled)
    /// again.
    pub fn uncount(&mut self, n: u64) {
        self.records = self.records.saturating_sub(n);
    }

    /// Appends one feature's logits (written once [`WRITE_BYTES`] or [`WRITE_RECORDS`]
    /// have gathered).
    pub fn append(&mut self, logits: &Logits) -> Result<()> {
        self.append_ranked(logits, None)
    }

    /// [`Journal::append`] with the logits' candidates when they were ranked already
    /// (used for a compact record when ranked for the journal's n-best size). Where the
    /// candidates stand alone ([`stands_alone`]) the logits may be empty: the record is
    /// made from the candidates only.
    pub fn append_ranked(&mut self, logits: &Logits, ranked: Option<&Candidates>) -> Result<()> {
        // The candidates of a compact record: those given, or ranked here; none when a
        // compact record would not be smaller or exact (module header). Logits of
        // unequal lengths (a malformed answer) are kept whole.
        let owned;
        let compact = match self.compact {
            Some(k) => match ranked.filter(|c| c.k() == k) {
                Some(c) => stands_alone(c, k).then_some(c),
                None => {
                    owned = Candidates::of(logits, k, &mut self.scratch);
                    stands_alone(&owned, k).then_some(&owned)
                }
            },
            None => None,
        };
        let n = match compact {
            Some(c) => c.lens().0,
            None => {
                let lens = (logits.start.len(), logits.end.len());
                if ranked.is_some_and(|c| c.lens() != lens) {
                    return Err(Error::Decode {
                        unique_id: logits.unique_id,
                        message: "its logits were not kept for a full journal record".into(),
                    });
                }
                lens.0.min(lens.1)
            }
        };
        let (start, end) = (
            &logits.start[..n.min(logits.start.len())],
            &logits.end[..n.min(logits.end.len())],
        );
        let record = &mut self.buffer;
        let at = record.len();
        // Length and checksum first, filled in once the payload is there.
        record.resize(at + 12, 0);
        record.extend_from_slice(&logits.unique_id.to_le_bytes());
        record.extend_from_slice(&(n as u32).to_le_bytes());
        match compact {
            Some(c) => {
                let (first_start, first_end) = c.first();
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
            None => {
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
        self.records += 1;
        self.gathered += 1;
        if record.len() >= WRITE_BYTES || self.gathered >= WRITE_RECORDS {
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
                self.records -= self.gathered;
                self.gathered = 0;
                return Err(Error::io(&self.path, e));
            }
        }
        self.gathered = 0;
        Ok(())
    }

    /// Records in the journal (journaled before plus appended).
    pub fn records(&self) -> u64 {
        self.records
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
             version does not read; rerun without --resume to start over (or delete it)",
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
    while let Some((l, was_compact, next)) = record_at(bytes, at) {
        if was_compact {
            compact.insert(l.unique_id);
        } else {
            compact.remove(&l.unique_id);
        }
        contents.logits.insert(l.unique_id, l);
        at = next;
    }
    contents.compact = compact.into_iter().collect();
    contents.compact.sort_unstable();
    contents.good_len = at as u64;
    contents.torn_bytes = (bytes.len() - at) as u64;
    Ok((fingerprint, contents))
}

/// The record at `at` (its logits, whether it was compact) and the offset after it, or
/// `None` at the end or a bad record.
fn record_at(bytes: &[u8], at: usize) -> Option<(Logits, bool, usize)> {
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
        return Some((l, false, next));
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
    Some((l, true, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::best_indexes;

    fn logits(id: u64, n: usize) -> Logits {
        Logits {
            unique_id: id,
            start: (0..n).map(|i| i as f32 * 0.5 - 1.0).collect(),
            end: (0..n).map(|i| -(i as f32) * 0.25).collect(),
        }
    }

    #[test]
    fn records_are_written_in_groups_and_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let fp = Fingerprint::default().with("model", "m");
        let mut j = Journal::create(&path, &fp).unwrap();
        let header = std::fs::metadata(&path).unwrap().len();
        let record = (12 + 16 + 384 * 8) as u64;
        j.append(&logits(1_000_000_000, 384)).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            header,
            "gathered, not written"
        );
        let group = WRITE_BYTES.div_ceil(record as usize) as u64;
        for id in 1..group + 1 {
            j.append(&logits(1_000_000_000 + id, 384)).unwrap();
        }
        // The first `group` records reached WRITE_BYTES and were written in one go.
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            header + group * record
        );
        assert_eq!(j.records(), group + 1);
        j.flush().unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            header + (group + 1) * record
        );
        j.append(&logits(1_000_000_999, 384)).unwrap();
        j.sync().unwrap();
        let (_, c) = read(&path).unwrap();
        assert_eq!(c.logits.len() as u64, group + 2);
        assert_eq!(c.logits[&1_000_000_999].end, logits(1_000_000_999, 384).end);

        // Small records: written every WRITE_RECORDS records.
        let small = (12 + 16 + 8 * 8) as u64;
        let at = std::fs::metadata(&path).unwrap().len();
        for id in 0..WRITE_RECORDS - 1 {
            j.append(&logits(2_000_000_000 + id, 8)).unwrap();
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), at);
        j.append(&logits(2_000_000_999, 8)).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            at + WRITE_RECORDS * small
        );
    }

    #[test]
    fn round_trip_torn_tail_and_fingerprint_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let fp = Fingerprint::default()
            .with("model", "m")
            .with("doc_stride", 128);
        let mut j = Journal::create(&path, &fp).unwrap();
        for id in 0..3 {
            j.append(&logits(1_000_000_000 + id, 7)).unwrap();
        }
        drop(j);
        let full = std::fs::read(&path).unwrap();
        // Tear the last record in the middle.
        std::fs::write(&path, &full[..full.len() - 5]).unwrap();
        let (mut j, c) = Journal::resume(&path, &fp).unwrap();
        assert_eq!(c.logits.len(), 2);
        assert_eq!(c.torn_bytes, (12 + 16 + 7 * 8 - 5) as u64);
        assert_eq!(
            c.logits[&1_000_000_001].start,
            logits(1_000_000_001, 7).start
        );
        j.append(&logits(1_000_000_002, 7)).unwrap();
        drop(j);
        // The torn bytes were cut away, so the re-appended record reads back.
        assert_eq!(std::fs::read(&path).unwrap(), full);
        // A flipped bit in a record drops it and everything after it.
        let mut corrupt = full.clone();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        let (_, c) = parse(&corrupt, &path).unwrap();
        assert_eq!(c.logits.len(), 2);

        let other = Fingerprint::default()
            .with("model", "m2")
            .with("doc_stride", 128);
        let e = Journal::resume(&path, &other).unwrap_err().to_string();
        assert!(
            e.contains("model: \"m\" in the journal, \"m2\" now") && !e.contains("doc_stride"),
            "{e}"
        );
        let e = parse(b"garbage!garbage", &path).unwrap_err().to_string();
        assert!(e.contains("bad magic"), "{e}");
    }

    /// A journal of an earlier version's format is refused with an error naming the
    /// file and what to do; a new journal has this format's magic.
    #[test]
    fn earlier_format_journals_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let fp = Fingerprint::default().with("model", "m");
        for magic in OLDER_MAGICS {
            let header = fp.to_json().to_string().into_bytes();
            let mut bytes = magic.to_vec();
            bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&header);
            bytes.extend_from_slice(&checksum(&header).to_le_bytes());
            std::fs::write(&path, &bytes).unwrap();
            let e = Journal::resume(&path, &fp).unwrap_err().to_string();
            assert!(e.contains(&path.display().to_string()), "{e}");
            assert!(e.contains("earlier version"), "{e}");
            assert!(e.contains("without --resume"), "{e}");
        }
        let fresh = dir.path().join("new.bqj");
        Journal::create(&fresh, &fp).unwrap();
        assert_eq!(&std::fs::read(&fresh).unwrap()[..8], MAGIC);
    }

    /// Random logits with many ties (a few distinct values), as the decoder ranks them.
    fn tied_logits(id: u64, n: usize, seed: u64) -> Logits {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 9) as f32 * 0.75 - 3.0
        };
        Logits {
            unique_id: id,
            start: (0..n).map(|_| next()).collect(),
            end: (0..n).map(|_| next()).collect(),
        }
    }

    /// A compact record reads back as logits whose first `k` candidates (positions and
    /// values, in order) and position 0 equal the original's, for any `k` and length,
    /// ties included; it is written only where it is smaller.
    #[test]
    fn compact_records_keep_what_decoding_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let fp = Fingerprint::default().with("n_best_size", 3);
        let mut written = Vec::new();
        for (case, (n, k)) in [(64, 20), (41, 20), (40, 20), (7, 3), (384, 20), (200, 1)]
            .into_iter()
            .enumerate()
        {
            let mut j = Journal::create(&path, &fp).unwrap();
            j.compact_to(k);
            let mut originals = Vec::new();
            for seed in 0..20u64 {
                let l = tied_logits(1_000_000_000 + seed, n, seed * 31 + case as u64);
                j.append(&l).unwrap();
                originals.push(l);
            }
            drop(j);
            let (_, c) = read(&path).unwrap();
            let compact = 2 * k < n;
            assert_eq!(c.compact.len(), if compact { 20 } else { 0 }, "n {n} k {k}");
            for l in &originals {
                let got = &c.logits[&l.unique_id];
                assert_eq!((got.start.len(), got.end.len()), (n, n));
                assert_eq!((got.start[0], got.end[0]), (l.start[0], l.end[0]));
                for (a, b) in [(&l.start, &got.start), (&l.end, &got.end)] {
                    let (mut ta, mut tb) = (Vec::new(), Vec::new());
                    best_indexes(a, k, &mut ta);
                    best_indexes(b, k, &mut tb);
                    assert_eq!(ta, tb, "n {n} k {k}");
                    assert!(ta.iter().all(|&i| a[i] == b[i]));
                }
                if !compact {
                    assert_eq!(got, l);
                }
            }
            written.push(std::fs::metadata(&path).unwrap().len());
        }
        // 384 positions, 20 candidates: about a sixth of the full record's bytes.
        let header = std::fs::metadata(&path).unwrap().len() - 20 * (12 + 16 + 8 + 16);
        assert_eq!(written[4], header + 20 * (12 + 16 + 8 + 16 * 20));
    }

    /// Records of logits ranked beforehand are the bytes of records ranked by the
    /// journal; candidates for another size are ranked again. Candidates that stand
    /// alone make the same records without the logits; others need the logits, and
    /// their absence is an error, not a record.
    #[test]
    fn ranked_appends_write_the_same_records() {
        let dir = tempfile::tempdir().unwrap();
        let fp = Fingerprint::default();
        let (a, b, c) = (
            dir.path().join("a.bqj"),
            dir.path().join("b.bqj"),
            dir.path().join("c.bqj"),
        );
        let (mut ja, mut jb, mut jc) = (
            Journal::create(&a, &fp).unwrap(),
            Journal::create(&b, &fp).unwrap(),
            Journal::create(&c, &fp).unwrap(),
        );
        ja.compact_to(4);
        jb.compact_to(4);
        jc.compact_to(4);
        let mut scratch = Vec::new();
        let mut alone = 0;
        for seed in 0..30u64 {
            let mut l = tied_logits(seed, 8 + seed as usize, seed);
            if seed % 7 == 3 {
                l.end[2] = f32::INFINITY;
            }
            ja.append(&l).unwrap();
            let k = if seed % 5 == 0 { 3 } else { 4 };
            let ranked = Candidates::of(&l, k, &mut scratch);
            jb.append_ranked(&l, Some(&ranked)).unwrap();
            let empty = Logits {
                unique_id: l.unique_id,
                start: Vec::new(),
                end: Vec::new(),
            };
            if stands_alone(&ranked, 4) {
                alone += 1;
                jc.append_ranked(&empty, Some(&ranked)).unwrap();
            } else {
                let err = jc.append_ranked(&empty, Some(&ranked)).unwrap_err();
                assert!(err.to_string().contains("not kept"), "{err}");
                jc.append_ranked(&l, Some(&ranked)).unwrap();
            }
        }
        assert!((10..30).contains(&alone), "{alone}");
        drop((ja, jb, jc));
        let (ra, rb) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        assert!(ra == rb);
        assert!(ra == std::fs::read(&c).unwrap());
        let (_, c) = read(&a).unwrap();
        assert!(c.compact.len() > 10, "{}", c.compact.len());
    }

    /// A compact record claiming more positions than any model has is a bad record (the
    /// reader stops there), not an allocation of gigabytes.
    #[test]
    fn a_compact_record_claiming_huge_lengths_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let fp = Fingerprint::default();
        let mut j = Journal::create(&path, &fp).unwrap();
        j.compact_to(1);
        j.append(&tied_logits(7, 8, 7)).unwrap();
        drop(j);
        let good = std::fs::read(&path).unwrap();
        let mut payload = 9u64.to_le_bytes().to_vec();
        payload.extend_from_slice(&u32::MAX.wrapping_sub(1).to_le_bytes()); // n
        payload.extend_from_slice(&1u32.to_le_bytes()); // k
        payload.extend_from_slice(&[0; 8 + 16]);
        let mut bytes = good.clone();
        bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&checksum(&payload).to_le_bytes());
        bytes.extend_from_slice(&payload);
        let (_, c) = parse(&bytes, &path).unwrap();
        assert_eq!(c.compact, vec![7]);
        assert_eq!(c.logits.len(), 1);
        assert_eq!(c.good_len, good.len() as u64);
    }

    /// Non-finite values, or candidates at `f32::MIN`, keep the record full; so does a
    /// journal not asked for compact records. A later full record of a feature replaces
    /// its compact one.
    #[test]
    fn compact_records_only_where_exact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let fp = Fingerprint::default();
        let mut j = Journal::create(&path, &fp).unwrap();
        let plain = tied_logits(1, 64, 1);
        j.append(&plain).unwrap(); // not asked: full
        j.compact_to(2);
        let mut nan = tied_logits(2, 64, 2);
        nan.end[40] = f32::NAN;
        let mut inf = tied_logits(3, 64, 3);
        inf.start[3] = f32::NEG_INFINITY;
        let low = Logits {
            unique_id: 4,
            start: vec![f32::MIN; 64],
            end: vec![0.0; 64],
        };
        let fine = tied_logits(5, 64, 5);
        for l in [&nan, &inf, &low, &fine] {
            j.append(l).unwrap();
        }
        drop(j);
        let (mut j, c) = Journal::resume(&path, &fp).unwrap();
        assert_eq!(c.compact, vec![5]);
        for l in [&plain, &nan, &inf, &low] {
            let got = &c.logits[&l.unique_id];
            assert_eq!(got.start.len(), l.start.len());
            for (a, b) in got
                .start
                .iter()
                .chain(&got.end)
                .zip(l.start.iter().chain(&l.end))
            {
                assert!(a == b || (a.is_nan() && b.is_nan()));
            }
        }
        // Sent again (for --save-logits) and journaled in full: no longer compact.
        j.append(&fine).unwrap();
        drop(j);
        let (_, c) = read(&path).unwrap();
        assert!(c.compact.is_empty());
        assert_eq!(c.logits[&5], fine);
    }
}
