//! `bertqa perf`: the load sweep of `bertqa::perf` with real features from a SQuAD
//! file; text report on stdout (or `--json`, `schema/perf.schema.json`), progress and
//! warnings on stderr, `--csv` (perf_analyzer's columns), `--svg` and `--html` files.
//! The flags become the client's settings and the sweep's options; the sweep, from
//! connecting to the report, is [`bertqa::perf::run`]'s.

use std::path::PathBuf;

use clap::ValueEnum;

use super::args::{
    BindingArgs, LoadArgs, MeasureArgs, MetricsArgs, OutputArgs, ServerArgs, TextBindingArgs,
    TokenizerArgs, WindowArgs, INPUT, MODEL, OUTPUT, RUN,
};
use super::common::{data_label, load_data, runtime, Outcome};
use super::flags::name_flags;
use super::session::Session;
use bertqa::metrics::MetricsOptions;
use bertqa::perf::export::{self, Exporter, Report};
use bertqa::perf::{
    self, Budget, Distribution, Level, Load, PerfConfig, PerfOptions, PerfProgress, Range,
};

/// How sends are spaced in request-rate mode: `constant`, evenly 1/rate apart;
/// `poisson`, exponential gaps (a Poisson process) seeded by `--seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DistributionArg {
    Constant,
    Poisson,
}

/// Load sweep in the manner of perf_analyzer, with real features from a SQuAD file.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("url", |a| a.help(super::args::URL_SPREAD_HELP)),
    mut_arg("concurrency", |a| a.help("Requests in flight, without a range below")),
    mut_arg("quiet", |a| a.help("No progress lines")),
    // Accepted, but perf always pads so: to each batch's longest window, unchecked.
    mut_arg("dynamic_seq_len", |a| a.hide(true)),
)]
pub struct Args {
    /// Data: SQuAD JSON, Hugging Face rows (JSON Lines, Parquet) or MRQA, gzipped or
    /// not, - for stdin; repeat for several files read as one
    #[arg(long, value_name = "FILE", help_heading = INPUT, required = true, action = clap::ArgAction::Append)]
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
    /// Model to load
    #[arg(long, help_heading = MODEL)]
    pub model: String,
    /// Model version (default: the server's choice)
    #[arg(long, default_value = "", hide_default_value = true, help_heading = MODEL)]
    pub model_version: String,
    #[command(flatten)]
    pub binding: BindingArgs,
    #[command(flatten)]
    pub text: TextBindingArgs,
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Closed loop: levels of requests in flight, START[:END[:STEP]]
    #[arg(
        long,
        value_name = "START:END:STEP",
        conflicts_with = "request_rate_range",
        help_heading = RUN
    )]
    pub concurrency_range: Option<String>,
    /// Open loop: levels of requests sent per second, START[:END[:STEP]]
    #[arg(long, value_name = "START:END:STEP", help_heading = RUN)]
    pub request_rate_range: Option<String>,
    /// How sends are spaced in request-rate mode
    #[arg(long, value_enum, default_value_t = DistributionArg::Constant, help_heading = RUN)]
    pub request_distribution: DistributionArg,
    /// Seed of the Poisson arrivals
    #[arg(long, default_value_t = 0, help_heading = RUN)]
    pub seed: u64,
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// Request-rate mode: most requests in flight (later sends wait and count as late)
    #[arg(long, default_value_t = 4096, value_name = "N", help_heading = RUN)]
    pub max_inflight: usize,
    /// Latency budget in ms: stop after the first level over it, report the best within
    #[arg(long, value_name = "MS", help_heading = RUN)]
    pub latency_threshold: Option<f64>,
    /// The latency percentile the budget applies to
    #[arg(
        long,
        default_value_t = 99.0,
        value_name = "P",
        requires = "latency_threshold",
        help_heading = RUN
    )]
    pub percentile: f64,
    /// Find the largest level within budget by binary search between the range's ends
    #[arg(long, requires = "latency_threshold", help_heading = RUN)]
    pub binary_search: bool,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Write perf_analyzer's CSV here
    #[arg(long, value_name = "FILE", help_heading = OUTPUT)]
    pub csv: Option<PathBuf>,
    /// Only write the requests as perf_analyzer's --input-data JSON here; send no load
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["csv", "svg", "html", "requests_jsonl", "latency_threshold"],
        help_heading = OUTPUT
    )]
    pub export_input_data: Option<PathBuf>,
    /// Write a JSON line per request here as requests complete (readable during the run)
    #[arg(long, value_name = "FILE", help_heading = OUTPUT)]
    pub requests_jsonl: Option<PathBuf>,
    /// Write an SVG chart of latency against throughput here
    #[arg(long, value_name = "FILE", help_heading = OUTPUT)]
    pub svg: Option<PathBuf>,
    /// Write a self-contained HTML report here (chart, levels, latency parts, load)
    #[arg(long, value_name = "FILE", help_heading = OUTPUT)]
    pub html: Option<PathBuf>,
}

