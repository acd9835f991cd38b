//! The binary names the flags. Library messages name a setting the way its configuration
//! does, in backticks (`` `doc_stride` ``, `` `root_cert` ``, `` `SharedMemory::System` ``);
//! [`name_flags`] writes each as the flag that sets it, so that a user of `bertqa` reads
//! `--doc-stride` where a user of the library reads `` `doc_stride` ``. A setting of one
//! command rather than of the library is named `` `command.setting` `` (`` `eval.resume` ``,
//! written `eval --resume`). Applied to the library's errors, warnings and notes, and to
//! the text of the reports that name settings (`models`, `perf`, `tune`). The flags of
//! eval's and compare's gates are the library's own (`bertqa::report::gates`).

/// Each setting as library messages write it, and the flag that sets it.
const FLAGS: &[(&str, &str)] = &[
    // Windows (features::FeatureConfig).
    ("`max_seq_length`", "--max-seq-length"),
    ("`doc_stride`", "--doc-stride"),
    ("`max_query_length`", "--max-query-length"),
    // Tokenizer.
    ("`vocab`", "--vocab"),
    ("`tokenizer` does not apply", "--tokenizer does not apply"),
    ("`tokenizer`", "`--tokenizer`"),
    ("`postprocess = ", "`--postprocess "),
    ("`lower_case = false`", "--no-lower-case"),
    // Decoding and scoring.
    ("`version_2_with_negative`", "--version-2-with-negative"),
    // The binding's overrides (backend::BindingOverrides, backend::text::TextOverrides).
    ("`input_ids`", "--input-ids"),
    ("`segment_ids`", "--segment-ids"),
    ("`input_mask`", "--input-mask"),
    ("`start_logits`", "--start-logits"),
    ("`end_logits`", "--end-logits"),
    ("`question_input`", "--question-input"),
    ("`context_input`", "--context-input"),
    ("`answer_output`", "--answer-output"),
    ("`offsets_output`", "--offsets-output"),
    // Requests (pipeline::InferConfig, backend::{PoolConfig, RetryPolicy}).
    ("`batch_size`", "--batch-size"),
    ("`concurrency`", "--concurrency"),
    ("`probe = false`", "--dynamic-seq-len"),
    ("`Padding::Fixed`", "--fixed-seq-len"),
    ("`SharedMemory::System`", "--shared-memory system"),
    ("`wait_ready`", "--wait-ready"),
    ("`retries`", "--retries"),
    // The protocol (backend::Protocol).
    ("`Protocol::Grpc`", "--protocol grpc"),
    ("`Protocol::Http`", "--protocol http"),
    ("`protocol`", "--protocol"),
    ("`transport = GrpcCall::Stream`", "--transport stream"),
    ("`transport`", "--transport"),
    ("`authority`", "--authority"),
    // TLS (backend::TlsConfig).
    ("`tls`", "--ssl"),
    ("`root_cert`", "--ssl-root-cert"),
    ("`client_cert`", "--ssl-client-cert"),
    ("`client_key`", "--ssl-client-key"),
    ("`target_name`", "--ssl-target-name"),
    // The load sweep (perf::PerfConfig).
    ("`max_trials`", "--max-trials"),
    ("`Window::Count`", "--measurement-request-count"),
    ("`max_inflight`", "--max-inflight"),
    ("`export_input_data`", "--export-input-data"),
    // The metrics read (metrics::MetricsOptions).
    ("`metrics_url`", "--metrics-url"),
    ("`no_metrics`", "--no-metrics"),
    // The journal and the saved logits.
    ("`resume`", "--resume"),
    ("`shard`", "--shard"),
    ("`save_logits`", "--save-logits"),
    // tune (tune::Tune).
    ("`remeasure`", "--remeasure"),
    ("`keep_best`", "--keep-best"),
    ("`step`", "--step"),
    (
        "with `control_url` (e.g. `control_url` ",
        "with --control-url (e.g. --control-url ",
    ),
    // Settings of one command, not of the library: `command.setting`.
    ("`eval.resume`", "eval --resume"),
    // A merge's shard was not one: `eval --shard` is the flag that was missing.
    ("no `eval.shard` I/N", "no --shard I/N"),
    ("`eval.output_dir`", "eval --output-dir"),
    ("`compare.output_dir`", "compare --output-dir"),
    // `data` and `model` name other things too (serde's "missing field `data`"): only
    // the phrases library messages and reports name the settings in.
    ("an earlier `data` file", "an earlier --data file"),
    ("the windows `data` and", "the windows --data and"),
    ("name one with `model`", "name one with --model"),
];

