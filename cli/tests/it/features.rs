//! Integration tests: tokenizer, SQuAD reader and features against the goldens of
//! tests/golden/features (made by scripts/golden/golden_features.sh), and `bertqa features`
//! error handling.

use std::path::PathBuf;
use std::process::Output;

use bertqa::features::{self, FeatureBuilder, FeatureConfig};
use bertqa::squad;
use bertqa::tokenize::{self, BertTokenizer};
use bertqa::types::TokenText;

use crate::common::{bertqa, fixture, root};

fn golden_dir() -> PathBuf {
    root().join("tests/golden/features")
}

/// bert-base-uncased's vocabulary: installed by a script, not committed.
fn uncased_vocab() -> PathBuf {
    let path = root().join("vocab/vocab.txt");
    assert!(
        path.exists(),
        "{} is missing: run `bash scripts/install_vocab.sh` first",
        path.display()
    );
    path
}

fn cased_vocab() -> PathBuf {
    fixture("vocab-cased.txt").into()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every `<fixture>.<casing>.<seq>-<stride>-<query>.jsonl` golden, with its options.
fn feature_goldens() -> Vec<(PathBuf, String, bool, [usize; 3])> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(golden_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let Some(stem) = name.strip_suffix(".jsonl") else {
            continue;
        };
        let parts: Vec<&str> = stem.split('.').collect();
        if parts.len() != 3 {
            continue;
        }
        let geometry: Vec<usize> = parts[2].split('-').map(|n| n.parse().unwrap()).collect();
        let cased = match parts[1] {
            "cased" => true,
            "uncased" => false,
            other => panic!("{name}: unknown casing {other}"),
        };
        out.push((
            path.clone(),
            format!("{}.json", parts[0]),
            cased,
            [geometry[0], geometry[1], geometry[2]],
        ));
    }
    out.sort();
    assert!(
        out.len() >= 10,
        "goldens missing in {}",
        golden_dir().display()
    );
    out
}

fn first_difference(ours: &str, golden: &str) -> Option<String> {
    let (a, b): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), golden.lines().collect());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        if x != y {
            let xv: serde_json::Value = serde_json::from_str(x).unwrap();
            let yv: serde_json::Value = serde_json::from_str(y).unwrap();
            let keys: Vec<String> = yv
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, v)| xv.get(k.as_str()) != Some(v))
                .map(|(k, _)| k.clone())
                .collect();
            return Some(format!(
                "line {} differs in {keys:?}\nours:   {x}\ngolden: {y}",
                i + 1
            ));
        }
    }
    (a.len() != b.len()).then(|| format!("{} lines, golden has {}", a.len(), b.len()))
}

#[test]
fn bertqa_features_equals_every_golden_byte_for_byte() {
    for (golden, data, cased, [seq, stride, query]) in feature_goldens() {
        let vocab = if cased {
            cased_vocab()
        } else {
            uncased_vocab()
        };
        let (seq, stride, query) = (seq.to_string(), stride.to_string(), query.to_string());
        let data = fixture(&data);
        let mut args = vec![
            "features",
            "--data",
            &data,
            "--vocab",
            vocab.to_str().unwrap(),
            "--max-seq-length",
            &seq,
            "--doc-stride",
            &stride,
            "--max-query-length",
            &query,
        ];
        if cased {
            args.push("--no-lower-case");
        }
        let out = bertqa(&args);
        assert!(
            out.status.success(),
            "{}: {}",
            golden.display(),
            stderr(&out)
        );
        let ours = String::from_utf8(out.stdout).unwrap();
        let expected = std::fs::read_to_string(&golden).unwrap();
        if let Some(diff) = first_difference(&ours, &expected) {
            panic!("{}: {diff}", golden.display());
        }
        assert_eq!(ours, expected, "{}", golden.display());
    }
}