/// What perf's flags ask of a sweep, besides the client's settings and the data: the
/// command's flags and `bertqa.Client.perf`'s options read into one value, checked
/// and run by the same code ([`PerfSettings::check`], [`PerfSettings::sweep`]).
/// `Default` is the flags' defaults.
#[derive(Debug, Clone)]
pub struct PerfSettings {
    /// `--concurrency` (without a range).
    pub concurrency: usize,
    /// `--warmup`.
    pub warmup: usize,
    /// `--shared-memory`.
    pub shared_memory: bertqa::SharedMemory,
    /// `--concurrency-range`.
    pub concurrency_range: Option<String>,
    /// `--request-rate-range`.
    pub request_rate_range: Option<String>,
    /// `--request-distribution`.
    pub request_distribution: Distribution,
    /// `--seed`.
    pub seed: u64,
    /// The measurement flags.
    pub measure: MeasureArgs,
    /// `--max-inflight`.
    pub max_inflight: usize,
    /// `--latency-threshold`.
    pub latency_threshold: Option<f64>,
    /// `--percentile`.
    pub percentile: f64,
    /// `--binary-search`.
    pub binary_search: bool,
    /// The metrics flags.
    pub metrics: MetricsArgs,
    /// `--requests-jsonl`.
    pub requests_jsonl: Option<PathBuf>,
    /// `--csv`.
    pub csv: Option<PathBuf>,
    /// `--svg`.
    pub svg: Option<PathBuf>,
    /// `--html`.
    pub html: Option<PathBuf>,
    /// `--quiet`: no progress lines.
    pub quiet: bool,
}

impl Default for PerfSettings {
    fn default() -> Self {
        PerfSettings {
            concurrency: 4,
            warmup: 0,
            shared_memory: bertqa::SharedMemory::Auto,
            concurrency_range: None,
            request_rate_range: None,
            request_distribution: Distribution::Constant,
            seed: 0,
            measure: MeasureArgs::default(),
            max_inflight: 4096,
            latency_threshold: None,
            percentile: 99.0,
            binary_search: false,
            metrics: MetricsArgs::default(),
            requests_jsonl: None,
            csv: None,
            svg: None,
            html: None,
            quiet: false,
        }
    }
}

impl Args {
    /// The sweep's settings of the flags.
    fn settings(&self) -> PerfSettings {
        PerfSettings {
            concurrency: self.load.concurrency,
            warmup: self.load.warmup,
            shared_memory: self.load.shared_memory.into(),
            concurrency_range: self.concurrency_range.clone(),
            request_rate_range: self.request_rate_range.clone(),
            request_distribution: match self.request_distribution {
                DistributionArg::Constant => Distribution::Constant,
                DistributionArg::Poisson => Distribution::Poisson,
            },
            seed: self.seed,
            measure: self.measure.clone(),
            max_inflight: self.max_inflight,
            latency_threshold: self.latency_threshold,
            percentile: self.percentile,
            binary_search: self.binary_search,
            metrics: self.metrics.clone(),
            requests_jsonl: self.requests_jsonl.clone(),
            csv: self.csv.clone(),
            svg: self.svg.clone(),
            html: self.html.clone(),
            quiet: self.output.quiet,
        }
    }
}

impl PerfSettings {
    /// Checks the settings (before any data is read or server contacted): the sweep.
    pub(crate) fn check(&self) -> anyhow::Result<PerfConfig> {
        let sweep = perf_config(self)?;
        super::metrics::check(&self.metrics)?;
        if let Some(path) = &self.html {
            super::common::check_output_dir("--html", path)?;
        }
        Ok(sweep)
    }

