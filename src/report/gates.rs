//! The gates of `eval` and `compare`, and the flag each report names a gate by.
//!
//! [`FLAGS`] is the one place the library writes command-line flags: a gate's `flag` in
//! eval's and compare's documents (`schema/eval.schema.json`,
//! `schema/compare.schema.json`) is the flag that sets it, whoever made the document (the
//! command, or a program through the Python client), and a failed gate is described by
//! it. Everywhere else the library names settings, and the command writes them as its
//! flags.

/// A gate, by the setting that asks for it ([`Gate::setting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// eval: exact match at least this.
    MinExact,
    /// eval: F1 at least this.
    MinF1,
    /// eval: p99 latency at most this many milliseconds.
    MaxP99Ms,
    /// compare: agreement with the first model at least this.
    MinAgreement,
    /// compare: L∞ of the logit differences at most this.
    MaxLogitDiff,
    /// compare: F1 at most this many points below the first model's.
    MaxF1Drop,
    /// compare: no score's difference significantly below 0.
    FailOnSignificantDrop,
    /// compare: at most this fraction of the questions changed correctness.
    MaxFlipRate,
    /// compare: the changed answers concentrate in no slice.
    FailIfConcentrated,
}

/// Each gate, its setting, and the flag the reports name it by; in [`Gate`]'s order.
pub const FLAGS: [(Gate, &str, &str); 9] = [
    (Gate::MinExact, "min_exact", "--min-exact"),
    (Gate::MinF1, "min_f1", "--min-f1"),
    (Gate::MaxP99Ms, "max_p99_ms", "--max-p99-ms"),
    (Gate::MinAgreement, "min_agreement", "--min-agreement"),
    (Gate::MaxLogitDiff, "max_logit_diff", "--max-logit-diff"),
    (Gate::MaxF1Drop, "max_f1_drop", "--max-f1-drop"),
    (
        Gate::FailOnSignificantDrop,
        "fail_on_significant_drop",
        "--fail-on-significant-drop",
    ),
    (Gate::MaxFlipRate, "max_flip_rate", "--max-flip-rate"),
    (
        Gate::FailIfConcentrated,
        "fail_if_concentrated",
        "--fail-if-concentrated",
    ),
];

impl Gate {
    /// The setting (compare's: a field of [`crate::report::compare::Gates`]).
    pub fn setting(self) -> &'static str {
        FLAGS[self as usize].1
    }

    /// The flag the reports name it by (`flag` in the documents).
    pub fn flag(self) -> &'static str {
        FLAGS[self as usize].2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_gate_has_its_row() {
        for (i, (gate, setting, flag)) in FLAGS.iter().enumerate() {
            assert_eq!(*gate as usize, i);
            assert_eq!(gate.setting(), *setting);
            // The flag is the setting as a flag.
            assert_eq!(*flag, format!("--{}", setting.replace('_', "-")));
        }
    }
}
