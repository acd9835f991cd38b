//! `bertqa models`: the server, its model repository, and for `--model M` that model's
//! tensors, configuration and the binding bertqa infers. Exit 1 when `--model M` exists
//! but is not ready; 2 when the server cannot be reached or M does not exist.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::args::{BindingArgs, OutputArgs, ServerArgs, TextBindingArgs, MODEL};
use super::common::{print_stdout, runtime, Bound, Outcome};
use bertqa::backend::client::{ready_models, ModelIndex};
use bertqa::backend::proto::model_instance_group::Kind;
use bertqa::backend::proto::{model_config, ModelConfig, ModelMetadataResponse};
use bertqa::backend::text::{takes_text, Contract, TextBinding};
use bertqa::backend::{Binding, TritonClient};
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

/// What `models` found, rendered as text or JSON.
struct Report {
    url: String,
    protocol: bertqa::backend::Protocol,
    name: String,
    version: String,
    live: bool,
    ready: bool,
    extensions: Vec<String>,
    /// `None`: the server does not list its models (no repository index).
    index: Option<Vec<ModelIndex>>,
    model: Option<ModelReport>,
}

struct ModelReport {
    metadata: ModelMetadataResponse,
    /// `None`: the server has no model configuration (Triton's extension).
    config: Option<ModelConfig>,
    ready: bool,
    binding: Result<Bound, Error>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    let rt = runtime()?;
    let report = rt.block_on(collect(&args))?;
    let text = if args.output.json {
        let mut s = serde_json::to_string_pretty(&to_json(&report))?;
        s.push('\n');
        s
    } else {
        render_text(&report)
    };
    print_stdout(&text)?;
    Ok(match &report.model {
        Some(m) if !m.ready => Outcome::GateFailed(vec![format!(
            "model {:?} is not ready (ready models: {})",
            m.metadata.name,
            match &report.index {
                Some(index) => ready_models(index).join(", "),
                None => "not listed by the server".into(),
            }
        )]),
        _ => Outcome::Success,
    })
}

async fn collect(args: &Args) -> anyhow::Result<Report> {
    let config = super::common::client_config(&args.server)?;
    let client = TritonClient::connect(&config).await?;
    let live = client.server_live().await?;
    let ready = client.server_ready().await?;
    // Kept by the client: the messages of the calls below name the server by it.
    let meta = client.server_info().await?.clone();
    let index = client.list_models().await?;
    let model = match &args.model {
        None => None,
        Some(name) => Some(collect_model(&client, args, name, index.as_deref()).await?),
    };
    Ok(Report {
        url: args.server.first_url().to_string(),
        protocol: client.protocol(),
        name: meta.name,
        version: meta.version,
        live,
        ready,
        extensions: meta.extensions,
        index,
        model,
    })
}

/// `--model`'s report; without a repository index, its metadata says whether it exists.
async fn collect_model(
    client: &TritonClient,
    args: &Args,
    name: &str,
    index: Option<&[ModelIndex]>,
) -> anyhow::Result<ModelReport> {
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
        // repository says.
        let metadata = ModelMetadataResponse {
            name: name.to_string(),
            ..Default::default()
        };
        return Ok(ModelReport {
            metadata,
            config: None,
            ready: false,
            binding: Err(Error::Binding {
                model: name.to_string(),
                message: "not ready".into(),
                tensors: Vec::new(),
            }),
        });
    }
    let metadata = client.model_metadata(name, version).await?;
    let config = client.model_config_if_any(name, version).await?;
    let tokens = super::common::binding_overrides(&args.binding);
    let binding = if takes_text(&metadata) {
        let overrides = args.text.overrides(&args.binding);
        TextBinding::infer(&metadata, config.as_ref(), version, &overrides).map(Bound::Text)
    } else {
        Binding::infer(&metadata, config.as_ref(), version, &tokens).map(Bound::Tokens)
    };
    Ok(ModelReport {
        metadata,
        config,
        ready: model_ready,
        binding,
    })
}

fn kind_name(kind: i32) -> &'static str {
    Kind::try_from(kind).map_or("KIND_UNKNOWN", |k| k.as_str_name())
}

fn dynamic_batching(c: &ModelConfig) -> Value {
    match &c.scheduling_choice {
        Some(model_config::SchedulingChoice::DynamicBatching(d)) => json!({
            "preferred_batch_size": d.preferred_batch_size,
            "max_queue_delay_us": d.max_queue_delay_microseconds,
            "preserve_ordering": d.preserve_ordering,
        }),
        Some(model_config::SchedulingChoice::EnsembleScheduling(_)) | None => Value::Null,
    }
}

