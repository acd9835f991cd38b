//! `bertqa models`: the server, its model repository, and for `--model M` that model's
//! tensors, configuration and the binding bertqa infers. Exit 1 when `--model M` exists
//! but is not ready; 2 when the server cannot be reached or M does not exist. The report
//! is `bertqa::report::models::inspect`'s.

use super::args::{BindingArgs, OutputArgs, ServerArgs, TextBindingArgs, MODEL};
use super::common::{binding_overrides, client_config, runtime, Outcome};
use super::flags::name_flags;
use super::session::Session;
use bertqa::report::models::{inspect, Inspection};
use bertqa::report::{Format, Render};

/// Server, model repository, and one model's tensors and inferred binding.
#[derive(Debug, clap::Args)]
// No progress bar to silence.
#[command(mut_arg("quiet", |a| a.hide(true)))]
pub struct Args {
    /// Show this model's tensors, configuration and inferred binding
    #[arg(long, help_heading = MODEL)]
    pub model: Option<String>,
    /// Model version (default: the server's choice)
    #[arg(long, default_value = "", hide_default_value = true, help_heading = MODEL)]
    pub model_version: String,
    #[command(flatten)]
    pub binding: BindingArgs,
    #[command(flatten)]
    pub text: TextBindingArgs,
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub(crate) fn run(args: Args, session: &mut Session) -> anyhow::Result<Outcome> {
    let server = client_config(&args.server)?;
    let (binding, text) = (
        binding_overrides(&args.binding),
        args.text.overrides(&args.binding),
    );
    let asked = inspect(
        &server,
        args.model.as_deref(),
        &args.model_version,
        &binding,
        &text,
    );
    let Inspection {
        mut report,
        ready,
        left_by_tune,
    } = runtime()?.block_on(asked)?;
    // The report names settings; the command names its flags.
    report.map_messages(name_flags);
    let format = session.format(args.output.json);
    session.print(|| match format {
        Format::Json => report.render(format),
        Format::Text { .. } => name_flags(&report.render(format)),
    })?;
    for (name, marker) in left_by_tune {
        eprintln!(
            "warning: model {name:?} is in a candidate configuration of a `bertqa tune` that did \
             not finish ({marker})"
        );
    }
    Ok(match &report.model {
        Some(m) if !m.ready => Outcome::GateFailed(vec![format!(
            "model {:?} is not ready (ready models: {})",
            m.name,
            match ready {
                Some(ready) => ready.join(", "),
                None => "not listed by the server".into(),
            }
        )]),
        _ => Outcome::Success,
    })
}
