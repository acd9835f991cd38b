//! Which tensor of a deployed model plays which BERT-QA role (algorithm §9.2, §9.6).
//!
//! A binding is inferred from `ModelMetadata` (+ `ModelConfig` for `max_batch_size` and
//! batching) by tensor *name*, never by position: the Hugging Face export declares
//! `input_ids, attention_mask, token_type_ids`, NVIDIA's declares ids, segments, mask,
//! and swapping mask and segments silently ruins the answers. Explicit overrides (the
//! `--input-ids` … `--end-logits` flags) win over inference. A layout that cannot be
//! mapped is an error listing the model's tensors and the flags to map them.

use std::fmt;

use serde::Serialize;

use super::proto::{model_metadata_response::TensorMetadata, ModelConfig, ModelMetadataResponse};
use crate::error::{Error, Result};

/// What an input tensor receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputRole {
    /// WordPiece token ids.
    InputIds,
    /// Segment (token type) ids.
    SegmentIds,
    /// Attention mask.
    InputMask,
    /// The feature's unique id, one per batch row (NVIDIA's TensorFlow export).
    UniqueIds,
}

impl InputRole {
    /// The override (a [`BindingOverrides`] field) that maps this role.
    pub fn setting(self) -> &'static str {
        match self {
            InputRole::InputIds => "`input_ids`",
            InputRole::SegmentIds => "`segment_ids`",
            InputRole::InputMask => "`input_mask`",
            InputRole::UniqueIds => "(unique ids: inferred by name only)",
        }
    }

    /// The role's name as shown to users (`input_ids`, `segment_ids`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            InputRole::InputIds => "input_ids",
            InputRole::SegmentIds => "segment_ids",
            InputRole::InputMask => "input_mask",
            InputRole::UniqueIds => "unique_ids",
        }
    }

    fn from_name(name: &str) -> Option<InputRole> {
        Some(match name {
            "input__0" | "input_ids" | "input_id" | "input_word_ids" => InputRole::InputIds,
            "input__1" | "token_type_ids" | "segment_ids" | "input_type_ids" => {
                InputRole::SegmentIds
            }
            "input__2" | "attention_mask" | "input_mask" => InputRole::InputMask,
            "unique_ids" | "unique_id" => InputRole::UniqueIds,
            _ => return None,
        })
    }
}

/// Integer element type of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum IntType {
    #[serde(rename = "INT32")]
    Int32,
    #[serde(rename = "INT64")]
    Int64,
}

impl IntType {
    /// The wire datatype string.
    pub fn wire(self) -> &'static str {
        match self {
            IntType::Int32 => "INT32",
            IntType::Int64 => "INT64",
        }
    }
    /// Bytes per element in raw form.
    pub fn size(self) -> usize {
        match self {
            IntType::Int32 => 4,
            IntType::Int64 => 8,
        }
    }
}

/// Floating-point element type of an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FloatType {
    #[serde(rename = "FP32")]
    Fp32,
    #[serde(rename = "FP16")]
    Fp16,
}

impl FloatType {
    /// The wire datatype string.
    pub fn wire(self) -> &'static str {
        match self {
            FloatType::Fp32 => "FP32",
            FloatType::Fp16 => "FP16",
        }
    }
    /// Bytes per element in raw form.
    pub fn size(self) -> usize {
        match self {
            FloatType::Fp32 => 4,
            FloatType::Fp16 => 2,
        }
    }
}

/// One bound input tensor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputBinding {
    pub name: String,
    pub role: InputRole,
    pub datatype: IntType,
    /// Shape per batch row as the model declares it (without the batch dimension).
    pub dims: Vec<i64>,
}

/// One bound output tensor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutputBinding {
    pub name: String,
    pub datatype: FloatType,
    pub dims: Vec<i64>,
}

/// Where the logits come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "layout", rename_all = "snake_case")]
pub enum Outputs {
    /// Two tensors `[batch, seq]`.
    Split {
        start: OutputBinding,
        end: OutputBinding,
    },
    /// One tensor `[batch, seq, 2]`: channel 0 start, channel 1 end.
    Stacked { logits: OutputBinding },
}

