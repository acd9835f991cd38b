//! `bertqa compare --json`, also `compare.json` (`schema/compare.schema.json`), and
//! the text `compare` prints. Floats that are not finite are written as `null` (and
//! shown as NaN in the text).

use std::fmt::Write as _;

use serde::Serialize;

use super::eval::Padding;
use super::gates::Gate;
use super::text::{as_in_json, json_number};
use super::Render;
use crate::backend::Protocol;
pub use crate::compare::{Difference, Disagreement, Divergence, Flips};
use crate::evaluate::Metrics;

/// A comparison's document: `compare`'s JSON report, also its `compare.json`
/// (`schema/compare.schema.json`).
#[derive(Debug, Serialize)]
pub struct CompareJson {
    /// Always 1.
    pub schema: u32,
    /// The data the models answered, as the report names it.
    pub data: String,
    /// Whether SQuAD 2.0's rules applied.
    pub version_2_with_negative: bool,
    /// Questions each model answered.
    pub questions: usize,
    /// Windows cut once from the data for the models that share them (0 when every
    /// model cuts its own); for finished runs, the windows cut again for their saved
    /// logits (0 when they could not be).
    pub features: usize,
    /// Whether the models ran at the same time rather than one after another (false
    /// for finished runs).
    pub parallel: bool,
    /// `compare --runs`: the directories of the finished runs compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs: Option<Vec<String>>,
    /// How the intervals and p-values were drawn.
    pub statistics: StatisticsJson,
    /// Each model's run, the first (the reference) first.
    pub models: Vec<ModelJson>,
    /// Each model after the first against the first.
    pub comparisons: Vec<ComparisonJson>,
    /// The gates asked for, and how each comparison went through them.
    pub gates: Vec<GateJson>,
    /// The dimensions of slices the first model's run cannot give, each with why.
    pub slices_not_computed: std::collections::BTreeMap<String, String>,
}

/// `DIR/<model>/metrics.json` of `compare`: the model's run, complete, under the keys
/// eval's metrics.json gives the same things (`compare --runs` reads either).
#[derive(Debug, Serialize)]
pub struct ModelRunJson {
    /// Always 1.
    pub schema: u32,
    /// The data answered, as the comparison names it.
    pub data: String,
    /// Whether SQuAD 2.0's rules applied.
    pub version_2_with_negative: bool,
    /// Questions answered.
    pub questions: usize,
    /// The model that ran.
    pub model: RunModelJson,
    /// The official scores under the official script's keys, percentages 0–100.
    #[serde(with = "super::json::metrics")]
    pub metrics: Metrics,
    /// Seconds from the first feature built to the last question decoded.
    pub wall_s: f64,
    /// Features and questions per second over `wall_s`.
    pub throughput: Throughput,
    /// Request latency percentiles, milliseconds.
    pub latency_ms: LatencyMs,
    /// How the model's requests were padded (`None`: a finished run that recorded none).
    pub padding: Option<Padding>,
    /// The run's files in its directory, metrics.json last.
    pub files: Vec<String>,
}

/// The model of a [`ModelRunJson`].
#[derive(Debug, Serialize)]
pub struct RunModelJson {
    /// The model's name in the comparison.
    pub name: String,
    /// Its server, as the comparison names it.
    pub url: String,
    /// The protocol the server was spoken to in: `grpc` or `http`.
    #[serde(with = "super::json::protocol")]
    pub protocol: Protocol,
    /// The model's platform or backend, as the server names it.
    pub platform: String,
}

impl ModelRunJson {
    /// Model `m`'s run of `doc`, with its `files`.
    pub fn of(doc: &CompareJson, m: &ModelJson, files: Vec<String>) -> ModelRunJson {
        ModelRunJson {
            schema: 1,
            data: doc.data.clone(),
            version_2_with_negative: doc.version_2_with_negative,
            questions: doc.questions,
            model: RunModelJson {
                name: m.name.clone(),
                url: m.url.clone(),
                protocol: m.protocol,
                platform: m.platform.clone(),
            },
            metrics: m.metrics.clone(),
            wall_s: m.wall_s,
            throughput: m.throughput.clone(),
            latency_ms: m.latency_ms.clone(),
            padding: m.padding.clone(),
            files,
        }
    }
}

