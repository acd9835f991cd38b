//! `bertqa models --json` (`schema/models.schema.json`) and the text `models` prints: the
//! server, the models it lists, and for `--model M` that model's tensors, configuration
//! and the binding bertqa infers ([`inspect`] finds it out). The text names settings as messages do (`` `model` ``,
//! `` `batch_size` ``); the command writes them as its flags.

use std::fmt::Write as _;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::Render;
use crate::backend::client::{ready_models, Listing};
use crate::backend::proto::model_config::SchedulingChoice;
use crate::backend::proto::model_instance_group::Kind;
use crate::backend::proto::model_metadata_response::TensorMetadata;
use crate::backend::proto::repository_index_response::ModelIndex;
use crate::backend::proto::{ModelConfig, ModelMetadataResponse};
use crate::backend::text::TextOverrides;
use crate::backend::{BindingOverrides, ClientConfig, Model, Protocol, TritonClient};
use crate::error::Error;

/// The `parameters` key that marks a model `tune` left in a candidate configuration.
pub const TUNE_MARKER: &str = "bertqa_tune";

/// `models`' document (`schema/models.schema.json`).
#[derive(Debug, Serialize)]
pub struct ModelsJson {
    /// Always 1.
    pub schema: u32,
    /// The server and what it says of itself.
    pub server: ServerJson,
    /// The models the server lists; without a listing, `--model`'s alone (or none).
    pub models: Vec<ModelRow>,
    /// `--model`'s details.
    pub model: Option<ModelJson>,
}

/// The server, as its metadata and health calls describe it.
#[derive(Debug, Serialize)]
pub struct ServerJson {
    /// As given (`--url`).
    pub url: String,
    /// The protocol it was spoken to in: `grpc` or `http`.
    #[serde(with = "super::json::protocol")]
    pub protocol: Protocol,
    /// As the server's metadata names it: `triton`, `mlserver`, `kserve`, ….
    pub name: String,
    /// The server's version, as its metadata gives it.
    pub version: String,
    /// Whether the server answered that it is live.
    pub live: bool,
    /// Whether the server answered that it is ready.
    pub ready: bool,
    /// The protocol extensions the server's metadata lists.
    pub extensions: Vec<String>,
    /// Whether the server lists its models (`listing` says how).
    pub lists_models: bool,
    /// Where the list comes from: `repository_index` (Triton's, MLServer's: versions
    /// and states) or `model_list` (KServe's `GET /v2/models`: names, each state asked);
    /// `null` when the server lists none.
    pub listing: Option<Listing>,
}

/// One row of the model table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelRow {
    /// The model's name on the server.
    pub name: String,
    /// `""`: not listed (the server's choice).
    pub version: String,
    /// `READY`, `UNAVAILABLE`, … (`""`: listed but not loaded).
    pub state: String,
    /// Why it is in that state, as the server says (`""`: nothing said).
    pub reason: String,
}

impl ModelRow {
    /// The row of one entry of Triton's repository index.
    fn from_index(m: ModelIndex) -> Self {
        ModelRow {
            name: m.name,
            version: m.version,
            state: m.state,
            reason: m.reason,
        }
    }
}

/// `--model M`: what its metadata and configuration say, and its binding. A model that
/// is not ready has its name, `ready: false` and the binding error alone.
#[derive(Debug, Serialize)]
pub struct ModelJson {
    /// The model's name on the server.
    pub name: String,
    /// Whether the model (at the version asked for) is ready.
    pub ready: bool,
    /// The versions its metadata lists (empty for a model that is not ready).
    pub versions: Vec<String>,
    /// The configuration's backend, else the metadata's platform.
    pub platform: String,
    /// Whether the server serves a model configuration (Triton's extension).
    pub configuration: bool,
    /// The configuration's (0 without one).
    pub max_batch_size: i32,
    /// The configuration's dynamic batcher (`None`: none configured, or no
    /// configuration).
    pub dynamic_batching: Option<DynamicBatching>,
    /// An ensemble's steps, in order.
    pub ensemble_steps: Option<Vec<EnsembleStep>>,
    /// The configuration's instance groups (empty without a configuration).
    pub instance_groups: Vec<InstanceGroup>,
    /// The input tensors its metadata lists.
    pub inputs: Vec<Tensor>,
    /// The output tensors its metadata lists.
    pub outputs: Vec<Tensor>,
    /// The keys `binding`, `contract` and `binding_error`.
    #[serde(flatten)]
    pub binding: BindingOutcome,
}

