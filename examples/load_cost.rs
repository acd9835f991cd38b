//! Prints how long bertqa's start-up steps take (vocabulary, tokenizer), for the
//! client-side cost of `bertqa ask` (scripts/bench/bench_ask.sh).
use std::path::Path;
use std::time::Instant;

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "vocab/vocab.txt".into());
    for _ in 0..3 {
        let t = Instant::now();
        let tok = bertqa::tokenize::BertTokenizer::from_vocab_file(Path::new(&path), true).unwrap();
        let load = t.elapsed();
        let t = Instant::now();
        let ids = tok.tokenize("Who designed the lighthouse at Varne Point?");
        println!(
            "vocabulary + tokenizer {:.2} ms, first tokenize {:.3} ms ({} pieces)",
            load.as_secs_f64() * 1e3,
            t.elapsed().as_secs_f64() * 1e3,
            ids.len()
        );
    }
}