/// How the intervals and p-values were drawn.
#[derive(Debug, Serialize)]
pub struct StatisticsJson {
    /// Bootstrap resamples, also the rounds of the randomization test.
    pub bootstrap: usize,
    /// The seed of the random generator (wyrand).
    pub seed: u64,
    /// The intervals' coverage, a fraction in (0, 1).
    pub confidence: f64,
    /// Always false: each model is tested against the first alone.
    pub p_values_corrected: bool,
}

/// One model's run.
#[derive(Debug, Serialize)]
pub struct ModelJson {
    /// The model's name in the report (made distinct when two are alike).
    pub name: String,
    /// Its server, as the report names it (a finished run: as its metrics.json has it).
    pub url: String,
    /// `--protocol`: `grpc` or `http`.
    #[serde(with = "super::json::protocol")]
    pub protocol: Protocol,
    /// The model's platform or backend, as the server names it.
    pub platform: String,
    /// The directory of its run's files.
    pub output_dir: String,
    /// The official scores under the official script's keys, percentages 0–100.
    #[serde(with = "super::json::metrics")]
    pub metrics: Metrics,
    /// Seconds from the first feature built to the last question decoded (NaN: a
    /// finished run that recorded none).
    pub wall_s: f64,
    /// Features and questions per second over `wall_s`.
    pub throughput: Throughput,
    /// Request latency percentiles, milliseconds.
    pub latency_ms: LatencyMs,
    /// `None`: a finished run that recorded none.
    pub padding: Option<Padding>,
}

/// A model's rates over its run's wall time (NaN: a finished run that recorded none).
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    /// Features per second.
    pub features_per_s: f64,
    /// Questions per second.
    pub questions_per_s: f64,
}

