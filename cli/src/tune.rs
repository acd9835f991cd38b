//! `bertqa tune`: the search of `bertqa::tune` on a live Triton in explicit
//! model-control mode, with real features from a data file; the text table on stdout
//! (or `--json`, `schema/tune.schema.json`), progress on stderr, the report and the
//! original configuration in `--output-dir`, `--write-config` and `--html` files.

use std::path::{Path, PathBuf};

use super::args::{
    BindingArgs, MeasureArgs, MetricsArgs, OutputArgs, ServerArgs, TextBindingArgs, TokenizerArgs,
    WindowArgs, INPUT, MODEL, OUTPUT, RUN, SEARCH, SERVER,
};
use super::common::{data_label, load_data, runtime, Outcome};
use super::flags::name_flags;
use super::session::Session;
use bertqa::perf::{Budget, Level, Load, PerfConfig, PerfProgress, Range};
use bertqa::tune::config::{Preferred, Settings};
use bertqa::tune::report::{self, Candidate};
use bertqa::tune::search::Space;
use bertqa::tune::{TuneOptions, TuneProgress, Tuning};

/// The configuration (max batch size, dynamic batching, instances) that serves best
/// within a latency budget, found on a live Triton in explicit model-control mode.
#[derive(Debug, clap::Args)]
#[command(mut_arg("quiet", |a| a.help("No progress lines")))]
pub struct Args {
    /// Data: SQuAD JSON, Hugging Face rows (JSON Lines, Parquet) or MRQA, gzipped or
    /// not, - for stdin; repeat for several files read as one
    #[arg(long, value_name = "FILE", help_heading = INPUT, required_unless_present = "restore", action = clap::ArgAction::Append)]
    pub data: Vec<PathBuf>,
    /// First N questions only
    #[arg(long, value_name = "N", help_heading = INPUT)]
    pub limit: Option<usize>,
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
    #[command(flatten)]
    pub window: WindowArgs,
    /// Windows of run_squad (nvidia, hf: the same windows) or of run_qa [default: run-qa
    /// for a tokenizer that is not WordPiece, else nvidia]
    #[arg(long, value_enum, help_heading = INPUT)]
    pub postprocess: Option<super::args::Postprocess>,
    /// Model to tune (loaded, and always put back, on the server)
    #[arg(long, help_heading = MODEL, required_unless_present = "restore")]
    pub model: Option<String>,
    /// For a text ensemble: the composing model to tune (the load goes through the
    /// ensemble)
    #[arg(long, value_name = "NAME", help_heading = MODEL)]
    pub step: Option<String>,
    #[command(flatten)]
    pub binding: BindingArgs,
    #[command(flatten)]
    pub text: TextBindingArgs,
    #[command(flatten)]
    pub server: ServerArgs,
    /// The server's HTTP address for the repository calls (default: --url with
    /// --protocol http; needed with gRPC)
    #[arg(long, value_name = "URL", help_heading = SERVER)]
    pub control_url: Option<String>,
    /// Max batch sizes to try
    #[arg(long, default_value = "8,16,32,64", value_name = "LIST", help_heading = SEARCH)]
    pub max_batch_sizes: String,
    /// Dynamic batching queue delays to try, microseconds
    #[arg(long, default_value = "0,100,500,2000", value_name = "LIST", help_heading = SEARCH)]
    pub queue_delays_us: String,
    /// Instance counts (of each instance group) to try
    #[arg(long, default_value = "1,2,4", value_name = "LIST", help_heading = SEARCH)]
    pub instances: String,
    /// Preferred batch sizes: auto (the server's default, and half and all of the max
    /// batch size), none (the server's default), or a LIST
    #[arg(long, default_value = "auto", value_name = "auto|none|LIST", help_heading = SEARCH)]
    pub preferred_batch_sizes: String,
    /// Measure every combination instead of the default search
    #[arg(long, help_heading = SEARCH)]
    pub exhaustive: bool,
    /// Measure the best N candidates of the search again, in alternation, and name the
    /// best by those figures (0: name it by the search's)
    #[arg(long, default_value_t = 3, value_name = "N", help_heading = SEARCH)]
    pub remeasure: usize,
    /// Leave the best configuration loaded instead of the original
    #[arg(long, help_heading = SEARCH)]
    pub keep_best: bool,
    /// Put back the original recorded in --output-dir (after a run that did not finish,
    /// or --keep-best), on the server recorded there
    #[arg(long, help_heading = SEARCH, conflicts_with_all = ["data", "model", "keep_best"])]
    pub restore: bool,
    /// Windows per request (the server's dynamic batcher makes the batches)
    #[arg(long, default_value_t = 1, value_name = "N", help_heading = RUN)]
    pub batch_size: usize,
    /// Measure each candidate at this many requests in flight only
    #[arg(long, value_name = "N", conflicts_with = "concurrency_range", help_heading = RUN)]
    pub concurrency: Option<usize>,
    /// Requests in flight searched (binary search) for the most within the budget
    #[arg(long, default_value = "1:64", value_name = "START:END:STEP", help_heading = RUN)]
    pub concurrency_range: String,
    /// Requests sent to each candidate first and left out of every figure
    #[arg(long, default_value_t = 8, value_name = "N", help_heading = RUN)]
    pub warmup: usize,
    /// Latency budget in ms (client latency at --percentile)
    #[arg(long, value_name = "MS", help_heading = RUN, required_unless_present = "restore")]
    pub latency_threshold: Option<f64>,
    /// The latency percentile the budget applies to
    #[arg(long, default_value_t = 99.0, value_name = "P", help_heading = RUN)]
    pub percentile: f64,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    /// Where the original configuration, the run's state and tune.json are written
    #[arg(long, value_name = "DIR", help_heading = OUTPUT)]
    pub output_dir: PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Write the best candidate's config.pbtxt here
    #[arg(long, value_name = "FILE", help_heading = OUTPUT)]
    pub write_config: Option<PathBuf>,
    /// Write a self-contained HTML report here (a chart of every candidate)
    #[arg(long, value_name = "FILE", help_heading = OUTPUT)]
    pub html: Option<PathBuf>,
}

