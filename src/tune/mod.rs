//! `bertqa tune`: the model configuration (max batch size, dynamic batching, instance
//! count) that serves best within a latency budget, found on the live server through
//! Triton's repository API, and the original always put back.
//!
//! Contract:
//! - The original configuration is read first; a model carrying another run's marker
//!   ([`config::MARKER`]) is refused. The original and the run's state are written to the
//!   output directory ([`state`]) before the first load.
//! - Candidate 0 is the configuration found, measured as it is (no load). Every other
//!   candidate is loaded as an override carrying this run's marker, read back and
//!   confirmed, waited for until ready (`control`), then swept as `perf` sweeps
//!   (warm-up, then a binary search for the largest load within the budget, or one
//!   level). A candidate that fails at any step is kept with its status and the
//!   server's message, and the search goes on (a failed load leaves the previous
//!   configuration serving).
//! - Measurement goes where it decides something: a candidate's binary search starts at
//!   the load where the best so far kept the budget; a level ends as soon as tune's rule
//!   decides it (`perf::Until::Decided`: clearly over the budget, clearly below the best
//!   so far, or its throughput known within [`PRECISION`]); a candidate over the budget
//!   at a load whose throughput is below the best's is `cut` (no load can make it win);
//!   a candidate that would serve as one measured (another max batch size without
//!   dynamic batching, for requests no larger than both) is `skipped`, not loaded.
//!   `exhaustive` measures every point (levels still end by the rule).
//! - Before the best is named, the best `remeasure` candidates of the search are
//!   measured again at their concurrency, in [`REMEASURE_ROUNDS`] rounds in alternating
//!   order (A B C, then C B A); the best is the highest re-measured throughput of those
//!   that kept the budget in every round.
//! - The order of the candidates is [`search`]'s. A model without a batch dimension
//!   (max batch size 0) has only its instance count searched. A stop (the token) ends the search
//!   after the level under way is drained.
//! - At the end, whatever happened (a stop, an error, a failed candidate, a panic inside
//!   the search, which goes on once the configuration is back), the original is put
//!   back and read back equal; with `keep_best`, the best candidate
//!   is loaded instead, without the marker. Either way the state file records it.

pub mod config;
mod control;
pub mod html;
pub mod report;
pub mod search;
pub mod state;
mod tuning;

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::backend::{Binding, BindingOverrides, Pool};
use crate::error::{Error, Result};
use crate::perf::{self, Batch, PerfConfig, PerfProgress};
use config::Settings;
internal! { pub use control::Control; }
use report::{Candidate, Report};
use search::{Space, Step};
pub use tuning::{restore_from, TuneOptions, Tuning};

/// What each candidate's sweep sends.
pub enum Workload {
    /// Token ids to the tuned model itself, rebound after each load.
    Tokens {
        /// The batches sent, one per request, cycled.
        batches: Vec<Batch>,
        /// Tensor names that override the binding inferred anew after each load.
        overrides: BindingOverrides,
    },
    /// Question and context pairs to a text ensemble whose step is tuned.
    Text(perf::Requests),
}

/// The precision at which tune's rule ends a level: the 95% interval of its throughput
/// within this fraction of it.
pub const PRECISION: f64 = 0.05;

/// Rounds of the re-measurement of the best candidates.
pub const REMEASURE_ROUNDS: usize = 2;

/// Where a run stands, for progress lines.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Standing {
    /// Candidates done (measured, cut, skipped or failed).
    pub done: usize,
    /// The best so far within the budget: its index and features per second.
    pub best: Option<(usize, f64)>,
    /// A rough estimate of the time left (the search's pace so far times the candidates
    /// it may still measure, and the re-measurement).
    pub left: std::time::Duration,
}

/// Progress callbacks (the library never prints).
pub trait TuneProgress: PerfProgress {
    /// Candidate `index` is about to be loaded (or, for 0, measured as found).
    fn candidate(&self, _index: usize, _settings: &Settings) {}
    /// Candidate `index` is done.
    fn done(&self, _index: usize, _candidate: &Candidate, _standing: &Standing) {}
    /// Candidate `index` is about to be measured again (round `round`, from 0).
    fn remeasure(&self, _round: usize, _index: usize) {}
    /// The original (or, with `keep_best`, the best) is being put back.
    fn putting_back(&self) {}
}

