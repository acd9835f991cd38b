use std::path::{Path, PathBuf};

use super::*;

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

const SQUAD: &str = r#"{"version": "v2.0", "data": [{"title": "T", "paragraphs": [
  {"context": "Ada wrote code.", "qas": [
    {"id": "a", "question": "Who wrote?", "answers": [{"text": "Ada", "answer_start": 0}]},
    {"id": "b", "question": "When?", "answers": [], "is_impossible": true}]},
  {"context": "Bo sang.", "qas": [
    {"id": "c", "question": "Who sang?", "answers": [{"text": "Bo", "answer_start": 0}]}]}]}]}"#;

const HF: &str = r#"{"id": "a", "title": "T", "context": "Ada wrote code.", "question": "Who wrote?", "answers": {"text": ["Ada"], "answer_start": [0]}}
{"id": "b", "title": "T", "context": "Ada wrote code.", "question": "When?", "answers": {"text": [], "answer_start": []}}

{"id": "c", "title": "T", "context": "Bo sang.", "question": "Who sang?", "answers": {"text": ["Bo"], "answer_start": [0]}}
"#;

#[test]
fn hugging_face_rows_read_as_the_same_squad_json() {
    let dir = tempfile::tempdir().unwrap();
    let (squad, f) = load(&[write(dir.path(), "s.json", SQUAD.as_bytes())], false).unwrap();
    assert_eq!(f, Format::Squad);
    let (hf, f) = load(&[write(dir.path(), "h.jsonl", HF.as_bytes())], false).unwrap();
    assert_eq!(f, Format::HfJsonl);
    assert_eq!(hf.dataset.examples, squad.dataset.examples);
    assert_eq!(hf.dataset.paragraphs, squad.dataset.paragraphs);
    assert!(hf.dataset.looks_like_v2());
}

#[test]
fn gzip_is_read_by_its_content_and_the_digest_is_of_the_content() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(HF.as_bytes()).unwrap();
    let zipped = write(dir.path(), "rows.bin", &gz.finish().unwrap());
    let plain = write(dir.path(), "rows.jsonl", HF.as_bytes());
    let (a, f) = load(&[zipped], true).unwrap();
    let (b, _) = load(&[plain], true).unwrap();
    assert_eq!(f, Format::HfJsonl);
    assert_eq!(a.dataset, b.dataset);
    assert_eq!(a.sha256, b.sha256);
    let broken = write(dir.path(), "broken.gz", &[0x1f, 0x8b, 8, 0, 1, 2, 3]);
    let e = load(&[broken], false).unwrap_err().to_string();
    assert!(
        e.contains("broken.gz: a gzip file that cannot be decompressed"),
        "{e}"
    );
}

#[test]
fn mrqa_lines_spans_and_replaced_ids() {
    let text = r#"{"header": {"dataset": "SQuAD", "split": "dev"}}
{"context": "Ada wrote code in 1843.", "qas": [{"qid": "q1", "question": "Who?", "answers": ["Ada"], "detected_answers": [{"text": "Ada", "char_spans": [[0, 2]]}]}, {"qid": "q2", "question": "When?", "answers": ["1843", "in 1843"], "detected_answers": [{"text": "1843", "char_spans": [[18, 21]]}]}]}
{"context": "Bo sang.", "qas": [{"qid": "q1", "question": "Who sang?", "answers": ["Bo"], "detected_answers": []}]}
"#;
    let dir = tempfile::tempdir().unwrap();
    let (l, f) = load(&[write(dir.path(), "m.jsonl", text.as_bytes())], false).unwrap();
    assert_eq!(f, Format::Mrqa);
    let ids: Vec<&str> = l
        .dataset
        .examples
        .iter()
        .map(|e| e.qas_id.as_str())
        .collect();
    assert_eq!(ids, ["q2", "q1"]);
    assert_eq!(l.dataset.examples[0].answers[0].answer_start, 18);
    assert_eq!(l.dataset.examples[0].answers[1].text, "in 1843");
    assert_eq!(l.dataset.examples[1].question_text, "Who sang?");
    assert!(
        l.warnings[0]
            .message
            .contains("line 3's question replaces it"),
        "{:?}",
        l.warnings
    );
    assert!(!l.dataset.looks_like_v2());
}