/// A comma-separated list of numbers, each at least `min`.
fn list<T: std::str::FromStr + PartialOrd + Copy + std::fmt::Display>(
    flag: &str,
    text: &str,
    min: T,
) -> anyhow::Result<Vec<T>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        match part.parse::<T>() {
            Ok(v) if v >= min => {
                if !out.contains(&v) {
                    out.push(v);
                }
            }
            _ => anyhow::bail!("{flag} {text:?}: {part:?} is not a number of at least {min}"),
        }
    }
    Ok(out)
}

/// What tune's flags ask of a search, besides the client's settings and the data: the
/// command's flags and `bertqa.Client.tune`'s options read into one value, checked and
/// run by the same code ([`TuneSettings::check`], [`TuneSettings::tune`]). `Default`
/// is the flags' defaults, with no output directory.
#[derive(Debug, Clone)]
pub struct TuneSettings {
    /// `--step`.
    pub step: Option<String>,
    /// `--control-url`.
    pub control_url: Option<String>,
    /// `--max-batch-sizes`.
    pub max_batch_sizes: String,
    /// `--queue-delays-us`.
    pub queue_delays_us: String,
    /// `--instances`.
    pub instances: String,
    /// `--preferred-batch-sizes`.
    pub preferred_batch_sizes: String,
    /// `--exhaustive`.
    pub exhaustive: bool,
    /// `--remeasure`.
    pub remeasure: usize,
    /// `--keep-best`.
    pub keep_best: bool,
    /// `--batch-size`.
    pub batch_size: usize,
    /// `--concurrency`.
    pub concurrency: Option<usize>,
    /// `--concurrency-range`.
    pub concurrency_range: String,
    /// `--warmup`.
    pub warmup: usize,
    /// `--latency-threshold`.
    pub latency_threshold: Option<f64>,
    /// `--percentile`.
    pub percentile: f64,
    /// The measurement flags.
    pub measure: MeasureArgs,
    /// The metrics flags.
    pub metrics: MetricsArgs,
    /// `--output-dir`.
    pub output_dir: PathBuf,
    /// `--write-config`.
    pub write_config: Option<PathBuf>,
    /// `--html`.
    pub html: Option<PathBuf>,
    /// `--quiet`: no progress lines.
    pub quiet: bool,
    /// `-v`: each measurement window's line too.
    pub verbose: bool,
}