    /// The sweep's options: `sweep` ([`PerfSettings::check`]'s) over `data`.
    fn options(&self, sweep: PerfConfig, data: String) -> PerfOptions {
        PerfOptions {
            sweep,
            data,
            requests_log: self.requests_jsonl.clone(),
            metrics: metrics_options(&self.metrics),
        }
    }

    /// Runs the sweep `sweep` ([`PerfSettings::check`]'s) of `client` over `dataset`
    /// (named `data`), writes its files and its warnings on stderr; its report, with the
    /// settings named as flags. `stop` stops it as the binary's first Ctrl-C does.
    pub(crate) fn sweep(
        &self,
        mut sweep: PerfConfig,
        client: &bertqa::ClientBuilder,
        dataset: &bertqa::types::Dataset,
        data: String,
        stop: Option<tokio_util::sync::CancellationToken>,
    ) -> anyhow::Result<Report> {
        sweep.stop = stop;
        let options = self.options(sweep, data);
        let progress = Lines {
            quiet: self.quiet,
            ..Lines::default()
        };
        let rt = runtime()?;
        let report = rt.block_on(perf::run(client, dataset, &options, &progress))?;
        self.finish(report)
    }

    /// Names the flags in a finished sweep's words, writes its files and its warnings.
    fn finish(&self, mut report: Report) -> anyhow::Result<Report> {
        // The warnings name settings; the reports name the flags.
        for w in report.levels.iter_mut().flat_map(|l| &mut l.warnings) {
            *w = name_flags(w);
        }
        if let bertqa::metrics::Choice::NotRead(why) = &mut report.metrics {
            *why = name_flags(why);
        }
        // The page and the text name settings (as words; the CSV and SVG name none): the
        // command names its flags.
        let files: [(&Option<PathBuf>, &dyn Exporter, bool); 3] = [
            (&self.csv, &export::CsvExporter, false),
            (&self.svg, &export::SvgExporter, false),
            (&self.html, &export::HtmlExporter, true),
        ];
        for (path, exporter, words) in files {
            if let Some(path) = path {
                let mut bytes = exporter.serialize(&report);
                if words {
                    bytes = name_flags(&String::from_utf8_lossy(&bytes)).into_bytes();
                }
                bertqa::output_file::write_atomic(path, &bytes)?;
            }
        }
        for w in report.warnings() {
            eprintln!("warning: {w}");
        }
        Ok(report)
    }
}

/// Validates the sweep's settings.
fn perf_config(s: &PerfSettings) -> anyhow::Result<PerfConfig> {
    let load = match (&s.request_rate_range, &s.concurrency_range) {
        (Some(_), Some(_)) => anyhow::bail!(
            "--concurrency-range and --request-rate-range are two kinds of load: give one"
        ),
        (Some(text), None) => Load::RequestRate {
            rates: Range::parse("--request-rate-range", text, false)?.values(),
            distribution: s.request_distribution,
            seed: s.seed,
        },
        (None, Some(text)) => Load::Concurrency(
            Range::parse("--concurrency-range", text, true)?
                .values()
                .into_iter()
                .map(|x| x as usize)
                .collect(),
        ),
        (None, None) => {
            if s.concurrency == 0 {
                anyhow::bail!("--concurrency must be at least 1");
            }
            Load::Concurrency(vec![s.concurrency])
        }
    };
    let window = s.measure.window()?;
    super::args::check_percentile(s.percentile)?;
    let budget = match s.latency_threshold {
        Some(ms) if !(ms > 0.0 && ms.is_finite()) => {
            anyhow::bail!("--latency-threshold {ms} must be above 0 (milliseconds)")
        }
        Some(ms) => Some(Budget {
            threshold_us: ms * 1000.0,
            percentile: s.percentile,
            binary_search: s.binary_search,
        }),
        None => None,
    };
    Ok(PerfConfig {
        load,
        budget,
        window,
        stability_percent: s.measure.stability_percentage,
        max_trials: s.measure.max_trials,
        warmup: s.warmup,
        max_inflight: s.max_inflight.max(1),
        shared_memory: s.shared_memory,
        ..PerfConfig::default()
    })
}

