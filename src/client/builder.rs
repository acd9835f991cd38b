//! [`ClientBuilder`]: a method per setting, named as the command line's flag in snake
//! case, with the flag's default; `build` connects, looks at the model and loads the
//! tokenizer once.

use std::marker::PhantomData;
use std::path::PathBuf;
use std::time::Duration;

use super::compare::{CompareOptions, Compared};
use super::{load_tokenizer, Client, Engine, LoadedTokenizer};
use crate::backend::{
    BindingOverrides, ClientConfig, GrpcCall, Header, Model, Pool, PoolConfig, Protocol,
    RetryPolicy, Secret, Security, SharedMemory, TextOverrides, TlsConfig,
};
use crate::decode::{DecodeConfig, Postprocess};
use crate::error::{Error, Result};
use crate::evaluation::{EvalData, EvalOptions, Evaluation};
use crate::features::FeatureConfig;
use crate::pipeline::Load;

/// The settings of a [`Client`] before it connects: [`Client::builder`]. `M` says which
/// client `build` gives: [`Async`] (this module's), or [`Blocking`]
/// ([`crate::blocking::Client`]); the settings are the same.
#[derive(Debug, Clone)]
pub struct ClientBuilder<M = Async> {
    mode: PhantomData<M>,
    urls: Vec<String>,
    protocol: Protocol,
    transport: Option<GrpcCall>,
    model: Option<String>,
    model_version: String,
    vocab: PathBuf,
    tokenizer: Option<PathBuf>,
    lower_case: bool,
    postprocess: Option<Postprocess>,
    version_2: Option<bool>,
    max_seq_length: Option<usize>,
    doc_stride: usize,
    max_query_length: usize,
    n_best_size: usize,
    max_answer_length: usize,
    null_score_diff_threshold: f64,
    na_prob_thresh: f64,
    load: Load,
    timeout: Duration,
    connect_timeout: Duration,
    tls: Option<TlsConfig>,
    headers: Vec<(String, Secret)>,
    checked_headers: Vec<Header>,
    authority: Option<String>,
    retry: RetryPolicy,
    connections: usize,
    wait_ready: Duration,
    binding: BindingOverrides,
    text: TextOverrides,
    io_thread: bool,
}

/// [`ClientBuilder::build`] gives the async [`Client`].
#[derive(Debug, Clone, Copy)]
pub struct Async;

/// [`ClientBuilder::build`] gives a [`crate::blocking::Client`].
#[derive(Debug, Clone, Copy)]
pub struct Blocking;

/// The settings a client runs with, once the model and the tokenizer are known.
pub(crate) struct Resolved {
    pub(crate) features: FeatureConfig,
    /// The window length as given (`None`: the model's, else the default).
    pub(crate) max_seq_length: Option<usize>,
    /// Its `version_2_with_negative` is set per call.
    pub(crate) decode: DecodeConfig,
    pub(crate) version_2: Option<bool>,
    pub(crate) na_prob_thresh: f64,
    pub(crate) load: Load,
}

impl<M> ClientBuilder<M> {
    pub(crate) fn new(url: String) -> ClientBuilder<M> {
        let features = FeatureConfig::default();
        let decode = DecodeConfig::default();
        ClientBuilder {
            mode: PhantomData,
            urls: vec![url],
            protocol: Protocol::Grpc,
            transport: None,
            model: None,
            model_version: String::new(),
            vocab: PathBuf::from("vocab/vocab.txt"),
            tokenizer: None,
            lower_case: true,
            postprocess: None,
            version_2: None,
            max_seq_length: None,
            doc_stride: features.doc_stride,
            max_query_length: features.max_query_length,
            n_best_size: decode.n_best_size,
            max_answer_length: decode.max_answer_length,
            null_score_diff_threshold: decode.null_score_diff_threshold,
            na_prob_thresh: 1.0,
            load: Load::default(),
            timeout: Duration::from_millis(60_000),
            connect_timeout: Duration::from_millis(5_000),
            tls: None,
            headers: Vec::new(),
            checked_headers: Vec::new(),
            authority: None,
            retry: RetryPolicy::default(),
            connections: 1,
            wait_ready: Duration::ZERO,
            binding: BindingOverrides::default(),
            text: TextOverrides::default(),
            io_thread: true,
        }
    }

