//! A model configuration as the server reports it (`GET /v2/models/M/config`, JSON), the
//! settings `tune` varies in it, and its `config.pbtxt` text.
//!
//! Contract:
//! - A candidate is the *original* configuration with only `max_batch_size`, every
//!   instance group's `count`, and `dynamic_batching` (its
//!   `max_queue_delay_microseconds` and `preferred_batch_size`; the block removed for
//!   "off") changed, plus, while a run is under way, one `parameters` entry
//!   ([`MARKER`]) naming the run: every other field is the original's, so putting the
//!   original back is loading it as it was read.
//! - [`Preferred::Server`] leaves `preferred_batch_size` out (Triton then fills in the
//!   max batch size); preferred sizes above a candidate's max batch size are dropped
//!   (Triton refuses them), and none left means the server's choice.
//! - `confirm` compares what the server reads back with what was asked for: the
//!   three settings and the marker; the rest is the server's to normalise.

use serde_json::{json, Map, Value};

/// The `parameters` key that marks a model left in a candidate configuration (the
/// `models` report names such models).
pub use crate::report::models::TUNE_MARKER as MARKER;

/// The preferred batch sizes of a dynamic-batching candidate.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Preferred {
    /// Left out: the server's default (Triton: the max batch size).
    Server,
    /// Half and all of the candidate's max batch size.
    Half,
    /// These sizes; those above a candidate's max batch size are dropped, and none left
    /// means the server's default.
    Sizes(Vec<usize>),
}

/// Dynamic batching of a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dynamic {
    /// `max_queue_delay_microseconds`: how long a request may wait in the queue for
    /// others to batch with, microseconds.
    pub delay_us: u64,
    /// `preferred_batch_size`.
    pub preferred: Preferred,
}

/// What `tune` varies in a configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Settings {
    /// `max_batch_size` (0: the model has no batch dimension).
    pub max_batch_size: usize,
    /// The count of each instance group.
    pub instances: usize,
    /// `None`: no dynamic batching.
    pub dynamic: Option<Dynamic>,
}

impl Settings {
    /// The settings of a configuration as read from the server.
    pub(crate) fn of(config: &Value) -> Settings {
        let max_batch_size = config.get("max_batch_size").and_then(as_u64).unwrap_or(0) as usize;
        let dynamic = config.get("dynamic_batching").map(|d| Dynamic {
            delay_us: d
                .get("max_queue_delay_microseconds")
                .and_then(as_u64)
                .unwrap_or(0),
            // What Triton fills in for a configuration without preferred sizes (the max
            // batch size) is that configuration.
            preferred: match sizes(d.get("preferred_batch_size")) {
                v if v.is_empty() || v == [max_batch_size] => Preferred::Server,
                v => Preferred::Sizes(v),
            },
        });
        Settings {
            max_batch_size,
            instances: config
                .get("instance_group")
                .and_then(Value::as_array)
                .and_then(|g| g.first())
                .and_then(|g| g.get("count"))
                .and_then(as_u64)
                .unwrap_or(1) as usize,
            dynamic,
        }
    }

    /// The preferred sizes this candidate sends: those at most its max batch size.
    pub(crate) fn preferred_sent(&self) -> Option<Vec<usize>> {
        match &self.dynamic {
            Some(Dynamic {
                preferred: Preferred::Half,
                ..
            }) => {
                let max = self.max_batch_size;
                Some(if max >= 2 {
                    vec![max / 2, max]
                } else {
                    vec![max]
                })
            }
            Some(Dynamic {
                preferred: Preferred::Sizes(v),
                ..
            }) => {
                let kept: Vec<usize> = v
                    .iter()
                    .copied()
                    .filter(|&s| s >= 1 && s <= self.max_batch_size)
                    .collect();
                (!kept.is_empty()).then_some(kept)
            }
            _ => None,
        }
    }