/// An ensemble's steps, in order: each composing model (`null` when not an ensemble).
fn ensemble_steps(c: &ModelConfig) -> Value {
    match &c.scheduling_choice {
        Some(model_config::SchedulingChoice::EnsembleScheduling(e)) => json!(e
            .step
            .iter()
            .map(|s| json!({"model": s.model_name, "version": s.model_version}))
            .collect::<Vec<_>>()),
        _ => Value::Null,
    }
}

/// The model's platform: the configuration's backend, else the metadata's platform.
fn platform(m: &ModelReport) -> &str {
    match &m.config {
        Some(c) if !c.backend.is_empty() => &c.backend,
        _ => &m.metadata.platform,
    }
}

/// The rows of the model table: the repository's, or without one `--model`'s alone.
fn rows(r: &Report) -> Vec<ModelIndex> {
    match (&r.index, &r.model) {
        (Some(index), _) => index.clone(),
        (None, Some(m)) => vec![ModelIndex {
            name: m.metadata.name.clone(),
            version: String::new(),
            state: if m.ready { "READY" } else { "UNAVAILABLE" }.into(),
            reason: String::new(),
        }],
        (None, None) => Vec::new(),
    }
}

fn to_json(r: &Report) -> Value {
    let models: Vec<Value> = rows(r)
        .iter()
        .map(
            |m| json!({"name": m.name, "version": m.version, "state": m.state, "reason": m.reason}),
        )
        .collect();
    let model = r.model.as_ref().map(|m| {
        let tensors = |ts: &[bertqa::backend::proto::model_metadata_response::TensorMetadata]| {
            ts.iter()
                .map(|t| json!({"name": t.name, "datatype": t.datatype, "shape": t.shape}))
                .collect::<Vec<_>>()
        };
        let config = m.config.clone().unwrap_or_default();
        json!({
            "name": m.metadata.name,
            "ready": m.ready,
            "versions": m.metadata.versions,
            "platform": platform(m),
            "configuration": m.config.is_some(),
            "max_batch_size": config.max_batch_size,
            "dynamic_batching": dynamic_batching(&config),
            "ensemble_steps": ensemble_steps(&config),
            "instance_groups": config.instance_group.iter().map(|g| json!({
                "name": g.name, "kind": kind_name(g.kind), "count": g.count, "gpus": g.gpus,
            })).collect::<Vec<_>>(),
            "inputs": tensors(&m.metadata.inputs),
            "outputs": tensors(&m.metadata.outputs),
            "binding": match &m.binding {
                Ok(Bound::Tokens(b)) => serde_json::to_value(b).unwrap_or(Value::Null),
                Ok(Bound::Text(b)) => serde_json::to_value(b).unwrap_or(Value::Null),
                Err(_) => Value::Null,
            },
            "contract": match &m.binding {
                Ok(Bound::Text(b)) => Value::from(b.contract.name()),
                _ => Value::Null,
            },
            "binding_error": match &m.binding {
                Ok(_) => Value::Null,
                Err(e) => Value::String(super::flags::name_flags(&e.to_string())),
            },
        })
    });
    json!({
        "schema": 1,
        "server": {
            "url": r.url, "protocol": r.protocol.as_str(), "name": r.name, "version": r.version, "live": r.live,
            "ready": r.ready, "extensions": r.extensions, "lists_models": r.index.is_some(),
        },
        "models": models,
        "model": model,
    })
}

fn render_text(r: &Report) -> String {
    let mut s = String::new();
    let yes = |b: bool| if b { "yes" } else { "no" };
    let _ = writeln!(
        s,
        "server   {} {} at {} over {}",
        r.name,
        r.version,
        r.url,
        bertqa::report::protocol_words(r.protocol)
    );
    let _ = writeln!(s, "live     {}   ready {}", yes(r.live), yes(r.ready));
    let _ = writeln!(s, "extensions {}", r.extensions.join(" "));
    let _ = writeln!(s);
    let rows = rows(r);
    if r.index.is_none() {
        let _ = writeln!(
            s,
            "the server does not list its models (no repository index){}",
            if r.model.is_some() {
                ""
            } else {
                "; name one with --model"
            }
        );
    }
    if !rows.is_empty() {
        let w = rows.iter().map(|m| m.name.len()).max().unwrap_or(5).max(5);
        let _ = writeln!(
            s,
            "{:<w$}  {:>7}  {:<11}  REASON",
            "MODEL", "VERSION", "STATE"
        );
        for m in &rows {
            let _ = writeln!(
                s,
                "{:<w$}  {:>7}  {:<11}  {}",
                m.name, m.version, m.state, m.reason
            );
        }
    }
    if let Some(m) = &r.model {
        let _ = writeln!(s);
        let _ = writeln!(s, "model    {}  (ready: {})", m.metadata.name, yes(m.ready));
        if !m.ready {
            return s;
        }
        let _ = writeln!(s, "versions {}", m.metadata.versions.join(", "));
        let _ = writeln!(s, "platform {}", platform(m));
        let Some(config) = &m.config else {
            let _ = writeln!(
                s,
                "configuration  not served (no model configuration): batching as the metadata's shapes say"
            );
            tensors_and_binding(&mut s, m);
            return s;
        };
        let _ = writeln!(s, "max batch size  {}", config.max_batch_size);
        match &config.scheduling_choice {
            Some(model_config::SchedulingChoice::DynamicBatching(d)) => {
                let _ = writeln!(
                    s,
                    "dynamic batching  on (max queue delay {} us, preferred sizes {:?})",
                    d.max_queue_delay_microseconds, d.preferred_batch_size
                );
            }
            Some(model_config::SchedulingChoice::EnsembleScheduling(e)) => {
                let steps: Vec<&str> = e.step.iter().map(|s| s.model_name.as_str()).collect();
                let _ = writeln!(s, "ensemble  steps {}", steps.join(" -> "));
            }
            None => {
                let _ = writeln!(s, "dynamic batching  off");
            }
        }
        for g in &config.instance_group {
            let _ = writeln!(
                s,
                "instance group  {} x{} {}",
                kind_name(g.kind),
                g.count,
                g.name
            );
        }
        tensors_and_binding(&mut s, m);
    }
    s
}

