//! `perf --html` and `eval --html` from real runs on the local Triton, loaded in headless
//! Chromium ([`crate::common::browser`]): each page renders with no console message, its
//! chart and tables are in the DOM with the run's figures, and it names no remote URL.
//! First, that the browser check sees a page's console errors and exceptions at all.

use std::collections::HashMap;

use serde_json::Value;

use crate::common::browser::{self, load, remote_urls, rendered};
use crate::common::{bertqa, eval, fixture, json_of, ok, read, read_json, server, show, SAMPLE};

/// One table cell of a dumped DOM: its `data-sort` number, if any, and its text.
#[derive(Debug)]
struct Cell {
    sort: Option<f64>,
    text: String,
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The rows `<tr class="CLASS">` of `dom`, cell by cell.
fn rows(dom: &str, class: &str) -> Vec<Vec<Cell>> {
    let open = format!("<tr class=\"{class}\"");
    dom.split(&open)
        .skip(1)
        .filter(|row| row.starts_with('>') || row.starts_with(' '))
        .map(|row| {
            let row = &row[..row.find("</tr>").expect("closed row")];
            row.split("<td ")
                .skip(1)
                .map(|td| {
                    let (attrs, rest) = td.split_once('>').unwrap();
                    let sort = attrs
                        .split_once("data-sort=\"")
                        .map(|(_, v)| v[..v.find('"').unwrap()].parse().unwrap());
                    let text = unescape(&rest[..rest.find("</td>").unwrap()]);
                    Cell { sort, text }
                })
                .collect()
        })
        .collect()
}

#[test]
fn the_browser_check_sees_console_errors_and_exceptions() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><html><body><p id=\"p\">before</p><script>\
         console.error('deliberate error');\
         document.getElementById('p').textContent = 'after';\
         throw new Error('deliberate throw');</script></body></html>",
    )
    .unwrap();
    let loaded = load(&bad);
    // The DOM is the one after the script ran.
    assert!(
        loaded.dom.contains("<p id=\"p\">after</p>"),
        "{}",
        loaded.dom
    );
    assert_eq!(loaded.console.len(), 2, "{}", loaded.log);
    assert!(
        loaded.console[0].contains("deliberate error"),
        "{:?}",
        loaded.console
    );
    assert!(
        loaded.console[1].contains("Uncaught Error: deliberate throw"),
        "{:?}",
        loaded.console
    );
    let caught = std::panic::catch_unwind(|| loaded.assert_clean("bad.html"));
    assert!(
        caught.is_err(),
        "a page with console errors passed the check"
    );
    // And a quiet page passes it.
    let good = tmp.path().join("good.html");
    std::fs::write(
        &good,
        "<!DOCTYPE html><html><body><p id=\"p\">before</p><script>\
         document.getElementById('p').textContent = 'after';</script></body></html>",
    )
    .unwrap();
    let loaded = load(&good);
    loaded.assert_clean("good.html");
    assert!(loaded.dom.contains("<p id=\"p\">after</p>"));
    // The log lines of older Chromium versions are read too.
    assert_eq!(
        browser::console_messages(
            "[1:2:0101/000000.1:INFO:CONSOLE(7)] \"x\", source: file:///a.html (7)\n\
             [1:2:0101/000000.1:ERROR:dbus/bus.cc:405] not a console line"
        ),
        ["\"x\", source: file:///a.html (7)"]
    );
    // Remote references are found where a page would fetch them, not in its text.
    assert_eq!(
        remote_urls(
            "<svg xmlns=\"http://www.w3.org/2000/svg\"></svg><img src=\"https://cdn.example/x.png\">\
             <link href=\"//fonts.example/f.css\"><p>http://a.example/b</p>\
             <div style=\"background:url(http://x.example/y.png)\"></div>"
        ),
        [
            "http://x.example/y.png",
            "https://cdn.example/x.png",
            "//fonts.example/f.css"
        ]
    );
}