impl Default for TuneSettings {
    fn default() -> Self {
        TuneSettings {
            step: None,
            control_url: None,
            max_batch_sizes: "8,16,32,64".into(),
            queue_delays_us: "0,100,500,2000".into(),
            instances: "1,2,4".into(),
            preferred_batch_sizes: "auto".into(),
            exhaustive: false,
            remeasure: 3,
            keep_best: false,
            batch_size: 1,
            concurrency: None,
            concurrency_range: "1:64".into(),
            warmup: 8,
            latency_threshold: None,
            percentile: 99.0,
            measure: MeasureArgs::default(),
            metrics: MetricsArgs::default(),
            output_dir: PathBuf::new(),
            write_config: None,
            html: None,
            quiet: false,
            verbose: false,
        }
    }
}

impl Args {
    /// The search's settings of the flags.
    fn settings(&self) -> TuneSettings {
        TuneSettings {
            step: self.step.clone(),
            control_url: self.control_url.clone(),
            max_batch_sizes: self.max_batch_sizes.clone(),
            queue_delays_us: self.queue_delays_us.clone(),
            instances: self.instances.clone(),
            preferred_batch_sizes: self.preferred_batch_sizes.clone(),
            exhaustive: self.exhaustive,
            remeasure: self.remeasure,
            keep_best: self.keep_best,
            batch_size: self.batch_size,
            concurrency: self.concurrency,
            concurrency_range: self.concurrency_range.clone(),
            warmup: self.warmup,
            latency_threshold: self.latency_threshold,
            percentile: self.percentile,
            measure: self.measure.clone(),
            metrics: self.metrics.clone(),
            output_dir: self.output_dir.clone(),
            write_config: self.write_config.clone(),
            html: self.html.clone(),
            quiet: self.output.quiet,
            verbose: false,
        }
    }
}

/// A search's settings once checked ([`TuneSettings::check`]).
pub struct Checked {
    perf: PerfConfig,
    space: Space,
}

impl TuneSettings {
    /// Checks the settings (before any data is read or server contacted), and makes the
    /// output directory.
    pub(crate) fn check(&self) -> anyhow::Result<Checked> {
        let perf = perf_config(self)?;
        let space = space(self)?;
        std::fs::create_dir_all(&self.output_dir)
            .map_err(|e| bertqa::Error::io(&self.output_dir, e))?;
        for (flag, path) in [
            ("--html", &self.html),
            ("--write-config", &self.write_config),
        ] {
            if let Some(path) = path {
                super::common::check_output_dir(flag, path)?;
            }
        }
        Ok(Checked { perf, space })
    }

    /// Runs the search of `checked` ([`TuneSettings::check`]'s) for `client`'s model
    /// (its batch size set to [`TuneSettings::batch_size`]) over `dataset` (named
    /// `data`); `shown` gets the report first (a file that cannot be written must not
    /// hide it), then tune.json and the other files are written. `stop` stops it as the
    /// binary's first Ctrl-C does (`None`: the binary's signal handlers).
    pub(crate) fn tune(
        &self,
        checked: Checked,
        client: bertqa::ClientBuilder,
        dataset: &bertqa::types::Dataset,
        data: String,
        stop: Option<tokio_util::sync::CancellationToken>,
        shown: impl FnOnce(&report::Report) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let rt = runtime()?;
        let client = client.batch_size(self.batch_size);
        let options = TuneOptions {
            step: self.step.clone(),
            control_url: self.control_url.clone(),
            perf: checked.perf,
            space: checked.space,
            exhaustive: self.exhaustive,
            remeasure: self.remeasure,
            keep_best: self.keep_best,
            output_dir: self.output_dir.clone(),
            data,
            metrics: super::perf::metrics_options(&self.metrics),
        };
        let progress = Lines {
            quiet: self.quiet,
            verbose: self.verbose,
        };
        let tuning = Tuning::prepare(&rt, &client, dataset, options, &progress)?;
        let dir = self.output_dir.clone();
        let stop = match stop {
            Some(stop) => stop,
            None => super::resume::stop_on_signals(move || {
                eprintln!(
                    "quitting at once; the model may be left in a candidate configuration: put \
                     the original back with `{}`",
                    restore_command(&dir)
                );
            })?,
        };
        let mut tuned_run = tuning.run(&rt, stop, &progress, &restore_command)?;
        // The warnings and the text name settings; the reports name the flags.
        for w in &mut tuned_run.report.warnings {
            *w = name_flags(w);
        }
        let report = &tuned_run.report;
        shown(report)?;
        let written = self.write_files(&tuned_run);
        let back = match (report.restored, report.kept_best) {
            (true, _) => "the original configuration is back".to_string(),
            (false, true) => "the best configuration is loaded (--keep-best)".to_string(),
            (false, false) => format!(
                "the original configuration is NOT back: run `{}`",
                restore_command(&self.output_dir)
            ),
        };
        match tuned_run.error {
            Some(bertqa::Error::Stopped) => anyhow::bail!(
                "stopped by an interrupt after {} candidates; {back}",
                report.candidates.len()
            ),
            Some(e) if !report.restored => Err(anyhow::Error::from(e)
                .context(format!("tune of {:?} failed; {back}", report.model))),
            Some(e) => Err(e.into()),
            None => written,
        }
    }

