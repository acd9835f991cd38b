//! The JSON answers of Triton's KServe v2 REST endpoints, read into the same generated
//! proto types the gRPC calls return, so that everything above the client is the same
//! for both protocols.
//!
//! Only what bertqa reads is translated; a field Triton adds or bertqa does not use is
//! ignored, and a missing one takes the proto default. The model configuration comes
//! with the proto's own field names (`max_batch_size`, `data_type: "TYPE_INT64"`,
//! `instance_group` …), enums by their proto names.

use std::collections::HashMap;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::backend::proto::model_config::SchedulingChoice;
use crate::backend::proto::model_instance_group::Kind;
use crate::backend::proto::model_metadata_response::TensorMetadata;
use crate::backend::proto::repository_index_response::ModelIndex;
use crate::backend::proto::{
    DataType, InferBatchStatistics, InferStatistics, ModelConfig, ModelDynamicBatching,
    ModelEnsembling, ModelInput, ModelInstanceGroup, ModelMetadataResponse, ModelOutput,
    ModelParameter, ModelStatistics, ModelTransactionPolicy, ServerMetadataResponse,
    StatisticDuration,
};

/// Reads a JSON answer into `T`, leniently where the protocol is loose: a `null` is read
/// as an absent field (KServe's model server writes `"versions": null`), so it takes its
/// default; fields bertqa does not read are ignored.
pub(crate) fn read<T: DeserializeOwned>(body: &[u8]) -> serde_json::Result<T> {
    let mut value: serde_json::Value = serde_json::from_slice(body)?;
    drop_nulls(&mut value);
    serde_json::from_value(value)
}

/// Removes every object member whose value is `null`, at any depth.
fn drop_nulls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// `GET /v2`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ServerMetadata {
    name: String,
    version: String,
    extensions: Vec<String>,
}

impl From<ServerMetadata> for ServerMetadataResponse {
    fn from(m: ServerMetadata) -> Self {
        ServerMetadataResponse {
            name: m.name,
            version: m.version,
            extensions: m.extensions,
        }
    }
}

/// `GET /v2/models/M[/versions/V]`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ModelMetadata {
    name: String,
    versions: Vec<String>,
    platform: String,
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Tensor {
    name: String,
    datatype: String,
    shape: Vec<i64>,
}

impl From<Tensor> for TensorMetadata {
    fn from(t: Tensor) -> Self {
        TensorMetadata {
            name: t.name,
            datatype: t.datatype,
            shape: t.shape,
        }
    }
}

impl From<ModelMetadata> for ModelMetadataResponse {
    fn from(m: ModelMetadata) -> Self {
        ModelMetadataResponse {
            name: m.name,
            versions: m.versions,
            platform: m.platform,
            inputs: m.inputs.into_iter().map(Into::into).collect(),
            outputs: m.outputs.into_iter().map(Into::into).collect(),
        }
    }
}

/// One entry of `POST /v2/repository/index`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct IndexEntry {
    name: String,
    version: String,
    state: String,
    reason: String,
}

impl From<IndexEntry> for ModelIndex {
    fn from(e: IndexEntry) -> Self {
        ModelIndex {
            name: e.name,
            version: e.version,
            state: e.state,
            reason: e.reason,
        }
    }
}

