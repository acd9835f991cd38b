//! Slices (docs/algorithm.md, "Slices") on the real local Triton: eval names the slice
//! a model is wrong on, with p-values computed here apart from bertqa (Fisher's exact
//! test by its definition, Holm's adjustment); the windows' slices equal what `bertqa
//! features` cuts, question by question.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::{bertqa, json_following, root, server, show, strings};

/// The dimensions in the order the reports list them.
const DIMENSIONS: [&str; 7] = [
    "question_type",
    "answerable",
    "context_windows",
    "answer_windows",
    "answer_length",
    "margin",
    "null_margin",
];

/// The lines of a JSON Lines file.
fn json_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// ln(k!) for k = 0..=n.
fn ln_factorials(n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n + 1];
    for k in 1..=n {
        out[k] = out[k - 1] + (k as f64).ln();
    }
    out
}

/// Two-sided Fisher's exact test of [[a, b], [c, d]] by its definition: the
/// hypergeometric probability of every table with the same margins no likelier than
/// the observed one (within a relative 1e-7), each from log-factorials.
fn fisher(a: usize, b: usize, c: usize, d: usize, lf: &[f64]) -> f64 {
    let (row, col, n) = (a + b, a + c, a + b + c + d);
    let p = |x: usize| {
        (lf[row] + lf[n - row] + lf[col] + lf[n - col]
            - lf[n]
            - lf[x]
            - lf[row - x]
            - lf[col - x]
            - lf[n + x - row - col])
            .exp()
    };
    let observed = p(a);
    let lo = (row + col).saturating_sub(n);
    (lo..=row.min(col))
        .map(p)
        .filter(|&q| q <= observed * (1.0 + 1e-7))
        .sum::<f64>()
        .min(1.0)
}

/// Holm's adjustment of `p`, in its order.
fn holm(p: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut out = vec![0.0; p.len()];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((p.len() - rank) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}

/// Every slice of per_question.jsonl's lines as `dimension:slice`, in the reports'
/// order, with its questions (indexes).
fn slices_of(lines: &[Value]) -> Vec<(String, Vec<usize>)> {
    let mut out = Vec::new();
    for d in DIMENSIONS {
        let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, line) in lines.iter().enumerate() {
            if let Some(name) = line["slices"][d].as_str() {
                by_name.entry(name.to_string()).or_default().push(i);
            }
        }
        out.extend(
            by_name
                .into_iter()
                .map(|(name, m)| (format!("{d}:{name}"), m)),
        );
    }
    out
}

/// A report's `slices` (`ours`) against per_question.jsonl's `lines` and each question's
/// flag (an error, or a changed answer): the same slices in the same order, each with
/// as many questions, its p-value and Holm-adjusted p-value those computed here (Fisher's
/// test of the slice's flagged questions against the rest's) to 1e-9. The slices with
/// their questions, and the adjusted p-values.
fn assert_tested(
    lines: &[Value],
    flagged: &[bool],
    ours: &[Value],
) -> (Vec<(String, Vec<usize>)>, Vec<f64>) {
    let expected = slices_of(lines);
    assert_eq!(
        ours.iter()
            .map(|s| s["slice"].as_str().unwrap())
            .collect::<Vec<_>>(),
        expected.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>()
    );
    let lf = ln_factorials(flagged.len());
    let total = flagged.iter().filter(|&&f| f).count();
    let p: Vec<f64> = expected
        .iter()
        .map(|(_, m)| {
            let hits = m.iter().filter(|&&i| flagged[i]).count();
            let rest = flagged.len() - m.len();
            fisher(
                hits,
                m.len() - hits,
                total - hits,
                rest - (total - hits),
                &lf,
            )
        })
        .collect();
    let adjusted = holm(&p);
    for (k, ((name, m), s)) in expected.iter().zip(ours).enumerate() {
        assert_eq!(s["questions"], m.len(), "{name}");
        let (got, got_adjusted) = (
            s["p_value"].as_f64().unwrap(),
            s["p_adjusted"].as_f64().unwrap(),
        );
        assert!((got - p[k]).abs() < 1e-9, "{name}: p {got} vs {}", p[k]);
        assert!(
            (got_adjusted - adjusted[k]).abs() < 1e-9,
            "{name}: adjusted {got_adjusted} vs {}",
            adjusted[k]
        );
    }
    (expected, adjusted)
}

