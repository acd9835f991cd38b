//! What `tune` reports: every candidate, the best within the budget, the Pareto front;
//! as `--json` (`schema/tune.schema.json`, perf's keys and units wherever perf has the
//! figure) and as a text table. The text and the warnings name settings as messages do
//! (`` `keep_best` ``); the command writes them as its flags.

use serde::Serialize;

use super::config::Settings;
use crate::metrics::json::{metrics, ms, r6, MetricsJson};
use crate::perf::{Budget, Level, LevelResult};

/// One candidate and what became of it.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// As asked.
    pub settings: Settings,
    /// As the server reported it once loaded (`None`: not loaded).
    pub served: Option<Settings>,
    /// `measured`, `cut` (measured until it was clear it cannot beat the best so far),
    /// `skipped` (it would serve as one measured: not loaded), `failed_to_load`,
    /// `not_applied`, `not_ready`, `failed` (a request of its sweep failed), `stopped`.
    pub status: &'static str,
    /// What went wrong, or why it was cut or skipped.
    pub error: Option<String>,
    /// The level reported: the largest load within the budget, else the first measured.
    pub level: Option<LevelResult>,
    /// Its figures when measured again among the best, before the best was named.
    pub remeasured: Option<Remeasured>,
}

/// A candidate measured again at its concurrency, in rounds alternating with the other
/// best candidates.
#[derive(Debug, Clone, PartialEq)]
pub struct Remeasured {
    /// Each round's features per second, in order.
    pub rounds: Vec<f64>,
    /// The lowest and the highest window's features per second over the rounds.
    pub spread: [f64; 2],
    /// Every round kept the budget.
    pub within_budget: bool,
}

impl Remeasured {
    /// The mean of the rounds.
    pub fn features_per_s(&self) -> f64 {
        match self.rounds.len() {
            0 => 0.0,
            n => self.rounds.iter().sum::<f64>() / n as f64,
        }
    }
}

impl Candidate {
    /// Its reported level kept the budget.
    pub fn within_budget(&self) -> bool {
        self.level
            .as_ref()
            .and_then(|l| l.budget)
            .is_some_and(|b| b.within)
    }

    /// Features per second within the budget; 0 when it kept no level within it.
    pub fn score(&self) -> f64 {
        match (&self.level, self.within_budget()) {
            (Some(l), true) => l.features_per_s,
            _ => 0.0,
        }
    }

    /// The settings to report: the server's when loaded.
    pub fn shown(&self) -> &Settings {
        self.served.as_ref().unwrap_or(&self.settings)
    }

    /// The level to report from a sweep's levels: the largest load within budget, else
    /// the first.
    pub(crate) fn pick(levels: Vec<LevelResult>) -> Option<LevelResult> {
        let within = levels
            .iter()
            .filter(|l| l.budget.is_some_and(|b| b.within))
            .max_by(|a, b| a.level.value().total_cmp(&b.level.value()))
            .cloned();
        within.or_else(|| levels.into_iter().next())
    }
}

/// Everything a tune run reports.
#[derive(Debug, Clone)]
pub struct Report {
    /// The tuned model (an ensemble's step for a text workload).
    pub model: String,
    /// Where the measurement requests went (the configuration calls went to the same
    /// server's HTTP endpoint).
    pub url: String,
    /// The latency budget every candidate was measured against.
    pub budget: Budget,
    /// Candidate 0 is the configuration found on the server.
    pub candidates: Vec<Candidate>,
    /// `exhaustive` or `default`.
    pub search: &'static str,
    /// The original configuration is back (read back and equal).
    pub restored: bool,
    /// `keep_best`: the best is left loaded.
    pub kept_best: bool,
    /// Notes on the run, in words that name settings.
    pub warnings: Vec<String>,
    /// The candidates measured again before the best was named, best of the search
    /// first (empty: none were).
    pub remeasured: Vec<usize>,
}

