//! Steps several commands share: loading data and the tokenizer with warnings on
//! stderr, turning flag groups into the library's configurations (validated here, so
//! that errors name the flags), connecting and binding, runtimes, and how a command
//! ended.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::args::{
    BindingArgs, NetArgs, PipelineArgs, Postprocess, ServerArgs, TokenizerArgs, TransportArg,
    WindowArgs,
};
use bertqa::backend::{BindingOverrides, ClientConfig, GrpcCall};
use bertqa::data::Format;
use bertqa::features::FeatureConfig;
use bertqa::types::Dataset;

/// Inputs from this size up get transparent huge pages ([`huge_pages_for`]).
pub(crate) const HUGE_PAGES_FROM_BYTES: u64 = 1 << 20;

/// Lets the allocator's arena use transparent huge pages from now on when `path` is a
/// large input. The binary starts with them off (`cli/src/main.rs`): a small run would zero
/// whole 2 MiB pages it barely uses. A run over a large file fills tens of MB, where
/// 4 KiB pages cost a page fault each and the word caches' random lookups miss the TLB.
pub(crate) fn huge_pages_for(path: &Path) {
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
    Ok(server_builder(server)?
        // Over HTTP `--transport` defaults to `unary` (args.rs): `stream` was asked for.
        .transport(match net.transport {
            TransportArg::Stream => GrpcCall::Stream,
            TransportArg::Unary => GrpcCall::Unary,
        })
        .connections(net.connections.max(1) as usize)
        .retries(net.retries)
        .retry_max_backoff(Duration::from_millis(net.retry_max_backoff_ms.max(1)))
        .retry_model_errors(net.retry_model_errors)
        .wait_ready(Duration::from_secs_f64(net.wait_ready)))
}

/// The client's settings of the server flags alone (`perf` and `tune` have no network
/// flags: their sweeps keep connections of their own).
pub(crate) fn server_builder(server: &ServerArgs) -> bertqa::Result<bertqa::ClientBuilder> {
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
        .connect_timeout(Duration::from_millis(server.connect_timeout_ms))
        .timeout(Duration::from_millis(server.timeout_ms))
        .headers(security.headers))
}

/// The client's settings of every flag of a command that runs the pipeline: the server
/// and network ([`client_builder`]), the model, the tokenizer, the windows, decoding,
/// the request flow and the binding's tensor names.
pub(crate) fn pipeline_builder(
    run: &PipelineArgs,
    model: &str,
    version: &str,
    text: &super::args::TextBindingArgs,
) -> bertqa::Result<bertqa::ClientBuilder> {
    let (t, w, d, l) = (&run.tokenizer, &run.window, &run.decode, &run.load);
    let mut b = client_builder(&run.server, &run.net)?
        .model(model)
        .model_version(version)
        .vocab(&t.vocab)
        .lower_case(t.lower_case())
        .doc_stride(w.doc_stride)
        .max_query_length(w.max_query_length)
        .n_best_size(d.n_best_size)
        .max_answer_length(d.max_answer_length)
        .null_score_diff_threshold(d.null_score_diff_threshold)
        .concurrency(l.concurrency)
        .warmup(l.warmup)
        .fixed_seq_len(l.fixed_seq_len)
        .dynamic_seq_len(l.dynamic_seq_len)
        .shared_memory(l.shared_memory.into())
        .binding(binding_overrides(&run.binding))
        .text_binding(text.overrides(&run.binding));
    if let Some(path) = &t.tokenizer {
        b = b.tokenizer(path);
    }
    if let Some(rules) = d.postprocess {
        b = b.postprocess(rules.into());
    }
    if d.version_2_with_negative {
        b = b.version_2_with_negative(true);
    }
    if let Some(n) = w.max_seq_length {
        b = b.max_seq_length(n);
    }
    if let Some(n) = l.batch_size {
        b = b.batch_size(n);
    }
    Ok(b)
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
        huge_pages_for(&small);
        huge_pages_for(&dir.path().join("missing.json"));
        assert!(huge_pages_off(), "small or missing inputs change nothing");
        huge_pages_for(&large);
        assert!(!huge_pages_off());
    }
}
