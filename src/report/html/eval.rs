//! `eval --html`: the run's setting, the official scores, the slices (each slice's
//! scores with their intervals, its error rate against the rest's, the weak ones
//! marked), the speed (throughput and latency percentiles), a histogram of the
//! per-request latencies, and the worst questions: the `WORST` with the lowest F1 below 1, ties broken by the highest
//! answer score (the most confident wrong answers first).

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::{escape, nice_step, note, section, setting_list, table, Cell};
use crate::evaluate::{MetricValue, Metrics};

/// How many questions the worst-questions table lists at most.
pub(crate) const WORST: usize = 20;

/// One question as the page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionRow {
    /// The question's id in the data.
    pub id: String,
    /// The question's text.
    pub question: String,
    /// The answer given (`""`: no answer).
    pub prediction: String,
    /// The gold answers' texts (none: the question has no answer).
    pub gold: Vec<String>,
    /// The official F1 of the prediction, 0 to 1.
    pub f1: f64,
    /// The answer's score (start + end logit of its n-best entry; for "no answer" the
    /// null score); `None` when there was no prediction.
    pub score: Option<f64>,
}

/// What the page shows, in plain data.
#[derive(Debug, Clone)]
pub struct EvalPage<'a> {
    /// The title's words, e.g. the model's name.
    pub title: String,
    /// The setting (`model`, `data`), each a name and its words as the text report's.
    pub setting: Vec<(&'static str, String)>,
    /// The official scores.
    pub metrics: &'a Metrics,
    /// The run's wall time, seconds.
    pub wall_s: f64,
    /// Windows answered per second of wall time.
    pub features_per_s: f64,
    /// Questions answered per second of wall time.
    pub questions_per_s: f64,
    /// Per-request latencies, microseconds (`None` or empty: no requests were sent).
    pub(crate) latency_us: Option<&'a Histogram<u64>>,
    /// Every question, in the data's order.
    pub questions: Vec<QuestionRow>,
    /// Every slice of the questions (docs/algorithm.md, "Slices").
    pub slices: &'a [crate::slices::Slice],
    /// The weak ones.
    pub weak_slices: &'a [String],
}

/// The questions the worst-questions table lists: F1 below 1, lowest F1 first; at
/// equal F1 the higher score first, no score last; then in the data's order.
pub(crate) fn worst(questions: &[QuestionRow]) -> Vec<&QuestionRow> {
    let mut wrong: Vec<&QuestionRow> = questions.iter().filter(|q| q.f1 < 1.0).collect();
    let score = |q: &QuestionRow| q.score.filter(|s| !s.is_nan()).unwrap_or(f64::NEG_INFINITY);
    // Stable: ties keep the data's order.
    wrong.sort_by(|a, b| a.f1.total_cmp(&b.f1).then(score(b).total_cmp(&score(a))));
    wrong.truncate(WORST);
    wrong
}

/// The page's bytes.
pub fn render(p: &EvalPage<'_>) -> Vec<u8> {
    let mut s = String::new();
    let _ = writeln!(s, "<h1>bertqa eval: {}</h1>", escape(&p.title));
    setting_list(&mut s, &p.setting);
    scores(&mut s, p.metrics);
    slices(&mut s, p.slices, p.weak_slices);
    speed(&mut s, p);
    worst_questions(&mut s, &p.questions);
    super::page(&format!("bertqa eval: {}", p.title), &s).into_bytes()
}

/// The official scores, keys as the official scripts name them.
fn scores(s: &mut String, metrics: &Metrics) {
    section(s, "scores", "Scores");
    let rows: Vec<(String, Vec<Cell>)> = metrics
        .official()
        .into_iter()
        .map(|(k, v)| {
            let value = match v {
                MetricValue::Float(x) => Cell::num(x, 3),
                MetricValue::Count(n) => Cell::num(n as f64, 0),
            };
            ("metric".to_string(), vec![Cell::Text(k.into()), value])
        })
        .collect();
    table(s, "scores", &["metric", "value"], &rows);
}