/// Progress lines on stderr: the library's warnings, and a line per window.
#[derive(Default)]
pub(crate) struct Lines {
    quiet: bool,
    /// Rows per request and their throughput's unit, once the sweep starts.
    sending: std::sync::OnceLock<(usize, &'static str)>,
}

impl PerfProgress for Lines {
    fn warning(&self, text: &str) {
        eprintln!("warning: {}", name_flags(text));
    }

    fn sending(&self, rows: usize, unit: &'static str) {
        let _ = self.sending.set((rows, unit));
    }

    fn window(&self, level: Level, trial: usize, requests_per_s: f64, avg_latency_us: f64) {
        let (rows, unit) = self.sending.get().copied().unwrap_or((1, "infer/s"));
        if !self.quiet {
            eprintln!(
                "{level}: window {trial}: {:.1} {unit}, avg latency {:.3} ms",
                requests_per_s * rows as f64,
                avg_latency_us / 1000.0
            );
        }
    }
}

/// The client's settings of the flags that say what is sent: the server, the model,
/// the tokenizer, the windows, the tensors' names and the batches.
#[allow(clippy::too_many_arguments)]
pub(crate) fn client_settings(
    server: &ServerArgs,
    model: &str,
    tokenizer: &TokenizerArgs,
    window: &WindowArgs,
    postprocess: Option<super::args::Postprocess>,
    binding: &BindingArgs,
    text: &TextBindingArgs,
    batch_size: Option<usize>,
) -> bertqa::Result<bertqa::ClientBuilder> {
    let mut b = super::common::server_builder(server)?
        .model(model)
        .vocab(&tokenizer.vocab)
        .lower_case(tokenizer.lower_case())
        .doc_stride(window.doc_stride)
        .max_query_length(window.max_query_length)
        .binding(super::common::binding_overrides(binding))
        .text_binding(text.overrides(binding));
    if let Some(path) = &tokenizer.tokenizer {
        b = b.tokenizer(path);
    }
    if let Some(rules) = postprocess {
        b = b.postprocess(rules.into());
    }
    if let Some(n) = window.max_seq_length {
        b = b.max_seq_length(n);
    }
    if let Some(n) = batch_size {
        b = b.batch_size(n);
    }
    Ok(b)
}

/// The metrics the flags ask for.
pub(crate) fn metrics_options(args: &MetricsArgs) -> MetricsOptions {
    MetricsOptions {
        urls: args.metrics_url.clone(),
        off: args.no_metrics,
        interval: std::time::Duration::from_millis(args.metrics_interval_ms),
    }
}

pub(crate) fn run(args: Args, session: &mut Session) -> anyhow::Result<Outcome> {
    let settings = args.settings();
    let sweep = settings.check()?;
    let dataset = load_data(&args.data, args.window.strict, args.limit)?;
    let client = client_settings(
        &args.server,
        &args.model,
        &args.tokenizer,
        &args.window,
        args.postprocess,
        &args.binding,
        &args.text,
        args.load.batch_size,
    )?
    .model_version(&args.model_version)
    .fixed_seq_len(args.load.fixed_seq_len)
    .dynamic_seq_len(args.load.dynamic_seq_len);
    if let Some(path) = &args.export_input_data {
        let options = settings.options(sweep, data_label(&args.data));
        let progress = Lines {
            quiet: args.output.quiet,
            ..Lines::default()
        };
        let rt = runtime()?;
        let d = rt.block_on(perf::input_data(&client, &dataset, &options, &progress))?;
        bertqa::output_file::write_atomic(path, &d.bytes)?;
        let (model, path) = (&d.model, path.display());
        return session
            .print(|| {
                format!(
                    "wrote {} entries ({} features, batches of {}, padding {}) for model \
                     {model:?} to {path}\nreplay: perf_analyzer -m {model} -b {} --input-data \
                     {path}\n",
                    d.entries, d.features, d.batch_size, d.padding, d.replay_batch_size
                )
            })
            .map(|()| Outcome::Success);
    }
    // Ctrl-C ends the process, and the sweep with it.
    let report = settings.sweep(sweep, &client, &dataset, data_label(&args.data), None)?;
    // The text has no `-v` lines.
    session.print(|| match args.output.json {
        true => String::from_utf8_lossy(&export::JsonExporter.serialize(&report)).into_owned(),
        false => name_flags(&String::from_utf8_lossy(
            &export::TextExporter.serialize(&report),
        )),
    })?;
    Ok(Outcome::Success)
}