/// Sequence length the model accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SeqLen {
    /// Exactly this many tokens (NVIDIA's export: 384).
    Fixed(usize),
    /// Any length (`-1`).
    Dynamic,
}

impl fmt::Display for SeqLen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SeqLen::Fixed(n) => write!(f, "fixed {n}"),
            SeqLen::Dynamic => write!(f, "dynamic"),
        }
    }
}

/// Who declares how many features a request may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Batching {
    /// Triton's model configuration: `max_batch_size` (0: no batch dimension, one
    /// feature per request).
    #[default]
    Declared,
    /// Nobody (a server without model configuration, or Triton's `max_batch_size: 0`
    /// with the batch dimension written in the dims): a leading `-1` is the batch
    /// dimension and the client chooses the batch size ([`Binding::default_batch_size`]).
    Undeclared,
}

impl Batching {
    fn is_declared(&self) -> bool {
        *self == Batching::Declared
    }
}

/// The batch size of a model whose batching nobody declares, unless `--batch-size`
/// says otherwise: the test models' and NVIDIA's usual `max_batch_size`.
pub(crate) const UNDECLARED_BATCH_SIZE: usize = 8;

/// Explicit tensor names that override inference (the binding flags).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BindingOverrides {
    /// The input that takes the token ids (`None`: found by name).
    pub input_ids: Option<String>,
    /// The input that takes the segment (token type) ids (`None`: found by name).
    pub segment_ids: Option<String>,
    /// The input that takes the attention mask (`None`: found by name).
    pub input_mask: Option<String>,
    /// The output holding the start logits, or, alone, the one `[batch, seq, 2]` output
    /// holding both (`None`: found by name or shape).
    pub start_logits: Option<String>,
    /// The output holding the end logits (`None`: found by name or shape).
    pub end_logits: Option<String>,
}

/// How bertqa talks to one model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Binding {
    pub model: String,
    /// Version requested (empty: the server's choice).
    pub version: String,
    pub platform: String,
    /// Inputs in the model's declared order (the order they are sent in).
    pub inputs: Vec<InputBinding>,
    pub outputs: Outputs,
    /// 0: no declared batch (one feature per request, no batch dimension; or see
    /// `batching`).
    pub max_batch_size: usize,
    pub seq_len: SeqLen,
    pub dynamic_batching: bool,
    /// Who declares the batching (serialized only when nobody does).
    #[serde(skip_serializing_if = "Batching::is_declared")]
    pub batching: Batching,
}

impl Binding {
    /// The sequence length the model takes when it is fixed (`None`: any length).
    pub fn fixed_len(&self) -> Option<usize> {
        match self.seq_len {
            SeqLen::Fixed(n) => Some(n),
            SeqLen::Dynamic => None,
        }
    }
}

/// Bindings for the crate's unit tests.
#[cfg(test)]
impl Binding {
    /// Three INT64 inputs (`input_ids`, `segment_ids`, `input_mask`, named `inputs`) and
    /// FP32 start/end outputs (named `outputs`), each of `dims`; max batch 8.
    pub(crate) fn for_tests(
        model: &str,
        inputs: [&str; 3],
        outputs: [&str; 2],
        dims: &[i64],
        seq_len: SeqLen,
    ) -> Binding {
        let roles = [
            InputRole::InputIds,
            InputRole::SegmentIds,
            InputRole::InputMask,
        ];
        let output = |name: &str| OutputBinding {
            name: name.into(),
            datatype: FloatType::Fp32,
            dims: dims.to_vec(),
        };
        Binding {
            model: model.into(),
            version: String::new(),
            platform: "test".into(),
            inputs: inputs
                .iter()
                .zip(roles)
                .map(|(name, role)| InputBinding {
                    name: (*name).into(),
                    role,
                    datatype: IntType::Int64,
                    dims: dims.to_vec(),
                })
                .collect(),
            outputs: Outputs::Split {
                start: output(outputs[0]),
                end: output(outputs[1]),
            },
            max_batch_size: 8,
            seq_len,
            dynamic_batching: false,
            batching: Batching::Declared,
        }
    }
}

