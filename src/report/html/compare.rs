//! `compare --html`: the models side by side (scores, speed, agreement), each model's
//! differences from the first drawn as a point and its interval against the zero line,
//! with their p-values, the flips, each comparison's slices (docs/algorithm.md,
//! "Slices": each slice's F1 difference against the zero line, where the changes
//! concentrate), and the table of the questions that flipped, filtered by slice.

use std::fmt::Write as _;

use super::{escape, note, section, setting_list, table, table_with_data, Cell};
use crate::compare::Difference;
use crate::report::compare::{CompareJson, ComparisonJson};

/// How many flipped questions the table lists per comparison at most.
pub(crate) const FLIPS_SHOWN: usize = 200;

/// One comparison's flipped questions, as the page lists them.
#[derive(Debug, Clone)]
pub struct FlipsOf<'a> {
    /// The compared deployment's name.
    pub model: &'a str,
    /// Its flipped questions against the reference, in the data's order, each with
    /// its slices in the reference's run (as flips.jsonl's lines have them).
    pub lines: Vec<(&'a crate::compare::Flip, &'a serde_json::Map<String, serde_json::Value>)>,
}

/// The page's bytes; the questions' texts are `dataset`'s.
pub fn render(doc: &CompareJson, flips: &[FlipsOf<'_>], dataset: &crate::types::Dataset) -> Vec<u8> {
    let mut s = String::new();
    let title = format!("bertqa compare: {}", doc.data);
    let _ = writeln!(s, "<h1>{}</h1>", escape(&title));
    let st = &doc.statistics;
    setting_list(
        &mut s,
        &[
            ("data", doc.data.clone()),
            ("questions", doc.questions.to_string()),
            (
                "reference",
                doc.models
                    .first()
                    .map(|m| m.name.clone())
                    .unwrap_or_default(),
            ),
            (
                "intervals",
                format!(
                    "{:.0}% paired bootstrap, {} resamples, seed {}",
                    100.0 * st.confidence,
                    st.bootstrap,
                    st.seed
                ),
            ),
        ],
    );
    models(&mut s, doc);
    section(&mut s, "differences", "Differences from the reference");
    note(
        &mut s,
        "Each model minus the reference, in points: the point is the mean over questions of \
         the per-question differences, the bar its interval; an interval wholly left of the \
         zero line is a drop beyond chance. p: McNemar's exact test (exact match), a paired \
         sign-flip randomization test (F1); each model against the reference alone, not \
         corrected for several models.",
    );
    s.push_str(&intervals_svg(&doc.comparisons));
    let rows: Vec<(String, Vec<Cell>)> = doc
        .comparisons
        .iter()
        .map(|c| {
            let f = &c.flips;
            (
                "comparison".to_string(),
                vec![
                    Cell::Text(c.model.clone()),
                    Cell::num(c.exact_diff.value, 2),
                    Cell::Text(interval(&c.exact_diff)),
                    Cell::Text(p_value(c.exact_diff.p_value)),
                    Cell::num(c.f1_diff.value, 2),
                    Cell::Text(interval(&c.f1_diff)),
                    Cell::Text(p_value(c.f1_diff.p_value)),
                    Cell::num(f.right_to_wrong as f64, 0),
                    Cell::num(f.wrong_to_right as f64, 0),
                    Cell::num(f.to_no_answer as f64, 0),
                    Cell::num(f.from_no_answer as f64, 0),
                    Cell::Text(kl(c)),
                ],
            )
        })
        .collect();
    table(
        &mut s,
        "differences",
        &[
            "model",
            "EM diff",
            "interval",
            "p",
            "F1 diff",
            "interval",
            "p",
            "right→wrong",
            "wrong→right",
            "→no answer",
            "no answer→",
            "KL start / end (mean, max)",
        ],
        &rows,
    );
    for c in &doc.comparisons {
        slices(&mut s, c);
    }
    for f in flips {
        flipped(&mut s, f, dataset);
    }
    super::page(&title, &s).into_bytes()
}

/// One comparison's slices: each slice's F1 difference as a point with its interval
/// against the zero line, then the table (differences, changed answers against the
/// rest's, the concentration ratio, the adjusted p-value).
fn slices(s: &mut String, c: &ComparisonJson) {
    if c.slices.is_empty() {
        return;
    }
    section(
        s,
        &format!("slices-{}", c.model),
        &format!("Slices: {} against {}", c.model, c.against),
    );
    let named = match c.concentrated_in.is_empty() {
        true => "The changed answers concentrate in no slice.".to_string(),
        false => format!(
            "The changed answers concentrate in {}.",
            c.concentrated_in.join(", ")
        ),
    };
    note(
        s,
        &format!(
            "{named} A slice's changed answers (answer text differs from the reference's) \
             are tested against the rest's by Fisher's exact test, the p-values adjusted by \
             Holm's method over the comparison's slices; ratio: the slice's change rate over \
             the rest's. The chart: each slice's F1 difference, in points, with its \
             interval."
        ),
    );
    let rows: Vec<(String, &Difference)> = c
        .slices
        .iter()
        .map(|x| (format!("{} F1", x.slice), &x.f1_diff))
        .collect();
    s.push_str(&difference_svg(&rows, "slice-"));
    let rows: Vec<(String, Vec<Cell>)> = c
        .slices
        .iter()
        .map(|x| {
            let ratio = match x.rest_change_rate > 0.0 {
                true => Cell::num(x.change_rate / x.rest_change_rate, 2),
                false => Cell::Text("-".into()),
            };
            let concentrated = c.concentrated_in.contains(&x.slice);
            (
                if concentrated { "slice concentrated" } else { "slice" }.to_string(),
                vec![
                    Cell::Text(x.slice.clone()),
                    Cell::num(x.questions as f64, 0),
                    Cell::num(x.exact_diff.value, 2),
                    Cell::Text(interval(&x.exact_diff)),
                    Cell::num(x.f1_diff.value, 2),
                    Cell::Text(interval(&x.f1_diff)),
                    Cell::num(x.changed as f64, 0),
                    Cell::num(100.0 * x.change_rate, 1),
                    Cell::num(100.0 * x.rest_change_rate, 1),
                    ratio,
                    Cell::Text(p_value(x.p_adjusted)),
                    Cell::Text(if concentrated { "yes" } else { "" }.into()),
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
            "EM diff",
            "interval",
            "F1 diff",
            "interval",
            "changed",
            "changed %",
            "rest %",
            "ratio",
            "adjusted p",
            "concentrated",
        ],
        &rows,
    );
}

/// The models' scores, speed and agreement with the reference.
fn models(s: &mut String, doc: &CompareJson) {
    section(s, "models", "Models");
    let rows: Vec<(String, Vec<Cell>)> = doc
        .models
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let agreement = match i.checked_sub(1).and_then(|i| doc.comparisons.get(i)) {
                Some(c) => Cell::num(c.agreement, 4),
                None => Cell::Text("(reference)".into()),
            };
            (
                "model".to_string(),
                vec![
                    Cell::Text(m.name.clone()),
                    Cell::num(m.metrics.exact(), 3),
                    Cell::num(m.metrics.f1(), 3),
                    Cell::num(m.throughput.features_per_s, 1),
                    Cell::num(m.latency_ms.p99, 2),
                    agreement,
                ],
            )
        })
        .collect();
    table(
        s,
        "sortable models",
        &["model", "EM", "F1", "features/s", "p99 ms", "agreement"],
        &rows,
    );
}

/// `[lo, hi]` to two places.
fn interval(d: &Difference) -> String {
    format!("[{:+.2}, {:+.2}]", d.ci[0], d.ci[1])
}

fn p_value(p: f64) -> String {
    if p.is_finite() && p < 1e-3 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

fn kl(c: &ComparisonJson) -> String {
    match (&c.start_kl, &c.end_kl) {
        (Some(a), Some(b)) => format!(
            "{:.3e}, {:.3e} / {:.3e}, {:.3e}",
            a.mean, a.max, b.mean, b.max
        ),
        _ => c.kl_unavailable.clone().unwrap_or_default(),
    }
}

/// Each comparison's two differences as points with their intervals on one axis in
/// points, the zero line marked.
fn intervals_svg(comparisons: &[ComparisonJson]) -> String {
    let rows: Vec<(String, &Difference)> = comparisons
        .iter()
        .flat_map(|c| {
            [
                (format!("{} EM", c.model), &c.exact_diff),
                (format!("{} F1", c.model), &c.f1_diff),
            ]
        })
        .collect();
    difference_svg(&rows, "")
}

/// Differences, each labelled, as points with their intervals on one axis in points,
/// the zero line marked; `kind` prefixes the chart's, bars' and points' classes.
fn difference_svg(rows: &[(String, &Difference)], kind: &str) -> String {
    let finite = |x: f64| if x.is_finite() { x } else { 0.0 };
    let reach = rows
        .iter()
        .flat_map(|(_, d)| [d.ci[0], d.ci[1], d.value])
        .map(|x| finite(x).abs())
        .fold(0.0f64, f64::max);
    let half = super::nice_step(reach.max(0.5) * 1.1, 1);
    let (left, width, row_h, top) = (230.0, 560.0, 30.0, 20.0);
    let height = top + row_h * rows.len() as f64 + 40.0;
    let x = |v: f64| left + (finite(v).clamp(-half, half) + half) / (2.0 * half) * width;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg class="{kind}intervals" xmlns="http://www.w3.org/2000/svg" width="{0:.0}" height="{height:.0}" viewBox="0 0 {0:.0} {height:.0}" font-size="12" font-family="sans-serif">"#,
        left + width + 30.0
    );
    let bottom = top + row_h * rows.len() as f64;
    let step = half / 2.0;
    for k in -2..=2 {
        let v = k as f64 * step;
        let stroke = if k == 0 { "#333" } else { "#e5e5e5" };
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{bottom:.1}" stroke="{stroke}"/><text x="{0:.1}" y="{1:.1}" text-anchor="middle">{v:+}</text>"##,
            x(v),
            bottom + 16.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">model minus reference (points)</text>"#,
        left + width / 2.0,
        bottom + 34.0
    );
    for (i, (label, d)) in rows.iter().enumerate() {
        let y = top + row_h * (i as f64 + 0.5);
        let colour = if d.significantly_below_zero() {
            "#c0392b"
        } else if d.ci[0] > 0.0 {
            "#1e8449"
        } else {
            "#2c6fbb"
        };
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text><line class="{kind}ci" x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{colour}" stroke-width="4"/><circle class="{kind}point" cx="{:.1}" cy="{y:.1}" r="5" fill="{colour}"><title>{} {:+.3} {}</title></circle>"##,
            left - 10.0,
            y + 4.0,
            escape(label),
            x(d.ci[0]),
            x(d.ci[1]),
            x(d.value),
            escape(label),
            d.value,
            interval(d)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The table of one comparison's flipped questions (each with its question's text),
/// and a choice of slice that shows only that slice's.
fn flipped(s: &mut String, f: &FlipsOf<'_>, dataset: &crate::types::Dataset) {
    section(
        s,
        &format!("flips-{}", f.model),
        &format!("Questions that flipped: {}", f.model),
    );
    if f.lines.is_empty() {
        note(
            s,
            "None: every answer kept its correctness and its having an answer.",
        );
        return;
    }
    if f.lines.len() > FLIPS_SHOWN {
        note(
            s,
            &format!(
                "The first {FLIPS_SHOWN} of {} in the data's order (all are in flips.jsonl).",
                f.lines.len()
            ),
        );
    }
    let shown = &f.lines[..f.lines.len().min(FLIPS_SHOWN)];
    let of = |slices: &serde_json::Map<String, serde_json::Value>| -> Vec<String> {
        slices
            .iter()
            .filter_map(|(d, v)| Some(format!("{d}:{}", v.as_str()?)))
            .collect()
    };
    let mut names: Vec<String> = shown.iter().flat_map(|(_, slices)| of(slices)).collect();
    names.sort_by_key(|n| {
        let d = n.split(':').next().unwrap_or_default();
        crate::slices::DIMENSIONS.iter().position(|x| *x == d)
    });
    names.dedup();
    let table_id = format!("flips-table-{}", f.model);
    if !names.is_empty() {
        let _ = write!(
            s,
            "<p class=\"filter\">slice <select class=\"slice-filter\" data-table=\"{}\"><option value=\"\">all</option>",
            escape(&table_id)
        );
        for n in &names {
            let _ = write!(s, "<option>{}</option>", escape(n));
        }
        s.push_str("</select></p>\n");
    }
    let data: Vec<String> = shown.iter().map(|(_, slices)| of(slices).join(" ")).collect();
    let rows: Vec<(String, Vec<Cell>)> = shown
        .iter()
        .map(|&(q, _)| {
            let question = dataset
                .examples
                .get(q.index)
                .map(|e| e.question_text.clone())
                .unwrap_or_default();
            (
                "flip".to_string(),
                vec![
                    Cell::Text(q.id.clone()),
                    Cell::Text(question),
                    Cell::Text(q.flips.join(", ").replace('_', " ")),
                    Cell::Text(q.answers[0].clone()),
                    Cell::Text(q.answers[1].clone()),
                    Cell::num(q.f1[0], 2),
                    Cell::num(q.f1[1], 2),
                ],
            )
        })
        .collect();
    table_with_data(
        s,
        "sortable flips",
        Some(&table_id),
        &[
            "id",
            "question",
            "flip",
            "reference's answer",
            "model's answer",
            "F1 ref",
            "F1 model",
        ],
        &rows,
        &data,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_intervals_are_drawn_against_the_zero_line_and_text_is_escaped() {
        let d = |value: f64, lo: f64, hi: f64| Difference {
            value,
            ci: [lo, hi],
            p_value: 0.01,
        };
        let c = ComparisonJson {
            model: "m<1>".into(),
            against: "ref".into(),
            agreement: 0.9,
            start_logits: crate::report::compare::LogitDiffJson {
                linf: 0.0,
                mean_abs: 0.0,
            },
            end_logits: crate::report::compare::LogitDiffJson {
                linf: 0.0,
                mean_abs: 0.0,
            },
            windows: crate::report::compare::WindowsJson {
                compared: 0,
                first: 0,
                model: 0,
            },
            f1_drop: 2.0,
            disagreements: crate::report::compare::Disagreements {
                count: 0,
                first: Vec::new(),
            },
            confidence: 0.95,
            exact_diff: d(-2.0, -3.0, -1.0),
            f1_diff: d(0.5, -0.5, f64::NAN),
            flips: Default::default(),
            start_kl: None,
            end_kl: None,
            kl_unavailable: Some("none shared".into()),
            slices: Vec::new(),
            concentrated_in: Vec::new(),
        };
        let svg = intervals_svg(std::slice::from_ref(&c));
        assert_eq!(svg.matches("class=\"ci\"").count(), 2);
        // The zero line is the dark one, in the middle of the axis.
        assert!(
            svg.contains(r##"x1="510.0" y1="20" x2="510.0" y2="80.0" stroke="#333""##),
            "{svg}"
        );
        // A drop beyond chance in red, the other in blue.
        assert!(svg.contains("#c0392b") && svg.contains("#2c6fbb"), "{svg}");
        assert!(
            svg.contains("m&lt;1&gt; EM") && !svg.contains("m<1>"),
            "{svg}"
        );
        let mut s = String::new();
        let mut slices = serde_json::Map::new();
        slices.insert("question_type".into(), "when".into());
        slices.insert("context_windows".into(), "3+".into());
        let flip = crate::compare::Flip {
            id: "q<1>".into(),
            flips: vec!["right_to_wrong"],
            answers: ["a".into(), "<b>".into()],
            exact: [1.0, 0.0],
            f1: [1.0, 0.0],
            index: 0,
        };
        let dataset = crate::types::Dataset {
            examples: vec![crate::types::Example {
                example_index: 0,
                qas_id: "q<1>".into(),
                question_text: "When <then>?".into(),
                paragraph_index: 0,
                answers: Vec::new(),
                is_impossible: false,
            }],
            ..Default::default()
        };
        flipped(
            &mut s,
            &FlipsOf {
                model: "m",
                lines: vec![(&flip, &slices)],
            },
            &dataset,
        );
        assert!(
            s.contains("right to wrong") && s.contains("&lt;b&gt;"),
            "{s}"
        );
        // The question beside its id; the row names its slices for the filter.
        assert!(s.contains("When &lt;then&gt;?"), "{s}");
        assert!(
            s.contains(r#"data-slices="question_type:when context_windows:3+""#),
            "{s}"
        );
        assert!(s.contains("<option>question_type:when</option>"), "{s}");
    }
}