/// A model configuration's dynamic batcher.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DynamicBatching {
    /// The batch sizes the batcher prefers to form (empty: none preferred).
    pub preferred_batch_size: Vec<i32>,
    /// How long a request may wait in the queue for a batch to form, microseconds.
    pub max_queue_delay_us: u64,
    /// Whether responses are returned in the order the requests came.
    pub preserve_ordering: bool,
}

/// One step of an ensemble.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnsembleStep {
    /// The model the step runs.
    pub model: String,
    /// Its version (-1: the latest).
    pub version: i64,
}

/// One instance group of a model configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstanceGroup {
    /// The group's name in the configuration.
    pub name: String,
    /// `KIND_CPU`, `KIND_GPU`, … as the configuration names it.
    pub kind: String,
    /// Instances of the model in the group (per GPU for a GPU group).
    pub count: i32,
    /// The GPUs the group's instances run on (empty: every GPU the server has).
    pub gpus: Vec<i32>,
}

/// A tensor as the model's metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tensor {
    /// The tensor's name, as requests and responses name it.
    pub name: String,
    /// Its data type, as the protocol names it (`INT64`, `FP32`, `BYTES`, …).
    pub datatype: String,
    /// Its shape; -1 marks a variable dimension.
    pub shape: Vec<i64>,
}

/// The binding, or why there is none (the message as the command line words it).
/// Written as three keys: `binding` (the binding or `null`), `contract` (a text model's
/// `answer` or `logits`, else `null`) and `binding_error` (the message or `null`).
#[derive(Debug, Clone)]
pub struct BindingOutcome(pub Result<Model, String>);

/// Equal when they are written alike.
impl PartialEq for BindingOutcome {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Ok(a), Ok(b)) => a.to_json() == b.to_json(),
            (a, b) => a.as_ref().err() == b.as_ref().err(),
        }
    }
}

impl Eq for BindingOutcome {}

impl Serialize for BindingOutcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        let binding = self.0.as_ref().ok().map(Model::to_json);
        map.serialize_entry("binding", &binding)?;
        let contract = match &self.0 {
            Ok(model) => model.contract_name(),
            Err(_) => None,
        };
        map.serialize_entry("contract", &contract)?;
        map.serialize_entry("binding_error", &self.0.as_ref().err())?;
        map.end()
    }
}

impl Tensor {
    fn all(ts: &[TensorMetadata]) -> Vec<Tensor> {
        ts.iter()
            .map(|t| Tensor {
                name: t.name.clone(),
                datatype: t.datatype.clone(),
                shape: t.shape.clone(),
            })
            .collect()
    }
}