/// A model's request latency in milliseconds, each request timed from its send to its
/// response (NaN: a finished run that recorded none).
#[derive(Debug, Clone, Serialize)]
pub struct LatencyMs {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// One model against the first.
#[derive(Debug, Serialize)]
pub struct ComparisonJson {
    /// The model compared.
    pub model: String,
    /// The first model, compared against.
    pub against: String,
    /// Share of questions with the same answer (0-1).
    pub agreement: f64,
    /// The start logits' differences over the windows compared.
    pub start_logits: LogitDiffJson,
    /// The end logits' differences over the windows compared.
    pub end_logits: LogitDiffJson,
    /// The windows whose logits were compared.
    pub windows: WindowsJson,
    /// The first model's F1 minus this one's, in points (the opposite sign of
    /// `f1_diff`'s value).
    pub f1_drop: f64,
    /// The questions whose answers differ.
    pub disagreements: Disagreements,
    /// The intervals' coverage, a fraction in (0, 1).
    pub confidence: f64,
    /// Exact match, this model minus the first, in points, with its interval and
    /// p-value.
    pub exact_diff: Difference,
    /// F1, this model minus the first, in points, with its interval and p-value.
    pub f1_diff: Difference,
    /// How many questions changed correctness or having an answer, each way.
    pub flips: Flips,
    /// KL(first ‖ model) of the start distributions over the windows compared (`None`:
    /// none compared; `kl_unavailable` says why).
    pub start_kl: Option<Divergence>,
    /// KL(first ‖ model) of the end distributions, as `start_kl`.
    pub end_kl: Option<Divergence>,
    /// Why there are no divergences (`None` when there are).
    pub kl_unavailable: Option<String>,
    /// The comparison in each slice of the first model's questions (docs/algorithm.md,
    /// "Slices"), by dimension then name; empty when they are not known.
    pub slices: Vec<crate::compare::SliceComparison>,
    /// The slices where the changed answers concentrate.
    pub concentrated_in: Vec<String>,
}

/// Windows compared: those both models made (the same tokens at the same places), of
/// the first's and of this model's.
#[derive(Debug, Serialize)]
pub struct WindowsJson {
    /// Windows both made, whose logits were compared.
    pub compared: usize,
    /// Windows of the first model.
    pub first: usize,
    /// Windows of this model.
    pub model: usize,
}

/// Differences of one logit side at the features' real positions.
#[derive(Debug, Serialize)]
pub struct LogitDiffJson {
    /// The largest absolute difference (L∞; NaN: no window compared).
    pub linf: f64,
    /// The mean absolute difference (NaN: no window compared).
    pub mean_abs: f64,
}

/// The questions two models answer differently.
#[derive(Debug, Serialize)]
pub struct Disagreements {
    /// How many there are.
    pub count: usize,
    /// The first of them in the data's order (at most `show` of them).
    pub first: Vec<Disagreement>,
}

/// How a comparison went through one of compare's gates ([`Gates`]).
#[derive(Debug, Serialize)]
pub struct GateJson {
    /// The gate's flag ([`super::gates::Gate::flag`]).
    pub flag: String,
    /// `fail_on_significant_drop`: the score (`exact` or `f1`) of this gate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<&'static str>,
    /// The model compared.
    pub model: String,
    /// The bound asked for, in the value's unit (`fail_on_significant_drop`: 0).
    pub threshold: f64,
    /// What the comparison measured: the agreement (0–1), the larger L∞ of the start
    /// and end logits, the F1 drop in points, the flip rate (questions that changed
    /// correctness over all, 0–1), or for `fail_on_significant_drop` the interval's
    /// upper bound in points.
    pub value: f64,
    /// Whether the comparison met the bound.
    pub passed: bool,
    /// `fail_if_concentrated`: the slices where the changes concentrate (`value`
    /// counts them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<String>,
}

/// The gates a comparison is held to (`None`/false: not checked); their flags are
/// [`super::gates::FLAGS`]'.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gates {
    /// Agreement with the first at least this (0-1).
    pub min_agreement: Option<f64>,
    /// L∞ of the logit differences at most this.
    pub max_logit_diff: Option<f64>,
    /// F1 at most this many points below the first's.
    pub max_f1_drop: Option<f64>,
    /// Neither difference's interval wholly below 0.
    pub fail_on_significant_drop: bool,
    /// At most this fraction of the questions changed correctness.
    pub max_flip_rate: Option<f64>,
    /// The changed answers concentrate in no slice (`concentrated_in` is empty).
    pub fail_if_concentrated: bool,
}

impl Gates {
    /// How comparison `c` of `questions` questions went through each gate asked for.
    pub fn check(&self, c: &ComparisonJson, questions: usize) -> Vec<GateJson> {
        let linf = c.start_logits.linf.max(c.end_logits.linf);
        let flip_rate = match questions {
            0 => 0.0,
            n => (c.flips.right_to_wrong + c.flips.wrong_to_right) as f64 / n as f64,
        };
        let checks = [
            (Gate::MinAgreement, self.min_agreement, c.agreement, false),
            (Gate::MaxLogitDiff, self.max_logit_diff, linf, true),
            (Gate::MaxF1Drop, self.max_f1_drop, c.f1_drop, true),
            (Gate::MaxFlipRate, self.max_flip_rate, flip_rate, true),
        ];
        let gate = |g: Gate, score, threshold, value, passed| GateJson {
            flag: g.flag().into(),
            score,
            model: c.model.clone(),
            threshold,
            value,
            passed,
            slices: Vec::new(),
        };
        let mut gates: Vec<GateJson> = checks
            .into_iter()
            .filter_map(|(g, threshold, value, at_most)| {
                let threshold = threshold?;
                let passed = if at_most {
                    value <= threshold
                } else {
                    value >= threshold
                };
                Some(gate(g, None, threshold, value, passed))
            })
            .collect();
        if self.fail_on_significant_drop {
            for (score, d) in [("exact", &c.exact_diff), ("f1", &c.f1_diff)] {
                let passed = !d.significantly_below_zero();
                gates.push(gate(
                    Gate::FailOnSignificantDrop,
                    Some(score),
                    0.0,
                    d.ci[1],
                    passed,
                ));
            }
        }
        if self.fail_if_concentrated {
            let mut g = gate(
                Gate::FailIfConcentrated,
                None,
                0.0,
                c.concentrated_in.len() as f64,
                c.concentrated_in.is_empty(),
            );
            g.slices = c.concentrated_in.clone();
            gates.push(g);
        }
        gates
    }
}