    /// The same settings, building the other kind of client (`ClientBuilder<Blocking>`
    /// for [`crate::blocking::Client`], or back).
    pub fn mode<N>(self) -> ClientBuilder<N> {
        ClientBuilder {
            mode: PhantomData,
            urls: self.urls,
            protocol: self.protocol,
            transport: self.transport,
            model: self.model,
            model_version: self.model_version,
            vocab: self.vocab,
            tokenizer: self.tokenizer,
            lower_case: self.lower_case,
            postprocess: self.postprocess,
            version_2: self.version_2,
            max_seq_length: self.max_seq_length,
            doc_stride: self.doc_stride,
            max_query_length: self.max_query_length,
            n_best_size: self.n_best_size,
            max_answer_length: self.max_answer_length,
            null_score_diff_threshold: self.null_score_diff_threshold,
            na_prob_thresh: self.na_prob_thresh,
            load: self.load,
            timeout: self.timeout,
            connect_timeout: self.connect_timeout,
            tls: self.tls,
            headers: self.headers,
            checked_headers: self.checked_headers,
            authority: self.authority,
            retry: self.retry,
            connections: self.connections,
            wait_ready: self.wait_ready,
            binding: self.binding,
            text: self.text,
            io_thread: self.io_thread,
        }
    }

    /// Another server with the same model (or a comma list of them, as `--url` takes
    /// them): requests are spread over every server, and one that fails is retried
    /// elsewhere.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.urls.push(url.into());
        self
    }

    /// The protocol the servers are spoken to in (`--protocol`; default gRPC).
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Which gRPC call carries requests (`--transport`; default: a stream over gRPC,
    /// one call per request over HTTP).
    pub fn transport(mut self, transport: GrpcCall) -> Self {
        self.transport = Some(transport);
        self
    }

    /// The model to ask (`--model`; required).
    pub fn model(mut self, name: impl Into<String>) -> Self {
        self.model = Some(name.into());
        self
    }

    /// The model's version (`--model-version`; default: the server's choice).
    pub fn model_version(mut self, version: impl Into<String>) -> Self {
        self.model_version = version.into();
        self
    }

    /// BERT's vocabulary (`--vocab`; default `vocab/vocab.txt`): run_squad's rules.
    pub fn vocab(mut self, path: impl Into<PathBuf>) -> Self {
        self.vocab = path.into();
        self
    }

    /// A fast tokenizer: its tokenizer.json or the folder `save_pretrained` writes
    /// (`--tokenizer`); run_qa's rules unless it is WordPiece.
    pub fn tokenizer(mut self, path: impl Into<PathBuf>) -> Self {
        self.tokenizer = Some(path.into());
        self
    }

    /// Lower-case the text before BERT's WordPiece (`--no-lower-case` for false; default
    /// true).
    pub fn lower_case(mut self, yes: bool) -> Self {
        self.lower_case = yes;
        self
    }

    /// The windowing and post-processing rules (`--postprocess`; default: the
    /// tokenizer's).
    pub fn postprocess(mut self, rules: Postprocess) -> Self {
        self.postprocess = Some(rules);
        self
    }

    /// SQuAD 2.0's rules: the answer may be that there is none
    /// (`--version-2-with-negative`; default: `evaluate` as the data looks, `ask` not;
    /// `false` holds for `evaluate` whatever the data looks like).
    pub fn version_2_with_negative(mut self, yes: bool) -> Self {
        self.version_2 = Some(yes);
        self
    }

    /// Tokens per window (`--max-seq-length`; default: the model's fixed length, else
    /// 384).
    pub fn max_seq_length(mut self, n: usize) -> Self {
        self.max_seq_length = Some(n);
        self
    }

    /// Step between window starts (`--doc-stride`; default 128).
    pub fn doc_stride(mut self, n: usize) -> Self {
        self.doc_stride = n;
        self
    }

    /// Question word pieces kept (`--max-query-length`; default 64).
    pub fn max_query_length(mut self, n: usize) -> Self {
        self.max_query_length = n;
        self
    }

    /// Candidates kept per question (`--n-best-size`; default 20).
    pub fn n_best_size(mut self, n: usize) -> Self {
        self.n_best_size = n;
        self
    }

    /// Longest answer, in word pieces (`--max-answer-length`; default 30).
    pub fn max_answer_length(mut self, n: usize) -> Self {
        self.max_answer_length = n;
        self
    }

    /// SQuAD 2.0: no answer when the null odds exceed this (`--null-score-diff-threshold`;
    /// default 0).
    pub fn null_score_diff_threshold(mut self, t: f64) -> Self {
        self.null_score_diff_threshold = t;
        self
    }

    /// The official v2 script's `--na-prob-thresh` (default 1.0).
    pub fn na_prob_thresh(mut self, t: f64) -> Self {
        self.na_prob_thresh = t;
        self
    }

    /// Features (a text model: questions) per request (`--batch-size`; default: the
    /// model's).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.load.batch_size = Some(n);
        self
    }

    /// Requests kept in flight (`--concurrency`; default 4).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.load.concurrency = n;
        self
    }

    /// How tensors travel (`--shared-memory`; default: system shared memory with a local
    /// server for an evaluation, in the messages for `ask`).
    pub fn shared_memory(mut self, mode: SharedMemory) -> Self {
        self.load.shared_memory = mode;
        self
    }

    /// Pad every batch to `max_seq_length` (`--fixed-seq-len`).
    pub fn fixed_seq_len(mut self, yes: bool) -> Self {
        self.load.fixed_seq_len = yes;
        self
    }

    /// Pad each batch to its longest feature without the probe (`--dynamic-seq-len`).
    pub fn dynamic_seq_len(mut self, yes: bool) -> Self {
        self.load.dynamic_seq_len = yes;
        self
    }

    /// Requests sent and discarded before a measured run, to warm the server up
    /// (`--warmup`; default 0).
    pub fn warmup(mut self, n: usize) -> Self {
        self.load.warmup = n;
        self
    }

    /// Deadline of each call (`--timeout-ms`; default 60 s).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }

    /// Deadline of connecting (`--connect-timeout-ms`; default 5 s).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }

    /// TLS (`--ssl` and its files); an `https://` URL turns it on regardless.
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// A header (gRPC metadata) sent with every call (`--header NAME:VALUE`); checked
    /// when the client is built, and never shown in errors.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), Secret::new(value.into())));
        self
    }

    /// Headers checked beforehand ([`Header::new`]), sent with every call as
    /// [`header`](Self::header)'s are.
    pub fn headers(mut self, headers: impl IntoIterator<Item = Header>) -> Self {
        self.checked_headers.extend(headers);
        self
    }

    /// The name a gateway routes by (`--authority`).
    pub fn authority(mut self, authority: impl Into<String>) -> Self {
        self.authority = Some(authority.into());
        self
    }

    /// Retries of a failed request (`--retries`; default 3).
    pub fn retries(mut self, n: u32) -> Self {
        self.retry.retries = n;
        self
    }

    /// Longest wait between two retries (`--retry-max-backoff-ms`; default 2 s).
    pub fn retry_max_backoff(mut self, d: Duration) -> Self {
        self.retry.max_backoff = d;
        self
    }

    /// Retry model errors too (`--retry-model-errors`; default: not, they usually repeat).
    pub fn retry_model_errors(mut self, yes: bool) -> Self {
        self.retry.retry_model_errors = yes;
        self
    }

    /// Connections per server (`--connections`; default 1).
    pub fn connections(mut self, n: usize) -> Self {
        self.connections = n;
        self
    }

    /// Wait up to this long for the servers and the model to be ready (`--wait-ready`).
    pub fn wait_ready(mut self, d: Duration) -> Self {
        self.wait_ready = d;
        self
    }

    /// A token model's tensor names, where they cannot be inferred.
    pub fn binding(mut self, overrides: BindingOverrides) -> Self {
        self.binding = overrides;
        self
    }

    /// A text model's tensor names, where they cannot be inferred.
    pub fn text_binding(mut self, overrides: TextOverrides) -> Self {
        self.text = overrides;
        self
    }

    /// Connects and looks at the model, on the runtime that awaits it.
    async fn connect(&self) -> Result<Connected> {
        let model_name = self
            .model
            .clone()
            .ok_or_else(|| Error::Config("no model given: name it with `model`".into()))?;
        let pool_config = self.pool_config()?;
        let pool = Pool::connect(&pool_config, &model_name, &self.model_version).await?;
        let model = pool
            .look(&model_name, &self.model_version, &self.binding, &self.text)
            .await?;
        Ok(Connected {
            pool,
            model,
            urls: pool_config.urls,
            server: pool_config.client,
        })
    }

    /// The tokenizer `model` needs (the vocabulary is not read for the answer contract).
    fn tokenizer_for(&self, model: &Model) -> Result<Option<LoadedTokenizer>> {
        if !model.needs_tokenizer() {
            return Ok(None);
        }
        load_tokenizer(
            &self.vocab,
            self.tokenizer.as_deref(),
            self.lower_case,
            self.postprocess,
        )
        .map(Some)
    }

    /// The engine of a connected client with its tokenizer.
    fn engine(&self, connected: Connected, tokenizer: Option<LoadedTokenizer>) -> Result<Engine> {
        let settings = self.resolve(&connected.model, tokenizer.as_ref())?;
        let warnings = tokenizer
            .as_ref()
            .and_then(LoadedTokenizer::casing_warning)
            .map(String::from)
            .into_iter()
            .collect();
        Ok(Engine {
            pool: connected.pool,
            urls: connected.urls,
            server: connected.server,
            given_urls: self.urls.join(","),
            warnings,
            model: connected.model,
            tokenizer,
            settings,
        })
    }

    fn resolve(&self, model: &Model, tokenizer: Option<&LoadedTokenizer>) -> Result<Resolved> {
        self.resolve_for(model.fixed_len(), tokenizer)
    }

    /// [`resolve`](Self::resolve) for a model of sequences of `fixed_len` tokens
    /// (`None`: any length, or no model).
    fn resolve_for(
        &self,
        fixed_len: Option<usize>,
        tokenizer: Option<&LoadedTokenizer>,
    ) -> Result<Resolved> {
        let lower_case = tokenizer.map_or(self.lower_case, |t| t.lower_case(self.lower_case));
        let postprocess = tokenizer.map_or(self.postprocess.unwrap_or_default(), |t| t.postprocess);
        let features = self.windows(fixed_len, postprocess)?;
        Ok(Resolved {
            features,
            max_seq_length: self.max_seq_length,
            decode: DecodeConfig {
                n_best_size: self.n_best_size,
                max_answer_length: self.max_answer_length,
                version_2_with_negative: false,
                null_score_diff_threshold: self.null_score_diff_threshold,
                postprocess,
                lower_case,
            },
            version_2: self.version_2,
            na_prob_thresh: self.na_prob_thresh,
            load: self.load,
        })
    }

    /// Evaluates `data` from the logits an earlier evaluation saved
    /// ([`EvalOptions::save_logits`]) in `logits`, with these settings' tokenizer,
    /// windows and decoding (the model's and the server's settings are not used): the
    /// answers, files and scores of that evaluation, without a server.
    pub fn evaluate_saved(
        &self,
        logits: impl AsRef<std::path::Path>,
        data: &EvalData,
        options: &EvalOptions,
    ) -> Result<Evaluation> {
        let tokenizer = load_tokenizer(
            &self.vocab,
            self.tokenizer.as_deref(),
            self.lower_case,
            self.postprocess,
        )?;
        if let (Some(hooks), Some(w)) = (&options.hooks, tokenizer.casing_warning()) {
            hooks.note(&format!("warning: {w}"));
        }
        let settings = self.resolve_for(None, Some(&tokenizer))?;
        let mut decode = settings.decode;
        decode.version_2_with_negative = self.version_2.unwrap_or(data.looks_like_v2);
        super::evaluate::evaluate_saved(
            &tokenizer,
            settings.features,
            decode,
            &self.load,
            self.na_prob_thresh,
            logits.as_ref(),
            data,
            options,
        )
    }

    /// Compares finished runs (`dirs`: eval's output directories, or a deployment's of a
    /// comparison) without a server; the windows their saved logits are of are cut again
    /// with these settings' tokenizer and windows (see [`crate::client::CompareOptions`]).
    pub fn compare_runs(
        &self,
        dirs: &[PathBuf],
        data: &EvalData,
        options: &CompareOptions,
    ) -> Result<Compared> {
        super::compare::compare_runs(dirs, data, options, self.na_prob_thresh, |dataset| {
            let loaded = load_tokenizer(
                &self.vocab,
                self.tokenizer.as_deref(),
                self.lower_case,
                self.postprocess,
            )?;
            if let (Some(hooks), Some(w)) = (&options.hooks, loaded.casing_warning()) {
                hooks.note(&format!("warning: {w}"));
            }
            let config = self.windows(None, loaded.postprocess)?;
            let builder = crate::features::FeatureBuilder::for_rules(
                loaded.tokenizer.as_ref(),
                loaded.postprocess,
                config,
                dataset,
            )?;
            let (features, _) = crate::features::collect(builder, dataset)?;
            Ok(features.into_iter().map(std::sync::Arc::new).collect())
        })
    }

    internal! {
        /// The servers, connections and retries these settings give: what `build`
        /// connects with (the command's flags become a pool configuration here too).
        pub fn pool_config(&self) -> Result<PoolConfig> {
            let urls = crate::backend::distinct_urls(&self.urls);
            if urls.is_empty() {
                return Err(Error::Config("no server URL given".into()));
            }
            if self.protocol == Protocol::Http && self.transport == Some(GrpcCall::Stream) {
                return Err(Error::Config(
                    "`transport = GrpcCall::Stream` is gRPC's ModelStreamInfer; with \
                     `Protocol::Http` every request is one POST (leave `transport` out)"
                        .into(),
                ));
            }
            let mut headers = self.checked_headers.clone();
            for (name, value) in &self.headers {
                headers.push(Header::new(name, value)?);
            }
            let transport = self.transport.unwrap_or(match self.protocol {
                Protocol::Grpc => GrpcCall::Stream,
                Protocol::Http => GrpcCall::Unary,
            });
            Ok(PoolConfig {
                client: ClientConfig {
                    url: urls[0].clone(),
                    connect_timeout: self.connect_timeout,
                    request_timeout: self.timeout,
                    security: Security {
                        tls: self.tls.clone(),
                        headers,
                    },
                    transport,
                    protocol: self.protocol,
                    authority: self.authority.clone(),
                },
                urls,
                connections: self.connections.max(1),
                retry: self.retry.clone(),
                wait_ready: self.wait_ready,
            })
        }
    }
}