#[test]
fn perf_html_renders_with_its_chart_levels_and_bars() {
    let tmp = tempfile::tempdir().unwrap();
    let html = tmp.path().join("perf.html");
    let o = bertqa(&[
        "perf",
        "--model",
        "null",
        "--data",
        SAMPLE,
        "--url",
        &server().url,
        "--concurrency-range",
        "1:3",
        "--batch-size",
        "4",
        "--measurement-request-count",
        "10",
        "--stability-percentage",
        "100",
        "--max-trials",
        "3",
        // A budget every level keeps: the page adds its verdict and goodput.
        "--latency-threshold",
        "60000",
        "--metrics-url",
        &format!("127.0.0.1:{}", server().metrics_port),
        "--quiet",
        "--json",
        "--html",
        html.to_str().unwrap(),
    ]);
    let v = json_of(&o);
    let dom = rendered(&html);
    assert!(dom.contains("<h1>bertqa perf: null</h1>"), "{dom}");
    // The chart: both percentiles' lines, a marker per level on each.
    assert!(dom.contains("<polyline class=\"p50-latency\""));
    assert!(dom.contains("<polyline class=\"p99-latency\""));
    assert_eq!(dom.matches("<circle ").count(), 6);
    // The level table: a row per level, with the JSON report's figures.
    let levels = rows(&dom, "level");
    let json_levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 3, "{dom}");
    for (row, l) in levels.iter().zip(json_levels) {
        assert_eq!(row[0].sort, l["concurrency"].as_f64());
        let fps = l["throughput"]["features_per_s"].as_f64().unwrap();
        assert!((row[1].sort.unwrap() - fps).abs() < 1e-3 * fps, "{l}");
        let p99 = l["latency_ms"]["p99"].as_f64().unwrap();
        assert!((row[5].sort.unwrap() - p99).abs() < 1e-3, "{l}");
        assert_eq!(row[9].text, "within");
        assert_eq!(row[10].sort, Some(100.0));
    }
    assert!(dom.contains("within budget (p99 ≤ 60000 ms): concurrency 3, p99 "));
    // Triton reports its statistics: every level has its eight latency parts.
    assert_eq!(dom.matches("<rect class=\"part\"").count(), 3 * 8, "{dom}");
    assert!(dom.contains("concurrency 2: compute infer "));
    assert!(!dom.contains("server breakdown not reported by the server"));
    assert_eq!(rows(&dom, "metrics").len(), 3);
    // The server's metrics per level: Triton's CPU here, no GPU.
    let metrics = rows(&dom, "server-metrics");
    assert_eq!(metrics.len(), 3, "{dom}");
    for row in &metrics {
        assert!(row[1].sort.is_some(), "CPU % is a number: {}", row[1].text);
        assert_eq!(row[3].text, "GPU: not reported by the server");
    }
}

/// The score the page should show for an answer: start + end logit of the first n-best
/// entry with its text.
fn score_in(nbest: &Value, id: &str, answer: &str) -> Option<f64> {
    nbest[id].as_array()?.iter().find_map(|e| {
        (e["text"] == answer)
            .then(|| e["start_logit"].as_f64().unwrap() + e["end_logit"].as_f64().unwrap())
    })
}

