//! Feature-building benchmark: the client CPU that `bertqa eval` spends turning a SQuAD
//! file into model windows (tokenizing and windowing, algorithm §2–§4).
//!
//! Usage: `bench_features FILE.json [REPEATS] [VOCAB]` (generate a SQuAD-dev-sized file
//! with `python3 scripts/bench/gen_squad.py /tmp/dev-sized.json`; VOCAB defaults to
//! `vocab/vocab.txt`). Single threaded, best of REPEATS (default 5), each repeat with a
//! fresh [`FeatureBuilder`] (so a cold word cache, as in one `bertqa eval`):
//!
//! - `build`: every feature of the file, as the eval pipeline's producer builds them;
//! - `split`: the reader's whitespace split of every context (§2.1), which `read` does
//!   once per paragraph.
//!
//! Prints µs per feature for both (thread CPU time, which a busy machine inflates much
//! less than wall time, and wall time), what the encoder's caches saved (paragraphs,
//! segments and basic tokens tokenized against asked for), and a digest of every
//! feature's fields, so that two builds (before and after a change) can be run back to
//! back on the same file and their outputs compared.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::time::Instant;

use bertqa::features::{FeatureBuilder, FeatureConfig};
use bertqa::tokenize::{BertTokenizer, EncoderStats};
use bertqa::types::Feature;

/// The allocator of the `bertqa` binary (cli/src/main.rs), so that this measures what the
/// binary's producer thread does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        anyhow::bail!("usage: bench_features FILE.json [REPEATS] [VOCAB]");
    };
    let repeats: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);
    let vocab = PathBuf::from(args.next().unwrap_or_else(|| "vocab/vocab.txt".into()));

    let dataset = bertqa::squad::read(&path)?;
    let tok = BertTokenizer::from_vocab_file(&vocab, true)?;

    let mut build = Best::default();
    let mut digest = None;
    let mut count = 0usize;
    let mut tokenized = (0usize, Default::default());
    let mut features: Vec<Feature> = Vec::new();
    for _ in 0..repeats.max(1) {
        features.clear();
        let mut builder = FeatureBuilder::new(&tok, FeatureConfig::default())?;
        let timer = Timer::start();
        for example in &dataset.examples {
            builder.push_example(&dataset, example, &mut features);
        }
        build.update(timer.stop());
        count = features.len();
        tokenized = (builder.paragraphs_tokenized(), builder.encoder_stats());
        let d = digest_of(&features);
        anyhow::ensure!(
            *digest.get_or_insert(d) == d,
            "two repeats built different features"
        );
    }

    let mut split = Best::default();
    let mut words = 0usize;
    for _ in 0..repeats.max(1) {
        let timer = Timer::start();
        words = 0;
        for p in &dataset.paragraphs {
            words += std::hint::black_box(bertqa::squad::split_context(&p.context))
                .doc_tokens
                .len();
        }
        split.update(timer.stop());
    }

    let per = |s: f64| s * 1e6 / count.max(1) as f64;
    let (paragraphs_tokenized, stats): (usize, EncoderStats) = tokenized;
    println!(
        "{}",
        serde_json::json!({
            "file": path.display().to_string(),
            "questions": dataset.examples.len(),
            "paragraphs": dataset.paragraphs.len(),
            "words": words,
            "features": count,
            "paragraphs_tokenized": paragraphs_tokenized,
            "segments": stats.segments,
            "segments_tokenized": stats.segments_tokenized,
            "basic_tokens": stats.words,
            "basic_tokens_tokenized": stats.words_tokenized,
            "repeats": repeats.max(1),
            "build_cpu_us_per_feature": per(build.cpu_s),
            "build_wall_us_per_feature": per(build.wall_s),
            "split_cpu_us_per_feature": per(split.cpu_s),
            "split_wall_us_per_feature": per(split.wall_s),
            "features_digest": format!("{:016x}", digest.unwrap_or(0)),
        })
    );
    Ok(())
}

/// The lowest CPU and wall times seen (each on its own: the runs that had the CPU to
/// themselves).
#[derive(Default)]
struct Best {
    cpu_s: f64,
    wall_s: f64,
    seen: bool,
}

impl Best {
    fn update(&mut self, (cpu_s, wall_s): (f64, f64)) {
        if !self.seen || cpu_s < self.cpu_s {
            self.cpu_s = cpu_s;
        }
        if !self.seen || wall_s < self.wall_s {
            self.wall_s = wall_s;
        }
        self.seen = true;
    }
}

struct Timer {
    cpu_s: f64,
    wall: Instant,
}

impl Timer {
    fn start() -> Self {
        Timer {
            cpu_s: thread_cpu_s(),
            wall: Instant::now(),
        }
    }

    fn stop(self) -> (f64, f64) {
        let wall_s = self.wall.elapsed().as_secs_f64();
        (thread_cpu_s() - self.cpu_s, wall_s)
    }
}

/// CPU time of this thread (Linux `/proc/thread-self/schedstat`, nanoseconds on CPU);
/// 0 where that file does not exist, so only the wall times mean anything there.
fn thread_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e9)
}

/// A digest of every field of every feature, in order (not cryptographic: it only has to
/// tell two builds apart).
fn digest_of(features: &[Feature]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for f in features {
        f.unique_id.hash(&mut h);
        f.example_index.hash(&mut h);
        f.doc_span_index.hash(&mut h);
        f.input_ids.hash(&mut h);
        f.query_len.hash(&mut h);
        f.token_to_orig.hash(&mut h);
        f.token_is_max_context.hash(&mut h);
    }
    h.finish()
}