impl Report {
    /// The best candidate within the budget: of the re-measured ones when there are,
    /// the highest re-measured throughput of those that kept the budget in every round;
    /// else the highest throughput of the search (the earlier on a tie, so the
    /// configuration found wins ties).
    pub fn best(&self) -> Option<usize> {
        if !self.remeasured.is_empty() {
            let mut best: Option<(usize, f64)> = None;
            for &i in &self.remeasured {
                let Some(r) = self.candidates[i].remeasured.as_ref() else {
                    continue;
                };
                if r.within_budget && best.is_none_or(|(_, b)| r.features_per_s() > b) {
                    best = Some((i, r.features_per_s()));
                }
            }
            return best.map(|(i, _)| i);
        }
        let mut best: Option<usize> = None;
        for (i, c) in self.candidates.iter().enumerate() {
            if c.within_budget() && best.is_none_or(|b| c.score() > self.candidates[b].score()) {
                best = Some(i);
            }
        }
        best
    }

    /// Candidate `i`'s throughput as the best is named by: re-measured, else the search's.
    pub fn best_score(&self, i: usize) -> f64 {
        let c = &self.candidates[i];
        c.remeasured
            .as_ref()
            .map_or(c.score(), Remeasured::features_per_s)
    }

    /// Candidates no other beats on both throughput and latency at the budget's
    /// percentile, by increasing latency.
    pub(crate) fn pareto(&self) -> Vec<usize> {
        let point = |c: &Candidate| {
            c.level.as_ref().map(|l| {
                let latency = l.budget.map_or(l.latency.p99_us, |b| b.latency_us);
                (l.features_per_s, latency)
            })
        };
        let points: Vec<(usize, (f64, f64))> = self
            .candidates
            .iter()
            .enumerate()
            .filter_map(|(i, c)| point(c).map(|p| (i, p)))
            .collect();
        let mut front: Vec<(usize, (f64, f64))> = points
            .iter()
            .filter(|(i, (t, l))| {
                !points
                    .iter()
                    .any(|(j, (t2, l2))| j != i && t2 >= t && l2 <= l && (t2 > t || l2 < l))
            })
            .copied()
            .collect();
        front.sort_by(|a, b| a.1 .1.total_cmp(&b.1 .1).then(a.0.cmp(&b.0)));
        front.into_iter().map(|(i, _)| i).collect()
    }
}

/// The JSON report (`schema/tune.schema.json`), keys in this order; latencies in
/// milliseconds, rates per second.
#[derive(Debug, Serialize)]
pub struct TuneJson<'a> {
    /// The document's schema version: 1.
    pub schema: u32,
    /// The tuned model (an ensemble's step for a text workload).
    pub model: &'a str,
    /// Where the measurement requests went.
    pub url: &'a str,
    /// The latency budget.
    pub budget: BudgetJson,
    /// `default` or `exhaustive`.
    pub search: &'static str,
    /// Candidate 0, the configuration found on the server (`null`: no candidate).
    pub baseline: Option<CandidateJson<'a>>,
    /// The best candidate within the budget ([`Report::best`]); `null` when none kept
    /// it.
    pub best: Option<CandidateJson<'a>>,
    /// Index of the best in `candidates` (`null`: none kept the budget).
    pub best_index: Option<usize>,
    /// Every candidate, in the order the search visited them (0: the configuration
    /// found).
    pub candidates: Vec<CandidateJson<'a>>,
    /// Indexes into `candidates` of those no other beats on both throughput and latency
    /// at the budget's percentile, by increasing latency.
    pub pareto: Vec<usize>,
    /// The original configuration is back, read back and equal.
    pub restored: bool,
    /// The best configuration was left loaded (`keep_best`).
    pub kept_best: bool,
    /// The run's warnings, in words.
    pub warnings: &'a [String],
    /// Indexes of the candidates measured again before the best was named.
    pub remeasured: &'a [usize],
}

