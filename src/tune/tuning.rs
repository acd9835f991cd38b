//! A tune run from a client's settings: what `bertqa tune` runs. [`Tuning::prepare`]
//! connects, binds the model, builds the requests each candidate is swept with and
//! opens the repository; [`Tuning::run`] searches ([`Tune`]). Two steps, so that a
//! program installs what stops the search (its signal handler, say) once everything
//! that cannot change the server's configuration is done.
//!
//! Contract:
//! - The sweeps go to the first server of the client's settings, one call per request;
//!   the repository calls go over HTTP to `control_url`, else to that server, which
//!   must then be spoken to in HTTP. tune measures the model's loaded version.
//! - A model that takes token ids is sent the windows the client would cut, `batch_size`
//!   (default 1) per request, padded to each batch's longest; the server's dynamic
//!   batcher makes the batches. A text ensemble is sent the data's question and context
//!   pairs, and its `step` is the model tuned.
//! - The tokenizer's casing warning goes to [`PerfProgress::warning`] before the server is
//!   contacted; a vocabulary that does not load is an error only for a model that takes
//!   token ids.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

use super::search::Space;
use super::{Control, RestoreWords, Tune, TuneProgress, Tuned, Workload};
use crate::backend::proto::model_config::SchedulingChoice;
use crate::backend::{ClientConfig, GrpcCall, Model, Pool, Protocol};
use crate::client::ClientBuilder;
use crate::error::{Error, Result};
use crate::metrics::scraper::Scraper;
use crate::metrics::{MetricsOptions, ModelKey};
use crate::perf::{self, PerfConfig, PerfProgress};
use crate::types::Dataset;

/// A tune run's settings beyond the client's (the server, the model, the tokenizer,
/// the windows and `batch_size`).
#[derive(Debug, Clone)]
pub struct TuneOptions {
    /// For a text ensemble: the composing model to tune (the load goes through the
    /// ensemble).
    pub step: Option<String>,
    /// The server's HTTP address for the repository calls (`None`: the client's first
    /// server, spoken to in HTTP).
    pub control_url: Option<String>,
    /// Each candidate's sweep; its budget, which is required, is the run's.
    pub perf: PerfConfig,
    /// The values searched.
    pub space: Space,
    /// Measure every combination instead of the default search.
    pub exhaustive: bool,
    /// How many of the best candidates are measured again before the best is named (0:
    /// none).
    pub remeasure: usize,
    /// Leave the best configuration loaded instead of the original.
    pub keep_best: bool,
    /// Where the original configuration, the run's state and its report go (it must
    /// exist).
    pub output_dir: PathBuf,
    /// How messages name the data (its path, say).
    pub data: String,
    /// The server's metrics read during the run.
    pub metrics: MetricsOptions,
}

/// A tune run connected and ready to search: see the module's documentation.
pub struct Tuning {
    /// The model tuned (an ensemble's step for a text workload).
    tuned: String,
    control: Control,
    server: Pool,
    workload: Workload,
    scraper: Option<Arc<Scraper>>,
    options: TuneOptions,
}

impl Tuning {
    /// Connects to the model of `client`'s settings, builds what each candidate is
    /// swept with from `dataset`, opens the repository and starts reading the metrics.
    /// Nothing on the server changes yet.
    pub fn prepare<M>(
        rt: &Runtime,
        client: &ClientBuilder<M>,
        dataset: &Dataset,
        options: TuneOptions,
        progress: &dyn PerfProgress,
    ) -> Result<Tuning> {
        if !client.version().is_empty() {
            return Err(Error::Config(
                "tune measures the model's loaded version: leave `model_version` out".into(),
            ));
        }
        let name = client.model_name()?.to_string();
        let tokenizer = client.load_tokenizer();
        if let Some(w) = tokenizer.as_ref().ok().and_then(|t| t.casing_warning()) {
            progress.warning(w);
        }
        let config = ClientConfig {
            transport: GrpcCall::Unary,
            ..client.pool_config()?.client
        };
        let server = rt.block_on(Pool::single(&config))?;
        let (metadata, model_config) =
            rt.block_on(crate::backend::describe(server.first_client(), &name, ""))?;
        let (tokens, text) = client.overrides();
        let batch_size = client.load_settings().batch_size.unwrap_or(1);
        let (tuned, workload) = if crate::backend::text::takes_text(&metadata) {
            let step = step(&name, options.step.as_deref(), model_config.as_ref())?;
            let bound = Model::infer(&metadata, model_config.as_ref(), "", tokens, text)?;
            let per_request = perf::text::per_request(Some(batch_size), &bound)?;
            let pairs = perf::text::pairs(dataset);
            if pairs.is_empty() {
                return Err(Error::Refused(format!(
                    "{}: no questions to send",
                    options.data
                )));
            }
            let requests = perf::text::make_requests(&pairs, per_request);
            let requests = perf::Requests::questions(&bound, String::new(), requests)?;
            (step, Workload::Text(requests))
        } else {
            if let Some(step) = &options.step {
                return Err(Error::Refused(format!(
                    "`step` {step}: model {name:?} takes token ids, not an ensemble of text"
                )));
            }
            let bound = Model::infer(&metadata, model_config.as_ref(), "", tokens, text)?;
            let (features, windows) =
                perf::token_features(client, tokenizer?, &bound, dataset, &options.data)?;
            let (padding, _) = perf::padding(&bound, windows.max_seq_length, false)?;
            let batches = perf::make_batches(&features, batch_size, padding);
            let overrides = tokens.clone();
            (name.clone(), Workload::Tokens { batches, overrides })
        };
        let control = rt.block_on(Control::open(
            control_server(rt, &config, &options)?,
            &tuned,
        ))?;
        let key = ModelKey {
            name,
            version: String::new(),
        };
        let first_url = client.first_url();
        let first = server.first_client();
        let (scraper, _) = rt.block_on(crate::metrics::start(
            &options.metrics,
            &config,
            first_url,
            first,
            key,
        ))?;
        Ok(Tuning {
            tuned,
            control,
            server,
            workload,
            scraper,
            options,
        })
    }