/// The arguments of `eval` of `oracle-wrong-when` on compare-1200.json into `out`, then
/// `extra`.
fn eval_wrong_when(out: &std::path::Path, extra: &[&str]) -> Vec<String> {
    let data = root().join("tests/compare-data/compare-1200.json");
    let mut args: Vec<String> = vec![
        "eval".into(),
        "--url".into(),
        server().url.clone(),
        "--model".into(),
        "oracle-wrong-when".into(),
        "--data".into(),
        data.display().to_string(),
        "--output-dir".into(),
        out.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

#[test]
fn eval_names_the_slice_a_model_is_wrong_on_as_computed_independently() {
    let tmp = tempfile::tempdir().unwrap();
    let args = eval_wrong_when(tmp.path(), &["--bootstrap", "1000", "--json"]);
    let report = json_following("eval", &args.iter().map(String::as_str).collect::<Vec<_>>());
    let weak = strings(&report["weak_slices"]);
    assert!(weak.contains(&"question_type:when"), "{weak:?}");
    assert!(!weak.contains(&"question_type:what"), "{weak:?}");

    let lines = json_lines(&tmp.path().join("per_question.jsonl"));
    let errors: Vec<bool> = lines.iter().map(|l| l["exact"] == 0.0).collect();
    // Every "when" question is wrong; the oracle answers the others.
    for (line, &wrong) in lines.iter().zip(&errors) {
        let when = line["slices"]["question_type"] == "when";
        assert!(!when || wrong, "{line}");
    }
    let ours = report["slices"].as_array().unwrap();
    let (expected, adjusted) = assert_tested(&lines, &errors, ours);
    let total_errors = errors.iter().filter(|&&e| e).count();
    let mut named = Vec::new();
    for (k, ((name, members), s)) in expected.iter().zip(ours).enumerate() {
        let mean = |key: &str| {
            100.0
                * members
                    .iter()
                    .map(|&i| lines[i][key].as_f64().unwrap())
                    .sum::<f64>()
                / members.len() as f64
        };
        for key in ["exact", "f1"] {
            let value = s[key].as_f64().unwrap();
            assert!((value - mean(key)).abs() < 1e-5, "{name} {key}");
            let ci = &s[&format!("{key}_ci")];
            let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
            assert!(
                lo <= value + 1e-9 && value <= hi + 1e-9,
                "{name} {key} {ci}"
            );
        }
        let hits = members.iter().filter(|&&i| errors[i]).count();
        let rate = hits as f64 / members.len() as f64;
        let rest = (total_errors - hits) as f64 / (lines.len() - members.len()).max(1) as f64;
        if adjusted[k] < 0.05 && rate > rest {
            named.push(name.as_str());
        }
    }
    assert_eq!(weak, named);
    // The text report names the weak slice with its figures.
    let text = bertqa(&eval_wrong_when(
        &tmp.path().join("text"),
        &["--bootstrap", "200"],
    ));
    assert!(text.status.success(), "{}", show(&text));
    let stdout = String::from_utf8_lossy(&text.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("question_type:when"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.starts_with("weak slices") || line.starts_with(' '),
        "{line}"
    );
    assert!(line.contains("EM 0.00"), "{line}");
}

/// The words (the reader's whitespace: space, tab, CR, LF, U+202F) of `context`, as
/// each code point's word (-1 before the first).
fn char_words(context: &str) -> Vec<i64> {
    let mut out = Vec::new();
    let (mut words, mut inside) = (0i64, false);
    for c in context.chars() {
        if matches!(c, ' ' | '\t' | '\r' | '\n' | '\u{202F}') {
            inside = false;
        } else if !inside {
            inside = true;
            words += 1;
        }
        out.push(words - 1);
    }
    out
}

/// context_windows and answer_windows of each question of `data`, at `settings`, from
/// `bertqa features`' windows: a window holds the first gold answer when it holds every
/// piece of its first and last word (a word's pieces are the most any window maps to
/// it).
fn windows_from_features(
    data: &std::path::Path,
    settings: &[&str],
) -> Vec<(String, Option<String>)> {
    let mut args = vec!["features", "--data", data.to_str().unwrap()];
    args.extend_from_slice(settings);
    let o = bertqa(&args);
    assert!(o.status.success(), "{}", show(&o));
    let mut windows: BTreeMap<u64, Vec<BTreeMap<usize, u64>>> = BTreeMap::new();
    for line in String::from_utf8(o.stdout).unwrap().lines() {
        let f: Value = serde_json::from_str(line).unwrap();
        let map = f["token_to_orig_map"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.as_u64().unwrap()))
            .collect();
        windows
            .entry(f["example_index"].as_u64().unwrap())
            .or_default()
            .push(map);
    }
    let file: Value = serde_json::from_str(&std::fs::read_to_string(data).unwrap()).unwrap();
    let mut out = Vec::new();
    let mut index = 0u64;
    for article in file["data"].as_array().unwrap() {
        for para in article["paragraphs"].as_array().unwrap() {
            let context = para["context"].as_str().unwrap();
            let words = char_words(context);
            for qa in para["qas"].as_array().unwrap() {
                let ws = windows.get(&index).cloned().unwrap_or_default();
                index += 1;
                let count = match ws.len() {
                    0 | 1 => "1",
                    2 => "2",
                    _ => "3+",
                };
                let answer = qa["answers"]
                    .as_array()
                    .and_then(|a| a.first())
                    .filter(|_| !qa["is_impossible"].as_bool().unwrap_or(false));
                let placed = answer.map(|a| {
                    if ws.len() <= 1 {
                        return "single".to_string();
                    }
                    let start = a["answer_start"].as_u64().unwrap() as usize;
                    let len = a["text"].as_str().unwrap().chars().count();
                    let (w0, w1) = (
                        words[start].max(0) as u64,
                        words[start + len - 1].max(0) as u64,
                    );
                    let pieces = |w: u64, window: &BTreeMap<usize, u64>| {
                        window.values().filter(|&&x| x == w).count()
                    };
                    let full = |w: u64| ws.iter().map(|win| pieces(w, win)).max().unwrap_or(0);
                    let holding = ws
                        .iter()
                        .filter(|win| {
                            pieces(w0, win) == full(w0)
                                && pieces(w1, win) == full(w1)
                                && full(w0) > 0
                        })
                        .count();
                    match holding {
                        0 => "cut",
                        1 => "one",
                        _ => "overlap",
                    }
                    .to_string()
                });
                out.push((count.to_string(), placed));
            }
        }
    }
    out
}

#[test]
fn the_windows_slices_are_the_windows_features_cuts() {
    // Long contexts cut at two strides, and contexts beyond ASCII.
    let cases: [(&str, &str, &[&str]); 3] = [
        ("tests/fixtures/squad/v1-long.json", "128", &[]),
        ("tests/fixtures/squad/v2-long.json", "64", &[]),
        // Questions without answers: SQuAD 2.0's rules score them.
        (
            "tests/fixtures/squad/unicode.json",
            "128",
            &["--version-2-with-negative"],
        ),
    ];
    let mut seen = BTreeMap::new();
    for (data, stride, rules) in cases {
        let data = root().join(data);
        let tmp = tempfile::tempdir().unwrap();
        let mut args = vec![
            "eval",
            "--url",
            &server().url,
            "--model",
            "oracle",
            "--data",
            data.to_str().unwrap(),
            "--doc-stride",
            stride,
            "--output-dir",
            tmp.path().to_str().unwrap(),
            "--bootstrap",
            "100",
            "--quiet",
        ];
        args.extend_from_slice(rules);
        let o = bertqa(&args);
        assert!(o.status.success(), "{}", show(&o));
        let lines = json_lines(&tmp.path().join("per_question.jsonl"));
        let expected =
            windows_from_features(&data, &["--max-seq-length", "384", "--doc-stride", stride]);
        assert_eq!(lines.len(), expected.len());
        for (line, (count, placed)) in lines.iter().zip(&expected) {
            let slices = &line["slices"];
            assert_eq!(slices["context_windows"], count.as_str(), "{line}");
            assert_eq!(
                slices["answer_windows"].as_str(),
                placed.as_deref(),
                "{line}"
            );
            *seen.entry(placed.clone()).or_insert(0) += 1;
        }
    }
    // The cases see every kind of placement.
    for kind in ["single", "one", "overlap"] {
        assert!(seen.contains_key(&Some(kind.to_string())), "{seen:?}");
    }
}

/// `compare --json` of `models` on compare-1200.json into `out`, with `extra` flags.
fn compare_1200(models: &str, out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["--bootstrap", "1000"];
    args.extend_from_slice(extra);
    crate::common::compare_on("tests/compare-data/compare-1200.json", models, out, &args)
}

/// Question id → answer text of a run's predictions.json.
fn answers(dir: &std::path::Path) -> serde_json::Map<String, Value> {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("predictions.json")).unwrap())
            .unwrap();
    v.as_object().unwrap().clone()
}