    /// The same settings as the server applies them: the preferred sizes as sent
    /// (none, or the max batch size alone, being the server's default).
    pub(crate) fn effective(&self) -> Settings {
        let mut e = self.clone();
        if let Some(d) = &mut e.dynamic {
            d.preferred = match self.preferred_sent() {
                Some(v) if v != [self.max_batch_size] => Preferred::Sizes(v),
                _ => Preferred::Server,
            };
        }
        e
    }

    /// In words, for tables and progress: `max batch 32, 2 instances, delay 100 us`.
    pub fn describe(&self) -> String {
        let dynamic = match &self.dynamic {
            None => "no dynamic batching".to_string(),
            Some(d) => {
                let preferred = match self.preferred_sent() {
                    Some(v) => format!(", preferred {}", join(&v)),
                    None => String::new(),
                };
                format!("delay {} us{preferred}", d.delay_us)
            }
        };
        let s = if self.instances == 1 { "" } else { "s" };
        format!(
            "max batch {}, {} instance{s}, {dynamic}",
            self.max_batch_size, self.instances
        )
    }
}

fn join(v: &[usize]) -> String {
    v.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// A JSON number, or a string holding one (protobuf's JSON writes 64-bit integers so).
fn as_u64(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

fn sizes(v: Option<&Value>) -> Vec<usize> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(as_u64).map(|x| x as usize).collect())
        .unwrap_or_default()
}

/// The original configuration with `settings` applied and, when given, the marker.
pub fn candidate(original: &Value, settings: &Settings, marker: Option<&str>) -> Value {
    let mut c = original.clone();
    let Some(obj) = c.as_object_mut() else {
        return c;
    };
    obj.insert("max_batch_size".into(), json!(settings.max_batch_size));
    match obj.get_mut("instance_group").and_then(Value::as_array_mut) {
        Some(groups) if !groups.is_empty() => {
            for g in groups {
                if let Some(g) = g.as_object_mut() {
                    g.insert("count".into(), json!(settings.instances));
                }
            }
        }
        _ => {
            obj.insert(
                "instance_group".into(),
                json!([{ "count": settings.instances }]),
            );
        }
    }
    match &settings.dynamic {
        None => {
            obj.remove("dynamic_batching");
        }
        Some(d) => {
            let mut block = match obj.remove("dynamic_batching") {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            block.insert("max_queue_delay_microseconds".into(), json!(d.delay_us));
            match settings.preferred_sent() {
                Some(v) => block.insert("preferred_batch_size".into(), json!(v)),
                None => block.remove("preferred_batch_size"),
            };
            obj.insert("dynamic_batching".into(), Value::Object(block));
        }
    }
    match marker {
        Some(m) => {
            let parameters = obj
                .entry("parameters")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(p) = parameters.as_object_mut() {
                p.insert(MARKER.into(), json!({ "string_value": m }));
            }
        }
        None => {
            if let Some(p) = obj.get_mut("parameters").and_then(Value::as_object_mut) {
                p.remove(MARKER);
            }
        }
    }
    c
}

/// The marker's text, when the configuration carries one.
pub(crate) fn marker(config: &Value) -> Option<String> {
    let entry = config.get("parameters")?.get(MARKER)?;
    Some(
        entry
            .get("string_value")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    )
}

/// Whether the server's configuration `read` is `wanted` with `marker`; else what
/// differs, in words.
pub(crate) fn confirm(
    read: &Value,
    wanted: &Settings,
    marker_text: Option<&str>,
) -> Result<(), String> {
    let got = Settings::of(read);
    let mut differ = Vec::new();
    if got.max_batch_size != wanted.max_batch_size {
        differ.push(format!("max_batch_size {}", got.max_batch_size));
    }
    if got.instances != wanted.instances {
        differ.push(format!("instance count {}", got.instances));
    }
    match (&got.dynamic, &wanted.dynamic) {
        (None, None) => {}
        (Some(g), Some(w)) => {
            if g.delay_us != w.delay_us {
                differ.push(format!("max_queue_delay_microseconds {}", g.delay_us));
            }
            if let (Some(sent), Preferred::Sizes(read)) = (wanted.preferred_sent(), &g.preferred) {
                if &sent != read {
                    differ.push(format!("preferred_batch_size [{}]", join(read)));
                }
            }
        }
        (Some(_), None) => differ.push("dynamic batching on".into()),
        (None, Some(_)) => differ.push("no dynamic batching".into()),
    }
    if marker(read).as_deref() != marker_text {
        differ.push(match marker_text {
            Some(_) => format!("no `{MARKER}` parameter of this run"),
            None => format!("a `{MARKER}` parameter"),
        });
    }
    if differ.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the server reports {} instead of {}",
            differ.join(", "),
            wanted.describe()
        ))
    }
}

