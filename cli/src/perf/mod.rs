//! `bertqa perf`: the load sweep of `bertqa::perf` with real features from a SQuAD
//! file; text report on stdout (or `--json`, `schema/perf.schema.json`), progress and
//! warnings on stderr, `--csv` (perf_analyzer's columns), `--svg` and `--html` files.
//! A model that takes text is swept with the file's question and context pairs
//! ([`text`]).

pub(crate) mod text;

use std::path::PathBuf;
use std::sync::Arc;

use clap::ValueEnum;

use super::args::{
    BindingArgs, LoadArgs, MeasureArgs, MetricsArgs, OutputArgs, ServerArgs, TextBindingArgs,
    TokenizerArgs, WindowArgs, INPUT, MODEL, OUTPUT, RUN,
};
use super::common::{client_config, feature_config, load_data, load_tokenizer, runtime, Outcome};
use super::session::Session;
use bertqa::perf::export::{self, Exporter};
use bertqa::perf::{self, Budget, Distribution, Level, Load, PerfConfig, PerfProgress, Range};
use bertqa::pipeline::{self, Padding};

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

/// Validates the sweep flags (before any data is read or server contacted).
fn perf_config(args: &Args) -> anyhow::Result<PerfConfig> {
    let load = match (&args.request_rate_range, &args.concurrency_range) {
        (Some(text), _) => Load::RequestRate {
            rates: Range::parse("--request-rate-range", text, false)?.values(),
            distribution: match args.request_distribution {
                DistributionArg::Constant => Distribution::Constant,
                DistributionArg::Poisson => Distribution::Poisson,
            },
            seed: args.seed,
        },
        (None, Some(text)) => Load::Concurrency(
            Range::parse("--concurrency-range", text, true)?
                .values()
                .into_iter()
                .map(|x| x as usize)
                .collect(),
        ),
        (None, None) => {
            if args.load.concurrency == 0 {
                anyhow::bail!("--concurrency must be at least 1");
            }
            Load::Concurrency(vec![args.load.concurrency])
        }
    };
    let window = args.measure.window()?;
    super::args::check_percentile(args.percentile)?;
    let budget = match args.latency_threshold {
        Some(ms) if !(ms > 0.0 && ms.is_finite()) => {
            anyhow::bail!("--latency-threshold {ms} must be above 0 (milliseconds)")
        }
        Some(ms) => Some(Budget {
            threshold_us: ms * 1000.0,
            percentile: args.percentile,
            binary_search: args.binary_search,
        }),
        None => None,
    };
    Ok(PerfConfig {
        load,
        budget,
        window,
        stability_percent: args.measure.stability_percentage,
        max_trials: args.measure.max_trials,
        warmup: args.load.warmup,
        max_inflight: args.max_inflight.max(1),
        shared_memory: args.load.shared_memory.into(),
        ..PerfConfig::default()
    })
}

/// Progress lines on stderr, one per window.
pub(crate) struct Lines {
    pub quiet: bool,
    pub batch_size: usize,
    /// `infer/s`, or `questions/s` for a model that takes text.
    pub unit: &'static str,
}

impl PerfProgress for Lines {
    fn window(&self, level: Level, trial: usize, requests_per_s: f64, avg_latency_us: f64) {
        if !self.quiet {
            eprintln!(
                "{level}: window {trial}: {:.1} {}, avg latency {:.3} ms",
                requests_per_s * self.batch_size as f64,
                self.unit,
                avg_latency_us / 1000.0
            );
        }
    }
}

pub(crate) fn run(args: Args, session: &mut Session) -> anyhow::Result<Outcome> {
    let mut config = perf_config(&args)?;
    // A host program stops a sweep through its token (the binary ends with the process).
    config.stop = session.stop();
    super::metrics::check(&args.metrics)?;
    if let Some(path) = &args.html {
        super::common::check_output_dir("--html", path)?;
    }
    let dataset = load_data(&args.data, args.window.strict, args.limit)?;
    let tokenizer = load_tokenizer(&args.tokenizer, args.postprocess);
    let rt = runtime()?;
    // Every --url: requests go to each in turn, the servers' statistics are summed; the
    // model is described by the first.
    let described = rt.block_on(async {
        let servers = connect_servers(&args.server).await?;
        let (metadata, model_config) = bertqa::backend::describe(
            servers.first().first_client(),
            &args.model,
            &args.model_version,
        )
        .await?;
        Ok::<_, bertqa::Error>((servers, metadata, model_config))
    });
    // A vocabulary that does not load is the first error, unless the model takes text
    // (it needs none).
    let (servers, metadata, model_config) = match described {
        Ok(d) => d,
        Err(e) => {
            tokenizer?;
            return Err(e.into());
        }
    };
    let model = bertqa::Model::infer(
        &metadata,
        model_config.as_ref(),
        &args.model_version,
        &super::common::binding_overrides(&args.binding),
        &args.text.overrides(&args.binding),
    )?;
    if model.takes_text() {
        return text::run(&args, session, config, &rt, &dataset, servers, model);
    }
    let features = token_features(&args.window, tokenizer?, &model, &dataset, &args.data)?;
    run_tokens(&args, session, config, &rt, servers, model, &features)
}