internal! {
/// A tune run's settings.
pub struct Tune<'a> {
    /// The tuned model (an ensemble's step for a text workload).
    pub model: &'a str,
    /// The server's model control (load, unload, configuration overrides).
    pub control: &'a Control,
    /// Where the sweeps go (either protocol).
    pub server: &'a Pool,
    /// What each sweep sends: token windows or text requests.
    pub workload: Workload,
    /// The sweep of each candidate (its budget is the run's).
    pub perf: PerfConfig,
    /// The configurations that may be tried.
    pub space: Space,
    /// Every configuration of the space is measured, not only the search's picks.
    pub exhaustive: bool,
    /// How many of the best candidates are measured again before the best is named (0:
    /// none).
    pub remeasure: usize,
    /// The best configuration stays loaded at the end (otherwise the original is put
    /// back).
    pub keep_best: bool,
    /// Where tune.json and the other files are written.
    pub output_dir: &'a Path,
    /// Cancelled: the search stops and the original configuration is put back.
    pub stop: CancellationToken,
}
}

/// A finished run: its report, and the error that ended it early, if any (the report
/// then holds the candidates measured before it).
pub struct Tuned {
    /// Every candidate, the best, and whether the original is back.
    pub report: Report,
    /// The model's configuration as read from the server before any change (its JSON).
    pub original: Value,
    /// The run's first error: the one that ended the search early ([`Error::Stopped`]
    /// after a stop), or the failure to put the configuration back; `None`: none.
    pub error: Option<Error>,
}

/// How a person puts the original back from an output directory, in the words of the
/// program that ran the search: the marker candidates carry and the messages that say
/// how quote it for the run's directory. The command's words are its command line.
pub type RestoreWords<'a> = &'a dyn Fn(&Path) -> String;

/// A program's words: the call of `restore` on the directory.
pub fn restore_call(dir: &Path) -> String {
    format!("bertqa::tune::restore_from(runtime, client, {dir:?})")
}