    /// tune.json in the output directory, `--write-config`, `--html`.
    fn write_files(&self, t: &bertqa::tune::Tuned) -> anyhow::Result<()> {
        let report = &t.report;
        let mut json = serde_json::to_vec_pretty(&report::render_json(report))?;
        json.push(b'\n');
        bertqa::output_file::write_atomic(&self.output_dir.join("tune.json"), &json)?;
        if let Some(path) = &self.html {
            bertqa::output_file::write_atomic(path, &bertqa::tune::html::render(report))?;
        }
        if let Some(path) = &self.write_config {
            match t.best_config() {
                Some(text) => bertqa::output_file::write_atomic(path, text.as_bytes())?,
                None => eprintln!(
                    "warning: no candidate kept the budget: {} not written",
                    path.display()
                ),
            }
        }
        Ok(())
    }
}

/// The search space of the settings.
fn space(args: &TuneSettings) -> anyhow::Result<Space> {
    let max_batch_sizes = list("--max-batch-sizes", &args.max_batch_sizes, 1usize)?;
    if let Some(&small) = max_batch_sizes.iter().find(|&&b| b < args.batch_size) {
        anyhow::bail!(
            "--max-batch-sizes has {small}, below --batch-size {}",
            args.batch_size
        );
    }
    let preferred = match args.preferred_batch_sizes.as_str() {
        "none" => vec![Preferred::Server],
        // The server's default, and half and all of each candidate's max batch size.
        "auto" => vec![Preferred::Server, Preferred::Half],
        text => vec![Preferred::Sizes(list(
            "--preferred-batch-sizes",
            text,
            1usize,
        )?)],
    };
    Ok(Space {
        max_batch_sizes,
        delays_us: list("--queue-delays-us", &args.queue_delays_us, 0u64)?,
        instances: list("--instances", &args.instances, 1usize)?,
        preferred,
    })
}

/// Each candidate's sweep.
fn perf_config(args: &TuneSettings) -> anyhow::Result<PerfConfig> {
    let load = match args.concurrency {
        Some(0) => anyhow::bail!("--concurrency must be at least 1"),
        Some(n) => Load::Concurrency(vec![n]),
        None => Load::Concurrency(
            Range::parse("--concurrency-range", &args.concurrency_range, true)?
                .values()
                .into_iter()
                .map(|x| x as usize)
                .collect(),
        ),
    };
    let window = args.measure.window_or(TUNE_WINDOW_MS)?;
    super::args::check_percentile(args.percentile)?;
    let ms = args.latency_threshold.unwrap_or(0.0);
    if !(ms > 0.0 && ms <= 3_600_000.0) {
        anyhow::bail!(
            "--latency-threshold {ms} must be above 0 and at most an hour (milliseconds)"
        );
    }
    Ok(PerfConfig {
        load,
        budget: Some(Budget {
            threshold_us: ms * 1000.0,
            percentile: args.percentile,
            binary_search: true,
        }),
        window,
        stability_percent: args.measure.stability_percentage,
        max_trials: args.measure.max_trials,
        warmup: args.warmup,
        ..PerfConfig::default()
    })
}