#[test]
fn broken_rows_name_the_line_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            r#"{"id": "a", "context": "c", "question": "q", "answers": {"text": [], "answer_start": []}}
{"id": "b", "context": "c", "question": 5, "answers": {"text": [], "answer_start": []}}"#,
            "2:",
            "field `question`",
        ),
        (
            r#"{"id": "a", "context": "c", "question": "q"}"#,
            "1:",
            "missing field `answers`",
        ),
        (
            r#"{"id": "a", "context": "c", "question": "q", "answers": {"text": ["x"], "answer_start": []}}"#,
            "line 1",
            "1 texts but 0 answer_start",
        ),
        (
            r#"{"id": "a", "context": "c", "question": "q", "answers": {"text": [], "answer_st"#,
            "1:",
            "EOF",
        ),
    ];
    for (i, (text, place, want)) in cases.iter().enumerate() {
        let p = write(dir.path(), &format!("r{i}.jsonl"), text.as_bytes());
        let e = load(&[p], false).unwrap_err().to_string();
        assert!(e.contains(place) && e.contains(want), "{i}: {e}");
    }
    let p = write(dir.path(), "x.txt", b"id,question\n1,2\n");
    let e = load(&[p], false).unwrap_err().to_string();
    assert!(
        e.contains("not a SQuAD, Hugging Face or MRQA file: it starts with \"id,question"),
        "{e}"
    );
}

#[test]
fn a_row_may_leave_an_answers_offset_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let rows = r#"{"id": "a", "context": "Ann B met C.", "question": "Who?", "answers": {"text": ["Ann", "Ann B"], "answer_start": [null, 0]}}"#;
    let p = write(dir.path(), "unknown.jsonl", rows.as_bytes());
    let (l, _) = load(&[p], false).unwrap();
    let texts: Vec<&str> = l.dataset.examples[0]
        .answers
        .iter()
        .map(|a| a.text.as_str())
        .collect();
    assert_eq!(texts, ["Ann", "Ann B"]);
    assert_eq!(l.answers_without_start, 1);
    let negative = rows.replace("[null, 0]", "[null, -1]");
    let p = write(dir.path(), "negative.jsonl", negative.as_bytes());
    let e = load(&[p], false).unwrap_err().to_string();
    assert!(e.contains("answer_start`: -1 is negative"), "{e}");
}

#[test]
fn several_files_read_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let (one, _) = load(&[write(dir.path(), "all.jsonl", HF.as_bytes())], false).unwrap();
    let (first, second) = HF.split_at(HF.find("\n\n").unwrap());
    let a = write(dir.path(), "a.jsonl", first.as_bytes());
    let b = write(dir.path(), "b.jsonl", second.as_bytes());
    let (two, _) = load(&[a.clone(), b], false).unwrap();
    assert_eq!(two.dataset.examples, one.dataset.examples);
    let e = load(&[a.clone(), a], false).unwrap_err().to_string();
    assert!(
        e.contains("duplicate question id (already in an earlier `data` file)"),
        "{e}"
    );
}

#[test]
fn any_dataset_writes_back_as_squad_json() {
    let dir = tempfile::tempdir().unwrap();
    let (hf, _) = load(&[write(dir.path(), "h.jsonl", HF.as_bytes())], false).unwrap();
    let mut out = Vec::new();
    write_squad(&hf.dataset, &mut out).unwrap();
    let back = write(dir.path(), "back.json", &out);
    let (again, f) = load(&[back], false).unwrap();
    assert_eq!(f, Format::Squad);
    assert_eq!(again.dataset.examples, hf.dataset.examples);
}

#[test]
fn the_first_key_is_read_without_the_rest() {
    assert_eq!(first_key(br#"{ "data": [..."#), Some(&b"data"[..]));
    assert_eq!(first_key(br#"{"a\"b": 1}"#), Some(&br#"a\"b"#[..]));
    assert_eq!(first_key(b"{}"), None);
    assert_eq!(first_key(b"[1]"), None);
}
