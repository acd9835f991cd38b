//! What the Python package (python/) takes of the command line besides the library:
//! the exit reason and sentence the command gives an error ([`Reason`]), the command's
//! checks of perf's and tune's settings and their runs (one copy for both), the flags'
//! names and help (the functions' docstrings), and small pieces of the command's
//! wording. Ctrl-C is the host's: it cancels a run through a token, as the binary's
//! first interrupt does.

use tokio_util::sync::CancellationToken;

pub use super::errors::Reason;
use super::{errors, Cli};

/// The exit reason the command line gives a library error: what a host raises for it.
pub fn reason_of(e: &bertqa::Error) -> Reason {
    errors::library_reason(e)
}

/// How the command says a library error fails a run: its exit reason and the sentence
/// after `error: ` (an incomplete evaluation as `eval` says it: the summary, the reason
/// of its cause).
pub fn failure(e: bertqa::Error) -> (Reason, String) {
    let e = match e {
        bertqa::Error::Incomplete { summary, cause } => errors::Classified::error(
            cause.as_deref().map(errors::library_reason),
            super::flags::name_flags(&summary),
        ),
        e => anyhow::Error::from(e),
    };
    let line = errors::render(&e, false, &[]);
    let sentence = line.strip_prefix("error: ").unwrap_or(&line).to_string();
    (errors::reason(&e), sentence)
}

/// A library message (an error's, a warning's) as the command writes it: each setting
/// named as the flag that sets it.
pub fn name_flags(text: &str) -> String {
    super::flags::name_flags(text)
}

/// The TLS and headers of the security flags' values (`header`: `KEY:VALUE`,
/// `header_env`: `KEY=ENVVAR`, `header_file`: `KEY=PATH`), checked as the command checks
/// them.
pub fn security(
    tls: bertqa::backend::TlsConfig,
    ssl: bool,
    header: Vec<String>,
    header_env: Vec<String>,
    header_file: Vec<std::path::PathBuf>,
) -> bertqa::Result<bertqa::backend::Security> {
    super::security::security(&super::security::SecurityArgs {
        ssl,
        ssl_root_cert: tls.root_cert,
        ssl_client_cert: tls.client_cert,
        ssl_client_key: tls.client_key,
        ssl_target_name: tls.target_name,
        headers: header.iter().map(bertqa::backend::Secret::new).collect(),
        header_env,
        header_file,
    })
}

/// A `--models` entry as compare reads it: (name, URL (`default_url` without one),
/// authority).
pub fn split_model(
    spec: &str,
    default_url: &str,
) -> Result<(String, String, Option<String>), String> {
    super::compare::split_model(spec, default_url).map_err(|e| e.to_string())
}

/// Holds `dir` (created if missing) for one run, as the command does, until the value
/// is dropped: a second run into it fails naming the first.
pub fn claim_output_dir(dir: &std::path::Path) -> Result<Box<dyn std::any::Any + Send>, String> {
    super::outdir::OutputDir::claim(dir)
        .map(|d| Box::new(d) as Box<dyn std::any::Any + Send>)
        .map_err(|e| super::flags::name_flags(&e.to_string()))
}

/// `eval`'s hooks: the progress bar on stderr (unless `quiet`, or off a terminal), the
/// library's words with the settings named as flags.
pub fn eval_hooks(quiet: bool) -> std::sync::Arc<dyn bertqa::EvalHooks> {
    std::sync::Arc::new(super::eval::Hooks::new(quiet))
}

pub use super::args::{MeasureArgs, MetricsArgs};
pub use super::perf::PerfSettings;
pub use super::tune::{Checked as TuneChecked, TuneSettings};

/// How the command says an error fails a run: its exit reason and the sentence after
/// `error: `.
fn classify(e: anyhow::Error) -> (Reason, String) {
    let line = errors::render(&e, false, &[]);
    let sentence = line.strip_prefix("error: ").unwrap_or(&line).to_string();
    (errors::reason(&e), sentence)
}

/// `perf`'s checks of its settings (before the data is read): the sweep.
pub fn perf_check(settings: &PerfSettings) -> Result<bertqa::perf::PerfConfig, (Reason, String)> {
    settings.check().map_err(classify)
}