/// Throughput, the latency percentiles and their histogram.
fn speed(s: &mut String, p: &EvalPage<'_>) {
    section(s, "speed", "Throughput and latency");
    setting_list(
        s,
        &[
            ("wall time", format!("{:.3} s", p.wall_s)),
            (
                "throughput",
                format!(
                    "{:.1} features/s, {:.1} questions/s",
                    p.features_per_s, p.questions_per_s
                ),
            ),
        ],
    );
    let Some(h) = p.latency_us.filter(|h| !h.is_empty()) else {
        note(
            s,
            "No requests were sent (decoded from saved logits): no latency.",
        );
        return;
    };
    let q = |x: f64| h.value_at_quantile(x) as f64;
    let cells = vec![
        Cell::num(h.len() as f64, 0),
        Cell::num(q(0.5) / 1000.0, 3),
        Cell::num(q(0.9) / 1000.0, 3),
        Cell::num(q(0.95) / 1000.0, 3),
        Cell::num(q(0.99) / 1000.0, 3),
        Cell::num(h.max() as f64 / 1000.0, 3),
        Cell::num(h.mean() / 1000.0, 3),
    ];
    table(
        s,
        "latency",
        &[
            "requests", "p50 ms", "p90 ms", "p95 ms", "p99 ms", "max ms", "mean ms",
        ],
        &[("latency".into(), cells)],
    );
    note(
        s,
        "Each request is timed from its send to its response: the server's time and the \
         network's, never time spent waiting inside bertqa.",
    );
    s.push_str(&histogram_svg(h));
}

/// How many bars the histogram has at most.
const BINS: usize = 40;

/// The latency histogram as inline SVG: requests per equal-width bin between the
/// fastest and the slowest request, with the p50 and p99 marked.
pub(crate) fn histogram_svg(h: &Histogram<u64>) -> String {
    const W: f64 = 760.0;
    const H: f64 = 300.0;
    const LEFT: f64 = 64.0;
    const RIGHT: f64 = 20.0;
    const TOP: f64 = 20.0;
    const BOTTOM: f64 = 48.0;
    let (lo, hi) = (h.min() as f64 / 1000.0, h.max() as f64 / 1000.0);
    let x_step = nice_step((hi - lo).max(0.001) * 1.05, 6);
    let x0 = (lo / x_step).floor() * x_step;
    let x1 = ((hi / x_step).floor() + 1.0) * x_step;
    let width = (x1 - x0) / BINS as f64;
    let mut counts = [0u64; BINS];
    for v in h.iter_recorded() {
        let ms = h.highest_equivalent(v.value_iterated_to()) as f64 / 1000.0;
        let ms = ms.min(hi);
        let bin = (((ms - x0) / width) as usize).min(BINS - 1);
        counts[bin] += v.count_at_value();
    }
    let top = counts.iter().copied().max().unwrap_or(0).max(1) as f64;
    let y_step = nice_step(top * 1.1, 5).max(1.0);
    let y_top = ((top * 1.1) / y_step).ceil() * y_step;
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * plot_w;
    let py = |y: f64| TOP + plot_h - y / y_top * plot_h;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg class="histogram" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let area = super::PlotArea {
        left: LEFT,
        top: TOP,
        width: plot_w,
        height: plot_h,
        x_label: "request latency (ms)",
        x_label_y: H - 10.0,
        y_label: "requests",
        y_label_x: 16.0,
    };
    area.y_grid(&mut s, y_top, y_step, |y| (y as u64).to_string());
    let decimals = if x_step >= 1.0 {
        0
    } else {
        (-x_step.log10().floor()) as usize
    };
    let mut x = x0;
    while x <= x1 + x_step * 1e-9 {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{x:.decimals$}</text>"#,
            px(x),
            TOP + plot_h + 18.0
        );
        x += x_step;
    }
    for (k, &n) in counts.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let from = x0 + width * k as f64;
        let _ = writeln!(
            s,
            r##"<rect class="bin" x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#1f77b4"><title>{from:.3}–{:.3} ms: {n} requests</title></rect>"##,
            px(from) + 0.5,
            py(n as f64),
            (plot_w / BINS as f64 - 1.0).max(0.5),
            plot_h - (py(n as f64) - TOP),
            from + width
        );
    }
    for (name, quantile, colour) in [("p50", 0.5, "#2ca02c"), ("p99", 0.99, "#d62728")] {
        let v = h.value_at_quantile(quantile) as f64 / 1000.0;
        // A label that would leave the plot on the right goes left of its line.
        let (label_x, anchor) = if px(v) > LEFT + plot_w - 110.0 {
            (px(v) - 4.0, "end")
        } else {
            (px(v) + 4.0, "start")
        };
        let _ = writeln!(
            s,
            r#"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{1:.1}" stroke="{colour}" stroke-dasharray="4 3"/><text x="{label_x:.1}" y="{2:.1}" fill="{colour}" text-anchor="{anchor}">{name} {v:.2} ms</text>"#,
            px(v),
            TOP + plot_h,
            TOP + if name == "p50" { 12.0 } else { 26.0 }
        );
    }
    area.frame(&mut s);
    s.push_str("</svg>\n");
    s
}