#[cfg_attr(
    not(feature = "internals"),
    allow(
        unreachable_pub,
        dead_code,
        reason = "public with the `internals` feature"
    )
)]
impl Tune<'_> {
    /// Runs the search and puts the configuration back (see the module's contract);
    /// the way back is named by [`restore_call`].
    pub fn run(self, rt: &tokio::runtime::Runtime, progress: &dyn TuneProgress) -> Result<Tuned> {
        self.run_naming(rt, progress, &restore_call)
    }

    /// [`Tune::run`], the way back named by `restore` (the command: its command line).
    pub fn run_naming(
        self,
        rt: &tokio::runtime::Runtime,
        progress: &dyn TuneProgress,
        restore: RestoreWords<'_>,
    ) -> Result<Tuned> {
        let budget = self
            .perf
            .budget
            .ok_or_else(|| Error::Config("`tune` needs a latency budget".into()))?;
        let original = rt.block_on(self.control.config())?;
        if let Some(m) = config::marker(&original) {
            return Err(Error::Config(format!(
                "model {:?} is in a candidate configuration of an unfinished tune ({m})",
                self.model
            )));
        }
        state::check_free(self.output_dir, restore)?;
        let run = format!(
            "{}-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            std::process::id()
        );
        let mut record = state::State {
            model: self.model.to_string(),
            control_url: self.control.url().to_string(),
            marker: state::marker_text(&run, self.output_dir, restore),
            restored: false,
            kept_best: false,
        };
        state::write(self.output_dir, &record, Some(&original))?;
        let baseline = Settings::of(&original);
        let mut space = self.space.clone();
        let mut warnings = Vec::new();
        if baseline.max_batch_size == 0 {
            // Batching would change the model's tensors (its ensemble's, too).
            space.max_batch_sizes.clear();
            space.delays_us.clear();
            space.preferred.clear();
            warnings.push(format!(
                "model {:?} has no batch dimension (max_batch_size 0): only its instance \
                 count is searched",
                self.model
            ));
        }
        let (mut candidates, mut error, mut panicked) =
            self.search(rt, &original, &baseline, &space, &record.marker, progress);
        if error.is_none() && self.stop.is_cancelled() {
            error = Some(Error::Stopped);
        }
        let mut remeasured = Vec::new();
        if error.is_none() && panicked.is_none() {
            let (indexes, e, payload) =
                self.remeasure_caught(rt, &original, &mut candidates, &record.marker, progress);
            (remeasured, error, panicked) = (indexes, e, payload);
        }
        let mut report = Report {
            model: self.model.to_string(),
            url: self.server.first_client().url().to_string(),
            budget,
            candidates,
            search: if self.exhaustive {
                "exhaustive"
            } else {
                "default"
            },
            restored: false,
            kept_best: false,
            warnings,
            remeasured,
        };
        if !report.remeasured.is_empty() && report.best().is_none() {
            report.warnings.push(
                "every candidate measured again went over the budget in a round: no best is \
                 named (a budget this close to the candidates' latency needs longer windows, \
                 or a larger `remeasure`)"
                    .into(),
            );
        }
        progress.putting_back();
        let put_back = self.put_back(rt, &original, &mut report, error.is_none());
        let recorded = match put_back {
            Ok(()) => {
                report.restored = !report.kept_best;
                record.restored = true;
                record.kept_best = report.kept_best;
                state::write(self.output_dir, &record, None)
            }
            Err(e) => {
                // The first error stays the one reported; the state keeps saying the
                // original is not back.
                report.warnings.push(format!(
                    "the original configuration could not be put back: {e}; run `{}`",
                    restore(self.output_dir)
                ));
                error.get_or_insert(e);
                Ok(())
            }
        };
        if let Some(payload) = panicked {
            // Put back (or said not to be, in the state): the panic goes on.
            std::panic::resume_unwind(payload);
        }
        recorded?;
        Ok(Tuned {
            report,
            original,
            error,
        })
    }

    /// Measures the candidates the search chooses: what was measured, the error that
    /// ended it early, and the payload of a panic inside it (a callback's, or a bug),
    /// caught here, where the runtime can still be driven to put the original back.
    fn search(
        &self,
        rt: &tokio::runtime::Runtime,
        original: &Value,
        baseline: &Settings,
        space: &Space,
        marker: &str,
        progress: &dyn TuneProgress,
    ) -> (
        Vec<Candidate>,
        Option<Error>,
        Option<Box<dyn std::any::Any + Send>>,
    ) {
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut error: Option<Error> = None;
        let started = std::time::Instant::now();
        let expected = self.expected_candidates(space, baseline);
        let standing = |candidates: &[Candidate]| Standing {
            done: candidates.len(),
            best: best_so_far(candidates),
            left: self.time_left(started.elapsed(), candidates.len(), expected),
        };
        let searched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            search::search(baseline, space, self.exhaustive, |s| {
                if self.stop.is_cancelled() {
                    return Step::Stop;
                }
                let index = candidates.len();
                let best = best_so_far(&candidates);
                if let Some((c, score)) = self.skip(s, &candidates) {
                    candidates.push(c);
                    progress.done(index, &candidates[index], &standing(&candidates));
                    return Step::Score(score);
                }
                progress.candidate(index, s);
                let perf = self.candidate_perf(best.map(|(i, _)| &candidates[i]));
                match self.measure(rt, original, s, index == 0, marker, &perf, progress) {
                    Ok(c) => {
                        let stopped = c.status == "stopped";
                        let score = c.score();
                        candidates.push(c);
                        progress.done(index, &candidates[index], &standing(&candidates));
                        if stopped {
                            Step::Stop
                        } else {
                            Step::Score(score)
                        }
                    }
                    Err(e) => {
                        error = Some(e);
                        Step::Stop
                    }
                }
            })
        }));
        let panicked = searched.err();
        if panicked.is_some() {
            error.get_or_insert_with(|| Error::Config("the search panicked".into()));
        }
        (candidates, error, panicked)
    }

    /// Loads the best candidate (`keep_best`, after a run without error) or the
    /// original back, noting in `report` which; a best that cannot be kept gives way to
    /// the original.
    fn put_back(
        &self,
        rt: &tokio::runtime::Runtime,
        original: &Value,
        report: &mut Report,
        clean: bool,
    ) -> Result<()> {
        match report.best().filter(|&b| b > 0) {
            Some(b) if self.keep_best && clean => {
                let settings = report.candidates[b].settings.clone();
                let c = config::candidate(original, &settings, None);
                match rt.block_on(self.control.apply(&c, &settings, None))? {
                    Ok(_) => {
                        report.kept_best = true;
                        Ok(())
                    }
                    Err(failure) => {
                        report.warnings.push(format!(
                            "the best configuration could not be kept ({}): the original \
                             is put back",
                            failure.message()
                        ));
                        rt.block_on(self.control.restore(original))
                    }
                }
            }
            _ => rt.block_on(self.control.restore(original)),
        }
    }

    /// The load went through the control address and the requests go to the client's:
    /// the model the client reaches must carry this run's marker.
    fn check_same_server(&self, rt: &tokio::runtime::Runtime, marker: &str) -> Result<()> {
        let client = self.server.first_client();
        let config = rt.block_on(client.model_config_if_any(self.model, ""))?;
        let carried = config
            .as_ref()
            .and_then(|c| c.parameters.get(config::MARKER))
            .is_some_and(|p| p.string_value == marker);
        if carried {
            Ok(())
        } else {
            Err(Error::Config(format!(
                "model {:?} at {} does not carry the configuration just loaded through {}: \
                 the `url` and the `control_url` must be one server (not a load balancer in \
                 front of several)",
                self.model,
                client.url(),
                self.control.url()
            )))
        }
    }

    /// Loads (unless `found`) and sweeps one candidate. An `Err` ends the run: the
    /// server is gone or the sweep cannot be set up; anything a candidate alone caused
    /// is its status.
    #[allow(clippy::too_many_arguments)]
    fn measure(
        &self,
        rt: &tokio::runtime::Runtime,
        original: &Value,
        s: &Settings,
        found: bool,
        marker: &str,
        perf: &PerfConfig,
        progress: &dyn TuneProgress,
    ) -> Result<Candidate> {
        let mut c = Candidate {
            settings: s.clone(),
            served: None,
            status: "measured",
            error: None,
            level: None,
            remeasured: None,
        };
        if found {
            c.served = Some(s.clone());
        } else {
            let wanted = config::candidate(original, s, Some(marker));
            match rt.block_on(self.control.apply(&wanted, s, Some(marker)))? {
                Ok(read) => c.served = Some(Settings::of(&read)),
                Err(failure) => {
                    c.status = failure.status();
                    c.error = Some(failure.message().to_string());
                    return Ok(c);
                }
            }
            self.check_same_server(rt, marker)?;
        }
        match self.sweep(rt, perf, progress) {
            Ok(levels) => {
                c.level = Candidate::pick(levels);
                if let (Some(l), perf::Until::Decided { beat, .. }) = (&c.level, perf.until) {
                    if !c.within_budget() && l.features_per_s < beat {
                        c.status = "cut";
                        c.error = Some(format!(
                            "over the budget at {} with {:.1} features/s, below the best so \
                             far ({beat:.1}): less load gives less throughput, more gives \
                             more latency",
                            l.level, l.features_per_s
                        ));
                    }
                }
            }
            Err(Error::Stopped) => c.status = "stopped",
            Err(e @ (Error::Unavailable { .. } | Error::NoServer { .. })) => return Err(e),
            Err(e) => {
                c.status = "failed";
                c.error = Some(e.to_string());
            }
        }
        Ok(c)
    }

    /// A candidate's sweep: tune's rule to end levels, to beat the best so far, its
    /// binary search started where the best kept the budget.
    fn candidate_perf(&self, best: Option<&Candidate>) -> PerfConfig {
        let beat = best.map_or(0.0, Candidate::score);
        let start_at = match (&self.perf.load, best.and_then(|b| b.level.as_ref())) {
            (perf::Load::Concurrency(values), Some(l)) => match l.level {
                perf::Level::Concurrency(n) => values.iter().position(|&v| v == n),
                perf::Level::RequestRate(_) => None,
            },
            _ => None,
        };
        PerfConfig {
            until: perf::Until::Decided {
                beat,
                precision: PRECISION,
            },
            start_at,
            ..self.perf.clone()
        }
    }

    /// `s` as a skipped candidate, with the score of the one it would serve as, when it
    /// would serve as one measured: without dynamic batching the server runs each
    /// request alone, so the max batch size changes nothing for requests no larger than
    /// it (the exhaustive search skips nothing).
    fn skip(&self, s: &Settings, measured: &[Candidate]) -> Option<(Candidate, f64)> {
        let rows = match &self.workload {
            Workload::Tokens { batches, .. } => batches.first().map(|b| b.features.len())?,
            Workload::Text(_) => return None,
        };
        if self.exhaustive {
            return None;
        }
        let i = serves_as(s, rows, measured)?;
        let same = &measured[i];
        let skipped = Candidate {
            settings: s.clone(),
            served: None,
            status: "skipped",
            error: Some(format!(
                "serves as #{i} ({}): without dynamic batching each request of {rows} \
                 runs alone, whatever the max batch size",
                same.shown().describe()
            )),
            level: None,
            remeasured: None,
        };
        Some((skipped, same.score()))
    }

    /// About how many candidates the search measures: the first pass over each setting,
    /// and a round of neighbours (the exhaustive search: the grid).
    fn expected_candidates(&self, space: &Space, start: &Settings) -> usize {
        if self.exhaustive {
            return 1 + space.grid(start).len();
        }
        let firsts = space.max_batch_sizes.len()
            + space.delays_us.len()
            + space.instances.len()
            + space.preferred.len();
        1 + firsts + 4
    }

    /// The time left at the pace so far: the candidates still expected and the
    /// re-measurement's rounds, each as long as a candidate took on average.
    fn time_left(
        &self,
        elapsed: std::time::Duration,
        done: usize,
        expected: usize,
    ) -> std::time::Duration {
        let per = elapsed / done.max(1) as u32;
        let more = expected
            .saturating_sub(done)
            .max(usize::from(!self.exhaustive));
        per * (more + self.remeasure * REMEASURE_ROUNDS / 2) as u32
    }

    /// [`remeasure`](Self::remeasure), a panic inside it caught (as the search's is):
    /// the indexes, the error that ended it, the panic's payload.
    fn remeasure_caught(
        &self,
        rt: &tokio::runtime::Runtime,
        original: &Value,
        candidates: &mut [Candidate],
        marker: &str,
        progress: &dyn TuneProgress,
    ) -> (
        Vec<usize>,
        Option<Error>,
        Option<Box<dyn std::any::Any + Send>>,
    ) {
        let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.remeasure(rt, original, candidates, marker, progress)
        }));
        match again {
            Ok(Ok(indexes)) => (indexes, None, None),
            Ok(Err(e)) => (Vec::new(), Some(e), None),
            Err(payload) => (
                Vec::new(),
                Some(Error::Config("the re-measurement panicked".into())),
                Some(payload),
            ),
        }
    }

    /// Measures the best `remeasure` candidates again, in alternating rounds, each at
    /// the concurrency of its reported level; returns their indexes, best first.
    fn remeasure(
        &self,
        rt: &tokio::runtime::Runtime,
        original: &Value,
        candidates: &mut [Candidate],
        marker: &str,
        progress: &dyn TuneProgress,
    ) -> Result<Vec<usize>> {
        let mut top: Vec<usize> = (0..candidates.len())
            .filter(|&i| candidates[i].status == "measured" && candidates[i].within_budget())
            .collect();
        top.sort_by(|&a, &b| candidates[b].score().total_cmp(&candidates[a].score()));
        top.truncate(self.remeasure);
        if top.is_empty() {
            return Ok(top);
        }
        let mut rounds: Vec<Vec<(f64, bool, Vec<f64>)>> = vec![Vec::new(); candidates.len()];
        for round in 0..REMEASURE_ROUNDS {
            // A B C, then C B A: the last of a round need not be loaded again.
            let order: Vec<usize> = if round % 2 == 0 {
                top.clone()
            } else {
                top.iter().rev().copied().collect()
            };
            for (k, &i) in order.iter().enumerate() {
                if self.stop.is_cancelled() {
                    return Err(Error::Stopped);
                }
                progress.remeasure(round, i);
                let loaded = round > 0 && k == 0;
                if !loaded && !self.load_again(rt, original, &candidates[i], i, marker)? {
                    continue;
                }
                let level = candidates[i].level.as_ref().map(|l| l.level);
                let Some(perf::Level::Concurrency(n)) = level else {
                    continue;
                };
                let perf = PerfConfig {
                    load: perf::Load::Concurrency(vec![n]),
                    until: perf::Until::Decided {
                        beat: 0.0,
                        precision: PRECISION,
                    },
                    start_at: None,
                    ..self.perf.clone()
                };
                let levels = self.sweep(rt, &perf, progress)?;
                if let Some(l) = levels.into_iter().next() {
                    let within = l.budget.is_some_and(|b| b.within);
                    rounds[i].push((l.features_per_s, within, l.window_features_per_s));
                }
            }
        }
        for &i in &top {
            let r = &rounds[i];
            if r.is_empty() {
                continue;
            }
            let windows = r.iter().flat_map(|x| x.2.iter().copied());
            let (lo, hi) = windows.fold((f64::INFINITY, 0.0f64), |(lo, hi), w| {
                (lo.min(w), hi.max(w))
            });
            candidates[i].remeasured = Some(report::Remeasured {
                rounds: r.iter().map(|x| x.0).collect(),
                spread: [lo.min(hi), hi],
                within_budget: r.iter().all(|x| x.1),
            });
        }
        Ok(top)
    }

    /// Loads candidate `c` (index `i`; 0 is the configuration found) again for its
    /// re-measurement; false when the server refused it now (it is then not
    /// re-measured).
    fn load_again(
        &self,
        rt: &tokio::runtime::Runtime,
        original: &Value,
        c: &Candidate,
        i: usize,
        marker: &str,
    ) -> Result<bool> {
        if i == 0 {
            rt.block_on(self.control.restore(original))?;
            return Ok(true);
        }
        let wanted = config::candidate(original, &c.settings, Some(marker));
        match rt.block_on(self.control.apply(&wanted, &c.settings, Some(marker)))? {
            Ok(_) => {
                self.check_same_server(rt, marker)?;
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    /// Sweeps the model as it is loaded now under `perf`.
    fn sweep(
        &self,
        rt: &tokio::runtime::Runtime,
        perf: &PerfConfig,
        progress: &dyn TuneProgress,
    ) -> Result<Vec<perf::LevelResult>> {
        let servers = perf::Servers::one(self.server.clone());
        let requests = match &self.workload {
            Workload::Tokens { batches, overrides } => {
                let binding = rt.block_on(async {
                    let client = self.server.first_client();
                    let (metadata, config) =
                        crate::backend::describe(client, self.model, "").await?;
                    Binding::infer(&metadata, config.as_ref(), "", overrides)
                })?;
                perf::Requests::tokens(Arc::new(binding), batches.clone())
            }
            Workload::Text(requests) => Ok(requests.clone()),
        };
        let requests = requests?;
        let (levels, _) = rt.block_on(perf::sweep(&servers, &requests, perf, progress))?;
        Ok(levels)
    }
}

/// The best candidate so far within the budget: its index and score.
fn best_so_far(candidates: &[Candidate]) -> Option<(usize, f64)> {
    let mut best: Option<(usize, f64)> = None;
    for (i, c) in candidates.iter().enumerate() {
        if c.within_budget() && best.is_none_or(|(_, b)| c.score() > b) {
            best = Some((i, c.score()));
        }
    }
    best
}

internal! {
/// `tune --restore`: puts back the original recorded in `dir` through `control`
/// (which must be the recorded server's), reads it back, and records it. Refused when
/// the model's configuration changed since the run (it carries no marker of the run, is
/// not the original, and no best was kept): that change is someone else's.
pub fn restore(rt: &tokio::runtime::Runtime, control: &Control, dir: &Path) -> Result<String> {
    let (mut record, original) = state::read(dir)?;
    let now = rt.block_on(control.config())?;
    let ours = config::marker(&now).as_deref() == Some(record.marker.as_str());
    let said = if now == original {
        "was already back"
    } else if ours || record.kept_best || !record.restored {
        rt.block_on(control.restore(&original))?;
        if record.kept_best {
            "is back, in place of the best configuration the run kept"
        } else {
            "is back"
        }
    } else {
        return Err(Error::Config(format!(
            "model {:?} on {} changed since the tune recorded in {} ended (it is neither a \
             candidate of that run nor its original): not touching it; the original is in \
             {}",
            record.model,
            record.control_url,
            dir.display(),
            dir.join(state::ORIGINAL_FILE).display()
        )));
    };
    record.restored = true;
    record.kept_best = false;
    state::write(dir, &record, None)?;
    Ok(format!(
        "the original configuration of model {:?} {said} on {} (read back and equal)",
        record.model, record.control_url
    ))
}
}

/// The index of the measured candidate that `s` would serve as, for requests of `rows`:
/// without dynamic batching the server runs each request alone, so two configurations
/// with the same instances and a max batch size of at least `rows` serve alike.
fn serves_as(s: &Settings, rows: usize, measured: &[Candidate]) -> Option<usize> {
    if s.dynamic.is_some() || s.max_batch_size < rows {
        return None;
    }
    measured.iter().position(|c| {
        let m = c.shown();
        c.status == "measured"
            && m.dynamic.is_none()
            && m.instances == s.instances
            && m.max_batch_size >= rows
    })
}

#[cfg(test)]
mod tests;