impl Binding {
    internal! {
        /// Infers the binding of `metadata` (+ `config`, when the server gave one).
        pub fn infer(
            metadata: &ModelMetadataResponse,
            config: Option<&ModelConfig>,
            version: &str,
            overrides: &BindingOverrides,
        ) -> Result<Binding> {
            let (max_batch_size, batching) = batching(metadata, config);
            let model = Inference {
                metadata,
                batched: max_batch_size > 0 || batching == Batching::Undeclared,
            };
            let inputs = model.inputs(overrides)?;
            let seq_len = model.seq_len(&inputs)?;
            let outputs = model.outputs(overrides)?;
            match &outputs {
                Outputs::Split { start, end } => {
                    model.check_seq(start, false, seq_len)?;
                    model.check_seq(end, false, seq_len)?;
                }
                Outputs::Stacked { logits } => model.check_seq(logits, true, seq_len)?,
            }
            Ok(Binding {
                model: metadata.name.clone(),
                version: version.to_string(),
                platform: platform(metadata, config),
                inputs,
                outputs,
                max_batch_size,
                seq_len,
                dynamic_batching: config.is_some_and(|c| {
                    matches!(
                        c.scheduling_choice,
                        Some(crate::backend::proto::model_config::SchedulingChoice::DynamicBatching(_))
                    )
                }),
                batching,
            })
        }
    }

    /// Whether each tensor's first dimension is the batch.
    pub fn has_batch_dim(&self) -> bool {
        self.max_batch_size > 0 || self.batching == Batching::Undeclared
    }

    /// Largest batch a request may carry: the declared one (1 for a model that does
    /// not batch); no limit when nobody declares it.
    pub fn batch_limit(&self) -> usize {
        match self.batching {
            Batching::Declared => self.max_batch_size.max(1),
            Batching::Undeclared => usize::MAX,
        }
    }

    /// The batch size when the user gives none: the declared limit, or 8 when nobody
    /// declares it.
    pub fn default_batch_size(&self) -> usize {
        match self.batching {
            Batching::Declared => self.batch_limit(),
            Batching::Undeclared => UNDECLARED_BATCH_SIZE,
        }
    }

    /// Largest batch the server's own batcher forms from several requests: the
    /// declared limit with dynamic batching; 1 when nobody declares batching (whatever
    /// the server does is unknown).
    pub fn server_batch(&self) -> usize {
        match self.batching {
            Batching::Declared => self.batch_limit(),
            Batching::Undeclared => 1,
        }
    }

    /// Names of the outputs to request, in the order they are decoded.
    pub fn output_names(&self) -> impl Iterator<Item = &str> {
        self.output_bindings().into_iter().map(|o| o.name.as_str())
    }

    /// The outputs in the order they are requested (start, end; or the stacked one).
    /// Nothing allocated: each request reads them several times.
    pub fn output_bindings(&self) -> OutputList<'_> {
        match &self.outputs {
            Outputs::Split { start, end } => OutputList {
                items: [start, end],
                len: 2,
            },
            Outputs::Stacked { logits } => OutputList {
                items: [logits, logits],
                len: 1,
            },
        }
    }

    /// Values of each output for `rows` features of `seq_len` tokens: one per position,
    /// two for the stacked `[batch, seq, 2]` output.
    pub fn output_values(&self, rows: usize, seq_len: usize) -> usize {
        let per_position = match self.outputs {
            Outputs::Split { .. } => 1,
            Outputs::Stacked { .. } => 2,
        };
        rows * seq_len * per_position
    }

    /// Bytes of every output together for `rows` features of `seq_len` tokens.
    pub fn outputs_len(&self, rows: usize, seq_len: usize) -> usize {
        let values = self.output_values(rows, seq_len);
        self.output_bindings()
            .iter()
            .map(|o| values * o.datatype.size())
            .sum()
    }
}