impl GateJson {
    /// The gate as a failure names it: `--min-agreement 0.99: model m measured 0.5`
    /// (numbers as the JSON has them).
    pub fn describe(&self) -> String {
        if !self.slices.is_empty() {
            return format!(
                "{}: model {}'s changed answers concentrate in {}",
                self.flag,
                self.model,
                self.slices.join(", ")
            );
        }
        match self.score {
            Some(score) => format!(
                "{} ({score}): model {}'s interval lies below 0 (upper bound {})",
                self.flag,
                self.model,
                json_number(self.value)
            ),
            None => format!(
                "{} {}: model {} measured {}",
                self.flag,
                json_number(self.threshold),
                self.model,
                json_number(self.value)
            ),
        }
    }
}

impl Render for CompareJson {
    type Json<'a> = &'a CompareJson;

    fn json(&self) -> &CompareJson {
        self
    }

    /// The setting, a table of the models (scores, speed, agreement with the first),
    /// each comparison's disagreements, then the gates.
    fn text(&self, _verbose: bool) -> String {
        let mut s = String::new();
        self.text_table(&mut s);
        for c in &self.comparisons {
            c.text(&mut s);
        }
        if self.comparisons.len() > 1 {
            let _ = writeln!(
                s,
                "\np-values are each model's against {} alone, not corrected for {} comparisons",
                self.comparisons[0].against,
                self.comparisons.len()
            );
        }
        for g in &self.gates {
            let verdict = if g.passed { "passed" } else { "FAILED" };
            let concentrated = g.flag == Gate::FailIfConcentrated.flag();
            let _ = match g.score {
                None if concentrated => writeln!(
                    s,
                    "gate {} for {}: changes concentrate in {} {verdict}",
                    g.flag,
                    g.model,
                    match g.slices.is_empty() {
                        true => "no slice".to_string(),
                        false => g.slices.join(", "),
                    },
                ),
                Some(score) => writeln!(
                    s,
                    "gate {} ({score}) for {}: interval's upper bound {} {verdict}",
                    g.flag,
                    g.model,
                    json_number(g.value),
                ),
                None => writeln!(
                    s,
                    "gate {} {} for {}: measured {} {verdict}",
                    g.flag,
                    json_number(g.threshold),
                    g.model,
                    json_number(g.value),
                ),
            };
        }
        s
    }
}