impl ClientBuilder<Async> {
    /// Connects, looks at the model and loads the tokenizer. The connections live on
    /// the runtime that awaits this (as reqwest's and tonic's clients do); the tokenizer
    /// is read where that runtime runs blocking work.
    pub async fn build(self) -> Result<Client> {
        let connected = self.connect().await?;
        let model = connected.model.clone();
        let this = self.clone();
        let tokenizer = tokio::task::spawn_blocking(move || this.tokenizer_for(&model))
            .await
            .map_err(|e| super::task_failed("loading the tokenizer", e))??;
        self.engine(connected, tokenizer).map(Client::from_engine)
    }
}

impl ClientBuilder<Blocking> {
    /// Whether the client keeps a thread of its own for its connections (default yes).
    /// Without one, the thread that makes a call drives the connections while the call
    /// runs: fewer switches between threads per request, for a program that makes one
    /// call at a time (the command line). Calls from several threads then take turns,
    /// and between calls nothing answers the server's keep-alive pings.
    pub fn io_thread(mut self, yes: bool) -> Self {
        self.io_thread = yes;
        self
    }

    /// Connects, looks at the model and loads the tokenizer. The client owns a runtime
    /// (one thread, `bertqa-client`) that keeps its connections and requests going.
    /// Inside an async runtime this is an error: hold the async [`Client`] there.
    pub fn build(self) -> Result<crate::blocking::Client> {
        crate::client::blocking::outside_a_runtime()?;
        let runtime = crate::client::blocking::OwnedRuntime::start(self.io_thread)?;
        let connected = runtime.block_on(self.connect())?;
        let tokenizer = self.tokenizer_for(&connected.model)?;
        let engine = self.engine(connected, tokenizer)?;
        Ok(crate::blocking::Client::new(
            Client::from_engine(engine),
            runtime,
        ))
    }
}