impl ModelJson {
    /// A model that answered: its metadata, its configuration (`None`: the server
    /// serves none) and its binding.
    pub(crate) fn new(
        metadata: &ModelMetadataResponse,
        config: Option<&ModelConfig>,
        ready: bool,
        binding: Result<Model, String>,
    ) -> ModelJson {
        let platform = match config {
            Some(c) if !c.backend.is_empty() => c.backend.clone(),
            _ => metadata.platform.clone(),
        };
        let scheduling = config.and_then(|c| c.scheduling_choice.as_ref());
        ModelJson {
            name: metadata.name.clone(),
            ready,
            versions: metadata.versions.clone(),
            platform,
            configuration: config.is_some(),
            max_batch_size: config.map_or(0, |c| c.max_batch_size),
            dynamic_batching: match scheduling {
                Some(SchedulingChoice::DynamicBatching(d)) => Some(DynamicBatching {
                    preferred_batch_size: d.preferred_batch_size.clone(),
                    max_queue_delay_us: d.max_queue_delay_microseconds,
                    preserve_ordering: d.preserve_ordering,
                }),
                _ => None,
            },
            ensemble_steps: match scheduling {
                Some(SchedulingChoice::EnsembleScheduling(e)) => Some(
                    e.step
                        .iter()
                        .map(|s| EnsembleStep {
                            model: s.model_name.clone(),
                            version: s.model_version,
                        })
                        .collect(),
                ),
                _ => None,
            },
            instance_groups: config
                .map(|c| {
                    c.instance_group
                        .iter()
                        .map(|g| InstanceGroup {
                            name: g.name.clone(),
                            kind: Kind::try_from(g.kind)
                                .map_or("KIND_UNKNOWN", |k| k.as_str_name())
                                .to_string(),
                            count: g.count,
                            gpus: g.gpus.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            inputs: Tensor::all(&metadata.inputs),
            outputs: Tensor::all(&metadata.outputs),
            binding: BindingOutcome(binding),
        }
    }

    /// A model the server lists but has not made ready (no metadata to read).
    pub(crate) fn not_ready(name: &str, binding_error: String) -> ModelJson {
        let metadata = ModelMetadataResponse {
            name: name.to_string(),
            ..Default::default()
        };
        ModelJson::new(&metadata, None, false, Err(binding_error))
    }
}

/// What `bertqa models` finds out ([`inspect`]).
#[derive(Debug)]
pub struct Inspection {
    /// The report. Its messages (a binding's failure) name settings as messages do
    /// ([`ModelsJson::map_messages`] rewrites them).
    pub report: ModelsJson,
    /// The names of the ready models, when the server lists its models.
    pub ready: Option<Vec<String>>,
    /// Models left in a candidate configuration by a `tune` that did not finish (their
    /// configuration carries its marker): each name, with the marker's value. Looked
    /// for among the model asked about, or else the ready models the server lists;
    /// best effort (a configuration that cannot be read is passed over).
    pub left_by_tune: Vec<(String, String)>,
}

/// Looks at the server of `server` (its liveness, readiness, metadata and list of
/// models) and, for `model` (at `version`, `""`: the server's choice), its metadata,
/// configuration and the binding bertqa infers with `binding` and `text`'s names. An
/// unreachable server, or a `model` the server does not have, is an error; a model that
/// is not ready, or that cannot be bound, is in the report.
pub async fn inspect(
    server: &ClientConfig,
    model: Option<&str>,
    version: &str,
    binding: &BindingOverrides,
    text: &TextOverrides,
) -> crate::Result<Inspection> {
    let client = TritonClient::connect(server).await?;
    let live = client.server_live().await?;
    let ready = client.server_ready().await?;
    // Kept by the client: the messages of the calls below name the server by it.
    let meta = client.server_info().await?.clone();
    let listing = client.list_models().await?;
    let source = listing.as_ref().map(|l| l.source);
    let index = listing.map(|l| l.models);
    let asked = Asked {
        client: &client,
        url: &server.url,
        version,
        binding,
        text,
    };
    let model_json = match model {
        None => None,
        Some(name) => Some(asked.model(name, index.as_deref()).await?),
    };
    let ready_names = index.as_deref().map(ready_models);
    // The model table: the server's list, or without one `model`'s alone.
    let models = match (index, &model_json) {
        (Some(index), _) => index.into_iter().map(ModelRow::from_index).collect(),
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
            url: server.url.clone(),
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
        model: model_json,
    };
    let names: Vec<&str> = match model {
        Some(m) => vec![m],
        None => report
            .models
            .iter()
            .filter(|m| m.state == "READY")
            .map(|m| m.name.as_str())
            .collect(),
    };
    let left_by_tune = left_by_tune(&client, &names).await;
    Ok(Inspection {
        report,
        ready: ready_names,
        left_by_tune,
    })
}

/// The model [`inspect`] is asked about, and how.
struct Asked<'a> {
    client: &'a TritonClient,
    url: &'a str,
    version: &'a str,
    binding: &'a BindingOverrides,
    text: &'a TextOverrides,
}

impl Asked<'_> {
    /// `name`'s report; when the server lists no models, its metadata says whether it
    /// exists.
    async fn model(&self, name: &str, index: Option<&[ModelIndex]>) -> crate::Result<ModelJson> {
        let (client, version) = (self.client, self.version);
        if let Some(index) = index {
            if !index.iter().any(|m| m.name == name) {
                return Err(Error::ModelNotFound {
                    url: self.url.to_string(),
                    model: name.to_string(),
                    available: Some(ready_models(index)),
                });
            }
        }
        let model_ready = client.model_ready(name, version).await?;
        if !model_ready && index.is_some() {
            // Metadata is unavailable for a model that is not ready: report what the
            // server's list says.
            let why = Error::binding(name, "not ready", Vec::new());
            return Ok(ModelJson::not_ready(name, why.to_string()));
        }
        let metadata = client.model_metadata(name, version).await?;
        let config = client.model_config_if_any(name, version).await?;
        let binding = Model::infer(&metadata, config.as_ref(), version, self.binding, self.text);
        Ok(ModelJson::new(
            &metadata,
            config.as_ref(),
            model_ready,
            binding.map_err(|e| e.to_string()),
        ))
    }
}

/// The models among `names` whose configuration carries `tune`'s marker, with its
/// value.
async fn left_by_tune(client: &TritonClient, names: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for name in names {
        if let Ok(Some(c)) = client.model_config_if_any(name, "").await {
            if let Some(p) = c.parameters.get(TUNE_MARKER) {
                out.push((name.to_string(), p.string_value.clone()));
            }
        }
    }
    out
}

impl ModelsJson {
    /// Rewrites the messages the report carries (a binding's failure) with `f`: a front
    /// end names settings its own way (the command line: as its flags).
    pub fn map_messages(&mut self, f: impl Fn(&str) -> String) {
        if let Some(BindingOutcome(Err(e))) = self.model.as_mut().map(|m| &mut m.binding) {
            *e = f(e);
        }
    }
}

impl Render for ModelsJson {
    type Json<'a> = &'a ModelsJson;

    fn json(&self) -> &ModelsJson {
        self
    }

    fn text(&self, _verbose: bool) -> String {
        let mut s = String::new();
        let server = &self.server;
        let _ = writeln!(
            s,
            "server   {} {} at {} over {}",
            server.name,
            server.version,
            server.url,
            super::protocol_words(server.protocol)
        );
        let _ = writeln!(
            s,
            "live     {}   ready {}",
            yes(server.live),
            yes(server.ready)
        );
        let _ = writeln!(s, "extensions {}", server.extensions.join(" "));
        let _ = writeln!(s);
        if !server.lists_models {
            let _ = writeln!(
                s,
                "the server does not list its models {}{}",
                match server.protocol {
                    // KServe's list is an HTTP route; gRPC has the repository index alone.
                    Protocol::Grpc => {
                        "over gRPC (no repository index, the protocol's only listing)"
                    }
                    Protocol::Http => "(no repository index, no model list at GET /v2/models)",
                },
                if self.model.is_some() {
                    ""
                } else {
                    "; name one with `model`"
                }
            );
        }
        model_table(&mut s, &self.models);
        if let Some(m) = &self.model {
            model_text(&mut s, m);
        }
        s
    }
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn model_table(s: &mut String, rows: &[ModelRow]) {
    if rows.is_empty() {
        return;
    }
    let w = rows.iter().map(|m| m.name.len()).max().unwrap_or(5).max(5);
    let _ = writeln!(
        s,
        "{:<w$}  {:>7}  {:<11}  REASON",
        "MODEL", "VERSION", "STATE"
    );
    for m in rows {
        let _ = writeln!(
            s,
            "{:<w$}  {:>7}  {:<11}  {}",
            m.name, m.version, m.state, m.reason
        );
    }
}

/// `--model`'s part of the text.
fn model_text(s: &mut String, m: &ModelJson) {
    let _ = writeln!(s);
    let _ = writeln!(s, "model    {}  (ready: {})", m.name, yes(m.ready));
    if !m.ready {
        return;
    }
    let _ = writeln!(s, "versions {}", m.versions.join(", "));
    let _ = writeln!(s, "platform {}", m.platform);
    if !m.configuration {
        let _ = writeln!(
            s,
            "configuration  not served (no model configuration): batching as the metadata's shapes say"
        );
        tensors_and_binding(s, m);
        return;
    }
    let _ = writeln!(s, "max batch size  {}", m.max_batch_size);
    match (&m.dynamic_batching, &m.ensemble_steps) {
        (Some(d), _) => {
            let _ = writeln!(
                s,
                "dynamic batching  on (max queue delay {} us, preferred sizes {:?})",
                d.max_queue_delay_us, d.preferred_batch_size
            );
        }
        (None, Some(steps)) => {
            let names: Vec<&str> = steps.iter().map(|s| s.model.as_str()).collect();
            let _ = writeln!(s, "ensemble  steps {}", names.join(" -> "));
        }
        (None, None) => {
            let _ = writeln!(s, "dynamic batching  off");
        }
    }
    for g in &m.instance_groups {
        let _ = writeln!(s, "instance group  {} x{} {}", g.kind, g.count, g.name);
    }
    tensors_and_binding(s, m);
}

/// The model's tensors and the binding bertqa infers.
fn tensors_and_binding(s: &mut String, m: &ModelJson) {
    let _ = writeln!(s);
    for (kind, ts) in [("input ", &m.inputs), ("output", &m.outputs)] {
        for t in ts {
            let _ = writeln!(s, "{kind}  {:<16} {:<6} {:?}", t.name, t.datatype, t.shape);
        }
    }
    let _ = writeln!(s);
    match &m.binding.0 {
        Ok(model) => model.describe(s),
        Err(e) => {
            let _ = writeln!(s, "binding: {e}");
        }
    }
}

#[cfg(test)]
mod tests;
