//! A sweep of a client's model with a dataset's questions, from the client's settings
//! to the report: what `bertqa perf` runs ([`run`]), and the requests it would send as
//! perf_analyzer's input data ([`input_data`]).
//!
//! Contract:
//! - The sweep has connections of its own, one per distinct server of the settings
//!   (requests go to each in turn, the servers' statistics are summed, the model is
//!   described by the first), each call unary; the client's pool, retries and
//!   readiness wait are not used.
//! - The model is bound as the client binds it. A model that takes token ids is sent
//!   the windows the client would cut (its tokenizer, rules and window settings), in
//!   batches of its `batch_size`, padded as an evaluation pads them; one that takes text
//!   is sent the data's question and context pairs, and a setting that shapes tokens,
//!   padding or token tensors is refused, in one line naming it.
//! - A vocabulary that does not load is the first error, unless the model takes text
//!   (which needs none); its casing warning goes to [`PerfProgress::warning`] before
//!   anything is sent.
//! - The sweep's own settings (levels, windows, budget, warm-up, shared memory) are
//!   [`PerfOptions::sweep`]'s, not the client's `concurrency`, `shared_memory` or
//!   `warmup`.

use std::path::PathBuf;
use std::sync::Arc;

use super::export::{self, Report};
use super::{text, PerfConfig, PerfProgress, RequestLog, Requests, Servers};
use crate::backend::{ClientConfig, GrpcCall, Model};
use crate::client::{ClientBuilder, LoadedTokenizer};
use crate::error::{Error, Result};
use crate::features::FeatureConfig;
use crate::metrics::{MetricsOptions, ModelKey};
use crate::pipeline::{self, Padding};
use crate::types::{Dataset, Feature};

/// A sweep's settings beyond the client's (the servers, model, tokenizer, windows,
/// `batch_size` and padding).
#[derive(Debug, Clone, Default)]
pub struct PerfOptions {
    /// Levels, windows, stability rule, budget, warm-up, shared memory and stop token.
    pub sweep: PerfConfig,
    /// How the report and messages name the data (its path, say).
    pub data: String,
    /// A JSON line per request written here as requests complete (readable during the
    /// sweep; the lines of a sweep that failed are kept: they show the failed request).
    pub requests_log: Option<PathBuf>,
    /// The server's metrics read during the sweep.
    pub metrics: MetricsOptions,
}

/// Sweeps the model of `client`'s settings with the questions of `dataset` (see the
/// module's contract): one result per level, and what the report says of the model,
/// its requests and the setting. Its warnings and text name settings.
pub async fn run<M>(
    client: &ClientBuilder<M>,
    dataset: &Dataset,
    options: &PerfOptions,
    progress: &dyn PerfProgress,
) -> Result<Report> {
    let bound = Bound::connect(client, progress).await?;
    let (requests, subject, key) = match bound.model.takes_text() {
        true => text_requests(client, &bound.model, dataset, &options.data)?,
        false => {
            let planned = token_batches(
                client,
                bound.tokenizer,
                &bound.model,
                dataset,
                &options.data,
            )?;
            let key = ModelKey {
                name: planned.model.name().to_string(),
                version: planned.model.version().to_string(),
            };
            let subject = planned.subject();
            (
                Requests::features(&planned.model, planned.batches),
                subject,
                key,
            )
        }
    };
    progress.sending(subject.batch_size, subject.unit());
    let mut config = options.sweep.clone();
    if let Some(path) = &options.requests_log {
        config.requests_log = Some(Arc::new(RequestLog::create(path)?));
    }
    let servers = &bound.servers;
    let (scraper, metrics) = crate::metrics::start(
        &options.metrics,
        &bound.config,
        client.first_url(),
        servers.first().first_client(),
        key,
    )
    .await?;
    config.metrics = scraper;
    let swept = match requests {
        Ok(requests) => super::sweep(servers, &requests, &config, progress).await,
        Err(e) => Err(e),
    };
    // The sweep is over: the metrics stop, the lines of the log are written.
    if let Some(scraper) = &config.metrics {
        scraper.stop();
    }
    let finished = config
        .requests_log
        .as_ref()
        .map_or(Ok(()), |log| log.finish());
    let (levels, shared_memory) = swept?;
    finished?;
    Ok(Report {
        model: subject.model,
        version: subject.version,
        platform: subject.platform,
        url: servers.urls().join(","),
        protocol: servers.first().first_client().protocol(),
        max_batch_size: subject.max_batch_size,
        batch_declared: subject.batch_declared,
        batch_size_given: client.load_settings().batch_size.is_some(),
        data: options.data.clone(),
        text: subject.text,
        features: subject.features,
        batch_size: subject.batch_size,
        padding: subject.padding,
        inputs: crate::report::eval::inputs_line(&shared_memory),
        load: config.load.clone(),
        window: config.window,
        stability_percent: config.stability_percent,
        max_trials: config.max_trials,
        budget: config.budget,
        metrics,
        metrics_warnings: export::metrics_warnings(&levels),
        levels,
    })
}

