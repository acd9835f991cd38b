//! The headings of `--help`, in the order a command's help shows them (their own module,
//! so that every flag group can name one without depending on the others).

/// Input files and the windows built from them.
pub const INPUT: &str = "Input and windows";
/// The input heading of commands that build no windows (`score`, `merge`).
pub const FILES: &str = "Input";
pub const MODEL: &str = "Model";
pub const SERVER: &str = "Server";
pub const SECURITY: &str = "Security";
pub const DECODING: &str = "Decoding";
pub const SCORING: &str = "Scoring";
pub const RUN: &str = "Run";
pub const OUTPUT: &str = "Output";
pub const GATES: &str = "Gates";