/// Fields whose JSON strings are protobuf enum names (written bare in text format).
const ENUM_FIELDS: [&str; 5] = ["data_type", "format", "kind", "priority", "timeout_action"];
/// Fields that are protobuf maps (`key`/`value` entries in text format).
const MAP_FIELDS: [&str; 7] = [
    "parameters",
    "cc_model_filenames",
    "metric_tags",
    "input_map",
    "output_map",
    "priority_queue_policy",
    "inputs",
];

/// `config` (the server's JSON) as protobuf text format, a `config.pbtxt` Triton
/// reads, after the comment lines `header`. Empty lists and maps are left out (a
/// repeated field's absence); the marker never is written.
pub fn to_pbtxt(config: &Value, header: &[String]) -> String {
    let mut out = String::new();
    for line in header {
        out.push_str("# ");
        out.push_str(line);
        out.push('\n');
    }
    if let Some(obj) = config.as_object() {
        let mut obj = obj.clone();
        if let Some(Value::Object(p)) = obj.get_mut("parameters") {
            p.remove(MARKER);
        }
        fields(&mut out, &obj, 0);
    }
    out
}

fn fields(out: &mut String, obj: &Map<String, Value>, depth: usize) {
    for (key, value) in obj {
        field(out, key, value, depth);
    }
}

fn field(out: &mut String, key: &str, value: &Value, depth: usize) {
    let pad = "  ".repeat(depth);
    match value {
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::Object(_) | Value::Array(_) => field(out, key, item, depth),
                    scalar_value => {
                        out.push_str(&format!("{pad}{key}: {}\n", scalar(key, scalar_value)))
                    }
                }
            }
        }
        Value::Object(m) if MAP_FIELDS.contains(&key) => {
            for (k, v) in m {
                let k = match key {
                    "priority_queue_policy" => k.clone(),
                    _ => quote(k),
                };
                out.push_str(&format!("{pad}{key} {{\n{pad}  key: {k}\n"));
                match v {
                    Value::Object(inner) => {
                        out.push_str(&format!("{pad}  value {{\n"));
                        fields(out, inner, depth + 2);
                        out.push_str(&format!("{pad}  }}\n"));
                    }
                    other => out.push_str(&format!("{pad}  value: {}\n", scalar("", other))),
                }
                out.push_str(&format!("{pad}}}\n"));
            }
        }
        Value::Object(m) => {
            out.push_str(&format!("{pad}{key} {{\n"));
            fields(out, m, depth + 1);
            out.push_str(&format!("{pad}}}\n"));
        }
        Value::Null => {}
        // proto3's defaults: the same configuration without them.
        Value::Bool(false) | Value::String(_)
            if value.as_str() == Some("") || value == &Value::Bool(false) => {}
        Value::Number(n) if n.as_f64() == Some(0.0) => {}
        scalar_value => out.push_str(&format!("{pad}{key}: {}\n", scalar(key, scalar_value))),
    }
}