/// tune's measurement window unless --measurement-interval-ms or
/// --measurement-request-count says otherwise: short, since its rule ends a level as soon
/// as its figures decide it.
const TUNE_WINDOW_MS: u64 = 1000;

/// Progress lines on stderr.
struct Lines {
    quiet: bool,
    verbose: bool,
}

impl PerfProgress for Lines {
    fn warning(&self, text: &str) {
        eprintln!("warning: {}", name_flags(text));
    }

    fn window(&self, level: Level, trial: usize, requests_per_s: f64, avg_latency_us: f64) {
        if !self.quiet && self.verbose {
            eprintln!(
                "  {level}: window {trial}: {requests_per_s:.1} requests/s, avg latency {:.3} ms",
                avg_latency_us / 1000.0
            );
        }
    }

    fn level(&self, level: Level) {
        if !self.quiet {
            eprintln!("  {level}");
        }
    }
}

impl TuneProgress for Lines {
    fn candidate(&self, index: usize, settings: &Settings) {
        if !self.quiet {
            let how = if index == 0 { "as found" } else { "loading" };
            eprintln!("candidate {index}: {} ({how})", settings.describe());
        }
    }

    fn done(&self, index: usize, c: &Candidate, standing: &bertqa::tune::Standing) {
        if self.quiet {
            return;
        }
        match (&c.level, &c.error) {
            (_, Some(e)) => eprintln!("candidate {index}: {}: {e}", c.status),
            (Some(l), None) => eprintln!(
                "candidate {index}: {:.1} features/s at {}, {} the budget",
                l.features_per_s,
                l.level,
                if c.within_budget() { "within" } else { "over" }
            ),
            (None, None) => eprintln!("candidate {index}: {}", c.status),
        }
        let best = match standing.best {
            Some((i, fps)) => format!("best so far #{i}, {fps:.1} features/s"),
            None => "no candidate within the budget yet".into(),
        };
        eprintln!(
            "  {} done; {best}; about {} s left",
            standing.done,
            standing.left.as_secs()
        );
    }

    fn remeasure(&self, round: usize, index: usize) {
        if !self.quiet {
            eprintln!("measuring candidate {index} again (round {})", round + 1);
        }
    }

    fn putting_back(&self) {
        if !self.quiet {
            eprintln!("putting the configuration back");
        }
    }
}

pub(crate) fn run(args: Args, session: &mut Session) -> anyhow::Result<Outcome> {
    if args.restore {
        let rt = runtime()?;
        let client = super::common::server_builder(&args.server)?;
        let said = bertqa::tune::restore_from(&rt, &client, &args.output_dir)?;
        session.print(|| format!("{said}\n"))?;
        return Ok(Outcome::Success);
    }
    let mut settings = args.settings();
    settings.verbose = session.verbose();
    let checked = settings.check()?;
    let model = args.model.clone().expect("required by clap");
    let dataset = load_data(&args.data, args.window.strict, args.limit)?;
    let client = super::perf::client_settings(
        &args.server,
        &model,
        &args.tokenizer,
        &args.window,
        args.postprocess,
        &args.binding,
        &args.text,
        None,
    )?;
    settings.tune(
        checked,
        client,
        &dataset,
        data_label(&args.data),
        None,
        |report| {
            session.print(|| {
                if args.output.json {
                    bertqa::report::json::to_string(&report::render_json(report))
                } else {
                    name_flags(&report::render_text(report))
                }
            })
        },
    )?;
    Ok(Outcome::Success)
}

/// How a user puts the original back from `dir`: the command line of `--restore` (the
/// marker on the server and the messages quote it).
fn restore_command(dir: &Path) -> String {
    format!("bertqa tune --restore --output-dir {}", dir.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_numbers_once_each_at_least_the_minimum() {
        assert_eq!(list("--x", "8, 16,8,32", 1usize).unwrap(), vec![8, 16, 32]);
        assert_eq!(list("--x", "0,100", 0u64).unwrap(), vec![0, 100]);
        let e = list("--max-batch-sizes", "8,0", 1usize)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--max-batch-sizes \"8,0\": \"0\" is not a number of at least 1"
        );
        assert!(list("--x", "8,,16", 1usize).is_err());
        assert!(list("--x", "auto", 1usize).is_err());
    }
}