/// What a setting that a model that takes text cannot use shapes
/// ([`ClientBuilder::token_setting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenSetting {
    /// The windows or the vocabulary: the server tokenizes, with its own.
    Tokens,
    /// The padding: the server pads.
    Pads,
    /// The token tensors' names: the model has none.
    Inputs,
}

/// A client's connections and its model, before the tokenizer is loaded.
struct Connected {
    pool: Pool,
    model: Model,
    urls: Vec<String>,
    server: ClientConfig,
}

/// What the load sweeps (`perf`, `tune`) read of a client's settings: they connect, bind
/// and cut windows as the client would, with connections of their own.
impl<M> ClientBuilder<M> {
    /// The model's name (`model`, required).
    pub(crate) fn model_name(&self) -> Result<&str> {
        self.model
            .as_deref()
            .ok_or_else(|| Error::Config("no model given: name it with `model`".into()))
    }

    /// The model's version (empty: the server's choice).
    pub(crate) fn version(&self) -> &str {
        &self.model_version
    }

    /// The first server's address as given.
    pub(crate) fn first_url(&self) -> &str {
        self.urls.first().map_or("", String::as_str)
    }

    /// The tokenizer of these settings, loaded whatever the model.
    pub(crate) fn load_tokenizer(&self) -> Result<LoadedTokenizer> {
        load_tokenizer(
            &self.vocab,
            self.tokenizer.as_deref(),
            self.lower_case,
            self.postprocess,
        )
    }