fn scalar(key: &str, v: &Value) -> String {
    match v {
        Value::String(s) if ENUM_FIELDS.contains(&key) => s.clone(),
        Value::String(s) => quote(s),
        other => other.to_string(),
    }
}

/// A text-format string literal.
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Triton 2.51's answer for a python-backend model (trimmed to what matters).
    fn served() -> Value {
        json!({
            "name": "m", "backend": "python", "max_batch_size": 8,
            "input": [{"name": "input__0", "data_type": "TYPE_INT64", "dims": [-1]}],
            "batch_input": [],
            "optimization": {"priority": "PRIORITY_DEFAULT", "input_pinned_memory": {"enable": true}},
            "instance_group": [{"name": "m_0", "kind": "KIND_CPU", "count": 1, "gpus": []}],
            "cc_model_filenames": {},
            "parameters": {"kind": {"string_value": "null"}}
        })
    }

    #[test]
    fn a_candidate_changes_only_its_settings_and_the_marker() {
        let original = served();
        let s = Settings {
            max_batch_size: 32,
            instances: 2,
            dynamic: Some(Dynamic {
                delay_us: 500,
                preferred: Preferred::Sizes(vec![16, 32, 64]),
            }),
        };
        let c = candidate(&original, &s, Some("run 1"));
        assert_eq!(c["max_batch_size"], 32);
        assert_eq!(c["instance_group"][0]["count"], 2);
        assert_eq!(c["instance_group"][0]["kind"], "KIND_CPU");
        assert_eq!(
            c["dynamic_batching"],
            json!({"max_queue_delay_microseconds": 500, "preferred_batch_size": [16, 32]})
        );
        assert_eq!(c["parameters"]["kind"], original["parameters"]["kind"]);
        assert_eq!(marker(&c).as_deref(), Some("run 1"));
        assert_eq!(Settings::of(&c).max_batch_size, 32);
        // Back without dynamic batching and without the marker: the original's fields.
        let back = candidate(&c, &Settings::of(&original), None);
        assert_eq!(back, original);
    }

    #[test]
    fn confirm_names_what_the_server_did_not_take() {
        let original = served();
        let s = Settings {
            max_batch_size: 16,
            instances: 1,
            dynamic: Some(Dynamic {
                delay_us: 100,
                preferred: Preferred::Server,
            }),
        };
        let mut read = candidate(&original, &s, Some("r"));
        // The server fills in the preferred size: still the candidate.
        read["dynamic_batching"]["preferred_batch_size"] = json!([16]);
        assert_eq!(confirm(&read, &s, Some("r")), Ok(()));
        let e = confirm(&original, &s, Some("r")).unwrap_err();
        assert!(e.contains("max_batch_size 8"), "{e}");
        assert!(e.contains("no dynamic batching"), "{e}");
        assert!(e.contains("no `bertqa_tune` parameter"), "{e}");
    }

    #[test]
    fn the_text_format_has_bare_enums_maps_and_no_marker() {
        let c = candidate(
            &served(),
            &Settings {
                max_batch_size: 16,
                instances: 2,
                dynamic: Some(Dynamic {
                    delay_us: 100,
                    preferred: Preferred::Sizes(vec![8, 16]),
                }),
            },
            Some("run"),
        );
        let text = to_pbtxt(&c, &["written by a test".into()]);
        let want = "# written by a test
name: \"m\"
backend: \"python\"
max_batch_size: 16
input {
  name: \"input__0\"
  data_type: TYPE_INT64
  dims: -1
}
optimization {
  priority: PRIORITY_DEFAULT
  input_pinned_memory {
    enable: true
  }
}
instance_group {
  name: \"m_0\"
  kind: KIND_CPU
  count: 2
}
parameters {
  key: \"kind\"
  value {
    string_value: \"null\"
  }
}
dynamic_batching {
  max_queue_delay_microseconds: 100
  preferred_batch_size: 8
  preferred_batch_size: 16
}
";
        assert_eq!(text, want);
    }
}
