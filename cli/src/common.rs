//! Steps several commands share: loading data and the tokenizer with warnings on
//! stderr, turning flag groups into the library's configurations (validated here, so
//! that errors name the flags), connecting and binding, runtimes, and how a command
//! ended.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::args::{
    BindingArgs, DecodeArgs, LoadArgs, NetArgs, PipelineArgs, Postprocess, ServerArgs,
    TokenizerArgs, TransportArg, WindowArgs,
};
use bertqa::backend::{BindingOverrides, ClientConfig, GrpcCall, Pool, PoolConfig};
use bertqa::data::Format;
use bertqa::decode::DecodeConfig;
use bertqa::features::FeatureConfig;
use bertqa::pipeline::RunConfig;
use bertqa::types::Dataset;

/// Inputs from this size up get transparent huge pages ([`huge_pages_for`]).
pub(crate) const HUGE_PAGES_FROM_BYTES: u64 = 1 << 20;

/// Lets the allocator's arena use transparent huge pages from now on when `path` is a
/// large input. The binary starts with them off (`cli/src/main.rs`): a small run would zero
/// whole 2 MiB pages it barely uses. A run over a large file fills tens of MB, where
/// 4 KiB pages cost a page fault each and the word caches' random lookups miss the TLB.
pub(crate) fn huge_pages_for(path: &Path) {
    // A host program's (the Python package's) memory settings are its own.
    if !super::command_process() {
        return;
    }
    #[cfg(target_os = "linux")]
    if std::fs::metadata(path).is_ok_and(|m| m.len() >= HUGE_PAGES_FROM_BYTES) {
        // SAFETY: prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0) only clears a flag of this
        // process, checked at page-fault time; failure leaves huge pages off.
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0);
        }
    }
}

/// Reads the `--data` files (any format `bertqa::data` reads) as one dataset; reader
/// warnings go to stderr, or fail under `--strict`.
pub(crate) fn load_data(
    paths: &[PathBuf],
    strict: bool,
    limit: Option<usize>,
) -> bertqa::Result<Dataset> {
    Ok(load(paths, strict, limit, false)?.0)
}

/// [`load_data`], with the SHA-256 (hex) of the content read and its format.
pub(crate) fn load_data_digest(
    paths: &[PathBuf],
    strict: bool,
    limit: Option<usize>,
) -> bertqa::Result<(Dataset, String, Format)> {
    let (dataset, digest, format) = load(paths, strict, limit, true)?;
    Ok((dataset, digest.expect("load takes the digest"), format))
}

/// The data, and its digest only when asked for (hashing a large file is not free).
fn load(
    paths: &[PathBuf],
    strict: bool,
    limit: Option<usize>,
    digest: bool,
) -> bertqa::Result<(Dataset, Option<String>, Format)> {
    if let Some(first) = paths.first() {
        huge_pages_for(first);
    }
    let (loaded, format) = bertqa::data::load(paths, digest)?;
    let (dataset, digest) = finish_loading(loaded, strict, limit)?;
    Ok((dataset, digest, format))
}

/// Fails unless `path`'s directory exists, so that a run whose output file (`flag`,
/// e.g. `--html`) could not be written stops before it starts rather than at its end.
pub(crate) fn check_output_dir(flag: &str, path: &Path) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => return Ok(()),
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "{flag} {}: no directory {} to write it in",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// The `--data` files as reports name them: the path, or the paths joined by ", ".
pub(crate) fn data_label(paths: &[PathBuf]) -> String {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    names.join(", ")
}

/// Warnings (or the first as an error under `--strict`) and `--limit`.
fn finish_loading(
    mut loaded: bertqa::squad::Loaded,
    strict: bool,
    limit: Option<usize>,
) -> bertqa::Result<(Dataset, Option<String>)> {
    let digest = loaded.sha256.take();
    let mut dataset = if strict {
        loaded.strict()?
    } else {
        for w in &loaded.warnings {
            eprintln!("warning: {w}");
        }
        loaded.dataset
    };
    if let Some(n) = limit {
        dataset.examples.truncate(n);
    }
    Ok((dataset, digest))
}

pub(crate) use bertqa::client::LoadedTokenizer;

