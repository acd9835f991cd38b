//! The fuzz harnesses: each takes arbitrary bytes and must never panic. Shared by the
//! cargo-fuzz targets (`fuzz/fuzz_targets/`) and by the regression test that replays the
//! kept inputs (`tests/fixtures/fuzz/<target>/`, `cli/tests/it/fuzz.rs`).
//!
//! - `squad_reader`: the bytes as a SQuAD file (errors are fine, panics are not).
//! - `hf_rows`, `mrqa`, `parquet`: the bytes as Hugging Face rows in JSON Lines, MRQA
//!   JSON Lines, a Parquet file of rows; `any_data`: as whatever their content says
//!   (gzip included). A dataset read must hold together and write back as SQuAD JSON.
//! - `features`: arbitrary UTF-8 question, context and answer, arbitrary (valid) window
//!   geometry and casing, through the reader, the tokenizer and the feature builder;
//!   checks the features' invariants.
//! - `decode`: the features of such an input with arbitrary logits (NaN and ±inf
//!   included), arbitrary decoding options, both rule families; then the output files'
//!   rendering.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};
use bertqa::decode::{self, DecodeConfig, Postprocess};
use bertqa::features::{self, FeatureConfig};
use bertqa::tokenize::BertTokenizer;
use bertqa::types::{Dataset, Logits};

/// A small vocabulary for when `vocab/vocab.txt` is not installed: specials, a few
/// words and word pieces, punctuation and CJK.
const SMALL_VOCAB: &str = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\na\nof\nin\nlight\n##house\n\
    was\nbuilt\n18\n##74\nby\nmiriam\nholt\n##s\n##ing\nrun\n##ning\n,\n.\n'\n\"\n(\n)\n-\n\
    é\n##é\n中\n文\n1\n2\n3\n##1\n##2\n";

/// bert-base-uncased's vocabulary when installed (scripts/install_vocab.sh), else
/// [`SMALL_VOCAB`]; cased and uncased.
fn tokenizer(lower: bool) -> &'static BertTokenizer {
    static TOK: OnceLock<[BertTokenizer; 2]> = OnceLock::new();
    let toks = TOK.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("vocab/vocab.txt");
        let path = if path.exists() {
            path
        } else {
            // The fuzz crate's manifest is in fuzz/.
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../vocab/vocab.txt")
        };
        let text = std::fs::read_to_string(&path).unwrap_or_else(|_| SMALL_VOCAB.to_string());
        let origin = PathBuf::from("<vocab>");
        [false, true].map(|l| BertTokenizer::from_vocab_text(&text, l, &origin).unwrap())
    });
    &toks[usize::from(lower)]
}

/// The bytes as one format of `bertqa::data` (`None`: as their content says, gzip
/// included); a dataset read must hold together.
fn data_reader(data: &[u8], format: Option<bertqa::data::Format>) {
    let path = Path::new("fuzz.data");
    if let Ok((loaded, _)) = bertqa::data::from_bytes(data.to_vec(), format, path) {
        let d = &loaded.dataset;
        for (i, e) in d.examples.iter().enumerate() {
            assert_eq!(e.example_index, i);
            assert!(e.paragraph_index < d.paragraphs.len());
        }
        let mut out = Vec::new();
        bertqa::data::write_squad(d, &mut out).unwrap();
        let _ = loaded.strict();
    }
}

/// The bytes as Hugging Face rows in JSON Lines.
pub fn hf_rows(data: &[u8]) {
    data_reader(data, Some(bertqa::data::Format::HfJsonl));
}

/// The bytes as MRQA JSON Lines.
pub fn mrqa(data: &[u8]) {
    data_reader(data, Some(bertqa::data::Format::Mrqa));
}

/// The bytes as a Parquet file of Hugging Face rows.
pub fn parquet(data: &[u8]) {
    data_reader(data, Some(bertqa::data::Format::HfParquet));
}

/// The bytes as any data file, found by content (gzip, Parquet, the JSON formats).
pub fn any_data(data: &[u8]) {
    data_reader(data, None);
}

/// The bytes as a SQuAD file.
pub fn squad_reader(data: &[u8]) {
    let path = Path::new("fuzz.json");
    if let Ok(loaded) = bertqa::squad::from_slice(data, path) {
        for w in &loaded.warnings {
            let _ = w.to_string();
        }
        let _ = loaded.dataset.looks_like_v2();
        let _ = loaded.strict();
    }
}

/// One question about one paragraph, with window and decoding options.
#[derive(Debug, Arbitrary)]
struct Case {
    context: String,
    question: String,
    answer_start: u16,
    answer_len: u8,
    impossible: bool,
    lower: bool,
    /// max_seq_length = max_query_length + 4 + this.
    doc_room: u8,
    doc_stride: u8,
    max_query_length: u8,
}

impl Case {
    fn config(&self) -> FeatureConfig {
        let max_query_length = usize::from(self.max_query_length % 64);
        FeatureConfig {
            max_seq_length: max_query_length + 4 + usize::from(self.doc_room % 128),
            doc_stride: 1 + usize::from(self.doc_stride % 128),
            max_query_length,
        }
    }