#[test]
fn compare_names_where_the_changes_concentrate_as_computed_independently() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("live");
    let o = compare_1200(
        "oracle,oracle-wrong-when,oracle-lossy-1",
        &out,
        &["--fail-if-concentrated"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::common::assert_schema("compare", &v);
    let when = &v["comparisons"][0];
    assert_eq!(when["model"], "oracle-wrong-when");
    let named = strings(&when["concentrated_in"]);
    assert!(named.contains(&"question_type:when"), "{named:?}");
    assert!(!named.contains(&"question_type:what"), "{named:?}");
    // Wrong at random: the changes gather nowhere.
    assert_eq!(
        v["comparisons"][1]["concentrated_in"],
        serde_json::json!([]),
        "{}",
        v["comparisons"][1]
    );
    // The gate names the slice, for the one model only.
    let failed: Vec<&Value> = v["gates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["passed"] == false)
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["model"], "oracle-wrong-when");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("--fail-if-concentrated") && stderr.contains("question_type:when"),
        "{stderr}"
    );

    // The p-values, computed here from the runs' files.
    let reference = json_lines(&out.join("oracle/per_question.jsonl"));
    let (ours, theirs) = (
        answers(&out.join("oracle")),
        answers(&out.join("oracle-wrong-when")),
    );
    let changed: Vec<bool> = reference
        .iter()
        .map(|l| {
            let id = l["id"].as_str().unwrap();
            ours[id] != theirs[id]
        })
        .collect();
    let slices = when["slices"].as_array().unwrap();
    let (expected, _) = assert_tested(&reference, &changed, slices);
    for ((name, m), s) in expected.iter().zip(slices) {
        assert_eq!(
            s["changed"],
            m.iter().filter(|&&i| changed[i]).count(),
            "{name}"
        );
        let value = s["exact_diff"]["value"].as_f64().unwrap();
        let ci = &s["exact_diff"]["ci"];
        assert!(
            ci[0].as_f64().unwrap() <= value + 1e-9 && value <= ci[1].as_f64().unwrap() + 1e-9,
            "{name}: {s}"
        );
    }
    let when_slice = slices
        .iter()
        .find(|s| s["slice"] == "question_type:when")
        .unwrap();
    assert!(
        when_slice["exact_diff"]["value"].as_f64().unwrap() < -50.0,
        "{when_slice}"
    );
    assert!(
        when_slice["exact_diff"]["p_value"].as_f64().unwrap() < 1e-6,
        "{when_slice}"
    );
    // flips.jsonl: each line with its question's slices in the reference run.
    let by_id: BTreeMap<&str, &Value> = reference
        .iter()
        .map(|l| (l["id"].as_str().unwrap(), &l["slices"]))
        .collect();
    let flips = json_lines(&out.join("flips.jsonl"));
    assert!(!flips.is_empty());
    for line in &flips {
        assert_eq!(
            &line["slices"],
            by_id[line["id"].as_str().unwrap()],
            "{line}"
        );
    }

    // The finished runs give the same slices without a server.
    let runs = bertqa(&[
        "compare",
        "--runs",
        out.join("oracle").to_str().unwrap(),
        out.join("oracle-wrong-when").to_str().unwrap(),
        "--data",
        root()
            .join("tests/compare-data/compare-1200.json")
            .to_str()
            .unwrap(),
        "--bootstrap",
        "1000",
        "--json",
    ]);
    assert!(runs.status.success(), "{}", show(&runs));
    let r: Value = serde_json::from_slice(&runs.stdout).unwrap();
    assert_eq!(r["comparisons"][0]["slices"], when["slices"]);
    assert_eq!(
        r["comparisons"][0]["concentrated_in"],
        when["concentrated_in"]
    );

    // A model equal to the reference passes the gate.
    let same = compare_1200(
        "oracle,oracle-nobatch",
        &tmp.path().join("same"),
        &["--fail-if-concentrated"],
    );
    assert_eq!(same.status.code(), Some(0), "{}", show(&same));
}