/// A model's outputs in the order they are requested ([`Binding::output_bindings`]): a
/// slice of one or two.
#[derive(Debug, Clone, Copy)]
pub struct OutputList<'a> {
    items: [&'a OutputBinding; 2],
    len: usize,
}

impl<'a> std::ops::Deref for OutputList<'a> {
    type Target = [&'a OutputBinding];

    fn deref(&self) -> &Self::Target {
        &self.items[..self.len]
    }
}

impl<'a> IntoIterator for OutputList<'a> {
    type Item = &'a OutputBinding;
    type IntoIter = std::iter::Take<std::array::IntoIter<&'a OutputBinding, 2>>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter().take(self.len)
    }
}

/// The one batching rule ([`Batching`]): Triton's `max_batch_size` when its
/// configuration declares one; otherwise (no configuration, or `max_batch_size: 0`) a
/// leading `-1` on every input of two or more dimensions is the batch dimension, whose
/// size the client chooses (a second `-1` is then a dynamic sequence length). Anything
/// else has no batch dimension.
pub(crate) fn batching(
    metadata: &ModelMetadataResponse,
    config: Option<&ModelConfig>,
) -> (usize, Batching) {
    let declared = config.map_or(0, |c| c.max_batch_size.max(0) as usize);
    if declared > 0 {
        return (declared, Batching::Declared);
    }
    let leading = !metadata.inputs.is_empty()
        && metadata
            .inputs
            .iter()
            .all(|t| t.shape.len() >= 2 && t.shape[0] == -1);
    if leading {
        (0, Batching::Undeclared)
    } else {
        (0, Batching::Declared)
    }
}

/// A model's metadata, read for its binding ([`Binding::infer`]).
struct Inference<'a> {
    metadata: &'a ModelMetadataResponse,
    /// The model batches: each tensor's first dimension is the batch.
    batched: bool,
}