/// The library API (streaming and collected) gives the golden fields too.
#[test]
fn library_features_match_golden_fields() {
    let tok = BertTokenizer::from_vocab_file(&uncased_vocab(), true).unwrap();
    let dataset = squad::read(fixture("degenerate.json").as_ref()).unwrap();
    let (all, featureless) = features::build(&tok, FeatureConfig::default(), &dataset).unwrap();
    // d-2 (whitespace only) and d-3 (only removed characters) have no features; d-4
    // keeps its example_index 3 (G/N, not H).
    assert_eq!(featureless, [1, 2]);
    let golden =
        std::fs::read_to_string(golden_dir().join("degenerate.uncased.384-128-64.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = golden
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(all.len(), rows.len());
    let streamed: Vec<_> = FeatureBuilder::new(&tok, FeatureConfig::default())
        .unwrap()
        .features(&dataset)
        .collect();
    assert_eq!(streamed, all);
    for (f, row) in all.iter().zip(&rows) {
        assert_eq!(f.unique_id, row["unique_id"].as_u64().unwrap());
        assert_eq!(
            f.example_index as u64,
            row["example_index"].as_u64().unwrap()
        );
        let ids: Vec<u64> = row["input_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        let ours: Vec<u64> = (0..384)
            .map(|p| f.input_ids.get(p).map_or(0, |&i| u64::from(i)))
            .collect();
        assert_eq!(ours, ids);
        let tokens: Vec<&str> = f.input_ids.iter().map(|&i| tok.id_to_token(i)).collect();
        let golden_tokens: Vec<&str> = row["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(tokens, golden_tokens);
        for (j, &word) in f.token_to_orig.iter().enumerate() {
            let key = (f.doc_offset() + j).to_string();
            assert_eq!(
                u64::from(word),
                row["token_to_orig_map"][&key].as_u64().unwrap()
            );
            assert_eq!(
                f.token_is_max_context[j],
                row["token_is_max_context"][&key].as_bool().unwrap()
            );
        }
    }
    assert_eq!(all.last().unwrap().example_index, 3);
}

#[test]
fn tokenizer_matches_golden_basic_tokens_and_ids() {
    let uncased = BertTokenizer::from_vocab_file(&uncased_vocab(), true).unwrap();
    let cased = BertTokenizer::from_vocab_file(&cased_vocab(), false).unwrap();
    let golden = std::fs::read_to_string(golden_dir().join("tokenize.jsonl")).unwrap();
    let mut checked = 0;
    for line in golden.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        let tok = match row["casing"].as_str().unwrap() {
            "uncased" => &uncased,
            _ => &cased,
        };
        let text = row["text"].as_str().unwrap();
        let basic: Vec<String> = serde_json::from_value(row["basic"].clone()).unwrap();
        assert_eq!(tok.basic_tokenize(text), basic, "basic tokens of {text:?}");
        let ids: Vec<u32> = serde_json::from_value(row["ids"].clone()).unwrap();
        assert_eq!(
            tok.tokenize(text),
            ids,
            "ids of {text:?} ({})",
            row["casing"]
        );
        checked += 1;
    }
    assert!(checked > 1000, "{checked}");
}

fn fnv1a64(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
    }
    h
}

/// Every code point of planes 0–3 (and a few later blocks) through the basic
/// tokenizer, against the reference's output hashed per block of 256.
#[test]
fn unicode_sweep_matches_the_reference_tables() {
    let golden = std::fs::read_to_string(golden_dir().join("unicode-sweep.tsv")).unwrap();
    let mut blocks = 0;
    for line in golden.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        let start = u32::from_str_radix(cols[0], 16).unwrap();
        for (lower, expected) in [(true, cols[1]), (false, cols[2])] {
            let mut h = 0xcbf29ce484222325;
            for c in (start..start + 256).filter_map(char::from_u32) {
                let probe = format!("a{c}A\u{3a3}{c}\u{3a3}{c}");
                let record = tokenize::basic_tokenize(&probe, lower).join(" ") + "\n";
                h = fnv1a64(h, record.as_bytes());
            }
            assert_eq!(
                format!("{h:016x}"),
                expected,
                "block U+{start:04X}, lower case {lower}"
            );
        }
        blocks += 1;
    }
    assert!(blocks > 800);
}

#[test]
fn bad_input_exits_2_naming_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let vocab = cased_vocab();
    let cases: [(&str, &str, &str); 6] = [
        (
            "truncated.json",
            "{\"data\": [{\"paragraphs\": [{\"context\": \"x\",\n \"qas\": [",
            "truncated.json:2:",
        ),
        (
            "types.json",
            "{\"data\": [{\"paragraphs\": [{\"context\": [1], \"qas\": []}]}]}",
            "types.json:1:",
        ),
        (
            "missing.json",
            "{\"data\": [{\"paragraphs\": [{\"qas\": []}]}]}",
            "missing field `context`",
        ),
        (
            "noquestion.json",
            r#"{"data":[{"paragraphs":[{"context":"x","qas":[{"id":"q-7","answers":[]}]}]}]}"#,
            "(question id \"q-7\"): missing field `question`",
        ),
        (
            "dup.json",
            r#"{"data":[{"paragraphs":[{"context":"x","qas":[{"id":"d","question":"a"}]},{"context":"y","qas":[{"id":"d","question":"b"}]}]}]}"#,
            "(question id \"d\"): duplicate question id",
        ),
        (
            "start.json",
            r#"{"data":[{"paragraphs":[{"context":"xy","qas":[{"id":"s","question":"a","answers":[{"text":"z","answer_start":9}]}]}]}]}"#,
            "(question id \"s\"): answer_start 9 is outside the context",
        ),
    ];
    for (name, body, needle) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        let out = bertqa(&[
            "features",
            "--data",
            path.to_str().unwrap(),
            "--vocab",
            vocab.to_str().unwrap(),
            "--no-lower-case",
        ]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(needle),
            "{name}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
}

#[test]
fn degenerate_input_warns_and_strict_refuses() {
    let data = fixture("degenerate.json");
    let vocab = uncased_vocab();
    let args = [
        "features",
        "--data",
        &data,
        "--vocab",
        vocab.to_str().unwrap(),
    ];
    let out = bertqa(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning:") && err.contains("\"d-2\"") && err.contains("\"d-3\""),
        "{err}"
    );
    let mut strict = args.to_vec();
    strict.push("--strict");
    let out = bertqa(&strict);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("\"d-2\""), "{}", stderr(&out));

    let data = fixture("unicode.json");
    let out = bertqa(&[
        "features",
        "--data",
        &data,
        "--vocab",
        vocab.to_str().unwrap(),
        "--strict",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("(question id \"u-7\"): empty question"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn invalid_windows_and_missing_vocab_are_clear_errors() {
    let data = fixture("v1-long.json");
    let vocab = cased_vocab();
    let base = [
        "features",
        "--data",
        &data,
        "--vocab",
        vocab.to_str().unwrap(),
    ];
    for (extra, needle) in [
        (&["--doc-stride", "0"][..], "--doc-stride"),
        (&["--max-seq-length", "67"][..], "--max-seq-length 67"),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let out = bertqa(&args);
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains(needle), "{}", stderr(&out));
    }
    let out = bertqa(&["features", "--data", &data, "--vocab", "/nonexistent/v.txt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("scripts/install_vocab.sh"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn tokenizer_json_gives_the_same_features() {
    // A tokenizer.json built by the tokenizers crate around the cased vocabulary.
    use tokenizers::models::wordpiece::WordPiece;
    use tokenizers::normalizers::bert::BertNormalizer;
    let vocab = cased_vocab();
    let wp = WordPiece::from_file(vocab.to_str().unwrap())
        .build()
        .unwrap();
    let mut tk = tokenizers::Tokenizer::new(wp);
    tk.with_normalizer(Some(BertNormalizer::new(true, true, None, false)));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tokenizer.json");
    tk.save(&json, false).unwrap();

    let data = fixture("unicode.json");
    let run = |source: &[&str]| {
        let mut args = vec!["features", "--data", &data, "--no-lower-case"];
        args.extend_from_slice(source);
        let out = bertqa(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        out.stdout
    };
    let from_json = run(&["--tokenizer", json.to_str().unwrap()]);
    let from_vocab = run(&["--vocab", vocab.to_str().unwrap()]);
    assert!(
        from_json == from_vocab,
        "tokenizer.json and vocab.txt disagree"
    );
    let golden = std::fs::read(golden_dir().join("unicode.cased.384-128-64.jsonl")).unwrap();
    assert!(from_json == golden);
}

#[test]
fn paragraph_words_map_back_through_token_to_orig() {
    let tok = BertTokenizer::from_vocab_file(&cased_vocab(), false).unwrap();
    let dataset = squad::read(fixture("v2-long.json").as_ref()).unwrap();
    let mut enc = tok.encoder();
    let para = &dataset.paragraphs[0];
    let doc = features::doc_pieces(&mut enc, para);
    // Every piece comes from a word, words in order, and re-tokenizing each word alone
    // gives exactly its pieces (§4.2).
    let mut start = 0;
    for (w, word) in para.doc_tokens.iter().enumerate() {
        let alone = tok.tokenize(word);
        assert_eq!(
            &doc.ids[start..start + alone.len()],
            alone.as_slice(),
            "{word}"
        );
        assert!(doc.tok_to_orig[start..start + alone.len()]
            .iter()
            .all(|&x| x as usize == w));
        start += alone.len();
    }
    assert_eq!(start, doc.ids.len());
}

/// A SQuAD file that starts with a UTF-8 byte order mark reads as the
/// same file without it; JSON that is not a SQuAD file is named as such, with what it
/// holds instead of serde's message about the records it expected.
#[test]
fn a_byte_order_mark_is_accepted_and_other_json_is_not_a_squad_file() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = fixture("v2-long.json");
    let bom = tmp.path().join("bom.json");
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(std::fs::read(&plain).unwrap());
    std::fs::write(&bom, bytes).unwrap();
    let (a, b) = (
        bertqa(&["features", "--data", &plain]),
        bertqa(&["features", "--data", bom.to_str().unwrap()]),
    );
    assert_eq!(b.status.code(), Some(0), "{}", stderr(&b));
    assert!(!a.stdout.is_empty() && a.stdout == b.stdout);

    let cases = [
        (
            "[{\"data\": []}]",
            "a JSON array of 1 item at the top level",
        ),
        (
            "{\"version\": \"1.1\", \"articles\": []}",
            "an object without \"data\" (keys \"version\", \"articles\")",
        ),
        (
            "{\"data\": {\"title\": \"x\"}}",
            "its \"data\" is an object",
        ),
        ("\u{feff}{\"data\": \"x\"}", "its \"data\" is a string"),
        ("{}", "an empty JSON object"),
        ("3", "a number at the top level"),
    ];
    for (i, (text, found)) in cases.iter().enumerate() {
        let path = tmp.path().join(format!("other{i}.json"));
        std::fs::write(&path, text).unwrap();
        let o = bertqa(&["features", "--data", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{text}: {}", stderr(&o));
        let want = format!(
            "error: {}: not a SQuAD file: {found}; a SQuAD file is a JSON object whose \
             \"data\" is an array of articles\n",
            path.display()
        );
        assert_eq!(stderr(&o), want, "{text}");
    }
    // A SQuAD file's own errors keep their place, BOM or not.
    let path = tmp.path().join("deeper.json");
    std::fs::write(&path, "\u{feff}{\"data\": [{\"x\": 1}]}").unwrap();
    let o = bertqa(&["features", "--data", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("missing field `paragraphs`"),
        "{}",
        stderr(&o)
    );
}

/// Every line `features` prints follows schema/features.schema.json.
#[test]
fn features_lines_follow_their_schema() {
    let data = root().join("data/sample-squad-v2.json");
    let lines = crate::common::json_lines_following(
        "features",
        &[
            "features",
            "--data",
            data.to_str().unwrap(),
            "--max-seq-length",
            "128",
        ],
    );
    assert!(lines.len() > 16, "more windows than questions");
    assert_eq!(lines[0]["input_ids"].as_array().unwrap().len(), 128);
}
