//! The journal's tests: writing in groups, round trips, torn tails, compact records.

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
    assert_eq!(j.features(), group + 1);
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

/// The padding decision is a record of its own: read back as the decision, neither
/// a feature's logits nor counted as a feature, the last one written winning.
#[test]
fn the_padding_decision_is_kept_apart_from_the_features() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let fp = Fingerprint::default();
    let mut j = Journal::create(&path, &fp).unwrap();
    j.compact_to(2);
    j.append(&logits(1, 64)).unwrap();
    j.append_padding_decision(true).unwrap();
    j.append(&logits(2, 64)).unwrap();
    assert_eq!(j.features(), 2);
    drop(j);
    let (mut j, c) = Journal::resume(&path, &fp).unwrap();
    assert_eq!(c.padding_decision, Some(true));
    assert_eq!(c.logits.len(), 2);
    assert_eq!(c.compact, vec![1, 2]);
    assert_eq!(j.features(), 2);
    j.append_padding_decision(false).unwrap();
    drop(j);
    let (_, c) = read(&path).unwrap();
    assert_eq!(c.padding_decision, Some(false));
    let (mut j, mut c) = Journal::resume(&path, &fp).unwrap();
    assert_eq!(j.resend_compact(&mut c), 2);
    assert!(c.logits.is_empty() && c.compact.is_empty());
    assert_eq!(j.features(), 0);
    let fresh = dir.path().join("fresh.bqj");
    drop(Journal::create(&fresh, &fp).unwrap());
    assert_eq!(read(&fresh).unwrap().1.padding_decision, None);
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
        assert!(e.contains("without `resume`"), "{e}");
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
/// an answer without them is an error, not a record.
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
        jb.append_answer(&Scores::Logits {
            logits: l.clone(),
            candidates: Some(ranked.clone()),
        })
        .unwrap();
        let only = Scores::Candidates {
            unique_id: l.unique_id,
            candidates: ranked.clone(),
        };
        if stands_alone(&ranked, 4) {
            alone += 1;
            jc.append_answer(&only).unwrap();
        } else {
            let err = jc.append_answer(&only).unwrap_err();
            assert!(err.to_string().contains("not kept"), "{err}");
            jc.append_answer(&Scores::of_logits(l.clone())).unwrap();
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