impl CompareJson {
    /// The data line and one row per model.
    fn text_table(&self, s: &mut String) {
        // Every model is spoken to in the one --protocol.
        let protocol = self.models.first().map_or(Protocol::Grpc, |m| m.protocol);
        let how = match &self.runs {
            Some(dirs) => format!("{} finished runs compared", dirs.len()),
            None => format!(
                "{} features ({} over {})",
                self.features,
                if self.parallel {
                    "models run in parallel"
                } else {
                    "models run one after another"
                },
                super::protocol_words(protocol)
            ),
        };
        let _ = writeln!(
            s,
            "data {}: {} questions, {how}\n",
            self.data, self.questions
        );
        let v2 = self.version_2_with_negative;
        let _ = write!(s, "{:<24} {:>8} {:>8}", "model", "EM", "F1");
        if v2 {
            let _ = write!(
                s,
                " {:>8} {:>8} {:>8} {:>8}",
                "HasEM", "HasF1", "NoEM", "NoF1"
            );
        }
        let _ = writeln!(
            s,
            " {:>11} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11}",
            "features/s", "p50 ms", "p95 ms", "p99 ms", "agree", "Linf start", "Linf end"
        );
        for (i, m) in self.models.iter().enumerate() {
            m.text_row(s, v2);
            match i.checked_sub(1).map(|i| &self.comparisons[i]) {
                None => {
                    let _ = writeln!(s, " {:>9} {:>11} {:>11}", "(ref)", "", "");
                }
                Some(c) => {
                    let _ = writeln!(
                        s,
                        " {:>9.4} {:>11.3e} {:>11.3e}",
                        as_in_json(c.agreement),
                        as_in_json(c.start_logits.linf),
                        as_in_json(c.end_logits.linf)
                    );
                }
            }
        }
    }
}

impl ModelJson {
    /// The model's row up to its comparison's columns.
    fn text_row(&self, s: &mut String, v2: bool) {
        let m = &self.metrics;
        let _ = write!(
            s,
            "{:<24} {:>8.3} {:>8.3}",
            self.name,
            as_in_json(m.exact()),
            as_in_json(m.f1())
        );
        if v2 {
            // A breakdown the metrics lack shows as NaN.
            let (has, no) = match m {
                Metrics::V2 {
                    has_ans, no_ans, ..
                } => (*has_ans, *no_ans),
                Metrics::V1 { .. } => (None, None),
            };
            let [has_em, has_f1, no_em, no_f1] = [
                has.map(|b| b.exact),
                has.map(|b| b.f1),
                no.map(|b| b.exact),
                no.map(|b| b.f1),
            ]
            .map(|x| x.map_or(f64::NAN, as_in_json));
            let _ = write!(s, " {has_em:>8.3} {has_f1:>8.3} {no_em:>8.3} {no_f1:>8.3}");
        }
        let _ = write!(
            s,
            " {:>11.1} {:>9.2} {:>9.2} {:>9.2}",
            as_in_json(self.throughput.features_per_s),
            as_in_json(self.latency_ms.p50),
            as_in_json(self.latency_ms.p95),
            as_in_json(self.latency_ms.p99)
        );
    }
}

impl ComparisonJson {
    /// Model `model`'s comparison `c` against `against` as the report gives it, with
    /// its first `show` disagreements.
    pub fn new(show: usize, against: &str, model: &str, c: crate::compare::Comparison) -> Self {
        let kl_unavailable = (c.start_kl.is_none() || c.end_kl.is_none()).then(|| {
            if c.windows_first == 0 || c.windows_other == 0 {
                let which = if c.windows_other == 0 { model } else { against };
                format!("{which} gives no logits of windows (the answer contract, or none kept)")
            } else {
                format!(
                    "no window is the same in both ({against} has {}, {model} has {}; another \
                 tokenizer or other window settings)",
                    c.windows_first, c.windows_other
                )
            }
        });
        ComparisonJson {
            model: model.to_string(),
            against: against.to_string(),
            agreement: c.agreement,
            start_logits: LogitDiffJson {
                linf: c.start_logits.linf,
                mean_abs: c.start_logits.mean_abs,
            },
            end_logits: LogitDiffJson {
                linf: c.end_logits.linf,
                mean_abs: c.end_logits.mean_abs,
            },
            windows: WindowsJson {
                compared: c.windows_compared,
                first: c.windows_first,
                model: c.windows_other,
            },
            f1_drop: c.f1_drop,
            disagreements: Disagreements {
                count: c.disagreements.len(),
                first: c.disagreements.into_iter().take(show).collect(),
            },
            confidence: c.confidence,
            exact_diff: c.exact_diff,
            f1_diff: c.f1_diff,
            flips: c.flips,
            start_kl: c.start_kl,
            end_kl: c.end_kl,
            kl_unavailable,
            slices: c.slices,
            concentrated_in: c.concentrated_in,
        }
    }

