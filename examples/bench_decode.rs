//! Decoding + scoring benchmark on the synthetic SQuAD-dev-sized input written by
//! scripts/bench/bench_decode.py (run it through scripts/bench/bench_decode.sh).
//!
//! Usage: `bench_decode DIR [REPEATS]`. Loads everything first, then times, single
//! threaded, the whole-dataset `decode` (hf rules, so the predictions can be compared
//! with transformers' byte for byte) and the v1.1 `score`, best of REPEATS, as wall
//! time and as the thread's CPU time. Prints one JSON line.

use std::path::{Path, PathBuf};
use std::time::Instant;

use bertqa::decode::{self, DecodeConfig, Postprocess};
use bertqa::evaluate::{self, Predictions, ScoreConfig};
use bertqa::tokenize::BertTokenizer;
use bertqa::types::{Feature, Logits};

/// The allocator of the `bertqa` binary (cli/src/main.rs), so that this measures what the
/// binary's decoder thread does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "target/bench-decode".into()));
    let repeats: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);

    let dataset = bertqa::squad::read(&dir.join("squad.json"))?;
    let tok = BertTokenizer::from_vocab_file(&dir.join("vocab.txt"), true)?;
    let features = read_features(&dir.join("features.jsonl"))?;
    let logits = read_logits(&dir.join("logits.f32"), &features)?;
    let config = DecodeConfig {
        postprocess: Postprocess::Hf,
        ..DecodeConfig::default()
    };

    let mut best = (f64::INFINITY, 0.0, 0.0);
    let mut best_cpu = (f64::INFINITY, 0.0, 0.0);
    let mut out = None;
    for _ in 0..repeats.max(1) {
        let c0 = thread_cpu_s();
        let t0 = Instant::now();
        let preds = decode::decode(&config, &dataset, &features, &logits, Some(&tok))?;
        let t1 = Instant::now();
        let c1 = thread_cpu_s();
        let scores = evaluate::score(
            &dataset,
            &Predictions::from_decoded(&preds),
            None,
            &ScoreConfig::default(),
        )?;
        let t2 = Instant::now();
        let c2 = thread_cpu_s();
        let (d, s) = ((t1 - t0).as_secs_f64(), (t2 - t1).as_secs_f64());
        if d + s < best.0 {
            best = (d + s, d, s);
        }
        if let (Some(c0), Some(c1), Some(c2)) = (c0, c1, c2) {
            if c2 - c0 < best_cpu.0 {
                best_cpu = (c2 - c0, c1 - c0, c2 - c1);
            }
        }
        out = Some((preds, scores));
    }
    let (preds, scores) = out.expect("one run");
    let ours = decode::render_predictions(&preds);
    let reference = std::fs::read(dir.join("hf_predictions.json"))?;
    println!(
        "{}",
        serde_json::json!({
            "questions": dataset.examples.len(),
            "features": features.len(),
            "decode_s": best.1,
            "score_s": best.2,
            "total_s": best.0,
            "cpu_decode_s": best_cpu.1,
            "cpu_score_s": best_cpu.2,
            "cpu_total_s": best_cpu.0,
            "exact_match": scores.metrics.exact(),
            "f1": scores.metrics.f1(),
            "predictions_equal_transformers": ours == reference,
        })
    );
    Ok(())
}

/// CPU time of this thread (Linux `/proc/thread-self/schedstat`, nanoseconds on CPU),
/// which a busy machine inflates much less than wall time.
fn thread_cpu_s() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

fn read_features(path: &Path) -> anyhow::Result<Vec<Feature>> {
    #[derive(serde::Deserialize)]
    struct Raw {
        unique_id: u64,
        example_index: usize,
        input_ids: Vec<u32>,
        query_len: usize,
        token_to_orig: Vec<u32>,
        token_is_max_context: Vec<bool>,
    }
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .map(|line| {
            let r: Raw = serde_json::from_str(line)?;
            Ok(Feature {
                unique_id: r.unique_id,
                example_index: r.example_index,
                doc_span_index: 0,
                input_ids: r.input_ids,
                query_len: r.query_len,
                token_to_orig: r.token_to_orig,
                token_is_max_context: r.token_is_max_context,
                template: None,
            })
        })
        .collect()
}

fn read_logits(path: &Path, features: &[Feature]) -> anyhow::Result<Vec<Logits>> {
    let bytes = std::fs::read(path)?;
    let floats: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let seq = floats.len() / features.len() / 2;
    anyhow::ensure!(seq * 2 * features.len() == floats.len(), "logits size");
    Ok(features
        .iter()
        .zip(floats.chunks_exact(2 * seq))
        .map(|(f, c)| Logits {
            unique_id: f.unique_id,
            start: c[..seq].to_vec(),
            end: c[seq..].to_vec(),
        })
        .collect())
}