/// The requests a sweep of a model that takes token ids would send, as
/// perf_analyzer's `--input-data` JSON, and what they are.
#[derive(Debug, Clone)]
pub struct InputData {
    /// The JSON document.
    pub bytes: Vec<u8>,
    /// The document's entries (features, by batch).
    pub entries: usize,
    /// Distinct features of the data.
    pub features: usize,
    /// Features per request.
    pub batch_size: usize,
    /// How the requests are padded, in words.
    pub padding: String,
    /// The model's name.
    pub model: String,
    /// perf_analyzer's batch size for a replay: `batch_size`, or 1 for a model whose
    /// batching the server does not declare (its tensors hold the batch).
    pub replay_batch_size: usize,
}

/// The requests [`run`] would send `client`'s model, which takes token ids, as
/// perf_analyzer's input data (nothing is sent; a model that takes text is refused).
pub async fn input_data<M>(
    client: &ClientBuilder<M>,
    dataset: &Dataset,
    options: &PerfOptions,
    progress: &dyn PerfProgress,
) -> Result<InputData> {
    let bound = Bound::connect(client, progress).await?;
    if bound.model.takes_text() {
        return Err(text::does_not_apply(
            "`export_input_data`",
            bound.model.name(),
            "it writes token tensors, and the model takes a question and a context",
        ));
    }
    let planned = token_batches(
        client,
        bound.tokenizer,
        &bound.model,
        dataset,
        &options.data,
    )?;
    let bytes = export::input_data::render_model(&planned.model, &planned.batches)?;
    Ok(InputData {
        bytes,
        entries: planned.batches.iter().map(|b| b.features.len()).sum(),
        features: planned.features,
        batch_size: planned.batch_size,
        padding: planned.padding_words,
        model: planned.model.name().to_string(),
        replay_batch_size: match planned.model.declares_batching() {
            true => planned.batch_size,
            false => 1,
        },
    })
}

/// The servers of a sweep, the model bound, and the tokenizer as it loaded.
struct Bound {
    servers: Servers,
    /// The first server's connection settings (the metrics pages are read with them).
    config: ClientConfig,
    model: Model,
    tokenizer: Result<LoadedTokenizer>,
}

impl Bound {
    /// Loads the tokenizer, connects to every server and binds the model on the first.
    async fn connect<M>(client: &ClientBuilder<M>, progress: &dyn PerfProgress) -> Result<Bound> {
        let tokenizer = client.load_tokenizer();
        if let Some(w) = tokenizer.as_ref().ok().and_then(|t| t.casing_warning()) {
            progress.warning(w);
        }
        let (servers, config) = match servers(client).await {
            Ok(s) => s,
            Err(e) => return Err(tokenizer.err().unwrap_or(e)),
        };
        let version = client.version();
        let described = match client.model_name() {
            Ok(name) => {
                crate::backend::describe(servers.first().first_client(), name, version).await
            }
            Err(e) => Err(e),
        };
        let (metadata, model_config) = match described {
            Ok(d) => d,
            Err(e) => return Err(tokenizer.err().unwrap_or(e)),
        };
        let (tokens, text) = client.overrides();
        let model = Model::infer(&metadata, model_config.as_ref(), version, tokens, text)?;
        Ok(Bound {
            servers,
            config,
            model,
            tokenizer,
        })
    }
}

/// The windows of `dataset` in the batches of `client`'s settings for `model`.
fn token_batches<M>(
    client: &ClientBuilder<M>,
    tokenizer: Result<LoadedTokenizer>,
    model: &Model,
    dataset: &Dataset,
    data: &str,
) -> Result<TokenBatches> {
    let (features, windows) = token_features(client, tokenizer?, model, dataset, data)?;
    let load = client.load_settings();
    let batch_size = pipeline::effective_batch_size(load.batch_size, model)?;
    let (padding, padding_words) = padding(model, windows.max_seq_length, load.fixed_seq_len)?;
    Ok(TokenBatches {
        batches: super::make_batches(&features, batch_size, padding),
        features: features.len(),
        model: model.clone(),
        batch_size,
        padding_words,
    })
}