/// The tokenizer of `--vocab` / `--tokenizer` and the rules of `--postprocess` (`rules`;
/// [`bertqa::client::load_tokenizer`]). Warns when the casing looks wrong.
pub(crate) fn load_tokenizer(
    args: &TokenizerArgs,
    rules: Option<Postprocess>,
) -> bertqa::Result<LoadedTokenizer> {
    let loaded = bertqa::client::load_tokenizer(
        &args.vocab,
        args.tokenizer.as_deref(),
        args.lower_case(),
        rules.map(Into::into),
    )?;
    if let Some(w) = loaded.casing_warning() {
        eprintln!("warning: {}", super::flags::name_flags(w));
    }
    Ok(loaded)
}

/// The tokenizer a run needs (`needed`: not for a text model of the answer contract),
/// with the casing and the rules in force (`--postprocess`'s, or the default, without
/// a tokenizer).
pub(crate) fn run_tokenizer(
    args: &TokenizerArgs,
    decode: &DecodeArgs,
    needed: bool,
) -> bertqa::Result<(Option<LoadedTokenizer>, bool, bertqa::decode::Postprocess)> {
    let loaded = match needed {
        true => Some(load_tokenizer(args, decode.postprocess)?),
        false => None,
    };
    let lower_case = loaded
        .as_ref()
        .map_or(args.lower_case(), |t| t.lower_case(args.lower_case()));
    let postprocess = loaded.as_ref().map_or(
        decode.postprocess.map_or(Default::default(), Into::into),
        |t| t.postprocess,
    );
    Ok((loaded, lower_case, postprocess))
}

/// The validated window geometry (run_qa's rules check theirs when windows are cut);
/// `model_len`: the model's fixed sequence length, the default window length.
pub(crate) fn feature_config(
    args: &WindowArgs,
    postprocess: bertqa::decode::Postprocess,
    model_len: Option<usize>,
) -> bertqa::Result<FeatureConfig> {
    let config = FeatureConfig {
        max_seq_length: args.max_seq_length(model_len),
        doc_stride: args.doc_stride,
        max_query_length: args.max_query_length,
    };
    config.validate_for(postprocess)?;
    Ok(config)
}

/// The decoding configuration for a dataset's rules, the tokenizer's casing and the
/// post-processing in force.
pub(crate) fn decode_config(
    args: &DecodeArgs,
    version_2: bool,
    lower_case: bool,
    postprocess: bertqa::decode::Postprocess,
) -> DecodeConfig {
    DecodeConfig {
        n_best_size: args.n_best_size,
        max_answer_length: args.max_answer_length,
        version_2_with_negative: version_2,
        null_score_diff_threshold: args.null_score_diff_threshold,
        postprocess,
        lower_case,
    }
}

/// The client configuration of the server flags (reads `--header-env` variables and
/// `--header-file` files).
pub(crate) fn client_config(args: &ServerArgs) -> bertqa::Result<ClientConfig> {
    Ok(ClientConfig {
        url: args.first_url().to_string(),
        connect_timeout: Duration::from_millis(args.connect_timeout_ms),
        request_timeout: Duration::from_millis(args.timeout_ms),
        security: super::security::security(&args.security)?,
        transport: GrpcCall::Unary,
        protocol: args.protocol.into(),
        authority: args.authority.clone(),
    })
}

/// The client's settings of the server and network flags (reads `--header-env`
/// variables and `--header-file` files): the one place they become a pool
/// configuration ([`bertqa::ClientBuilder::pool_config`]).
pub(crate) fn client_builder(
    server: &ServerArgs,
    net: &NetArgs,
) -> bertqa::Result<bertqa::ClientBuilder> {
    if !(net.wait_ready.is_finite() && net.wait_ready >= 0.0) {
        return Err(bertqa::Error::Config(format!(
            "--wait-ready {} must be a number of seconds, 0 or more",
            net.wait_ready
        )));
    }
    let security = super::security::security(&server.security)?;
    let mut builder = bertqa::Client::builder(server.first_url());
    for url in server.url.iter().skip(1) {
        builder = builder.url(url);
    }
    if let Some(tls) = security.tls {
        builder = builder.tls(tls);
    }
    if let Some(authority) = &server.authority {
        builder = builder.authority(authority);
    }
    Ok(builder
        .protocol(server.protocol.into())
        // Over HTTP `--transport` defaults to `unary` (args.rs): `stream` was asked for.
        .transport(match net.transport {
            TransportArg::Stream => GrpcCall::Stream,
            TransportArg::Unary => GrpcCall::Unary,
        })
        .connect_timeout(Duration::from_millis(server.connect_timeout_ms))
        .timeout(Duration::from_millis(server.timeout_ms))
        .headers(security.headers)
        .connections(net.connections.max(1) as usize)
        .retries(net.retries)
        .retry_max_backoff(Duration::from_millis(net.retry_max_backoff_ms.max(1)))
        .retry_model_errors(net.retry_model_errors)
        .wait_ready(Duration::from_secs_f64(net.wait_ready)))
}