/// `perf`'s sweep `sweep` ([`perf_check`]'s) of `client` over `dataset` (named `data`),
/// as the command runs it (its files, its lines on stderr unless `settings.quiet`): the
/// document `perf --json` prints. Cancelling `stop` stops it as the binary's first
/// Ctrl-C does.
pub fn perf(
    settings: &PerfSettings,
    sweep: bertqa::perf::PerfConfig,
    client: &bertqa::ClientBuilder,
    dataset: &bertqa::types::Dataset,
    data: String,
    stop: CancellationToken,
) -> Result<serde_json::Value, (Reason, String)> {
    let report = settings
        .sweep(sweep, client, dataset, data, Some(stop))
        .map_err(classify)?;
    Ok(bertqa::report::json::to_value(
        &bertqa::report::Render::json(&report),
    ))
}

/// `tune`'s checks of its settings (before the data is read); makes the output
/// directory.
pub fn tune_check(settings: &TuneSettings) -> Result<TuneChecked, (Reason, String)> {
    settings.check().map_err(classify)
}

/// `tune`'s search of `checked` ([`tune_check`]'s) for `client`'s model over `dataset`
/// (named `data`), as the command runs it (tune.json and its files, its lines on stderr
/// unless `settings.quiet`): tune.json's document. Cancelling `stop` stops it as the
/// binary's first Ctrl-C does.
pub fn tune(
    settings: &TuneSettings,
    checked: TuneChecked,
    client: bertqa::ClientBuilder,
    dataset: &bertqa::types::Dataset,
    data: String,
    stop: CancellationToken,
) -> Result<serde_json::Value, (Reason, String)> {
    let mut document = None;
    settings
        .tune(checked, client, dataset, data, Some(stop), |report| {
            document = Some(bertqa::report::json::to_value(
                &bertqa::tune::report::render_json(report),
            ));
            Ok(())
        })
        .map_err(classify)?;
    Ok(document.expect("the report is shown before tune returns"))
}

/// One flag of a command, as a host names its options (python/bertqa/_api.py).
#[derive(Debug, Clone)]
pub struct Flag {
    /// The long name, without `--` (`min-exact`).
    pub long: String,
    /// It takes a value (else it is a switch).
    pub takes_value: bool,
    /// It may be given several times.
    pub repeated: bool,
    /// Its default, as the help shows it.
    pub default: Option<String>,
    /// The values it accepts, when they are a list.
    pub choices: Vec<String>,
    /// Its help line.
    pub help: String,
    /// Hidden from the command's help.
    pub hidden: bool,
}

/// The flags of `command` (`eval`, `ask`, ...), in the order of its help; empty for
/// an unknown command.
pub fn flags(command: &str) -> Vec<Flag> {
    use clap::CommandFactory as _;
    let mut cli = Cli::command();
    let Some(sub) = cli.find_subcommand_mut(command) else {
        return Vec::new();
    };
    let sub = sub.clone();
    sub.get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            if long == "help" {
                return None;
            }
            let action = a.get_action();
            let defaults: Vec<String> = a
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            Some(Flag {
                long: long.to_string(),
                takes_value: action.takes_values(),
                repeated: matches!(action, clap::ArgAction::Append),
                default: (!defaults.is_empty() && action.takes_values())
                    .then(|| defaults.join(",")),
                choices: a
                    .get_possible_values()
                    .iter()
                    .filter(|p| !p.is_hide_set())
                    .map(|p| p.get_name().to_string())
                    .collect(),
                help: a.get_help().map(|h| h.to_string()).unwrap_or_default(),
                hidden: a.is_hide_set(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_are_the_commands() {
        let eval = flags("eval");
        let find = |long: &str| eval.iter().find(|f| f.long == long).unwrap();
        assert!(find("min-f1").takes_value && !find("resume").takes_value);
        assert_eq!(find("doc-stride").default.as_deref(), Some("128"));
        assert!(find("data").repeated);
        assert!(flags("no-such-command").is_empty());
    }
}