/// A connection to each distinct server of `client`'s settings (one call per request),
/// and the first's settings.
async fn servers<M>(client: &ClientBuilder<M>) -> Result<(Servers, ClientConfig)> {
    let pool = client.pool_config()?;
    let config = ClientConfig {
        transport: GrpcCall::Unary,
        ..pool.client
    };
    Ok((Servers::connect(&pool.urls, &config).await?, config))
}

/// The windows of `dataset` for `model` (`perf` and `tune` send them), and their
/// settings; `data` names the data in the error of a dataset without any.
pub(crate) fn token_features<M>(
    client: &ClientBuilder<M>,
    loaded: LoadedTokenizer,
    model: &Model,
    dataset: &Dataset,
    data: &str,
) -> Result<(Vec<Feature>, FeatureConfig)> {
    let windows = client.windows(model.fixed_len(), loaded.postprocess)?;
    let builder = crate::features::FeatureBuilder::for_rules(
        loaded.tokenizer.as_ref(),
        loaded.postprocess,
        windows,
        dataset,
    )?;
    let (features, _) = crate::features::collect(builder, dataset)?;
    if features.is_empty() {
        return Err(Error::Refused(format!(
            "{data}: no features to send (no question has a context with word pieces)"
        )));
    }
    Ok((features, windows))
}

/// How requests to `model` are padded (`fixed`: always to `max_seq_length`), and that
/// in words; a fixed-length model shorter than the windows is refused.
pub(crate) fn padding(
    model: &Model,
    max_seq_length: usize,
    fixed: bool,
) -> Result<(Padding, String)> {
    let padding = Padding::of(model, max_seq_length, !fixed);
    let words = match padding {
        Padding::Fixed(n) => {
            if n < max_seq_length {
                return Err(Error::Refused(format!(
                    "model {:?} takes sequences of {n} tokens but `max_seq_length` is \
                     {max_seq_length}; pass `max_seq_length` {n}",
                    model.name(),
                )));
            }
            format!("fixed {n}")
        }
        Padding::Longest { multiple } => format!("longest feature, multiple of {multiple}"),
    };
    Ok((padding, words))
}

/// A token model's batches.
struct TokenBatches {
    model: Model,
    batches: Vec<super::Batch>,
    /// Distinct features.
    features: usize,
    batch_size: usize,
    padding_words: String,
}

impl TokenBatches {
    fn subject(&self) -> Subject {
        let m = &self.model;
        Subject {
            model: m.name().to_string(),
            version: m.version().to_string(),
            platform: m.platform().to_string(),
            max_batch_size: m.max_batch_size(),
            batch_declared: m.declares_batching(),
            text: false,
            features: self.features,
            batch_size: self.batch_size,
            padding: self.padding_words.clone(),
        }
    }
}

/// What the report says of the model and its requests: the part that token and text
/// models fill differently.
struct Subject {
    model: String,
    /// Requested version (empty: the server's choice).
    version: String,
    platform: String,
    max_batch_size: usize,
    /// The server declares the model's batching (else bertqa chose the batch size).
    batch_declared: bool,
    /// The model takes text (`features` count questions).
    text: bool,
    /// Distinct features (or questions) cycled during the sweep.
    features: usize,
    batch_size: usize,
    /// How requests are padded, in words.
    padding: String,
}

impl Subject {
    /// The unit of a level's throughput in progress.
    fn unit(&self) -> &'static str {
        match self.text {
            true => "questions/s",
            false => "infer/s",
        }
    }
}

/// The requests of a model that takes text: the data's pairs, by `batch_size` (a
/// setting that shapes tokens refused first).
fn text_requests<M>(
    client: &ClientBuilder<M>,
    model: &Model,
    dataset: &Dataset,
    data: &str,
) -> Result<(Result<Requests>, Subject, ModelKey)> {
    text::refuse_token_settings(client, model.name())?;
    let per_request = text::per_request(client.load_settings().batch_size, model)?;
    let pairs = text::pairs(dataset);
    if pairs.is_empty() {
        return Err(Error::Refused(format!("{data}: no questions to send")));
    }
    let version = client.version().to_string();
    let key = ModelKey {
        name: model.name().to_string(),
        version: version.clone(),
    };
    let subject = Subject {
        model: model.name().to_string(),
        version: version.clone(),
        platform: model.platform().to_string(),
        max_batch_size: model.max_batch_size(),
        batch_declared: true,
        text: true,
        features: pairs.len(),
        batch_size: per_request,
        padding: "none (the server tokenizes)".into(),
    };
    let requests = text::make_requests(&pairs, per_request);
    Ok((Requests::questions(model, version, requests), subject, key))
}
