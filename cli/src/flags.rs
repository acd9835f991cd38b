//! The binary names the flags. Library messages name a setting the way its configuration
//! does, in backticks (`` `doc_stride` ``, `` `root_cert` ``, `` `SharedMemory::System` ``);
//! [`name_flags`] writes each as the flag that sets it, so that a user of `bertqa` reads
//! `--doc-stride` where a user of the library reads `` `doc_stride` ``.

/// Each setting as library messages write it, and the flag that sets it.
const FLAGS: &[(&str, &str)] = &[
    // Windows (features::FeatureConfig).
    ("`max_seq_length`", "--max-seq-length"),
    ("`doc_stride`", "--doc-stride"),
    ("`max_query_length`", "--max-query-length"),
    // Tokenizer.
    ("`vocab`", "--vocab"),
    ("`tokenizer`", "`--tokenizer`"),
    ("`postprocess = ", "`--postprocess "),
    ("`lower_case = false`", "--no-lower-case"),
    // Decoding and scoring.
    ("`version_2_with_negative`", "--version-2-with-negative"),
    // The binding's overrides (backend::BindingOverrides).
    ("`input_ids`", "--input-ids"),
    ("`segment_ids`", "--segment-ids"),
    ("`input_mask`", "--input-mask"),
    ("`start_logits`", "--start-logits"),
    ("`end_logits`", "--end-logits"),
    // Requests (pipeline::InferConfig, backend::{PoolConfig, RetryPolicy}).
    ("`batch_size`", "--batch-size"),
    ("`probe = false`", "--dynamic-seq-len"),
    ("`Padding::Fixed`", "--fixed-seq-len"),
    ("`SharedMemory::System`", "--shared-memory system"),
    ("`wait_ready`", "--wait-ready"),
    ("`retries`", "--retries"),
    // The protocol (backend::Protocol).
    ("`Protocol::Grpc`", "--protocol grpc"),
    ("`Protocol::Http`", "--protocol http"),
    ("`protocol`", "--protocol"),
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
    // The journal.
    ("`resume`", "--resume"),
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
            let name = flag.trim_matches('`').split(' ').next().unwrap();
            assert!(longs.iter().any(|l| l == name), "{flag}");
        }
    }
}