    /// The differences with their intervals, the flips and the divergences: two lines.
    fn statistics_text(&self, s: &mut String) {
        let diff = |name: &str, d: &Difference| {
            format!(
                "{name} {:+.2} [{:+.2}, {:+.2}] p={}",
                as_in_json(d.value),
                as_in_json(d.ci[0]),
                as_in_json(d.ci[1]),
                p_value(d.p_value)
            )
        };
        let f = &self.flips;
        let _ = writeln!(
            s,
            "  {}; {} ({:.0}% intervals); flips: {} right to wrong, {} wrong to right, {} to no \
             answer, {} from no answer",
            diff("EM", &self.exact_diff),
            diff("F1", &self.f1_diff),
            100.0 * self.confidence,
            f.right_to_wrong,
            f.wrong_to_right,
            f.to_no_answer,
            f.from_no_answer
        );
        let kl = |d: &Divergence| {
            format!(
                "mean {:.3e} p99 {:.3e} max {:.3e}",
                as_in_json(d.mean),
                as_in_json(d.p99),
                as_in_json(d.max)
            )
        };
        if let (Some(a), Some(b)) = (&self.start_kl, &self.end_kl) {
            let _ = writeln!(s, "  KL start {}; end {}", kl(a), kl(b));
        }
        for name in &self.concentrated_in {
            let Some(x) = self.slices.iter().find(|x| &x.slice == name) else {
                continue;
            };
            let _ = writeln!(
                s,
                "  changes concentrate in {name}: {} of {} answers changed ({:.1}% against \
                 {:.1}% elsewhere, Holm-adjusted p={}); {}",
                x.changed,
                x.questions,
                100.0 * x.change_rate,
                100.0 * x.rest_change_rate,
                p_value(x.p_adjusted),
                diff("F1", &x.f1_diff),
            );
        }
    }

    /// The comparison's summary line and the disagreements it lists.
    fn text(&self, s: &mut String) {
        let d = &self.disagreements;
        let _ = writeln!(
            s,
            "\n{} vs {}: mean |Δ| start {:.3e}, end {:.3e}; F1 drop {:.3}; {} questions disagree",
            self.model,
            self.against,
            as_in_json(self.start_logits.mean_abs),
            as_in_json(self.end_logits.mean_abs),
            as_in_json(self.f1_drop),
            d.count
        );
        self.statistics_text(s);
        let w = &self.windows;
        if w.first == 0 || w.model == 0 {
            let _ = writeln!(
                s,
                "  no logits compared: {} gives answers only (the answer contract)",
                if w.model == 0 {
                    &self.model
                } else {
                    &self.against
                }
            );
        } else if w.compared == 0 {
            let _ = writeln!(
                s,
                "  no logits compared: no window is the same in both ({} has {}, {} has {}; \
                 another tokenizer or other window settings)",
                self.against, w.first, self.model, w.model
            );
        } else if w.compared != w.first || w.compared != w.model {
            let _ = writeln!(
                s,
                "  logits compared on the {} windows both made ({} has {}, {} has {})",
                w.compared, self.against, w.first, self.model, w.model
            );
        }
        let score = |x: Option<f64>| x.map_or(f64::NAN, as_in_json);
        for q in &d.first {
            let _ = writeln!(
                s,
                "  {}: {:?} ({:.3}) vs {:?} ({:.3})",
                q.id,
                q.answers[0],
                score(q.scores[0]),
                q.answers[1],
                score(q.scores[1])
            );
        }
    }
}

/// A p-value in a few characters: `0.031`, `2.1e-7`.
fn p_value(p: f64) -> String {
    if p.is_finite() && p < 1e-3 {
        format!("{p:.1e}")
    } else {
        format!("{:.3}", as_in_json(p))
    }
}

#[cfg(test)]
mod tests;