impl Inference<'_> {
    /// A binding error: `message`, then the model's tensors.
    fn fail(&self, message: String) -> Error {
        Error::Binding {
            model: self.metadata.name.clone(),
            message,
            tensors: describe_tensors(self.metadata),
        }
    }

    /// A tensor's shape per batch row.
    fn per_row(&self, t: &TensorMetadata) -> Vec<i64> {
        if self.batched {
            t.shape.iter().skip(1).copied().collect()
        } else {
            t.shape.clone()
        }
    }

    /// The inputs in the model's order, each with its role: overrides first, then
    /// names. Every token role is bound, once.
    fn inputs(&self, overrides: &BindingOverrides) -> Result<Vec<InputBinding>> {
        let metadata = self.metadata;
        let wanted = [
            (InputRole::InputIds, &overrides.input_ids),
            (InputRole::SegmentIds, &overrides.segment_ids),
            (InputRole::InputMask, &overrides.input_mask),
        ];
        for (role, name) in wanted {
            if let Some(name) = name {
                if !metadata.inputs.iter().any(|t| &t.name == name) {
                    return Err(self.fail(format!(
                        "{} names input {name:?}, which the model does not have",
                        role.setting()
                    )));
                }
            }
        }
        let mut inputs = Vec::new();
        for t in &metadata.inputs {
            let overridden = wanted
                .iter()
                .find(|(_, n)| n.as_deref() == Some(t.name.as_str()))
                .map(|(r, _)| *r);
            let role = overridden.or_else(|| {
                // A name-inferred role yields to an override that claims the same role.
                InputRole::from_name(&t.name).filter(|r| {
                    !wanted
                        .iter()
                        .any(|(wr, n)| wr == r && n.is_some() && n.as_deref() != Some(&t.name))
                })
            });
            let Some(role) = role else {
                return Err(self.fail(format!(
                    "cannot tell what input {:?} is for; map the inputs with `input_ids`, \
                     `segment_ids` and `input_mask`",
                    t.name
                )));
            };
            if inputs.iter().any(|b: &InputBinding| b.role == role) {
                return Err(self.fail(format!(
                    "two inputs are bound as {}; map them with `input_ids`, \
                     `segment_ids` and `input_mask`",
                    role.as_str()
                )));
            }
            let datatype = match t.datatype.as_str() {
                "INT32" => IntType::Int32,
                "INT64" => IntType::Int64,
                other => {
                    return Err(Error::TensorMismatch {
                        model: metadata.name.clone(),
                        tensor: t.name.clone(),
                        expected: "INT32 or INT64".into(),
                        actual: other.into(),
                    })
                }
            };
            inputs.push(InputBinding {
                name: t.name.clone(),
                role,
                datatype,
                dims: self.per_row(t),
            });
        }
        // Token type ids go only to a model that has that input (DistilBERT, RoBERTa and
        // DeBERTa-v3 have none).
        for role in [InputRole::InputIds, InputRole::InputMask] {
            if !inputs.iter().any(|b| b.role == role) {
                return Err(self.fail(format!(
                    "no input for the {} role; map it with {}",
                    role.as_str(),
                    role.setting()
                )));
            }
        }
        Ok(inputs)
    }

    /// The sequence length: the token inputs must be 1-D per row and agree.
    fn seq_len(&self, inputs: &[InputBinding]) -> Result<SeqLen> {
        let mut seq_len: Option<SeqLen> = None;
        for b in inputs.iter().filter(|b| b.role != InputRole::UniqueIds) {
            let this = match without_trailing_ones(&b.dims) {
                [-1] => SeqLen::Dynamic,
                [n] if *n > 0 => SeqLen::Fixed(*n as usize),
                other => {
                    return Err(Error::TensorMismatch {
                        model: self.metadata.name.clone(),
                        tensor: b.name.clone(),
                        expected: format!(
                            "shape {}[seq]",
                            if self.batched { "[batch] + " } else { "" }
                        ),
                        actual: format!("per-row dims {other:?}"),
                    })
                }
            };
            match seq_len {
                None => seq_len = Some(this),
                Some(prev) if prev != this => {
                    return Err(self.fail(format!(
                        "inputs disagree on the sequence length ({prev} vs {this} for {:?})",
                        b.name
                    )))
                }
                _ => {}
            }
        }
        Ok(seq_len.expect("three token inputs checked before"))
    }

    /// An output's binding: FP32 or FP16.
    fn float(&self, t: &TensorMetadata) -> Result<OutputBinding> {
        let datatype = match t.datatype.as_str() {
            "FP32" => FloatType::Fp32,
            "FP16" => FloatType::Fp16,
            other => {
                return Err(Error::TensorMismatch {
                    model: self.metadata.name.clone(),
                    tensor: t.name.clone(),
                    expected: "FP32 or FP16".into(),
                    actual: other.into(),
                })
            }
        };
        Ok(OutputBinding {
            name: t.name.clone(),
            datatype,
            dims: self.per_row(t),
        })
    }

    /// The outputs holding the logits: the overrides, or known names, or the one
    /// `[batch, seq, 2]` output.
    fn outputs(&self, overrides: &BindingOverrides) -> Result<Outputs> {
        let metadata = self.metadata;
        let out = |name: &str| metadata.outputs.iter().find(|t| t.name == name);
        let is_stacked = |t: &TensorMetadata| {
            let dims = self.per_row(t);
            let dims = without_trailing_ones(&dims);
            dims.len() == 2 && dims[1] == 2
        };
        let named = |o: &Option<String>, what: &str| -> Result<Option<&TensorMetadata>> {
            match o {
                None => Ok(None),
                Some(n) => out(n).map(Some).ok_or_else(|| {
                    self.fail(format!(
                        "{what} names output {n:?}, which the model does not have"
                    ))
                }),
            }
        };
        let start_o = named(&overrides.start_logits, "`start_logits`")?;
        let end_o = named(&overrides.end_logits, "`end_logits`")?;
        Ok(match (start_o, end_o) {
            (Some(s), None) if is_stacked(s) => Outputs::Stacked {
                logits: self.float(s)?,
            },
            (Some(s), Some(e)) => Outputs::Split {
                start: self.float(s)?,
                end: self.float(e)?,
            },
            (s, e) => {
                let by_name = |pairs: &[(&str, &str)]| {
                    pairs.iter().find_map(|(a, b)| Some((out(a)?, out(b)?)))
                };
                let guess = by_name(&[
                    ("output__0", "output__1"),
                    ("start_logits", "end_logits"),
                    ("start_logit", "end_logit"),
                    ("start_scores", "end_scores"),
                ]);
                let stacked: Vec<&TensorMetadata> =
                    metadata.outputs.iter().filter(|t| is_stacked(t)).collect();
                match (s.or(guess.map(|g| g.0)), e.or(guess.map(|g| g.1))) {
                    (Some(s), Some(e)) => Outputs::Split {
                        start: self.float(s)?,
                        end: self.float(e)?,
                    },
                    _ if stacked.len() == 1 && s.is_none() && e.is_none() => Outputs::Stacked {
                        logits: self.float(stacked[0])?,
                    },
                    _ => {
                        let outputs: Vec<String> = metadata
                            .outputs
                            .iter()
                            .map(|t| format!("{} {} {:?}", t.name, t.datatype, t.shape))
                            .collect();
                        return Err(self.fail(format!(
                            "cannot tell which of its outputs ({}) hold the start and end \
                             logits; map them with `start_logits` and `end_logits` (or \
                             `start_logits` alone for one [batch, seq, 2] output)",
                            outputs.join(", ")
                        )));
                    }
                }
            }
        })
    }

    /// An output's per-row dims fit the sequence length (`[seq]`, or `[seq, 2]` stacked).
    fn check_seq(&self, o: &OutputBinding, stacked: bool, seq_len: SeqLen) -> Result<()> {
        let want = if stacked { 2 } else { 1 };
        let dims = without_trailing_ones(&o.dims);
        let ok = dims.len() == want
            && match seq_len {
                SeqLen::Fixed(n) => dims[0] == n as i64 || dims[0] == -1,
                SeqLen::Dynamic => true,
            };
        if ok {
            return Ok(());
        }
        Err(Error::TensorMismatch {
            model: self.metadata.name.clone(),
            tensor: o.name.clone(),
            expected: format!(
                "per-row dims [{}{}]",
                match seq_len {
                    SeqLen::Fixed(n) => n.to_string(),
                    SeqLen::Dynamic => "-1".into(),
                },
                if stacked { ", 2" } else { "" }
            ),
            actual: format!("{:?}", o.dims),
        })
    }
}

/// `dims` without its trailing dimensions of size 1 (at least one dimension kept): the
/// layout they hold (TensorRT's BERT demo answers `[batch, seq, 2, 1, 1]`).
/// The model's platform or backend, as its configuration names it (else its metadata).
pub(crate) fn platform(metadata: &ModelMetadataResponse, config: Option<&ModelConfig>) -> String {
    config
        .map(|c| {
            if c.platform.is_empty() {
                c.backend.clone()
            } else {
                c.platform.clone()
            }
        })
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| metadata.platform.clone())
}

pub(crate) fn without_trailing_ones(dims: &[i64]) -> &[i64] {
    let mut n = dims.len();
    while n > 1 && dims[n - 1] == 1 {
        n -= 1;
    }
    &dims[..n]
}

/// One line per tensor (`input input__0 INT64 [-1, 384]`), for `-v`.
fn describe_tensors(m: &ModelMetadataResponse) -> Vec<String> {
    let line =
        |kind: &str, t: &TensorMetadata| format!("{kind} {} {} {:?}", t.name, t.datatype, t.shape);
    let inputs = m.inputs.iter().map(|t| line("input ", t));
    inputs
        .chain(m.outputs.iter().map(|t| line("output", t)))
        .collect()
}