    /// Searches (see `Tune`'s contract) until done or `stop` is cancelled, and puts
    /// the configuration back; the way back is named by `restore`
    /// ([`super::restore_call`] for a program).
    pub fn run(
        self,
        rt: &Runtime,
        stop: CancellationToken,
        progress: &dyn TuneProgress,
        restore: RestoreWords<'_>,
    ) -> Result<Tuned> {
        let o = self.options;
        let mut perf = o.perf.clone();
        perf.metrics = self.scraper.clone();
        perf.stop = Some(stop.clone());
        let control = self.control.stop_with(stop.clone());
        let tuned = Tune {
            model: &self.tuned,
            control: &control,
            server: &self.server,
            workload: self.workload,
            perf,
            space: o.space,
            exhaustive: o.exhaustive,
            remeasure: o.remeasure,
            keep_best: o.keep_best,
            output_dir: &o.output_dir,
            stop,
        }
        .run_naming(rt, progress, restore);
        if let Some(scraper) = &self.scraper {
            scraper.stop();
        }
        tuned
    }
}

/// The step of text ensemble `model` that is tuned (`given`), checked against its steps.
fn step(
    model: &str,
    given: Option<&str>,
    config: Option<&crate::backend::proto::ModelConfig>,
) -> Result<String> {
    let steps: Vec<String> = config
        .and_then(|c| match &c.scheduling_choice {
            Some(SchedulingChoice::EnsembleScheduling(e)) => {
                Some(e.step.iter().map(|s| s.model_name.clone()).collect())
            }
            _ => None,
        })
        .unwrap_or_default();
    let refused = |why: String| Err(Error::Refused(why));
    match given {
        Some(s) if steps.iter().any(|t| t == s) => Ok(s.to_string()),
        Some(s) if steps.is_empty() => refused(format!(
            "`step` {s}: model {model:?} takes text but is not an ensemble"
        )),
        Some(s) => refused(format!(
            "`step` {s}: not a step of ensemble {model:?} (its steps: {})",
            steps.join(", ")
        )),
        None if steps.is_empty() => refused(format!(
            "model {model:?} takes text and is not an ensemble: tune the model itself is not \
             supported for text models; tune the model behind it"
        )),
        None => refused(format!(
            "model {model:?} is an ensemble: name the step to tune with `step` (its steps: {})",
            steps.join(", ")
        )),
    }
}

/// The least time a repository call may take: a load of a large model (a TensorRT
/// engine, several instances) takes minutes.
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// The HTTP connection of the repository calls (`config`: the sweeps').
fn control_server(rt: &Runtime, config: &ClientConfig, options: &TuneOptions) -> Result<Pool> {
    let mut config = config.clone();
    match (&options.control_url, config.protocol) {
        (Some(url), _) => config.url = url.clone(),
        (None, Protocol::Http) => {}
        (None, Protocol::Grpc) => {
            return Err(Error::Refused(
                "tune loads model configurations through Triton's HTTP repository API: give \
                 the server's HTTP address with `control_url` (e.g. `control_url` \
                 localhost:8000), or use `Protocol::Http`"
                    .into(),
            ))
        }
    }
    config.protocol = Protocol::Http;
    config.request_timeout = config.request_timeout.max(LOAD_TIMEOUT);
    rt.block_on(Pool::single(&config))
}

/// Puts back the original recorded in `dir` (`super::restore`) on the server recorded
/// there, reached with `client`'s connection settings over HTTP; what was done, in words.
pub fn restore_from<M>(rt: &Runtime, client: &ClientBuilder<M>, dir: &Path) -> Result<String> {
    let (state, _) = super::state::read(dir)?;
    let config = ClientConfig {
        url: state.control_url.clone(),
        protocol: Protocol::Http,
        transport: GrpcCall::Unary,
        ..client.pool_config()?.client
    };
    let server = rt.block_on(Pool::single(&config))?;
    let control = rt.block_on(Control::open(server, &state.model))?;
    super::restore(rt, &control, dir)
}

impl Tuned {
    /// The best candidate's configuration as config.pbtxt, its first lines saying what
    /// it is and what it served (`None`: no candidate kept the budget). The
    /// configuration found is written as it was read.
    pub fn best_config(&self) -> Option<String> {
        let report = &self.report;
        let b = report.best()?;
        let c = &report.candidates[b];
        let config = match b {
            0 => self.original.clone(),
            _ => super::config::candidate(&self.original, &c.settings, None),
        };
        let header = vec![
            format!(
                "written by bertqa tune for model {:?}: {}",
                report.model,
                c.shown().describe()
            ),
            format!(
                "{:.1} features/s within p{} <= {} ms on {}",
                c.score(),
                report.budget.percentile,
                report.budget.threshold_us / 1000.0,
                report.url
            ),
        ];
        Some(super::config::to_pbtxt(&config, &header))
    }
}