/// The latency budget in the JSON report.
#[derive(Debug, Serialize)]
pub struct BudgetJson {
    /// Client latency allowed at `percentile`, milliseconds.
    pub latency_ms: f64,
    /// The percentile the budget applies to, in (0, 100].
    pub percentile: f64,
}

/// One candidate in the JSON report: its configuration and what its reported level
/// measured (the largest load within the budget, else the first measured; the level's
/// figures `null` when it was not measured).
#[derive(Debug, Serialize)]
pub struct CandidateJson<'a> {
    /// As the server reported it once loaded (as asked when it was not loaded).
    pub config: ConfigJson,
    /// What became of it ([`Candidate::status`]).
    pub status: &'static str,
    /// The server's message or the request's error when not measured, or why it was
    /// cut or skipped.
    pub error: Option<&'a str>,
    /// The reported level's requests in flight.
    pub concurrency: Option<usize>,
    /// The reported level's throughput.
    pub throughput: Option<ThroughputJson>,
    /// The reported level's requests answered within the budget's threshold.
    pub goodput: Option<GoodputJson>,
    /// The reported level's client latency percentiles.
    pub latency_ms: Option<LatencyJson>,
    /// Per request: the server's queue and compute times (`null`: not reported).
    pub server_ms: Option<ServerJson>,
    /// The server's metrics over the reported level, as perf reports them (`null`: not
    /// read, or not measured).
    pub metrics: Option<MetricsJson<'a>>,
    /// The reported level kept the budget.
    pub within_budget: bool,
    /// Measured again among the best (`null`: not).
    pub remeasured: Option<RemeasuredJson>,
}

/// A candidate's re-measurement in the JSON report.
#[derive(Debug, Serialize)]
pub struct RemeasuredJson {
    /// The mean of the rounds.
    pub features_per_s: f64,
    /// The lowest and highest window's features per second.
    pub spread: [f64; 2],
    /// Each round's features per second, in order.
    pub rounds: Vec<f64>,
    /// Every round kept the budget.
    pub within_budget: bool,
}

/// The settings tune varies, under the server's configuration keys.
#[derive(Debug, Serialize)]
pub struct ConfigJson {
    /// `max_batch_size` (0: no batch dimension).
    pub max_batch_size: usize,
    /// The `count` of each instance group.
    pub instance_count: usize,
    /// The `dynamic_batching` block (`null`: off).
    pub dynamic_batching: Option<DynamicJson>,
}

/// The searched fields of a `dynamic_batching` block.
#[derive(Debug, Serialize)]
pub struct DynamicJson {
    /// How long a request may wait in the queue for others to batch with, microseconds.
    pub max_queue_delay_microseconds: u64,
    /// `null`: left to the server.
    pub preferred_batch_size: Option<Vec<usize>>,
}

/// A level's throughput, per second of its reported windows.
#[derive(Debug, Serialize)]
pub struct ThroughputJson {
    /// Features answered per second (questions for a text workload).
    pub features_per_s: f64,
    /// Requests answered per second.
    pub requests_per_s: f64,
}

/// A level's requests answered within the budget's threshold.
#[derive(Debug, Serialize)]
pub struct GoodputJson {
    /// Their share of the level's requests, a fraction from 0 to 1.
    pub share: f64,
    /// Their rate, per second of the reported windows.
    pub per_s: f64,
}

/// A level's client latency percentiles, milliseconds.
#[derive(Debug, Serialize)]
pub struct LatencyJson {
    /// Median, ms.
    pub p50: f64,
    /// 90th percentile, ms.
    pub p90: f64,
    /// 95th percentile, ms.
    pub p95: f64,
    /// 99th percentile, ms.
    pub p99: f64,
}

/// A level's server time per request, milliseconds, from the server's statistics.
#[derive(Debug, Serialize)]
pub struct ServerJson {
    /// Waiting in the scheduler's queue, ms per request.
    pub queue: f64,
    /// Running the model, ms per request (a batched execution counted once per request
    /// it serves).
    pub compute_infer: f64,
    /// Requests the server ran together per execution of the model.
    pub inferences_per_execution: f64,
}

