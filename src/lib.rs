//! bertqa: BERT extractive question answering (SQuAD) against NVIDIA Triton Inference
//! Server.
//!
//! The pipeline, one stage per module, data flowing one way:
//!
//! ```text
//! squad (read) → tokenize → features (windows) → backend (gRPC or HTTP)
//!       → decode (spans, final text) → evaluate (EM/F1) → report
//! ```
//!
//! Every stage but the backend is plain synchronous Rust over the types of [`types`].
//! The library never parses flags, prints or exits; the `bertqa` command (the package
//! `bertqa-cli`, over this library's public API) does that. Messages, and the reports'
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
//! # The stages
//!
//! A program may also drive the stages itself: read a dataset ([`squad`]), load the
//! vocabulary ([`BertTokenizer`], run_squad's rules) or another family's fast tokenizer
//! ([`PretrainedTokenizer`], run_qa's rules: [`decode::Postprocess::RunQa`]), connect
//! ([`TritonClient`], or a [`Pool`] of endpoints with retries), bind the model's tensors
//! ([`bind`], or [`look`] for any model), run ([`Run`]), score ([`evaluate::score`]), or
//! a whole evaluation with the command's files ([`Client::evaluate_with`]). The topic
//! modules ([`squad`], [`tokenize`], [`features`], [`decode`], [`evaluate`], [`types`],
//! [`logits_io`], [`journal`], [`error`]) hold the rest; [`perf`], [`tune`], [`report`],
//! [`metrics`] and [`shard`] are the other commands' engines and reports.
//!
//! Asking one question:
//!
//! ```no_run
//! use bertqa::{bind, BertTokenizer, BindingOverrides, ClientConfig, Run, RunConfig, TritonClient};
//!
//! # fn main() -> bertqa::Result<()> {
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! let tokenizer = BertTokenizer::from_vocab_file("vocab/vocab.txt".as_ref(), true)?;
//! let config = ClientConfig { url: "localhost:8001".into(), ..ClientConfig::default() };
//! let client = runtime.block_on(TritonClient::connect(&config))?;
//! let model = bertqa::Model::from(runtime.block_on(bind(&client, "bert", "", &BindingOverrides::default()))?);
//! let dataset = bertqa::squad::questions_about(
//!     "The lighthouse at Varne Point was designed by Ada Byron in 1851.",
//!     &["Who designed the lighthouse?".to_string()],
//! );
//! let run = RunConfig::for_model(&model);
//! let outcome = Run::new(&runtime, &client, model, &dataset, &run).tokenizer(&tokenizer).run()?;
//! println!("{}", outcome.predictions[0].answer);
//! # Ok(())
//! # }
//! ```
//!
//! Evaluating a SQuAD file (a [`Pool`] of endpoints with retries serves as well as one
//! client):
//!
//! ```no_run
//! use bertqa::evaluate::{self, Predictions, ScoreConfig};
//! use bertqa::{bind, BertTokenizer, BindingOverrides, ClientConfig, Run, RunConfig, TritonClient};
//!
//! # fn main() -> bertqa::Result<()> {
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! let dataset = bertqa::squad::read("dev-v2.0.json".as_ref())?;
//! let tokenizer = BertTokenizer::from_vocab_file("vocab/vocab.txt".as_ref(), true)?;
//! let config = ClientConfig { url: "localhost:8001".into(), ..ClientConfig::default() };
//! let client = runtime.block_on(TritonClient::connect(&config))?;
//! // Any model: one that takes token ids, or text (a server-side tokenizer).
//! let model = runtime.block_on(bertqa::look(
//!     &client, "bert", "", &BindingOverrides::default(), &Default::default(),
//! ))?;
//! let run = RunConfig::for_model(&model);
//! let outcome = Run::new(&runtime, &client, model, &dataset, &run).tokenizer(&tokenizer).run()?;
//! let predictions = Predictions::from_decoded(&outcome.predictions);
//! let scores = evaluate::score(&dataset, &predictions, None, &ScoreConfig::default())?;
//! println!("{:?}", scores.metrics);
//! # Ok(())
//! # }
//! ```

#![warn(unreachable_pub)]

// The library's own examples and doc tests name it `bertqa::`, as any user's code does.
extern crate self as bertqa;

pub mod backend;
pub mod client;
pub mod compare;
pub mod data;
pub mod decode;
pub mod error;
pub mod evaluate;
pub mod evaluation;
pub mod features;
pub mod journal;
mod latency;
pub mod logits_io;
pub mod metrics;
pub mod output_file;
pub mod perf;
pub mod pipeline;
pub mod report;
pub mod sha256;
pub mod shard;
pub mod squad;
pub mod tokenize;
pub mod tune;
pub mod types;

pub use backend::binding::{
    Batching, FloatType, InputBinding, InputRole, IntType, OutputBinding, Outputs,
};
pub use backend::tensor::decode_response;
pub use backend::{
    bind, look, prepare_request, proto, Binding, BindingOverrides, ClientConfig, Contract,
    GrpcCall, Header, Infer, InferRequest, Model, NoAnswer, Pool, PoolConfig, Protocol,
    RetryPolicy, RetryStats, Secret, Security, SeqLen, ServerInfo, ServerWindows, SharedMemory,
    TextAnswer, TextBinding, TextOverrides, TextPair, TextReply, TlsConfig, TritonClient,
};
pub use client::{blocking, Answer, AskOptions, Candidate, Client, ClientBuilder, Evaluation};
pub use compare::compare;
pub use error::{Error, Result};
pub use evaluation::{EvalData, EvalHooks, EvalOptions};
pub use pipeline::{
    effective_batch_size, infer_all, AnswerNeeds, InferConfig, InferReport, NoProgress, Padding,
    PaddingGuard, PaddingReport, PartialOutcome, Phases, Run, RunConfig, RunObserver, RunOutcome,
    SharedMemoryReport,
};
pub use tokenize::{BertTokenizer, PretrainedTokenizer, Tokenizer, TokenizerRef};
pub use types::Dataset;
