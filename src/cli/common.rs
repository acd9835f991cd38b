//! Steps several commands share: loading data and the tokenizer with warnings on
//! stderr, turning flag groups into library configurations, connecting and binding.

use std::path::Path;
use std::time::Duration;

use super::args::{BindingArgs, DecodeArgs, Postprocess, ServerArgs, TokenizerArgs, WindowArgs};
use crate::backend::{bind, Binding, ClientConfig, TritonClient};
use crate::decode::DecodeConfig;
use crate::features::FeatureConfig;
use crate::tokenize::{self, BertTokenizer};
use crate::types::Dataset;

/// Reads a SQuAD file; reader warnings go to stderr, or fail under `--strict`.
pub fn load_data(path: &Path, strict: bool, limit: Option<usize>) -> crate::Result<Dataset> {
    let loaded = crate::squad::load(path)?;
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
    Ok(dataset)
}

/// The tokenizer of `--vocab` / `--tokenizer`, warning when the casing looks wrong.
pub fn load_tokenizer(args: &TokenizerArgs) -> crate::Result<BertTokenizer> {
    let tokenizer = tokenize::load(&args.vocab, args.tokenizer.as_deref(), args.lower_case())?;
    if let Some(w) = tokenizer.casing_warning() {
        eprintln!("warning: {w}");
    }
    Ok(tokenizer)
}

/// The validated window geometry.
pub fn feature_config(args: &WindowArgs) -> crate::Result<FeatureConfig> {
    let config = FeatureConfig {
        max_seq_length: args.max_seq_length,
        doc_stride: args.doc_stride,
        max_query_length: args.max_query_length,
    };
    config.validate()?;
    Ok(config)
}

/// The decoding configuration for a dataset's rules and the tokenizer's casing.
pub fn decode_config(args: &DecodeArgs, version_2: bool, lower_case: bool) -> DecodeConfig {
    DecodeConfig {
        n_best_size: args.n_best_size,
        max_answer_length: args.max_answer_length,
        version_2_with_negative: version_2,
        null_score_diff_threshold: args.null_score_diff_threshold,
        postprocess: match args.postprocess {
            Postprocess::Nvidia => crate::decode::Postprocess::Nvidia,
            Postprocess::Hf => crate::decode::Postprocess::Hf,
        },
        lower_case,
    }
}

/// The client configuration of the server flags.
pub fn client_config(args: &ServerArgs) -> ClientConfig {
    ClientConfig {
        url: args.url.clone(),
        connect_timeout: Duration::from_millis(args.connect_timeout_ms),
        request_timeout: Duration::from_millis(args.timeout_ms),
    }
}

/// Connects and infers the model's binding (with the override flags).
pub async fn connect_and_bind(
    server: &ServerArgs,
    model: &str,
    version: &str,
    overrides: &BindingArgs,
) -> crate::Result<(TritonClient, Binding)> {
    let client = TritonClient::connect(&client_config(server)).await?;
    let binding = bind(
        &client,
        model,
        version,
        &super::models::overrides(overrides),
    )
    .await?;
    Ok((client, binding))
}