pub(crate) fn config_json(s: &Settings) -> ConfigJson {
    ConfigJson {
        max_batch_size: s.max_batch_size,
        instance_count: s.instances,
        dynamic_batching: s.dynamic.as_ref().map(|d| DynamicJson {
            max_queue_delay_microseconds: d.delay_us,
            preferred_batch_size: s.preferred_sent(),
        }),
    }
}

fn candidate(c: &Candidate) -> CandidateJson<'_> {
    let l = c.level.as_ref();
    CandidateJson {
        config: config_json(c.shown()),
        status: c.status,
        error: c.error.as_deref(),
        concurrency: l.and_then(|l| match l.level {
            Level::Concurrency(n) => Some(n),
            Level::RequestRate(_) => None,
        }),
        throughput: l.map(|l| ThroughputJson {
            features_per_s: r6(l.features_per_s),
            requests_per_s: r6(l.requests_per_s),
        }),
        goodput: l.and_then(|l| l.budget).map(|b| GoodputJson {
            share: r6(b.goodput_share),
            per_s: r6(b.goodput_per_s),
        }),
        latency_ms: l.map(|l| LatencyJson {
            p50: ms(l.latency.p50_us),
            p90: ms(l.latency.p90_us),
            p95: ms(l.latency.p95_us),
            p99: ms(l.latency.p99_us),
        }),
        server_ms: l.filter(|l| l.server_reported).map(|l| ServerJson {
            queue: ms(l.server.queue_us),
            compute_infer: ms(l.server.compute_infer_us),
            inferences_per_execution: r6(l.inferences_per_execution()),
        }),
        metrics: l.and_then(|l| l.metrics.as_ref()).map(metrics),
        within_budget: c.within_budget(),
        remeasured: c.remeasured.as_ref().map(|r| RemeasuredJson {
            features_per_s: r6(r.features_per_s()),
            spread: r.spread.map(r6),
            rounds: r.rounds.iter().copied().map(r6).collect(),
            within_budget: r.within_budget,
        }),
    }
}

/// The JSON document of `report`.
pub fn render_json(report: &Report) -> TuneJson<'_> {
    let best = report.best();
    TuneJson {
        schema: 1,
        model: &report.model,
        url: &report.url,
        budget: BudgetJson {
            latency_ms: ms(report.budget.threshold_us),
            percentile: report.budget.percentile,
        },
        search: report.search,
        baseline: report.candidates.first().map(candidate),
        best: best.map(|i| candidate(&report.candidates[i])),
        best_index: best,
        candidates: report.candidates.iter().map(candidate).collect(),
        pareto: report.pareto(),
        restored: report.restored,
        kept_best: report.kept_best,
        warnings: &report.warnings,
        remeasured: &report.remeasured,
    }
}