/// The client's settings of a pipeline command's flags (`ask`): the server and network
/// flags ([`client_builder`]), the model, its binding, the tokenizer, the windows, the
/// decoding and the request flow.
pub(crate) fn pipeline_builder(
    run: &PipelineArgs,
    text: &super::args::TextBindingArgs,
    model: &str,
    version: &str,
) -> bertqa::Result<bertqa::ClientBuilder> {
    let (tokenizer, window, decode, load) = (&run.tokenizer, &run.window, &run.decode, &run.load);
    let mut b = client_builder(&run.server, &run.net)?
        .model(model)
        .model_version(version)
        .binding(binding_overrides(&run.binding))
        .text_binding(text.overrides(&run.binding))
        .vocab(&tokenizer.vocab)
        .lower_case(tokenizer.lower_case())
        .doc_stride(window.doc_stride)
        .max_query_length(window.max_query_length)
        .n_best_size(decode.n_best_size)
        .max_answer_length(decode.max_answer_length)
        .version_2_with_negative(decode.version_2_with_negative)
        .null_score_diff_threshold(decode.null_score_diff_threshold)
        .concurrency(load.concurrency)
        .fixed_seq_len(load.fixed_seq_len)
        .dynamic_seq_len(load.dynamic_seq_len)
        .shared_memory(load.shared_memory.into());
    if let Some(t) = &tokenizer.tokenizer {
        b = b.tokenizer(t);
    }
    if let Some(rules) = decode.postprocess {
        b = b.postprocess(rules.into());
    }
    if let Some(n) = window.max_seq_length {
        b = b.max_seq_length(n);
    }
    if let Some(n) = load.batch_size {
        b = b.batch_size(n);
    }
    Ok(b)
}

/// The pool configuration of the server and network flags.
pub(crate) fn pool_config(server: &ServerArgs, net: &NetArgs) -> bertqa::Result<PoolConfig> {
    client_builder(server, net)?.pool_config()
}

/// Connects a pool to every endpoint (waiting for readiness with `--wait-ready`) and
/// looks at the model once, on the first: a model that takes text is bound by its contract, one that takes token
/// ids by its tensors.
pub(crate) async fn connect_pool_and_look(
    server: &ServerArgs,
    net: &NetArgs,
    model: &str,
    version: &str,
    tokens: &BindingArgs,
    text: &super::args::TextBindingArgs,
) -> bertqa::Result<(Pool, bertqa::Model)> {
    let pool = Pool::connect(&pool_config(server, net)?, model, version).await?;
    let looked = pool
        .look(
            model,
            version,
            &binding_overrides(tokens),
            &text.overrides(tokens),
        )
        .await?;
    Ok((pool, looked))
}

/// The tensor names given with `--input-ids`, `--segment-ids`, `--input-mask`,
/// `--start-logits` and `--end-logits`.
pub(crate) fn binding_overrides(b: &BindingArgs) -> BindingOverrides {
    BindingOverrides {
        input_ids: b.input_ids.clone(),
        segment_ids: b.segment_ids.clone(),
        input_mask: b.input_mask.clone(),
        start_logits: b.start_logits.clone(),
        end_logits: b.end_logits.clone(),
    }
}

/// The run's configuration of the request-flow flags, the window and decoding settings
/// and the model's binding ([`RunConfig::resolve`]: `ask`, `compare`, `eval`). The caller
/// chooses what the run keeps (logits, features).
pub(crate) fn run_config(
    load: &LoadArgs,
    model: &bertqa::backend::Model,
    features: FeatureConfig,
    decode: DecodeConfig,
) -> bertqa::Result<RunConfig> {
    RunConfig::resolve(model, &load.load(), features, decode)
}