    /// The tensor names given for a token model and a text model.
    pub(crate) fn overrides(&self) -> (&BindingOverrides, &TextOverrides) {
        (&self.binding, &self.text)
    }

    /// The request-flow settings.
    pub(crate) fn load_settings(&self) -> &Load {
        &self.load
    }

    /// The first setting given that shapes what bertqa tokenizes or pads, which a
    /// model that takes text cannot use, and what it shapes (`tokens`: windows and
    /// vocabulary; `pads`: padding; `inputs`: token tensors); `None`: none given.
    pub(crate) fn token_setting(&self) -> Option<(&'static str, TokenSetting)> {
        let defaults = FeatureConfig::default();
        let b = &self.binding;
        [
            (
                self.load.fixed_seq_len,
                "`Padding::Fixed`",
                TokenSetting::Pads,
            ),
            (
                self.load.dynamic_seq_len,
                "`probe = false`",
                TokenSetting::Pads,
            ),
            (
                self.max_seq_length.is_some(),
                "`max_seq_length`",
                TokenSetting::Tokens,
            ),
            (
                self.doc_stride != defaults.doc_stride,
                "`doc_stride`",
                TokenSetting::Tokens,
            ),
            (
                self.max_query_length != defaults.max_query_length,
                "`max_query_length`",
                TokenSetting::Tokens,
            ),
            (
                self.tokenizer.is_some(),
                "`tokenizer`",
                TokenSetting::Tokens,
            ),
            (
                self.vocab.as_os_str() != "vocab/vocab.txt",
                "`vocab`",
                TokenSetting::Tokens,
            ),
            (
                !self.lower_case,
                "`lower_case = false`",
                TokenSetting::Tokens,
            ),
            (b.input_ids.is_some(), "`input_ids`", TokenSetting::Inputs),
            (
                b.segment_ids.is_some(),
                "`segment_ids`",
                TokenSetting::Inputs,
            ),
            (b.input_mask.is_some(), "`input_mask`", TokenSetting::Inputs),
        ]
        .into_iter()
        .find(|(given, _, _)| *given)
        .map(|(_, setting, shapes)| (setting, shapes))
    }