#[test]
fn eval_html_renders_with_scores_histogram_and_the_worst_questions() {
    let tmp = tempfile::tempdir().unwrap();
    let (plain, with) = (tmp.path().join("plain"), tmp.path().join("html"));
    let html = tmp.path().join("eval.html");
    // 24 questions of SQuAD 2.0 data that tiny-bert (random weights) gets wrong but for
    // a few: more than the table lists.
    let long = fixture("v2-long.json");
    let data = ["--data", &long];
    let o = eval(SAMPLE, "tiny-bert", &plain, &data);
    ok(&o);
    let o = eval(
        SAMPLE,
        "tiny-bert",
        &with,
        &[&data[..], &["--html", html.to_str().unwrap()]].concat(),
    );
    ok(&o);
    // The answers and the scores are the same with --html.
    for f in [
        "predictions.json",
        "nbest_predictions.json",
        "null_odds.json",
        "per_question.jsonl",
    ] {
        assert!(
            read(plain.join(f)) == read(with.join(f)),
            "{f} differs with --html\n{}",
            show(&o)
        );
    }
    let dom = rendered(&html);
    assert!(dom.contains("<h1>bertqa eval: tiny-bert on "), "{dom}");
    // The official scores, as metrics.json has them.
    let metrics = read_json(with.join("metrics.json"));
    let scores: HashMap<String, f64> = rows(&dom, "metric")
        .iter()
        .map(|r| (r[0].text.clone(), r[1].sort.unwrap()))
        .collect();
    for key in ["exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1", "total"] {
        let want = metrics["metrics"][key].as_f64().unwrap();
        assert!((scores[key] - want).abs() < 1e-9, "{key}: {scores:?}");
    }
    // The slices, a row each as metrics.json has them (tiny-bert gets nothing right:
    // no slice stands out).
    let slices = metrics["slices"].as_array().unwrap();
    let table = rows(&dom, "slice");
    assert!(!slices.is_empty());
    assert_eq!(table.len(), slices.len(), "{dom}");
    for (row, x) in table.iter().zip(slices) {
        assert_eq!(row[0].text, x["slice"].as_str().unwrap());
        assert_eq!(row[1].sort, x["questions"].as_f64());
        // metrics.json rounds to 6 decimals.
        assert!((row[4].sort.unwrap() - x["f1"].as_f64().unwrap()).abs() < 1e-5);
    }
    // The latency: the percentiles of metrics.json, and a histogram of every request.
    let latency = rows(&dom, "latency");
    assert_eq!(latency[0][0].sort, metrics["requests"].as_f64());
    assert!(
        (latency[0][4].sort.unwrap() - metrics["latency_ms"]["p99"].as_f64().unwrap()).abs() < 1e-3
    );
    let bins: u64 = dom
        .split("<rect class=\"bin\"")
        .skip(1)
        .map(|b| {
            let title = &b[..b.find(" requests</title>").unwrap()];
            title.rsplit(": ").next().unwrap().parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(Some(bins), metrics["requests"].as_u64(), "{dom}");
    // The worst questions: F1 below 1, lowest first, the highest score first at equal F1
    // (the data's order after that), at most 20; each with its per_question.jsonl F1 and
    // its n-best score.
    let per_question: Vec<Value> = read(with.join("per_question.jsonl"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let nbest = read_json(with.join("nbest_predictions.json"));
    let mut wrong: Vec<(&str, f64, f64)> = per_question
        .iter()
        .filter(|q| q["f1"].as_f64().unwrap() < 1.0)
        .map(|q| {
            let id = q["id"].as_str().unwrap();
            let score = score_in(&nbest, id, q["prediction"].as_str().unwrap()).unwrap();
            (id, q["f1"].as_f64().unwrap(), score)
        })
        .collect();
    assert!(
        wrong.len() > 20,
        "{} wrong answers: too few to test the cut",
        wrong.len()
    );
    wrong.sort_by(|a, b| a.1.total_cmp(&b.1).then(b.2.total_cmp(&a.2)));
    let shown = rows(&dom, "question");
    assert_eq!(shown.len(), 20);
    let ids: Vec<&str> = shown.iter().map(|r| r[0].text.as_str()).collect();
    let want: Vec<&str> = wrong.iter().take(20).map(|w| w.0).collect();
    assert_eq!(ids, want);
    for (row, (id, f1, score)) in shown.iter().zip(&wrong) {
        assert!((row[4].sort.unwrap() - f1).abs() < 1e-12, "{id}");
        assert!((row[5].sort.unwrap() - score).abs() < 1e-6, "{id}");
    }
    // Some ties on F1 were broken by the score, so the order is not F1's alone.
    assert!(
        shown
            .windows(2)
            .any(|w| w[0][4].sort == w[1][4].sort && w[0][5].sort > w[1][5].sort),
        "no tie on F1 to break"
    );
    // Each row shows the question and its gold answers from the data.
    let questions: HashMap<String, (String, Vec<String>)> =
        serde_json::from_str::<Value>(&read(&long)).unwrap()["data"]
            .as_array()
            .unwrap()
            .iter()
            .chain(
                read_json(crate::common::root().join(SAMPLE))["data"]
                    .as_array()
                    .unwrap(),
            )
            .flat_map(|a| a["paragraphs"].as_array().unwrap().iter())
            .flat_map(|p| p["qas"].as_array().unwrap().iter())
            .map(|q| {
                let gold = q["answers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a["text"].as_str().unwrap().to_string())
                    .collect();
                (
                    q["id"].as_str().unwrap().to_string(),
                    (q["question"].as_str().unwrap().to_string(), gold),
                )
            })
            .collect();
    for row in &shown {
        let (question, gold) = &questions[&row[0].text];
        assert_eq!(&row[1].text, question);
        let want = if gold.is_empty() {
            "(no answer)".to_string()
        } else {
            gold.join(" | ")
        };
        assert_eq!(row[3].text, want);
    }
}

#[test]
fn an_html_file_in_a_missing_directory_stops_the_run_before_it_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("missing/report.html");
    let out = tmp.path().join("out");
    let missing = format!(
        "--html {}: no directory {} to write it in",
        page.display(),
        tmp.path().join("missing").display()
    );
    // No server is asked (the URL is closed) and no output directory is made.
    let closed = format!("127.0.0.1:{}", crate::common::free_port());
    for command in ["eval", "perf"] {
        let mut args = vec![
            command,
            "--model",
            "null",
            "--data",
            SAMPLE,
            "--url",
            &closed,
            "--html",
            page.to_str().unwrap(),
        ];
        if command == "eval" {
            args.extend(["--output-dir", out.to_str().unwrap()]);
        }
        crate::common::assert_fails_with(&bertqa(&args), &[&missing]);
        assert!(!out.exists());
    }
}

#[test]
fn compare_html_renders_each_interval_against_zero_and_the_flips() {
    let tmp = tempfile::tempdir().unwrap();
    let html = tmp.path().join("compare.html");
    let data = crate::common::root().join("tests/compare-data/compare-1200.json");
    let o = bertqa(&[
        "compare",
        "--models",
        "oracle,oracle-lossy-1",
        "--data",
        data.to_str().unwrap(),
        "--url",
        &server().url,
        "--output-dir",
        tmp.path().join("out").to_str().unwrap(),
        "--json",
        "--html",
        html.to_str().unwrap(),
    ]);
    let v = json_of(&o);
    let dom = rendered(&html);
    assert!(remote_urls(&dom).is_empty(), "{:?}", remote_urls(&dom));
    // Two intervals (exact match and F1), each a bar and a point, and the zero line.
    assert_eq!(dom.matches("<line class=\"ci\"").count(), 2, "{dom}");
    assert_eq!(dom.matches("<circle class=\"point\"").count(), 2);
    assert!(dom.contains("stroke=\"#333\""), "the zero line");
    let c = &v["comparisons"][0];
    let row = &rows(&dom, "comparison")[0];
    assert_eq!(row[0].text, "oracle-lossy-1");
    assert_eq!(row[1].sort, c["exact_diff"]["value"].as_f64());
    let ci = &c["exact_diff"]["ci"];
    let shown = format!(
        "[{:+.2}, {:+.2}]",
        ci[0].as_f64().unwrap(),
        ci[1].as_f64().unwrap()
    );
    assert_eq!(row[2].text, shown);
    assert_eq!(row[7].sort, c["flips"]["right_to_wrong"].as_f64());
    // The flipped questions: the first 200 of those in flips.jsonl, in its order.
    let flips = read(tmp.path().join("out/flips.jsonl"));
    let first: Value = serde_json::from_str(flips.lines().next().unwrap()).unwrap();
    let table = rows(&dom, "flip");
    assert_eq!(table.len(), flips.lines().count().min(200));
    assert_eq!(table[0][0].text, first["id"].as_str().unwrap());
    assert_eq!(table[0][3].text, first["answers"][0].as_str().unwrap());
    // Each flipped question's text beside its id.
    let file: Value = serde_json::from_str(&read(&data)).unwrap();
    let question = file["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|a| a["paragraphs"].as_array().unwrap())
        .flat_map(|p| p["qas"].as_array().unwrap())
        .find(|q| q["id"] == first["id"])
        .unwrap();
    assert_eq!(table[0][1].text, question["question"].as_str().unwrap());
    // The slices: a row each, as the report has them, and a chart of their intervals.
    let slices = c["slices"].as_array().unwrap();
    let table = rows(&dom, "slice");
    assert_eq!(table.len(), slices.len(), "{dom}");
    for (row, s) in table.iter().zip(slices) {
        assert_eq!(row[0].text, s["slice"].as_str().unwrap());
        assert_eq!(row[1].sort, s["questions"].as_f64());
        assert_eq!(row[6].sort, s["changed"].as_f64());
    }
    assert_eq!(
        dom.matches("<line class=\"slice-ci\"").count(),
        slices.len()
    );
    // Filtered by a slice (the address chooses it): only that slice's flips are shown.
    let chosen = "question_type:what";
    let filtered = crate::common::browser::load_at(&html, &format!("#slice={chosen}"));
    filtered.assert_clean("compare.html#slice");
    let shown: Vec<&str> = filtered
        .dom
        .split("<tr class=\"flip\"")
        .skip(1)
        .filter(|row| !row[..row.find('>').unwrap()].contains("hidden"))
        .collect();
    let expected = flips
        .lines()
        .take(200)
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["slices"]["question_type"] == "what")
        .count();
    assert!(
        expected > 0 && expected < table_len(&dom, "flip"),
        "{expected}"
    );
    assert_eq!(shown.len(), expected);
    assert!(shown.iter().all(|row| row.contains(chosen)));
}

/// The rows of class `class` in `dom`.
fn table_len(dom: &str, class: &str) -> usize {
    rows(dom, class).len()
}