/// `GET /v2/models/M/config`: the fields of `ModelConfig` that bertqa reads.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Config {
    name: String,
    platform: String,
    backend: String,
    max_batch_size: i32,
    input: Vec<ConfigInput>,
    output: Vec<ConfigOutput>,
    instance_group: Vec<InstanceGroup>,
    default_model_filename: String,
    dynamic_batching: Option<DynamicBatching>,
    ensemble_scheduling: Option<Ensembling>,
    parameters: HashMap<String, Parameter>,
    model_transaction_policy: Option<TransactionPolicy>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ConfigInput {
    name: String,
    data_type: String,
    dims: Vec<i64>,
    is_shape_tensor: bool,
    allow_ragged_batch: bool,
    optional: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ConfigOutput {
    name: String,
    data_type: String,
    dims: Vec<i64>,
    label_filename: String,
    is_shape_tensor: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct InstanceGroup {
    name: String,
    kind: String,
    count: i32,
    gpus: Vec<i32>,
    profile: Vec<String>,
    passive: bool,
    host_policy: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DynamicBatching {
    preferred_batch_size: Vec<i32>,
    max_queue_delay_microseconds: u64,
    preserve_ordering: bool,
    priority_levels: u64,
    default_priority_level: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Ensembling {
    step: Vec<EnsembleStep>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct EnsembleStep {
    model_name: String,
    model_version: i64,
    input_map: HashMap<String, String>,
    output_map: HashMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Parameter {
    string_value: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TransactionPolicy {
    decoupled: bool,
}

/// A proto enum value by its name (`TYPE_INT64`); an unknown name is the enum's 0.
fn data_type(name: &str) -> i32 {
    DataType::from_str_name(name).map_or(0, |t| t as i32)
}

impl From<Config> for ModelConfig {
    fn from(c: Config) -> Self {
        ModelConfig {
            name: c.name,
            platform: c.platform,
            backend: c.backend,
            max_batch_size: c.max_batch_size,
            input: c
                .input
                .into_iter()
                .map(|i| ModelInput {
                    name: i.name,
                    data_type: data_type(&i.data_type),
                    dims: i.dims,
                    is_shape_tensor: i.is_shape_tensor,
                    allow_ragged_batch: i.allow_ragged_batch,
                    optional: i.optional,
                    ..Default::default()
                })
                .collect(),
            output: c
                .output
                .into_iter()
                .map(|o| ModelOutput {
                    name: o.name,
                    data_type: data_type(&o.data_type),
                    dims: o.dims,
                    label_filename: o.label_filename,
                    is_shape_tensor: o.is_shape_tensor,
                    ..Default::default()
                })
                .collect(),
            instance_group: c
                .instance_group
                .into_iter()
                .map(|g| ModelInstanceGroup {
                    name: g.name,
                    count: g.count,
                    gpus: g.gpus,
                    kind: Kind::from_str_name(&g.kind).map_or(0, |k| k as i32),
                    profile: g.profile,
                    passive: g.passive,
                    host_policy: g.host_policy,
                })
                .collect(),
            default_model_filename: c.default_model_filename,
            scheduling_choice: match (c.dynamic_batching, c.ensemble_scheduling) {
                (Some(d), _) => Some(SchedulingChoice::DynamicBatching(ModelDynamicBatching {
                    preferred_batch_size: d.preferred_batch_size,
                    max_queue_delay_microseconds: d.max_queue_delay_microseconds,
                    preserve_ordering: d.preserve_ordering,
                    priority_levels: d.priority_levels,
                    default_priority_level: d.default_priority_level,
                    ..Default::default()
                })),
                (None, Some(e)) => Some(SchedulingChoice::EnsembleScheduling(ModelEnsembling {
                    step: e
                        .step
                        .into_iter()
                        .map(|s| crate::backend::proto::model_ensembling::Step {
                            model_name: s.model_name,
                            model_version: s.model_version,
                            input_map: s.input_map,
                            output_map: s.output_map,
                        })
                        .collect(),
                })),
                (None, None) => None,
            },
            parameters: c
                .parameters
                .into_iter()
                .map(|(k, v)| {
                    let value = ModelParameter {
                        string_value: v.string_value,
                    };
                    (k, value)
                })
                .collect(),
            model_transaction_policy: c.model_transaction_policy.map(|p| ModelTransactionPolicy {
                decoupled: p.decoupled,
            }),
        }
    }
}

/// `GET /v2/models/M[/versions/V]/stats` (and `/v2/models/stats`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Statistics {
    model_stats: Vec<ModelStats>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ModelStats {
    name: String,
    version: String,
    last_inference: u64,
    inference_count: u64,
    execution_count: u64,
    inference_stats: Option<InferStats>,
    batch_stats: Vec<BatchStats>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct InferStats {
    success: Option<Duration>,
    fail: Option<Duration>,
    queue: Option<Duration>,
    compute_input: Option<Duration>,
    compute_infer: Option<Duration>,
    compute_output: Option<Duration>,
    cache_hit: Option<Duration>,
    cache_miss: Option<Duration>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(default)]
struct Duration {
    count: u64,
    ns: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct BatchStats {
    batch_size: u64,
    compute_input: Option<Duration>,
    compute_infer: Option<Duration>,
    compute_output: Option<Duration>,
}

fn duration(d: Option<Duration>) -> Option<StatisticDuration> {
    d.map(|d| StatisticDuration {
        count: d.count,
        ns: d.ns,
    })
}

impl From<Statistics> for Vec<ModelStatistics> {
    fn from(s: Statistics) -> Self {
        s.model_stats
            .into_iter()
            .map(|m| ModelStatistics {
                name: m.name,
                version: m.version,
                last_inference: m.last_inference,
                inference_count: m.inference_count,
                execution_count: m.execution_count,
                inference_stats: m.inference_stats.map(|i| InferStatistics {
                    success: duration(i.success),
                    fail: duration(i.fail),
                    queue: duration(i.queue),
                    compute_input: duration(i.compute_input),
                    compute_infer: duration(i.compute_infer),
                    compute_output: duration(i.compute_output),
                    cache_hit: duration(i.cache_hit),
                    cache_miss: duration(i.cache_miss),
                }),
                batch_stats: m
                    .batch_stats
                    .into_iter()
                    .map(|b| InferBatchStatistics {
                        batch_size: b.batch_size,
                        compute_input: duration(b.compute_input),
                        compute_infer: duration(b.compute_infer),
                        compute_output: duration(b.compute_output),
                    })
                    .collect(),
                ..Default::default()
            })
            .collect()
    }
}

/// The `{"error": "…"}` of an error answer, or the body's first line when it is text
/// of another shape, cut to a length a message can hold; never the raw bytes of a
/// binary body.
/// The `<title>` of an HTML page, if `body` is one.
fn html_title(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let lower = text.to_ascii_lowercase();
    let start = lower.find("<title>")? + "<title>".len();
    let end = start + lower[start..].find("</title>")?;
    Some(text[start..end].trim().to_string())
}

/// Whether `body` is the protocol's error answer, `{"error": "..."}`.
pub(crate) fn is_protocol_error(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .is_ok_and(|v| v.get("error").is_some_and(serde_json::Value::is_string))
}

pub(crate) fn error_text(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct ErrorBody {
        error: String,
    }
    const MAX_CHARS: usize = 300;
    let text = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) => e.error,
        // An HTML page (a proxy's or ingress's error page): its title says it.
        Err(_) if html_title(body).is_some() => html_title(body).unwrap_or_default(),
        Err(_) => match std::str::from_utf8(body) {
            Ok(t) if t.chars().all(|c| !c.is_control() || c.is_whitespace()) => t
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("")
                .to_string(),
            _ => return format!("({} bytes that are not text)", body.len()),
        },
    };
    let text = text.trim();
    match text.char_indices().nth(MAX_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_pages_are_read_by_their_title() {
        let page = b"<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center>\
            <h1>404 Not Found</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body></html>";
        assert_eq!(error_text(page), "404 Not Found");
        assert!(!is_protocol_error(page));
        assert!(is_protocol_error(br#"{"error":"Model m not found"}"#));
        assert!(!is_protocol_error(br#"{"detail":"Not Found"}"#));
    }

    #[test]
    fn nulls_are_absent_fields() {
        let m: ModelMetadata = read(
            br#"{"name":"oracle","versions":null,"platform":"","inputs":[{"name":"a",
            "datatype":"INT64","shape":[-1,384],"parameters":null}],"outputs":null,"extra":1}"#,
        )
        .unwrap();
        let m = ModelMetadataResponse::from(m);
        assert!(m.versions.is_empty() && m.outputs.is_empty());
        assert_eq!(m.inputs[0].shape, vec![-1, 384]);
        assert!(read::<ModelMetadata>(br#"{"name":null,"inputs":"x"}"#).is_err());
    }

    /// An ensemble's steps, in order, with their tensor maps.
    #[test]
    fn an_ensembles_configuration_lists_its_steps() {
        let text = r#"{"name":"qa","platform":"ensemble","max_batch_size":0,
            "ensemble_scheduling":{"step":[
              {"model_name":"tokenizer","model_version":-1,"input_map":{"q":"question"},"output_map":{"ids":"t_ids"}},
              {"model_name":"tiny-bert-nobatch","model_version":1,"input_map":{"input__0":"t_ids"},"output_map":{}}]}}"#;
        let c: ModelConfig = serde_json::from_str::<Config>(text).unwrap().into();
        let Some(SchedulingChoice::EnsembleScheduling(e)) = c.scheduling_choice else {
            panic!("ensemble scheduling: {:?}", c.scheduling_choice);
        };
        let names: Vec<&str> = e.step.iter().map(|s| s.model_name.as_str()).collect();
        assert_eq!(names, ["tokenizer", "tiny-bert-nobatch"]);
        assert_eq!(e.step[0].model_version, -1);
        assert_eq!(e.step[0].input_map["q"], "question");
        assert_eq!(e.step[1].input_map["input__0"], "t_ids");
    }

    #[test]
    fn a_model_config_as_triton_writes_it() {
        let text = r#"{"name":"tiny-bert","platform":"","backend":"python","max_batch_size":8,
            "input":[{"name":"input__0","data_type":"TYPE_INT64","format":"FORMAT_NONE","dims":[384]}],
            "output":[{"name":"output__0","data_type":"TYPE_FP32","dims":[384],"label_filename":""}],
            "dynamic_batching":{"preferred_batch_size":[8],"max_queue_delay_microseconds":100,
            "preserve_ordering":false,"priority_levels":0,"default_priority_level":0,"priority_queue_policy":{}},
            "instance_group":[{"name":"tiny-bert_0","kind":"KIND_CPU","count":1,"gpus":[],"secondary_devices":[]}],
            "parameters":{"seed":{"string_value":"20241202"}},"model_warmup":[]}"#;
        let c: ModelConfig = serde_json::from_str::<Config>(text).unwrap().into();
        assert_eq!(c.max_batch_size, 8);
        assert_eq!(c.backend, "python");
        assert_eq!(c.input[0].data_type, DataType::TypeInt64 as i32);
        assert_eq!(c.output[0].data_type, DataType::TypeFp32 as i32);
        assert_eq!(c.instance_group[0].kind, Kind::Cpu as i32);
        assert_eq!(c.parameters["seed"].string_value, "20241202");
        let Some(SchedulingChoice::DynamicBatching(d)) = c.scheduling_choice else {
            panic!("dynamic batching");
        };
        assert_eq!(
            (d.preferred_batch_size, d.max_queue_delay_microseconds),
            (vec![8], 100)
        );
        let c: ModelConfig = serde_json::from_str::<Config>("{}").unwrap().into();
        assert!(c.scheduling_choice.is_none());
    }

    #[test]
    fn statistics_as_triton_writes_them() {
        let text = r#"{"model_stats":[{"name":"null","version":"1","last_inference":5,
            "inference_count":3,"execution_count":2,"inference_stats":{"success":{"count":3,"ns":900},
            "queue":{"count":3,"ns":30}},"response_stats":{},
            "batch_stats":[{"batch_size":2,"compute_infer":{"count":1,"ns":70}}],"memory_usage":[]}]}"#;
        let s: Vec<ModelStatistics> = serde_json::from_str::<Statistics>(text).unwrap().into();
        let i = s[0].inference_stats.unwrap();
        assert_eq!((i.success.unwrap().count, i.queue.unwrap().ns), (3, 30));
        assert!(i.fail.is_none());
        assert_eq!(s[0].batch_stats[0].compute_infer.unwrap().ns, 70);
        assert_eq!((s[0].inference_count, s[0].execution_count), (3, 2));
    }

    #[test]
    fn error_bodies_are_trimmed() {
        assert_eq!(
            error_text(br#"{"error":"model exploded "}"#),
            "model exploded"
        );
        assert_eq!(error_text(b"\n  Bad Gateway\nmore"), "Bad Gateway");
        assert_eq!(
            error_text(&[0, 159, 146, 150]),
            "(4 bytes that are not text)"
        );
        let long = "x".repeat(1000);
        assert_eq!(error_text(long.as_bytes()).chars().count(), 301);
    }
}