pub(crate) use bertqa::report::text::metric_lines;

/// How a command's report is shown: `--json`, or the text (`-v`: verbose).
pub(crate) fn report_format(json: bool) -> bertqa::report::Format {
    if json {
        bertqa::report::Format::Json
    } else {
        bertqa::report::Format::Text {
            verbose: super::verbose(),
        }
    }
}

/// How a command that ran to completion ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Everything passed.
    Success,
    /// The run completed but these gates failed (each named, e.g. `--min-f1 90: f1 85.2`).
    GateFailed(Vec<String>),
}

/// Builds a multi-thread tokio runtime (a worker per core) for commands that talk to a
/// server.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// The runtime of an evaluation pipeline (`eval`, `ask`, `compare` one model after
/// another): a current-thread runtime, so that the requests, their connection and the
/// sender all run on the thread that drives it, besides the pipeline's own feature and
/// decoder threads. A worker thread for the requests would hand every answer from thread
/// to thread once more, costing client CPU for no throughput: one thread sends far more
/// requests per second than a GPU server answers (docs/performance.md). Interrupts are
/// watched by a thread of their own
/// ([`super::resume::stop_on_signals`]), so they are seen while this runtime is not driven.
pub(crate) fn pipeline_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// The runtime of pipelines run side by side from several threads (`compare
/// --parallel`): one worker thread drives every model's requests and connections.
pub(crate) fn shared_pipeline_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?)
}

/// How a report names the batch size: `batch 8`; for a model whose batching the server
/// does not declare, also who chose it (`--batch-size` or bertqa's default).
pub(crate) fn batch_words(batch_size: usize, model: &bertqa::Model, given: bool) -> String {
    if model.declares_batching() {
        return format!("batch {batch_size}");
    }
    let who = if given {
        "--batch-size"
    } else {
        "bertqa's default"
    };
    format!("batch {batch_size} ({who}: the server declares no batching)")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Windows are as long as `--max-seq-length` says, else as the model's fixed
    /// length, else 384; run_qa's rules skip run_squad's query-length check.
    #[test]
    fn the_window_length_comes_from_the_flag_then_the_model() {
        let window = |given: Option<usize>| WindowArgs {
            max_seq_length: given,
            doc_stride: 128,
            max_query_length: 64,
            strict: false,
        };
        let rules = bertqa::decode::Postprocess::Nvidia;
        let len = |given, model| {
            feature_config(&window(given), rules, model)
                .unwrap()
                .max_seq_length
        };
        assert_eq!(len(None, None), 384);
        assert_eq!(len(None, Some(386)), 386);
        assert_eq!(len(Some(256), Some(512)), 256);
        let short = WindowArgs {
            max_query_length: 300,
            ..window(Some(256))
        };
        assert!(feature_config(&short, rules, None).is_err());
        let run_qa = bertqa::decode::Postprocess::RunQa;
        assert!(feature_config(&short, run_qa, None).is_ok());
    }

    #[cfg(target_os = "linux")]
    fn huge_pages_off() -> bool {
        // SAFETY: PR_GET_THP_DISABLE only reads a flag of this process.
        unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1 }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn large_inputs_turn_huge_pages_on_small_ones_leave_them_off() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.json");
        let large = dir.path().join("large.json");
        std::fs::write(&small, b"{}").unwrap();
        std::fs::write(&large, vec![b' '; HUGE_PAGES_FROM_BYTES as usize]).unwrap();
        // SAFETY: sets a flag of this process (as the binary does before main).
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        assert!(huge_pages_off());
        let command = &super::super::COMMAND_PROCESS;
        let was = command.swap(false, std::sync::atomic::Ordering::Relaxed);
        huge_pages_for(&large);
        assert!(huge_pages_off(), "a host program's settings are its own");
        command.store(true, std::sync::atomic::Ordering::Relaxed);
        huge_pages_for(&small);
        huge_pages_for(&dir.path().join("missing.json"));
        assert!(huge_pages_off(), "small or missing inputs change nothing");
        huge_pages_for(&large);
        assert!(!huge_pages_off());
        command.store(was, std::sync::atomic::Ordering::Relaxed);
    }
}