/// A client of each `--url` (each address once).
async fn connect_servers(server: &super::args::ServerArgs) -> bertqa::Result<perf::Servers> {
    perf::Servers::connect(&server.url, &client_config(server)?).await
}

/// The windows of `dataset` for `model` (perf and tune send them).
pub(crate) fn token_features(
    window: &super::args::WindowArgs,
    loaded: super::common::LoadedTokenizer,
    model: &bertqa::Model,
    dataset: &bertqa::types::Dataset,
    data: &[PathBuf],
) -> anyhow::Result<Vec<bertqa::types::Feature>> {
    let features_config = feature_config(window, loaded.postprocess, model.fixed_len())?;
    let builder = bertqa::features::FeatureBuilder::for_rules(
        loaded.tokenizer.as_ref(),
        loaded.postprocess,
        features_config,
        dataset,
    )?;
    let (features, _) = bertqa::features::collect(builder, dataset)?;
    if features.is_empty() {
        anyhow::bail!(
            "{}: no features to send (no question has a context with word pieces)",
            super::common::data_label(data)
        );
    }
    Ok(features)
}

/// How requests to `model` are padded, and that in words; a fixed-length model
/// shorter than the windows is refused.
pub(crate) fn padding(
    window: &super::args::WindowArgs,
    model: &bertqa::Model,
    fixed_seq_len: bool,
) -> anyhow::Result<(Padding, String)> {
    let max_seq_length = window.max_seq_length(model.fixed_len());
    let padding = Padding::of(model, max_seq_length, !fixed_seq_len);
    let words = match padding {
        Padding::Fixed(n) => {
            if n < max_seq_length {
                anyhow::bail!(
                    "model {:?} takes sequences of {n} tokens but --max-seq-length is {}; \
                     pass --max-seq-length {n}",
                    model.name(),
                    max_seq_length
                );
            }
            format!("fixed {n}")
        }
        Padding::Longest { multiple } => format!("longest feature, multiple of {multiple}"),
    };
    Ok((padding, words))
}

/// The sweep of a model that takes token ids, with the features of the data.
fn run_tokens(
    args: &Args,
    session: &mut Session,
    mut config: PerfConfig,
    rt: &tokio::runtime::Runtime,
    servers: perf::Servers,
    model: bertqa::Model,
    features: &[bertqa::types::Feature],
) -> anyhow::Result<Outcome> {
    let batch_size = pipeline::effective_batch_size(args.load.batch_size, &model)?;
    let (padding, padding_words) = padding(&args.window, &model, args.load.fixed_seq_len)?;
    let batches = perf::make_batches(features, batch_size, padding);
    if let Some(path) = &args.export_input_data {
        let bytes = export::input_data::render_model(&model, &batches)?;
        bertqa::output_file::write_atomic(path, &bytes)?;
        let rows: usize = batches.iter().map(|b| b.features.len()).sum();
        let b = if model.declares_batching() {
            batch_size
        } else {
            1
        };
        session.print(|| {
            format!(
            "wrote {rows} entries ({} features, batches of {batch_size}, padding {padding_words}) \
             for model {:?} to {}\nreplay: perf_analyzer -m {} -b {b} --input-data {}\n",
            features.len(),
            model.name(),
            path.display(),
            model.name(),
            path.display()
        )
        })?;
        return Ok(Outcome::Success);
    }
    let progress = Lines {
        quiet: args.output.quiet,
        batch_size,
        unit: "infer/s",
    };
    let key = bertqa::metrics::ModelKey {
        name: model.name().to_string(),
        version: model.version().to_string(),
    };
    let metrics = start(args, rt, servers.first(), key, &mut config)?;
    let swept = perf::Requests::features(&model, batches)
        .and_then(|requests| rt.block_on(perf::sweep(&servers, &requests, &config, &progress)));
    let subject = Subject {
        model: model.name().to_string(),
        version: model.version().to_string(),
        platform: model.platform().to_string(),
        max_batch_size: model.max_batch_size(),
        batch_declared: model.declares_batching(),
        text: false,
        features: features.len(),
        batch_size,
        padding: padding_words,
    };
    let swept = stop(&config, swept)?;
    finish(args, session, &config, &servers, metrics, subject, swept)
}