/// The slices' table (sortable): scores with their intervals, errors against the
/// rest's, the ratio of the two, the adjusted p-value, the weak ones marked.
fn slices(s: &mut String, slices: &[crate::slices::Slice], weak: &[String]) {
    if slices.is_empty() {
        return;
    }
    section(s, "slices", "Slices");
    let named = match weak.is_empty() {
        true => "No slice is weak.".to_string(),
        false => format!("Weak: {}.", weak.join(", ")),
    };
    note(
        s,
        &format!(
            "{named} A question is an error when its exact score is 0; a slice's errors are \
             tested against the rest's by Fisher's exact test, the p-values adjusted by \
             Holm's method over every slice; ratio: the slice's error rate over the rest's. \
             Intervals: a bootstrap over the slice's questions."
        ),
    );
    let rows: Vec<(String, Vec<Cell>)> = slices
        .iter()
        .map(|x| {
            let is_weak = weak.contains(&x.slice);
            let ratio = match x.rest_error_rate > 0.0 {
                true => Cell::num(x.error_rate / x.rest_error_rate, 2),
                false => Cell::Text("-".into()),
            };
            let interval = |ci: [f64; 2]| format!("[{:.2}, {:.2}]", ci[0], ci[1]);
            (
                if is_weak { "slice weak" } else { "slice" }.to_string(),
                vec![
                    Cell::Text(x.slice.clone()),
                    Cell::num(x.questions as f64, 0),
                    Cell::num(x.exact, 2),
                    Cell::Text(interval(x.exact_ci)),
                    Cell::num(x.f1, 2),
                    Cell::Text(interval(x.f1_ci)),
                    Cell::num(100.0 * x.error_rate, 1),
                    Cell::num(100.0 * x.rest_error_rate, 1),
                    ratio,
                    Cell::Text(format!("{:.2e}", x.p_adjusted)),
                    Cell::Text(if is_weak { "yes" } else { "" }.into()),
                ],
            )
        })
        .collect();
    table(
        s,
        "sortable slices",
        &[
            "slice",
            "questions",
            "EM",
            "interval",
            "F1",
            "interval",
            "errors %",
            "rest %",
            "ratio",
            "adjusted p",
            "weak",
        ],
        &rows,
    );
}

/// The worst-questions table (sortable), or a sentence when every answer scored F1 1.
fn worst_questions(s: &mut String, questions: &[QuestionRow]) {
    section(s, "worst", "Worst questions");
    let rows = worst(questions);
    let wrong = questions.iter().filter(|q| q.f1 < 1.0).count();
    if rows.is_empty() {
        note(
            s,
            &format!(
                "Every one of the {} questions scored F1 1.",
                questions.len()
            ),
        );
        return;
    }
    note(
        s,
        &format!(
            "{wrong} of {} questions scored F1 below 1; the {} lowest, the highest-scoring \
             wrong answers first at equal F1. Score: the answer's start + end logit (for no \
             answer, the null score). Click a column to sort.",
            questions.len(),
            rows.len()
        ),
    );
    let cells: Vec<(String, Vec<Cell>)> = rows
        .into_iter()
        .map(|q| {
            let words = |t: &str| {
                if t.is_empty() {
                    "(no answer)".to_string()
                } else {
                    t.to_string()
                }
            };
            let gold = if q.gold.is_empty() {
                "(no answer)".to_string()
            } else {
                q.gold.join(" | ")
            };
            let score = match q.score {
                Some(x) => Cell::num(x, 3),
                None => Cell::Text("(no prediction)".into()),
            };
            (
                "question".to_string(),
                vec![
                    Cell::Text(q.id.clone()),
                    Cell::Text(q.question.clone()),
                    Cell::Text(words(&q.prediction)),
                    Cell::Text(gold),
                    Cell::num(q.f1, 3),
                    score,
                ],
            )
        })
        .collect();
    table(
        s,
        "sortable worst",
        &[
            "id",
            "question",
            "prediction",
            "gold answers",
            "F1",
            "score",
        ],
        &cells,
    );
}