/// `text` (a library error, warning or note) with every setting it names written as
/// its flag.
pub(crate) fn name_flags(text: &str) -> String {
    let mut out = text.to_string();
    if out.contains('`') {
        for (setting, flag) in FLAGS {
            out = out.replace(setting, flag);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_become_flags_and_nothing_else_changes() {
        assert_eq!(
            name_flags("`max_seq_length` 67 leaves no room: it must exceed `max_query_length` 64"),
            "--max-seq-length 67 leaves no room: it must exceed --max-query-length 64"
        );
        assert_eq!(
            name_flags("use `tls` (with `root_cert` FILE)"),
            "use --ssl (with --ssl-root-cert FILE)"
        );
        // Tensor names are quoted, not backticked: a tensor called input_ids stays.
        let tensor = "model \"m\", tensor \"input_ids\": expected INT64";
        assert_eq!(name_flags(tensor), tensor);
        assert_eq!(name_flags("`unknown` stays"), "`unknown` stays");
        assert_eq!(
            name_flags("finish it with `eval.resume` first"),
            "finish it with eval --resume first"
        );
        assert_eq!(
            name_flags("(already in an earlier `data` file); name one with `model`"),
            "(already in an earlier --data file); name one with --model"
        );
        assert_eq!(
            name_flags("left loaded (`keep_best`); a larger `remeasure`"),
            "left loaded (--keep-best); a larger --remeasure"
        );
        // A text model refuses the settings that shape tokens, each named as its flag.
        for (setting, flag) in [
            ("`doc_stride`", "--doc-stride"),
            ("`max_seq_length`", "--max-seq-length"),
            ("`export_input_data`", "--export-input-data"),
            ("`Padding::Fixed`", "--fixed-seq-len"),
            ("`vocab`", "--vocab"),
            ("`tokenizer`", "--tokenizer"),
            ("`lower_case = false`", "--no-lower-case"),
            ("`input_mask`", "--input-mask"),
        ] {
            assert_eq!(
                name_flags(&format!(
                    "{setting} does not apply: model \"qa-text\" takes text (x)"
                )),
                format!("{flag} does not apply: model \"qa-text\" takes text (x)")
            );
        }
        assert_eq!(
            name_flags(
                "with `control_url` (e.g. `control_url` localhost:8000), or use `Protocol::Http`"
            ),
            "with --control-url (e.g. --control-url localhost:8000), or use --protocol http"
        );
        assert_eq!(
            name_flags("`step` s: model \"m\"; name the step to tune with `step` (its steps"),
            "--step s: model \"m\"; name the step to tune with --step (its steps"
        );
        // Only in the library's phrases: serde's words stay.
        let serde = "missing field `data`; missing field `model`";
        assert_eq!(name_flags(serde), serde);
    }

    /// Every flag of the table exists on some command.
    #[test]
    fn every_flag_is_a_flag_of_bertqa() {
        use clap::CommandFactory;
        let cli = super::super::Cli::command();
        let longs: Vec<String> = cli
            .get_subcommands()
            .flat_map(|c| c.get_arguments())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        for (_, flag) in FLAGS {
            let name = flag
                .trim_matches('`')
                .split(' ')
                .find(|w| w.starts_with("--"))
                .unwrap();
            assert!(longs.iter().any(|l| l == name), "{flag}");
        }
    }
}