/// What the report says of the model and its requests: the part of the report that
/// token and text models fill differently.
pub(crate) struct Subject {
    pub model: String,
    /// Requested version (empty: the server's choice).
    pub version: String,
    pub platform: String,
    pub max_batch_size: usize,
    /// The server declares the model's batching (else bertqa chose the batch size).
    pub batch_declared: bool,
    /// The model takes text (`features` count questions).
    pub text: bool,
    /// Distinct features (or questions) cycled during the sweep.
    pub features: usize,
    pub batch_size: usize,
    /// How requests are padded, in words.
    pub padding: String,
}

/// Opens `--requests-jsonl` and starts reading the server's metrics for `model`, into
/// `config`; the metrics setting for the report.
pub(crate) fn start(
    args: &Args,
    rt: &tokio::runtime::Runtime,
    server: &bertqa::Pool,
    model: bertqa::metrics::ModelKey,
    config: &mut PerfConfig,
) -> anyhow::Result<bertqa::metrics::Choice> {
    if let Some(path) = &args.requests_jsonl {
        config.requests_log = Some(Arc::new(perf::RequestLog::create(path)?));
    }
    let (scraper, metrics) = rt.block_on(super::metrics::start(
        &args.metrics,
        &args.server,
        Some(server.first_client()),
        model,
    ))?;
    config.metrics = scraper;
    Ok(metrics)
}

/// Stops what [`start`] started once the sweep is over: its result, once the lines of
/// `--requests-jsonl` are written (those of a sweep that failed are kept: they show the
/// request that failed).
pub(crate) fn stop<T>(config: &PerfConfig, swept: bertqa::Result<T>) -> anyhow::Result<T> {
    if let Some(scraper) = &config.metrics {
        scraper.stop();
    }
    let finished = config
        .requests_log
        .as_ref()
        .map_or(Ok(()), |log| log.finish());
    let swept = swept?;
    finished?;
    Ok(swept)
}

/// Builds the report of a finished sweep (token or text model: `subject` is what
/// differs), then writes its files, its warnings on stderr and the report (on stdout, or
/// kept for a host program).
pub(crate) fn finish(
    args: &Args,
    session: &mut Session,
    config: &PerfConfig,
    servers: &perf::Servers,
    metrics: bertqa::metrics::Choice,
    subject: Subject,
    (levels, shared_memory): (Vec<perf::LevelResult>, pipeline::SharedMemoryReport),
) -> anyhow::Result<Outcome> {
    let mut report = export::Report {
        model: subject.model,
        version: subject.version,
        platform: subject.platform,
        url: servers.urls().join(","),
        protocol: servers.first().first_client().protocol(),
        max_batch_size: subject.max_batch_size,
        batch_declared: subject.batch_declared,
        batch_size_given: args.load.batch_size.is_some(),
        data: super::common::data_label(&args.data),
        text: subject.text,
        features: subject.features,
        batch_size: subject.batch_size,
        padding: subject.padding,
        inputs: super::eval::inputs_line(&shared_memory),
        load: config.load.clone(),
        window: config.window,
        stability_percent: config.stability_percent,
        max_trials: config.max_trials,
        budget: config.budget,
        metrics,
        metrics_warnings: export::metrics_warnings(&levels),
        levels,
    };
    // The warnings name settings; the reports name the flags.
    for w in report.levels.iter_mut().flat_map(|l| &mut l.warnings) {
        *w = super::flags::name_flags(w);
    }
    // The page and the text name settings (as words; the CSV and SVG name none): the
    // command names its flags.
    let files: [(&Option<PathBuf>, &dyn Exporter, bool); 3] = [
        (&args.csv, &export::CsvExporter, false),
        (&args.svg, &export::SvgExporter, false),
        (&args.html, &export::HtmlExporter, true),
    ];
    for (path, exporter, words) in files {
        if let Some(path) = path {
            let mut bytes = exporter.serialize(&report);
            if words {
                bytes = super::flags::name_flags(&String::from_utf8_lossy(&bytes)).into_bytes();
            }
            bertqa::output_file::write_atomic(path, &bytes)?;
        }
    }
    for w in report.warnings() {
        eprintln!("warning: {w}");
    }
    // The text has no `-v` lines.
    session.keep(&report);
    session.print(|| match args.output.json {
        true => String::from_utf8_lossy(&export::JsonExporter.serialize(&report)).into_owned(),
        false => super::flags::name_flags(&String::from_utf8_lossy(
            &export::TextExporter.serialize(&report),
        )),
    })?;
    Ok(Outcome::Success)
}