    /// The windows of `model` under these settings and `postprocess`'s rules, checked.
    pub(crate) fn windows(
        &self,
        fixed_len: Option<usize>,
        postprocess: Postprocess,
    ) -> Result<FeatureConfig> {
        let features = FeatureConfig {
            max_seq_length: self
                .max_seq_length
                .or(fixed_len)
                .unwrap_or(FeatureConfig::default().max_seq_length),
            doc_stride: self.doc_stride,
            max_query_length: self.max_query_length,
        };
        features.validate_for(postprocess)?;
        Ok(features)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_taken_as_the_flag_takes_them() {
        let b = ClientBuilder::<Async>::new("a:1, b:2".into())
            .url("b:2")
            .url(" c:3 ,");
        assert_eq!(b.pool_config().unwrap().urls, ["a:1", "b:2", "c:3"]);
        let none = ClientBuilder::<Async>::new(" , ".into());
        assert!(none.pool_config().is_err());
    }

    #[test]
    fn a_stream_over_http_is_refused_and_the_transport_follows_the_protocol() {
        let http = ClientBuilder::<Async>::new("a:1".into()).protocol(Protocol::Http);
        assert_eq!(
            http.clone().pool_config().unwrap().client.transport,
            GrpcCall::Unary
        );
        let e = http.transport(GrpcCall::Stream).pool_config().unwrap_err();
        assert!(
            e.to_string().contains("`transport = GrpcCall::Stream`"),
            "{e}"
        );
        let grpc = ClientBuilder::<Async>::new("a:1".into())
            .pool_config()
            .unwrap();
        assert_eq!(grpc.client.transport, GrpcCall::Stream);
    }
}
