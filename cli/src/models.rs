//! `bertqa models`: the server, its model repository, and for `--model M` that model's
//! tensors, configuration and the binding bertqa infers. Exit 1 when `--model M` exists
//! but is not ready; 2 when the server cannot be reached or M does not exist. The report
//! is `bertqa::report::models`'s.

use super::args::{BindingArgs, OutputArgs, ServerArgs, TextBindingArgs, MODEL};
use super::common::{runtime, Outcome};
use super::session::Session;
use bertqa::backend::client::{ready_models, ModelIndex};
use bertqa::backend::{Model, TritonClient};
use bertqa::report::models::{ModelJson, ModelRow, ModelsJson, ServerJson};
use bertqa::report::{Format, Render};
use bertqa::Error;

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
    let rt = runtime()?;
    let (report, ready) = rt.block_on(collect(&args))?;
    session.keep(&report);
    // The text names settings; the command names its flags.
    let format = super::common::report_format(args.output.json);
    session.print(|| match format {
        Format::Json => report.render(format),
        Format::Text { .. } => super::flags::name_flags(&report.render(format)),
    })?;
    let names: Vec<&str> = match &args.model {
        Some(m) => vec![m.as_str()],
        None => report
            .models
            .iter()
            .filter(|m| m.state == "READY")
            .map(|m| m.name.as_str())
            .collect(),
    };
    for w in rt.block_on(tune_warnings(&args, &names)) {
        eprintln!("warning: {w}");
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

/// The report, and the names of the ready models when the server lists its models.
async fn collect(args: &Args) -> anyhow::Result<(ModelsJson, Option<Vec<String>>)> {
    let config = super::common::client_config(&args.server)?;
    let client = TritonClient::connect(&config).await?;
    let live = client.server_live().await?;
    let ready = client.server_ready().await?;
    // Kept by the client: the messages of the calls below name the server by it.
    let meta = client.server_info().await?.clone();
    let listing = client.list_models().await?;
    let source = listing.as_ref().map(|l| l.source);
    let index = listing.map(|l| l.models);
    let model = match &args.model {
        None => None,
        Some(name) => Some(collect_model(&client, args, name, index.as_deref()).await?),
    };
    let ready_names = index.as_deref().map(ready_models);
    // The model table: the server's list, or without one `--model`'s alone.
    let models = match (index, &model) {
        (Some(index), _) => index.into_iter().map(ModelRow::from).collect(),
        (None, Some(m)) => vec![ModelRow {
            name: m.name.clone(),
            version: String::new(),
            state: if m.ready { "READY" } else { "UNAVAILABLE" }.into(),
            reason: String::new(),
        }],
        (None, None) => Vec::new(),
    };
    let report = ModelsJson {
        schema: 1,
        server: ServerJson {
            url: args.server.first_url().to_string(),
            protocol: client.protocol(),
            name: meta.name,
            version: meta.version,
            live,
            ready,
            extensions: meta.extensions,
            lists_models: source.is_some(),
            listing: source,
        },
        models,
        model,
    };
    Ok((report, ready_names))
}

/// `--model`'s report; when the server lists no models, its metadata says whether it
/// exists.
async fn collect_model(
    client: &TritonClient,
    args: &Args,
    name: &str,
    index: Option<&[ModelIndex]>,
) -> anyhow::Result<ModelJson> {
    let version = args.model_version.as_str();
    if let Some(index) = index {
        if !index.iter().any(|m| m.name == name) {
            return Err(Error::ModelNotFound {
                url: args.server.first_url().to_string(),
                model: name.to_string(),
                available: Some(ready_models(index)),
            }
            .into());
        }
    }
    let model_ready = client.model_ready(name, version).await?;
    if !model_ready && index.is_some() {
        // Metadata is unavailable for a model that is not ready: report what the
        // server's list says.
        let why = Error::binding(name, "not ready", Vec::new());
        return Ok(ModelJson::not_ready(name, words(&why)));
    }
    let metadata = client.model_metadata(name, version).await?;
    let config = client.model_config_if_any(name, version).await?;
    let binding = Model::infer(
        &metadata,
        config.as_ref(),
        version,
        &super::common::binding_overrides(&args.binding),
        &args.text.overrides(&args.binding),
    );
    Ok(ModelJson::new(
        &metadata,
        config.as_ref(),
        model_ready,
        binding.map_err(|e| words(&e)),
    ))
}

/// The models among `names` left in a candidate configuration by a `tune` that did not
/// finish (their configuration carries its marker). Best effort: a model whose
/// configuration cannot be read is passed over.
async fn tune_warnings(args: &Args, names: &[&str]) -> Vec<String> {
    let Ok(config) = super::common::client_config(&args.server) else {
        return Vec::new();
    };
    let Ok(client) = TritonClient::connect(&config).await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for name in names {
        if let Ok(Some(c)) = client.model_config_if_any(name, "").await {
            if let Some(p) = c.parameters.get(bertqa::tune::config::MARKER) {
                out.push(format!(
                    "model {name:?} is in a candidate configuration of a `bertqa tune` that did \
                     not finish ({})",
                    p.string_value
                ));
            }
        }
    }
    out
}

/// A binding failure as the command line words it (its flags, not the settings' names).
fn words(e: &Error) -> String {
    super::flags::name_flags(&e.to_string())
}
