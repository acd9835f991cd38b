//! bertqa: BERT extractive question answering (SQuAD) against NVIDIA Triton Inference
//! Server.
//!
//! A program holds a [`Client`] (or a [`blocking::Client`]): built once from a server's
//! URL and a model's settings, it answers questions ([`Client::ask`]) and evaluates
//! datasets ([`Client::evaluate`], [`Client::evaluate_with`]) as `bertqa ask` and
//! `bertqa eval` do. Under it, one stage a step, data flowing one way:
//!
//! ```text
//! squad (read) → tokenize → features (windows) → backend (gRPC or HTTP)
//!       → decode (spans, final text) → evaluate (EM/F1) → report
//! ```
//!
//! The library never parses flags, prints or exits; the `bertqa` command (the package
//! `bertqa-cli`) does that. Messages, and the reports'
//! text, name a setting as its configuration does, in backticks (`` `doc_stride` ``,
//! `` `root_cert` ``; a setting of one command only as `` `eval.resume` ``), never as a
//! command-line flag; the command writes them as its flags. The one table of flags in
//! the library is [`report::gates`]: eval's and compare's documents name a gate by its
//! flag.
//!
//! A `§N.M` in a comment cites docs/algorithm.md, where the reference rules this code
//! reproduces (and their traps) are written down.
//!
//! # The front door: a client
//!
//! [`blocking::Client`] (or the async [`Client`], the same methods) is built once from a
//! URL and the settings the command's flags give; it connects, looks at the model and
//! loads the tokenizer once, then answers questions and evaluates datasets as `bertqa
//! ask` and `bertqa eval` do:
//!
//! ```no_run
//! # fn main() -> bertqa::Result<()> {
//! let client = bertqa::blocking::Client::builder("localhost:8001")
//!     .model("bert")
//!     .vocab("vocab/vocab.txt")
//!     .build()?;
//! let answer = client.ask(
//!     "Who designed the lighthouse?",
//!     "The lighthouse at Varne Point was designed by Ada Byron in 1851.",
//! )?;
//! println!("{} [{:?}, {:?})", answer.text, answer.start_char, answer.end_char);
//! let evaluation = client.evaluate(&bertqa::Dataset::open("dev-v2.0.json")?)?;
//! println!("EM {:.2} F1 {:.2}", evaluation.metrics.exact(), evaluation.metrics.f1());
//! for (id, text) in &evaluation.predictions {
//!     println!("{id}: {text}");
//! }
//! evaluation.write_files("out")?; // predictions.json, nbest_predictions.json, ...
//! # Ok(())
//! # }
//! ```
//!
//! A model of another family is built with `.tokenizer(dir)` (its tokenizer.json,
//! run_qa's rules); a model that takes text of the answer contract needs no tokenizer
//! (one of the logits contract is decoded with the vocabulary). `examples/client_*.rs`
//! show each.
//!
//! # Evaluating with the command's files
//!
//! [`Client::evaluate_with`] (and [`blocking::Client::evaluate_with`]) runs an evaluation
//! as `bertqa eval` does, with what [`EvalOptions`] asks for: the output directory and its
//! files, resuming from the journal there, saved logits, the HTML page, gates and the
//! server's metrics. [`EvalData`] names the questions (and their shard, [`shard`]);
//! [`data`] reads every format the command reads.
//!
//! ```no_run
//! # fn main() -> bertqa::Result<()> {
//! # let client = bertqa::blocking::Client::builder("localhost:8001").model("bert").build()?;
//! let dataset = bertqa::Dataset::open("dev-v2.0.json")?;
//! let data = bertqa::EvalData::new(dataset, "dev-v2.0.json", "", bertqa::data::Format::Squad);
//! let mut options = bertqa::EvalOptions::new("out");
//! options.resume = true;
//! options.min_f1 = Some(80.0);
//! let evaluation = client.evaluate_with(&data, &options)?;
//! for gate in &evaluation.gates {
//!     println!("{}", gate.describe());
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Comparing, measuring, tuning
//!
//! - [`compare()`] sets two evaluations side by side (agreement, flips, a paired
//!   bootstrap); [`client::compare_deployments`] evaluates the same questions on several
//!   clients and compares them, [`ClientBuilder::compare_runs`] compares finished runs'
//!   directories.
//! - [`perf::run`] sweeps a client's model over concurrency levels (`bertqa perf`);
//!   [`tune::Tuning`] searches the model's configuration on a server in explicit
//!   model-control mode (`bertqa tune`).
//! - [`evaluate`] scores predictions against a dataset (`bertqa score`); [`shard::merge`]
//!   merges the directories of a sharded evaluation.
//!
//! Each of these gives a report value; the [`report`] module renders them
//! ([`report::Render`]: the command's text or its JSON document).
//!
//! # Errors
//!
//! Every call returns [`Result`]: an [`Error`] says what failed and, where a server
//! answered, with which code ([`error`]).
//!
//! # What is not public
//!
//! The stages the client drives (the backend's connections and pool, the pipeline's run,
//! the tokenizers, the decoder, the generated protocol types) are the crate's own. The
//! command line, its tests, the fuzz targets and the benchmarks reach them through the
//! cargo feature `internals`, which is not a program's surface and may change with any
//! release.
#![cfg_attr(
    not(feature = "internals"),
    doc = r#"