/// eval's page of `r`: its questions joined with their predictions, answer scores (by
/// id) and gold answers; `wording` words the settings the run's rows name.
pub(crate) fn page(
    r: &crate::report::eval::EvalRun,
    dataset: &crate::types::Dataset,
    predictions: &[crate::decode::Prediction],
    answer_scores: &std::collections::HashMap<String, f64>,
    wording: &dyn Fn(&str) -> String,
) -> Vec<u8> {
    let by_id: std::collections::HashMap<&str, &crate::decode::Prediction> =
        predictions.iter().map(|p| (p.qas_id.as_str(), p)).collect();
    let examples: std::collections::HashMap<&str, &crate::types::Example> = dataset
        .examples
        .iter()
        .map(|e| (e.qas_id.as_str(), e))
        .collect();
    let questions = r
        .scores
        .questions
        .iter()
        .map(|q| {
            let example = examples.get(q.qas_id.as_str());
            let prediction = by_id.get(q.qas_id.as_str());
            QuestionRow {
                id: q.qas_id.clone(),
                question: example.map(|e| e.question_text.clone()).unwrap_or_default(),
                prediction: prediction.map(|p| p.answer.clone()).unwrap_or_default(),
                gold: example
                    .map(|e| e.answers.iter().map(|a| a.text.clone()).collect())
                    .unwrap_or_default(),
                f1: q.f1,
                score: answer_scores.get(q.qas_id.as_str()).copied(),
            }
        })
        .collect();
    let title = match &r.binding {
        Some(b) => format!("{} on {}", b.name(), r.data),
        None => r.data.clone(),
    };
    let mut setting: Vec<_> = crate::report::eval::setting_rows(r)
        .into_iter()
        .map(|(name, words)| (name, wording(&words)))
        .collect();
    if let Some((_, m)) = &r.server_metrics {
        use crate::metrics::text::{counters, gauges};
        setting.push((
            "server",
            format!(
                "{}; {}",
                gauges(m.cpu_utilization, m.cpu_memory_used_bytes, &m.gpus),
                counters(m.inference.as_ref())
            ),
        ));
    }
    render(&EvalPage {
        title,
        setting,
        metrics: &r.scores.metrics,
        wall_s: r.wall.as_secs_f64(),
        features_per_s: crate::report::eval::rate(r.features as f64, r.wall),
        questions_per_s: crate::report::eval::rate(r.questions as f64, r.wall),
        latency_us: r.infer.as_ref().map(|i| &i.latency_us),
        questions,
        slices: &r.slices,
        weak_slices: &r.weak_slices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, f1: f64, score: Option<f64>) -> QuestionRow {
        QuestionRow {
            id: id.into(),
            question: format!("question {id}?"),
            prediction: "x".into(),
            gold: vec!["y".into()],
            f1,
            score,
        }
    }

    #[test]
    fn worst_is_lowest_f1_then_highest_score_then_data_order() {
        let qs = vec![
            row("right", 1.0, Some(99.0)),
            row("half", 0.5, Some(1.0)),
            row("zero-low", 0.0, Some(-3.0)),
            row("zero-none", 0.0, None),
            row("zero-high", 0.0, Some(7.5)),
            row("zero-high-later", 0.0, Some(7.5)),
            row("third", 0.33, Some(50.0)),
        ];
        let ids: Vec<&str> = worst(&qs).iter().map(|q| q.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "zero-high",
                "zero-high-later",
                "zero-low",
                "zero-none",
                "third",
                "half"
            ]
        );
    }

    #[test]
    fn worst_lists_at_most_twenty() {
        let qs: Vec<QuestionRow> = (0..30)
            .map(|i| row(&format!("q{i}"), 0.0, Some(f64::from(i))))
            .collect();
        let w = worst(&qs);
        assert_eq!(w.len(), WORST);
        assert_eq!(w[0].id, "q29");
        assert_eq!(w[19].id, "q10");
    }

    fn page_of(questions: Vec<QuestionRow>, h: Option<&Histogram<u64>>) -> String {
        let metrics = Metrics::V1 {
            exact_match: 50.0,
            f1: 62.5,
        };
        let p = EvalPage {
            title: "m<odel>".into(),
            setting: vec![("model", "m<odel> at host".into())],
            metrics: &metrics,
            wall_s: 1.0,
            features_per_s: 10.0,
            questions_per_s: 5.0,
            latency_us: h,
            questions,
            slices: &[],
            weak_slices: &[],
        };
        String::from_utf8(render(&p)).unwrap()
    }

    #[test]
    fn the_slices_table_marks_the_weak_ones() {
        let metrics = Metrics::V1 {
            exact_match: 50.0,
            f1: 60.0,
        };
        let slice = |name: &str, error_rate: f64| crate::slices::Slice {
            slice: name.into(),
            questions: 10,
            exact: 100.0 * (1.0 - error_rate),
            f1: 100.0 * (1.0 - error_rate),
            exact_ci: [10.0, 90.0],
            f1_ci: [12.5, 90.0],
            error_rate,
            rest_error_rate: 0.1,
            p_value: 0.001,
            p_adjusted: 0.002,
        };
        let slices = [slice("question_type:when", 1.0), slice("question_type:what", 0.1)];
        let weak = ["question_type:when".to_string()];
        let p = EvalPage {
            title: "m".into(),
            setting: vec![],
            metrics: &metrics,
            wall_s: 1.0,
            features_per_s: 10.0,
            questions_per_s: 5.0,
            latency_us: None,
            questions: vec![],
            slices: &slices,
            weak_slices: &weak,
        };
        let html = String::from_utf8(render(&p)).unwrap();
        assert!(html.contains("Weak: question_type:when."), "{html}");
        assert_eq!(html.matches("<tr class=\"slice weak\">").count(), 1, "{html}");
        assert_eq!(html.matches("<tr class=\"slice\">").count(), 1, "{html}");
        // The ratio of the error rates, and the interval.
        assert!(html.contains(">10.00</td>") && html.contains("[12.50, 90.00]"), "{html}");
    }

    #[test]
    fn data_strings_are_escaped_everywhere() {
        let mut q = row("<id>", 0.0, Some(1.0));
        q.question = "Is 1 < 2 && \"3\" > '2'?".into();
        q.prediction = "<script>alert(1)</script>".into();
        q.gold = vec!["a & b".into(), "</td>".into()];
        let html = page_of(vec![q], None);
        assert!(
            html.contains("<h1>bertqa eval: m&lt;odel&gt;</h1>"),
            "{html}"
        );
        assert!(html.contains("&lt;id&gt;"));
        assert!(html.contains("Is 1 &lt; 2 &amp;&amp; &quot;3&quot; &gt; &#39;2&#39;?"));
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("a &amp; b | &lt;/td&gt;"));
        // The page's own script is its only one.
        assert_eq!(html.matches("<script>").count(), 1);
        assert!(html.contains("No requests were sent"));
    }

    #[test]
    fn scores_histogram_and_an_all_right_run() {
        let mut h = crate::latency::histogram();
        for us in [1000u64, 1100, 1200, 1200, 5000] {
            h.record(us).unwrap();
        }
        let html = page_of(vec![row("a", 1.0, Some(3.0))], Some(&h));
        assert!(
            html.contains(
                "<td class=\"text\">exact_match</td><td class=\"num\" data-sort=\"50\">50.000</td>"
            ),
            "{html}"
        );
        assert!(html.contains("Every one of the 1 questions scored F1 1."));
        assert!(!html.contains("class=\"sortable worst\""));
        let svg = histogram_svg(&h);
        // Five requests in bars; the four near 1 ms are apart from the one at 5 ms.
        let counts: Vec<u64> = svg
            .split(" requests</title>")
            .filter_map(|part| part.rsplit(": ").next()?.parse().ok())
            .collect();
        assert_eq!(counts.iter().sum::<u64>(), 5, "{svg}");
        assert_eq!(*counts.last().unwrap(), 1, "{svg}");
        assert!(
            svg.contains("p50 1.20 ms") && svg.contains("p99 5.00 ms"),
            "{svg}"
        );
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }
}
