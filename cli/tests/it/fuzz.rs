//! Replays the inputs kept from fuzzing (`tests/fixtures/fuzz/<target>/`: crashes found
//! and fixed, and a few corpus entries that reach deep) through the fuzz harnesses
//! (`fuzz/harness.rs`, shared with the cargo-fuzz targets run by `scripts/fuzz.sh`),
//! plus a fixed-seed batch of random inputs. A panic fails the test.

#[path = "../../../fuzz/harness.rs"]
mod harness;

use crate::common::root;

fn replay(target: &str, harness: fn(&[u8])) {
    let dir = root().join("tests/fixtures/fuzz").join(target);
    // A fixed-seed xorshift for the mutations and random inputs below.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let r = std::panic::catch_unwind(|| harness(&bytes));
        assert!(r.is_ok(), "{target}: {} panics", path.display());
        n += 1;
        // Each kept input with one byte changed, 100 times (a damaged file of the
        // format, which random bytes seldom make).
        for i in 0..100 {
            let mut damaged = bytes.clone();
            if damaged.is_empty() {
                break;
            }
            let at = (next() % damaged.len() as u64) as usize;
            damaged[at] = next() as u8;
            let r = std::panic::catch_unwind(|| harness(&damaged));
            assert!(
                r.is_ok(),
                "{target}: {} with byte {at} changed ({i}) panics",
                path.display()
            );
        }
    }
    assert!(n > 0, "no inputs in {}", dir.display());
    // Random bytes, lengths 0..2048.
    for i in 0..300 {
        let len = (next() % 2048) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let r = std::panic::catch_unwind(|| harness(&bytes));
        assert!(r.is_ok(), "{target}: random input {i} panics");
    }
}

#[test]
fn kept_squad_reader_inputs_do_not_panic() {
    replay("squad_reader", harness::squad_reader);
}

#[test]
fn kept_features_inputs_do_not_panic() {
    replay("features", harness::features);
}

#[test]
fn kept_decode_inputs_do_not_panic() {
    replay("decode", harness::decode);
}

#[test]
fn kept_hf_rows_inputs_do_not_panic() {
    replay("hf_rows", harness::hf_rows);
}

#[test]
fn kept_mrqa_inputs_do_not_panic() {
    replay("mrqa", harness::mrqa);
}

#[test]
fn kept_parquet_inputs_do_not_panic() {
    replay("parquet", harness::parquet);
}

#[test]
fn kept_any_data_inputs_do_not_panic() {
    replay("any_data", harness::any_data);
}