Without the feature, none of them can be named:

```compile_fail
use bertqa::Pool;
```

```compile_fail
use bertqa::Run;
```

```compile_fail
use bertqa::RunConfig;
```

```compile_fail
use bertqa::TritonClient;
```

```compile_fail
use bertqa::InferRequest;
```

```compile_fail
use bertqa::backend::proto::ModelInferRequest;
```

```compile_fail
use bertqa::proto::ModelInferRequest;
```
"#
)]
#![warn(unreachable_pub)]
#![deny(missing_docs)]

// The library's own examples and doc tests name it `bertqa::`, as any user's code does.
extern crate self as bertqa;

/// An item public with the `internals` feature and the crate's own without it: a stage
/// that the command line, its tests or the benchmarks drive directly.
macro_rules! internal {
    ($(#[$attr:meta])* pub $($item:tt)*) => {
        #[cfg(feature = "internals")]
        $(#[$attr])*
        pub $($item)*
        #[cfg(not(feature = "internals"))]
        $(#[$attr])*
        #[allow(
            unreachable_pub,
            dead_code,
            reason = "public with the `internals` feature; without it, what only the command line uses is unused"
        )]
        pub(crate) $($item)*
    };
}

// The surface a program holds.
pub mod client;
pub mod compare;
pub mod data;
pub mod error;
pub mod evaluate;
pub mod evaluation;
pub mod perf;
pub mod report;
pub mod shard;
pub mod tune;

// The stages: public only with the `internals` feature (the command line, its tests, the
// fuzz targets and the benchmarks); without it, the crate's own.
macro_rules! internals {
    ($($(#[$attr:meta])* $name:ident;)*) => {$(
        $(#[$attr])*
        #[cfg(feature = "internals")]
        #[allow(
            missing_docs,
            reason = "the stages are not the library's surface: no promise is documented"
        )]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        #[allow(
            unreachable_pub,
            dead_code,
            unused_imports,
            reason = "public with the `internals` feature; without it, what only the command line uses is unused"
        )]
        mod $name;
    )*};
}

internals! {
    backend;
    decode;
    features;
    journal;
    logits_io;
    metrics;
    output_file;
    pipeline;
    sha256;
    squad;
    tokenize;
    types;
}
mod latency;
mod slices;

pub use client::{blocking, Answer, AskOptions, Candidate, Client, ClientBuilder, Evaluation};
pub use compare::compare;
pub use error::{Error, Result};
pub use evaluation::{EvalData, EvalHooks, EvalOptions};
pub use types::Dataset;

// The settings of a client and its calls.
pub use backend::{
    BindingOverrides, GrpcCall, Header, Protocol, Secret, Security, SharedMemory, TextOverrides,
    TlsConfig,
};
pub use decode::Postprocess;
pub use metrics::MetricsOptions;

#[cfg(feature = "internals")]
pub use backend::binding::{
    Batching, FloatType, InputBinding, InputRole, IntType, OutputBinding, Outputs,
};
#[cfg(feature = "internals")]
pub use backend::tensor::decode_response;
#[cfg(feature = "internals")]
pub use backend::{
    bind, look, prepare_request, proto, Binding, ClientConfig, Contract, Infer, InferRequest,
    Model, NoAnswer, Pool, PoolConfig, RetryPolicy, RetryStats, SeqLen, ServerInfo, ServerWindows,
    TextAnswer, TextBinding, TextPair, TextReply, TritonClient,
};
#[cfg(feature = "internals")]
pub use pipeline::{
    effective_batch_size, infer_all, AnswerNeeds, InferConfig, InferReport, NoProgress, Padding,
    PaddingGuard, PaddingReport, PartialOutcome, Phases, Run, RunConfig, RunObserver, RunOutcome,
    SharedMemoryReport,
};
#[cfg(feature = "internals")]
pub use tokenize::{BertTokenizer, PretrainedTokenizer, Tokenizer, TokenizerRef};