    /// Through the reader, as a user's file would be: a JSON document.
    fn dataset(&self) -> Option<Dataset> {
        let chars: Vec<char> = self.context.chars().collect();
        let start = usize::from(self.answer_start).min(chars.len());
        let end = (start + usize::from(self.answer_len)).min(chars.len());
        let answer: String = chars[start..end].iter().collect();
        let answers = if self.impossible {
            serde_json::json!([])
        } else {
            serde_json::json!([{"text": answer, "answer_start": start}])
        };
        let file = serde_json::json!({
            "version": if self.impossible { "v2.0" } else { "1.1" },
            "data": [{"title": "fuzz", "paragraphs": [{
                "context": self.context,
                "qas": [{"id": "q0", "question": self.question, "answers": answers,
                         "is_impossible": self.impossible}],
            }]}],
        });
        let bytes = serde_json::to_vec(&file).unwrap();
        bertqa::squad::from_slice(&bytes, Path::new("fuzz.json"))
            .ok()
            .map(|l| l.dataset)
    }
}

/// Arbitrary text through the tokenizer and the feature builder.
pub fn features(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(case) = Case::arbitrary(&mut u) else {
        return;
    };
    let tok = tokenizer(case.lower);
    let _ = tok.tokenize(&case.question);
    let _ = tok.tokenize(&case.context);
    let Some(dataset) = case.dataset() else {
        return;
    };
    let config = case.config();
    config.validate().unwrap();
    let (built, featureless) = features::build(tok, config, &dataset).unwrap();
    check_features(&dataset, config, &built, &featureless);
}

fn check_features(
    dataset: &Dataset,
    config: FeatureConfig,
    built: &[bertqa::types::Feature],
    featureless: &[usize],
) {
    let words = dataset.paragraphs[0].doc_tokens.len();
    for f in built {
        assert!(
            f.len() <= config.max_seq_length,
            "feature longer than the window"
        );
        assert!(f.query_len <= config.max_query_length);
        let doc = f.len() - f.query_len - 3;
        assert!(doc >= 1, "a window without doc pieces");
        assert_eq!(f.token_to_orig.len(), doc);
        assert_eq!(f.token_is_max_context.len(), doc);
        assert!(f.token_to_orig.iter().all(|&w| (w as usize) < words));
    }
    assert_eq!(built.is_empty(), featureless == [0]);
}

/// Decoding options and logits for the features of a [`Case`].
#[derive(Debug, Arbitrary)]
struct DecodeCase {
    case: Case,
    v2: bool,
    hf: bool,
    n_best_size: u8,
    max_answer_length: u8,
    threshold: f32,
    /// Logit values, cycled over every position (start, then end, per feature); NaN
    /// and infinities come through as they are.
    values: Vec<f32>,
    /// Shorten one feature's logits (an error, never a panic).
    truncate: Option<u8>,
}

/// Arbitrary logits through span decoding and the output files' rendering.
pub fn decode(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(dc) = DecodeCase::arbitrary(&mut u) else {
        return;
    };
    let tok = tokenizer(dc.case.lower);
    let Some(dataset) = dc.case.dataset() else {
        return;
    };
    let config = dc.case.config();
    let (built, _) = features::build(tok, config, &dataset).unwrap();
    let mut next = {
        let values = dc.values.clone();
        let mut i = 0usize;
        move || {
            let v = if values.is_empty() {
                0.0
            } else {
                values[i % values.len()]
            };
            i += 1;
            v
        }
    };
    let mut logits: Vec<Logits> = built
        .iter()
        .map(|f| {
            // Padded to the window like a fixed-length model's output.
            let n = config.max_seq_length;
            Logits {
                unique_id: f.unique_id,
                start: (0..n).map(|_| next()).collect(),
                end: (0..n).map(|_| next()).collect(),
            }
        })
        .collect();
    if let (Some(t), false) = (dc.truncate, logits.is_empty()) {
        let i = usize::from(t) % logits.len();
        let n = usize::from(t) % (config.max_seq_length + 1);
        logits[i].start.truncate(n);
        logits[i].end.truncate(n);
    }
    let config = DecodeConfig {
        n_best_size: usize::from(dc.n_best_size % 32),
        max_answer_length: usize::from(dc.max_answer_length % 64),
        version_2_with_negative: dc.v2,
        null_score_diff_threshold: f64::from(dc.threshold),
        postprocess: if dc.hf {
            Postprocess::Hf
        } else {
            Postprocess::Nvidia
        },
        lower_case: dc.case.lower,
    };
    let Ok(preds) = decode::decode(&config, &dataset, &built, &logits, Some(tok)) else {
        return;
    };
    assert_eq!(preds.len(), dataset.examples.len());
    let _ = decode::render_predictions(&preds);
    let _ = decode::render_nbest(&preds);
    let _ = decode::render_null_odds(&preds);
}
