//! bertqa: BERT extractive question answering (SQuAD) against NVIDIA Triton Inference
//! Server.
//!
//! The pipeline, one stage per module, data flowing one way:
//!
//! ```text
//! squad (read) → tokenize → features (windows) → backend (Triton gRPC)
//!       → decode (spans, final text) → evaluate (EM/F1) → report
//! ```
//!
//! Every stage but [`backend`] is plain synchronous Rust over the types of [`types`].
//! The library never parses flags, prints or exits; the `bertqa` binary (src/main.rs and
//! its `cli` modules, built with the default `cli` feature) does that. Messages name a
//! setting as its configuration does, in backticks (`` `doc_stride` ``,
//! `` `root_cert` ``), never as a command-line flag; the binary writes them as its flags.
//!
//! A `§N.M` in a comment cites docs/algorithm.md, where the reference rules this code
//! reproduces (and their traps) are written down.

pub mod backend;
pub mod decode;
pub mod error;
pub mod evaluate;
pub mod features;
pub mod journal;
mod latency;
pub mod logits_io;
pub mod output_file;
pub mod perf;
pub mod pipeline;
pub mod report;
pub mod sha256;
pub mod shard;
pub mod squad;
pub mod tokenize;
pub mod types;

pub use error::{Error, Result};
