//! The headings of `--help`, in the order a command's help shows them (their own module,
//! so that every flag group can name one without depending on the others).

/// Input files and the windows built from them.
pub(crate) const INPUT: &str = "Input and windows";
/// The input heading of commands that build no windows (`score`, `merge`).
pub(crate) const FILES: &str = "Input";
pub(crate) const MODEL: &str = "Model";
pub(crate) const SERVER: &str = "Server";
pub(crate) const SECURITY: &str = "Security";
pub(crate) const DECODING: &str = "Decoding";
pub(crate) const SCORING: &str = "Scoring";
pub(crate) const RUN: &str = "Run";
/// The configurations `tune` tries.
pub(crate) const SEARCH: &str = "Search";
/// The server's Prometheus metrics (`perf`, `eval`).
pub(crate) const METRICS: &str = "Server metrics";
/// How `compare` draws its intervals and p-values.
pub(crate) const STATISTICS: &str = "Statistics";
pub(crate) const OUTPUT: &str = "Output";
pub(crate) const GATES: &str = "Gates";