/// The model's tensors and the binding bertqa infers.
fn tensors_and_binding(s: &mut String, m: &ModelReport) {
    {
        let _ = writeln!(s);
        for (kind, ts) in [
            ("input ", &m.metadata.inputs),
            ("output", &m.metadata.outputs),
        ] {
            for t in ts {
                let _ = writeln!(s, "{kind}  {:<16} {:<6} {:?}", t.name, t.datatype, t.shape);
            }
        }
        let _ = writeln!(s);
        match &m.binding {
            Ok(Bound::Text(b)) => text_binding(s, b),
            Ok(Bound::Tokens(b)) => {
                let _ = writeln!(s, "binding (sequence length {}):", b.seq_len);
                if b.batching == bertqa::Batching::Undeclared {
                    let _ = writeln!(
                        s,
                        "  batch        the leading -1, not declared by the server: {} features \
                         per request unless --batch-size says otherwise",
                        b.default_batch_size()
                    );
                }
                for i in &b.inputs {
                    let _ = writeln!(
                        s,
                        "  {:<12} <- {} ({})",
                        i.role.as_str(),
                        i.name,
                        i.datatype.wire()
                    );
                }
                match &b.outputs {
                    bertqa::backend::binding::Outputs::Split { start, end } => {
                        let _ = writeln!(
                            s,
                            "  {:<12} -> {} ({})",
                            "start_logits",
                            start.name,
                            start.datatype.wire()
                        );
                        let _ = writeln!(
                            s,
                            "  {:<12} -> {} ({})",
                            "end_logits",
                            end.name,
                            end.datatype.wire()
                        );
                    }
                    bertqa::backend::binding::Outputs::Stacked { logits } => {
                        let _ = writeln!(
                            s,
                            "  {:<12} -> {} ({}, [batch, seq, 2]: start = 0, end = 1)",
                            "logits",
                            logits.name,
                            logits.datatype.wire()
                        );
                    }
                }
            }
            Err(e) => {
                let _ = writeln!(s, "binding: {}", super::flags::name_flags(&e.to_string()));
            }
        }
    }
}

/// A text model's binding: its inputs, and the contract its outputs follow.
fn text_binding(s: &mut String, b: &TextBinding) {
    let batch = match b.max_batch_size {
        0 => "one question per request".to_string(),
        n => format!("up to {n} questions per request"),
    };
    let _ = writeln!(
        s,
        "binding (text: the {} contract, {batch}):",
        b.contract.name()
    );
    let _ = writeln!(s, "  {:<12} <- {} (BYTES)", "question", b.question);
    let _ = writeln!(s, "  {:<12} <- {} (BYTES)", "context", b.context);
    let row = |s: &mut String, role: &str, name: Option<&str>| {
        let _ = writeln!(s, "  {role:<12} -> {}", name.unwrap_or("(not given)"));
    };
    match &b.contract {
        Contract::Answer {
            answer,
            score,
            no_answer,
            start,
            end,
        } => {
            row(s, "answer", Some(answer));
            row(s, "score", score.as_deref());
            let no = no_answer.as_ref().map(|n| {
                format!(
                    "{} ({})",
                    n.name,
                    if n.probability {
                        "a probability"
                    } else {
                        "a score"
                    }
                )
            });
            row(s, "no answer", no.as_deref());
            row(s, "start char", start.as_deref());
            row(s, "end char", end.as_deref());
        }
        Contract::Logits {
            start_logits,
            end_logits,
            offsets,
        } => {
            row(s, "start_logits", Some(start_logits));
            row(s, "end_logits", Some(end_logits));
            row(s, "offsets", Some(offsets));
        }
    }
}