/// The text report: a table of every candidate, then the verdict.
pub fn render_text(report: &Report) -> String {
    let pct = report.budget.percentile;
    let mut out = format!(
        "tune {:?} at {}: budget p{} ≤ {} ms, {} search, {} candidates\n\n",
        report.model,
        report.url,
        pct,
        ms(report.budget.threshold_us),
        report.search,
        report.candidates.len()
    );
    let width = report
        .candidates
        .iter()
        .map(|c| c.shown().describe().chars().count())
        .max()
        .unwrap_or(0)
        .max("configuration".len());
    out.push_str(&format!(
        "{:>3}  {:<width$} {:>14} {:>5} {:>12} {:>9} {:>9} {:>9}  {}\n",
        "#",
        "configuration",
        "status",
        "conc",
        "features/s",
        "p50 ms",
        &format!("p{pct} ms"),
        "queue ms",
        "budget"
    ));
    let best = report.best();
    let pareto = report.pareto();
    for (i, c) in report.candidates.iter().enumerate() {
        let mark = match (Some(i) == best, pareto.contains(&i)) {
            (true, _) => "best",
            (false, true) => "pareto",
            _ => "",
        };
        let (conc, tput, p50, pb, queue) = match &c.level {
            Some(l) => (
                match l.level {
                    Level::Concurrency(n) => n.to_string(),
                    Level::RequestRate(r) => format!("{r}/s"),
                },
                format!("{:.1}", l.features_per_s),
                format!("{:.2}", l.latency.p50_us / 1000.0),
                format!(
                    "{:.2}",
                    l.budget.map_or(l.latency.p99_us, |b| b.latency_us) / 1000.0
                ),
                if l.server_reported {
                    format!("{:.2}", l.server.queue_us / 1000.0)
                } else {
                    "-".into()
                },
            ),
            None => Default::default(),
        };
        let budget = match (&c.level, c.within_budget()) {
            (None, _) => "",
            (Some(_), true) => "within",
            (Some(_), false) => "over",
        };
        let row = format!(
            "{i:>3}  {:<width$} {:>14} {conc:>5} {tput:>12} {p50:>9} {pb:>9} {queue:>9}  {budget} {mark}",
            c.shown().describe(),
            c.status,
        );
        out.push_str(row.trim_end());
        out.push('\n');
        if let Some(e) = &c.error {
            // The first line: a server's message may carry a traceback (in the JSON).
            out.push_str(&format!("     {}\n", e.lines().next().unwrap_or_default()));
        }
    }
    out.push('\n');
    if !report.remeasured.is_empty() {
        out.push_str("measured again in alternation before naming the best:\n");
        for &i in &report.remeasured {
            if let Some(r) = &report.candidates[i].remeasured {
                out.push_str(&format!(
                    "  #{i}: {:.1} features/s (windows {:.1} to {:.1}){}\n",
                    r.features_per_s(),
                    r.spread[0],
                    r.spread[1],
                    if r.within_budget {
                        ""
                    } else {
                        ", over the budget"
                    }
                ));
            }
        }
    }
    match best {
        Some(0) => out.push_str(&format!(
            "best: the configuration found ({}) serves best within the budget: {:.1} features/s\n",
            report.candidates[0].shown().describe(),
            report.best_score(0)
        )),
        Some(b) => {
            let c = &report.candidates[b];
            let base = report.candidates.first().map_or(0.0, Candidate::score);
            let score = report.best_score(b);
            let gain = if base > 0.0 {
                format!(" ({:.2}x the configuration found)", score / base)
            } else {
                " (the configuration found kept no level within the budget)".into()
            };
            out.push_str(&format!(
                "best: #{b}, {}: {:.1} features/s within the budget{gain}\n",
                c.shown().describe(),
                score
            ));
        }
        None => out.push_str("best: none: no candidate kept a level within the budget\n"),
    }
    out.push_str(match (report.kept_best, report.restored) {
        (true, _) => "the best configuration is left loaded (`keep_best`)\n",
        (false, true) => "the original configuration is back (read back and equal)\n",
        (false, false) => "the original configuration is NOT back\n",
    });
    for w in &report.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::export::sample;
    use crate::perf::LevelBudget;
    use crate::tune::config::{Dynamic, Preferred};
    use serde_json::Value;

    fn budget() -> Budget {
        Budget {
            threshold_us: 100_000.0,
            percentile: 99.0,
            binary_search: true,
        }
    }

    /// A measured candidate: `fps` features/s at `p99_ms`, judged by the budget.
    fn measured(max_batch_size: usize, fps: f64, p99_ms: f64) -> Candidate {
        let mut l = sample::level(Level::Concurrency(4), fps, p99_ms / 2.0, p99_ms);
        l.budget = Some(LevelBudget {
            latency_us: p99_ms * 1000.0,
            within: p99_ms <= 100.0,
            good: 10,
            goodput_share: 1.0,
            goodput_per_s: fps,
        });
        let settings = Settings {
            max_batch_size,
            instances: 1,
            dynamic: Some(Dynamic {
                delay_us: 100,
                preferred: Preferred::Server,
            }),
        };
        Candidate {
            served: Some(settings.clone()),
            settings,
            status: "measured",
            error: None,
            level: Some(l),
            remeasured: None,
        }
    }

    fn report() -> Report {
        let failed = Candidate {
            status: "failed_to_load",
            error: Some("refused\nTraceback".into()),
            served: None,
            level: None,
            ..measured(16, 0.0, 0.0)
        };
        Report {
            model: "m".into(),
            url: "h:8001".into(),
            budget: budget(),
            candidates: vec![
                measured(8, 50.0, 90.0),
                measured(32, 400.0, 60.0),
                failed,
                measured(64, 900.0, 140.0),
                measured(16, 300.0, 40.0),
            ],
            search: "default",
            restored: true,
            kept_best: false,
            warnings: Vec::new(),
            remeasured: Vec::new(),
        }
    }

    #[test]
    fn the_best_keeps_the_budget_and_the_front_is_not_dominated() {
        let r = report();
        // 900 features/s is over the budget: the best is 400 within it.
        assert_eq!(r.best(), Some(1));
        // 50 at 90 ms is beaten by 400 at 60 ms; the failed one has no point.
        assert_eq!(r.pareto(), vec![4, 1, 3]);
        let text = render_text(&r);
        assert!(text.contains("best: #1, max batch 32, 1 instance, delay 100 us: 400.0 features/s within the budget (8.00x the configuration found)"), "{text}");
        assert!(text.contains("     refused\n"), "{text}");
        assert!(!text.contains("Traceback"));
    }

    #[test]
    fn the_json_follows_its_schema() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../schema/tune.schema.json")).unwrap();
        let validator = jsonschema::validator_for(&schema).expect("valid schema");
        let v = serde_json::to_value(render_json(&report())).unwrap();
        let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(v["best_index"], 1);
        assert_eq!(v["candidates"][2]["status"], "failed_to_load");
        assert_eq!(v["candidates"][2]["throughput"], Value::Null);
        assert_eq!(v["baseline"]["throughput"]["features_per_s"], 50.0);
        assert_eq!(v["candidates"][1]["remeasured"], Value::Null);
    }

    /// Re-measured, the second of the search beats the first; one over the budget in a
    /// round drops out.
    #[test]
    fn the_best_is_named_by_the_remeasured_figures() {
        let mut r = report();
        let again = |rounds: Vec<f64>, within_budget| Remeasured {
            spread: [rounds[0] - 5.0, rounds[1] + 5.0],
            rounds,
            within_budget,
        };
        r.candidates[1].remeasured = Some(again(vec![380.0, 390.0], true));
        r.candidates[4].remeasured = Some(again(vec![395.0, 405.0], true));
        r.candidates[0].remeasured = Some(again(vec![900.0, 910.0], false));
        r.remeasured = vec![1, 4, 0];
        assert_eq!(r.best(), Some(4));
        assert_eq!(r.best_score(4), 400.0);
        let text = render_text(&r);
        assert!(
            text.contains("  #4: 400.0 features/s (windows 390.0 to 410.0)\n"),
            "{text}"
        );
        assert!(
            text.contains("  #0: 905.0 features/s (windows 895.0 to 915.0), over the budget\n"),
            "{text}"
        );
        assert!(text.contains("best: #4, max batch 16"), "{text}");
        let v = serde_json::to_value(render_json(&r)).unwrap();
        assert_eq!(v["best_index"], 4);
        assert_eq!(v["remeasured"], serde_json::json!([1, 4, 0]));
        assert_eq!(
            v["candidates"][4]["remeasured"]["spread"],
            serde_json::json!([390.0, 410.0])
        );
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../schema/tune.schema.json")).unwrap();
        assert!(
            jsonschema::validator_for(&schema).unwrap().is_valid(&v),
            "{v:#}"
        );
    }
}
