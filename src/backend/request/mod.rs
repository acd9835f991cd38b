//! An inference request as bertqa sends it: a checked batch of features for a bound
//! model, and its `ModelInferRequest` message (docs/design.md, protocol item 1).
//!
//! [`prepare_request`] only checks a batch and keeps its features; the tensors are
//! written when the request is sent ([`InferRequest::to_proto`], encoded by prost), or
//! into a shared memory slot ([`InferRequest::write_contents_to`]). Raw contents are
//! little-endian and row-major, padded to the batch's sequence length (algorithm §4.4: pad
//! id 0, segment 0, mask 0), one entry per input in the model's declared input order.
//!
//! The request is cheap to clone (shared features), so a retry builds the same message
//! again without copying the batch.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::BufMut;

use super::binding::{Binding, InputBinding, InputRole, IntType};
use super::proto::infer_parameter::ParameterChoice;
use super::proto::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
use super::proto::{InferParameter, ModelInferRequest};
use super::text::TextBinding;
use super::text_request::{self, TextPair};
use crate::error::{Error, Result};
use crate::types::Feature;

/// One `ModelInfer` call: a batch of features for a bound model, padded to `seq_len`
/// ([`prepare_request`]), or a text model's questions and contexts
/// ([`InferRequest::text`]). Every inference request bertqa sends is one of these, and
/// goes through [`Infer`](super::Infer).
#[derive(Debug, Clone)]
pub struct InferRequest {
    payload: Payload,
    /// Request id (`ModelInferRequest.id`), echoed by the server; empty: none.
    id: String,
    /// Request-level parameters.
    parameters: Vec<(String, InferParameter)>,
    /// Where the input tensors lie when they are not in the message.
    shm: Option<ShmInputs>,
    /// Where the server is to write the outputs instead of returning them in the message.
    shm_out: Option<ShmOutputs>,
}

/// What a request carries.
#[derive(Debug, Clone)]
enum Payload {
    /// Token tensors: features padded to `seq_len`.
    Tokens {
        binding: Arc<Binding>,
        features: Arc<Vec<Arc<Feature>>>,
        seq_len: usize,
    },
    /// BYTES tensors: (question, context) pairs for a model that tokenizes on the
    /// server (`text_request.rs`).
    Text {
        binding: Arc<TextBinding>,
        pairs: Arc<Vec<TextPair>>,
    },
}

/// Where a request's input tensors lie in a registered system shared memory region
/// instead of in the message (docs/design.md, protocol item 4): one after another from `offset`, in the
/// binding's input order, exactly as [`InferRequest::write_contents`] lays them out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShmInputs {
    /// The region's registered name.
    pub region: Arc<str>,
    /// Byte offset of the first input in the region.
    pub offset: u64,
}

/// Where the server writes a request's output tensors in a registered system shared
/// memory region instead of returning their bytes in the response (docs/design.md, protocol item 4): one
/// after another from `offset`, in the binding's output order
/// ([`Binding::output_bindings`]), each exactly as long as the batch's output (the
/// response then has an empty raw entry for each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShmOutputs {
    /// The region's registered name.
    pub region: Arc<str>,
    /// Byte offset of the first output in the region.
    pub offset: u64,
}

/// Checks a batch of `features` for `binding` padded to `seq_len` tokens and keeps it
/// for sending.
///
/// `seq_len` must be at least the longest feature; for a fixed-length model it is the
/// model's length. The batch must hold between one feature and the model's max batch
/// size.
pub fn prepare_request(
    binding: &Arc<Binding>,
    features: Vec<Arc<Feature>>,
    seq_len: usize,
) -> Result<InferRequest> {
    let rows = features.len();
    if rows == 0 {
        return Err(Error::Config(
            "an inference request needs at least one feature".into(),
        ));
    }
    if rows > binding.batch_limit() {
        return Err(Error::Config(format!(
            "batch of {rows} features exceeds model {:?}'s max batch size {}",
            binding.model,
            binding.batch_limit()
        )));
    }
    if let Some(f) = features.iter().find(|f| f.len() > seq_len) {
        return Err(Error::Config(format!(
            "feature {} has {} tokens, more than the sequence length {seq_len}",
            f.unique_id,
            f.len()
        )));
    }
    Ok(InferRequest::of(Payload::Tokens {
        binding: binding.clone(),
        features: Arc::new(features),
        seq_len,
    }))
}

impl InferRequest {
    fn of(payload: Payload) -> InferRequest {
        InferRequest {
            payload,
            id: String::new(),
            parameters: Vec::new(),
            shm: None,
            shm_out: None,
        }
    }

    /// A text model's request about `pairs` (question, context), one row each: between
    /// one pair and the model's max batch size (one for a model without batching).
    pub fn text(binding: &Arc<TextBinding>, pairs: Vec<TextPair>) -> Result<InferRequest> {
        let limit = binding.max_batch_size.max(1);
        if pairs.is_empty() || pairs.len() > limit {
            return Err(Error::Config(format!(
                "a request of {} questions for model {:?}, which takes 1 to {limit}",
                pairs.len(),
                binding.model
            )));
        }
        Ok(InferRequest::of(Payload::Text {
            binding: binding.clone(),
            pairs: Arc::new(pairs),
        }))
    }
}

impl InferRequest {
    /// Sets the request id the server echoes back.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Adds a request-level parameter (e.g. `priority`, `timeout`; docs/design.md, protocol item 3).
    pub fn with_parameter(mut self, key: impl Into<String>, value: InferParameter) -> Self {
        self.parameters.push((key.into(), value));
        self
    }

    /// Sends the input tensors through shared memory: the message names the region and
    /// carries no tensor bytes; the caller writes [`write_contents`](Self::write_contents)
    /// at `at.offset` of the region before sending.
    pub fn with_shm_inputs(mut self, at: ShmInputs) -> Self {
        self.shm = Some(at);
        self
    }

    /// Where the inputs lie when they are not in the message.
    pub fn shm_inputs(&self) -> Option<&ShmInputs> {
        self.shm.as_ref()
    }

    /// Asks the server to write the outputs into shared memory at `at` (laid out as
    /// `ShmOutputs` says, `outputs_len` bytes in all) instead of
    /// returning them in the response.
    pub fn with_shm_outputs(mut self, at: ShmOutputs) -> Self {
        self.shm_out = Some(at);
        self
    }

    /// The same request with its outputs returned in the message.
    pub fn without_shm_outputs(mut self) -> Self {
        self.shm_out = None;
        self
    }

    /// Where the server writes the outputs when they are not returned in the message.
    pub fn shm_outputs(&self) -> Option<&ShmOutputs> {
        self.shm_out.as_ref()
    }

    /// Bytes of every output tensor of this batch together; `None` for a text model's
    /// request, whose outputs' size is known only once the server has answered (they
    /// always come back in the message).
    pub fn outputs_len(&self) -> Option<usize> {
        match &self.payload {
            Payload::Tokens {
                binding, seq_len, ..
            } => Some(binding.outputs_len(self.rows(), *seq_len)),
            Payload::Text { .. } => None,
        }
    }

    /// Bytes of every input tensor together (what [`write_contents`](Self::write_contents)
    /// writes).
    pub fn contents_len(&self) -> usize {
        match &self.payload {
            Payload::Tokens {
                binding, seq_len, ..
            } => contents_len(binding, self.rows(), *seq_len),
            Payload::Text { pairs, .. } => text_request::contents_len(pairs),
        }
    }

    /// Appends every input tensor's raw bytes to `out`, in the binding's input order:
    /// the bytes the message carries when shared memory is not used.
    pub fn write_contents(&self, out: &mut Vec<u8>) {
        out.reserve(self.contents_len());
        self.write_contents_to(out);
    }

    /// [`write_contents`](Self::write_contents) into any buffer with room for
    /// [`contents_len`](Self::contents_len) bytes (a slice of a shared memory slot).
    pub fn write_contents_to<B: BufMut>(&self, out: &mut B) {
        match &self.payload {
            Payload::Tokens { binding, .. } => {
                for input in &binding.inputs {
                    self.put_contents(out, input);
                }
            }
            Payload::Text { pairs, .. } => text_request::write_contents(pairs, out),
        }
    }

    /// The token binding the request was prepared for (`None`: a text model's request).
    pub fn binding(&self) -> Option<&Arc<Binding>> {
        match &self.payload {
            Payload::Tokens { binding, .. } => Some(binding),
            Payload::Text { .. } => None,
        }
    }

    /// The (question, context) pairs of a text model's request, one per row (`None`: a
    /// token request).
    pub fn pairs(&self) -> Option<&[TextPair]> {
        match &self.payload {
            Payload::Tokens { .. } => None,
            Payload::Text { pairs, .. } => Some(pairs),
        }
    }

    /// The features, one per batch row (none in a text model's request).
    pub fn features(&self) -> &[Arc<Feature>] {
        match &self.payload {
            Payload::Tokens { features, .. } => features,
            Payload::Text { .. } => &[],
        }
    }

    /// Batch rows: features, or questions.
    pub fn rows(&self) -> usize {
        match &self.payload {
            Payload::Tokens { features, .. } => features.len(),
            Payload::Text { pairs, .. } => pairs.len(),
        }
    }

    /// Tokens per row on the wire (0 for a text model's request: the server tokenizes).
    pub fn seq_len(&self) -> usize {
        match &self.payload {
            Payload::Tokens { seq_len, .. } => *seq_len,
            Payload::Text { .. } => 0,
        }
    }

    /// The model name, for messages.
    pub fn model(&self) -> &str {
        match &self.payload {
            Payload::Tokens { binding, .. } => &binding.model,
            Payload::Text { binding, .. } => &binding.model,
        }
    }

    /// The model version asked for (`""`: the server's choice).
    pub fn version(&self) -> &str {
        match &self.payload {
            Payload::Tokens { binding, .. } => &binding.version,
            Payload::Text { binding, .. } => &binding.version,
        }
    }

    /// The features back, without copying them when no clone of the request is left
    /// (none for a text model's request).
    pub fn into_features(self) -> Vec<Arc<Feature>> {
        match self.payload {
            Payload::Tokens { features, .. } => {
                Arc::try_unwrap(features).unwrap_or_else(|shared| shared.as_ref().clone())
            }
            Payload::Text { .. } => Vec::new(),
        }
    }

    /// The token binding and the sequence length; only called on token requests.
    fn tokens(&self) -> (&Binding, usize) {
        match &self.payload {
            Payload::Tokens {
                binding, seq_len, ..
            } => (binding, *seq_len),
            Payload::Text { .. } => unreachable!("a token tensor of a text request"),
        }
    }

    /// Shape of `input` on the wire: `[rows] +` per-row dims for a batching model.
    fn shape(&self, input: &InputBinding) -> Vec<i64> {
        let (binding, seq_len) = self.tokens();
        let batch = binding.has_batch_dim().then_some(self.rows() as i64);
        let per_row: &[i64] = match input.role {
            InputRole::UniqueIds => &input.dims,
            _ => &[],
        };
        let seq = (input.role != InputRole::UniqueIds).then_some(seq_len as i64);
        // A token input declared with trailing dimensions of size 1 (`[seq, 1]`) is
        // sent with them: the same bytes in the shape the model declares.
        let ones = match input.role {
            InputRole::UniqueIds => 0,
            _ => input.dims.len() - super::binding::without_trailing_ones(&input.dims).len(),
        };
        batch
            .into_iter()
            .chain(per_row.iter().map(|&d| d.max(1)))
            .chain(seq)
            .chain(std::iter::repeat_n(1, ones))
            .collect()
    }

    /// Bytes of each input tensor's raw contents, in the order of
    /// [`input_tensors`](Self::input_tensors).
    pub fn input_lens(&self) -> Vec<usize> {
        match &self.payload {
            Payload::Tokens {
                binding, seq_len, ..
            } => binding
                .inputs
                .iter()
                .map(|i| input_len(i, self.rows(), *seq_len))
                .collect(),
            Payload::Text { pairs, .. } => text_request::input_lens(pairs).to_vec(),
        }
    }

    /// The raw contents of one token input for every row.
    fn put_contents<B: BufMut>(&self, buf: &mut B, input: &InputBinding) {
        let t = input.datatype;
        let seq = self.seq_len();
        let ones = |buf: &mut B, n: usize| (0..n).for_each(|_| put_int(buf, t, 1));
        for f in self.features().iter() {
            let len = f.len();
            match input.role {
                InputRole::InputIds => {
                    for &id in &f.input_ids {
                        put_int(buf, t, i64::from(id));
                    }
                    let pad = f.pad_id();
                    if pad != 0 {
                        (len..seq).for_each(|_| put_int(buf, t, i64::from(pad)));
                        continue;
                    }
                }
                InputRole::SegmentIds => {
                    let one_from = f.type_one_from().min(len);
                    buf.put_bytes(0, one_from * t.size());
                    ones(buf, len - one_from);
                }
                InputRole::InputMask => ones(buf, len),
                InputRole::UniqueIds => {
                    for _ in 0..unique_width(input) {
                        put_int(buf, t, f.unique_id as i64);
                    }
                    continue;
                }
            }
            buf.put_bytes(0, (seq - len) * t.size());
        }
    }

    /// The `ModelInferRequest` message: tensors in the message, or the shared memory
    /// parameters that say where they lie.
    pub fn to_proto(&self) -> ModelInferRequest {
        let raw_input_contents = match (&self.shm, &self.payload) {
            (Some(_), _) => Vec::new(),
            (None, Payload::Tokens { binding, .. }) => binding
                .inputs
                .iter()
                .map(|input| {
                    let mut bytes =
                        Vec::with_capacity(input_len(input, self.rows(), self.seq_len()));
                    self.put_contents(&mut bytes, input);
                    bytes::Bytes::from(bytes)
                })
                .collect(),
            (None, Payload::Text { pairs, .. }) => text_request::raw_contents(pairs).into(),
        };
        ModelInferRequest {
            model_name: self.model().to_string(),
            model_version: self.version().to_string(),
            id: self.id.clone(),
            parameters: self.parameters.iter().cloned().collect(),
            inputs: self.input_tensors(),
            outputs: self.output_tensors(),
            raw_input_contents,
        }
    }

    /// The request id (empty: none).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The request-level parameters, in the order they were added.
    pub fn parameters(&self) -> &[(String, InferParameter)] {
        &self.parameters
    }

    /// The input tensors as the message describes them (name, datatype, shape, and the
    /// shared memory parameters when they lie in a region), in the binding's order:
    /// what any protocol sends ahead of the bytes [`write_contents`](Self::write_contents)
    /// lays out.
    pub fn input_tensors(&self) -> Vec<InferInputTensor> {
        let mut input_at = self.shm.as_ref().map(|at| at.offset);
        let lens = self.input_lens();
        let described: Vec<(&str, &str, Vec<i64>)> = match &self.payload {
            Payload::Tokens { binding, .. } => binding
                .inputs
                .iter()
                .map(|input| {
                    (
                        input.name.as_str(),
                        input.datatype.wire(),
                        self.shape(input),
                    )
                })
                .collect(),
            Payload::Text { binding, .. } => {
                let shape = binding.input_shape(self.rows());
                vec![
                    (binding.question.as_str(), "BYTES", shape.clone()),
                    (binding.context.as_str(), "BYTES", shape),
                ]
            }
        };
        described
            .into_iter()
            .zip(lens)
            .map(|((name, datatype, shape), len)| {
                let parameters = match (&self.shm, input_at.as_mut()) {
                    (Some(at), Some(offset)) => {
                        let p = shm_parameters(&at.region, len, *offset);
                        *offset += len as u64;
                        p
                    }
                    _ => HashMap::new(),
                };
                InferInputTensor {
                    name: name.to_string(),
                    datatype: datatype.into(),
                    shape,
                    parameters,
                    ..Default::default()
                }
            })
            .collect()
    }

    /// The outputs asked for, in the binding's output order, with the shared memory
    /// parameters when the server is to write them into a region.
    pub fn output_tensors(&self) -> Vec<InferRequestedOutputTensor> {
        let b = match &self.payload {
            Payload::Tokens { binding, .. } => binding,
            Payload::Text { binding, .. } => {
                return binding
                    .output_names()
                    .into_iter()
                    .map(|name| InferRequestedOutputTensor {
                        name: name.to_string(),
                        ..Default::default()
                    })
                    .collect()
            }
        };
        let values = b.output_values(self.rows(), self.seq_len());
        let mut output_at = self.shm_out.as_ref().map(|at| at.offset);
        b.output_bindings()
            .iter()
            .map(|o| {
                let len = values * o.datatype.size();
                let parameters = match (&self.shm_out, output_at.as_mut()) {
                    (Some(at), Some(offset)) => {
                        let p = shm_parameters(&at.region, len, *offset);
                        *offset += len as u64;
                        p
                    }
                    _ => HashMap::new(),
                };
                InferRequestedOutputTensor {
                    name: o.name.clone(),
                    parameters,
                }
            })
            .collect()
    }
}

/// The parameters that place a tensor of `len` bytes at `offset` of shared memory region
/// `region` (docs/design.md, protocol item 4).
pub(crate) fn shm_parameters(
    region: &str,
    len: usize,
    offset: u64,
) -> HashMap<String, InferParameter> {
    let param = |choice| InferParameter {
        parameter_choice: Some(choice),
    };
    HashMap::from([
        (
            "shared_memory_region".to_string(),
            param(ParameterChoice::StringParam(region.to_string())),
        ),
        (
            "shared_memory_byte_size".to_string(),
            param(ParameterChoice::Int64Param(len as i64)),
        ),
        (
            "shared_memory_offset".to_string(),
            param(ParameterChoice::Int64Param(offset as i64)),
        ),
    ])
}

/// Bytes of every input tensor of `binding` together, for `rows` features padded to
/// `seq_len` tokens.
pub(crate) fn contents_len(binding: &Binding, rows: usize, seq_len: usize) -> usize {
    binding
        .inputs
        .iter()
        .map(|i| input_len(i, rows, seq_len))
        .sum()
}

/// Bytes of one input tensor for `rows` features padded to `seq_len` tokens.
fn input_len(input: &InputBinding, rows: usize, seq_len: usize) -> usize {
    let per_row = match input.role {
        InputRole::UniqueIds => unique_width(input),
        _ => seq_len,
    };
    rows * per_row * input.datatype.size()
}

/// Values per row of a unique-ids input: the product of its per-row dims (at least 1).
fn unique_width(input: &InputBinding) -> usize {
    input.dims.iter().map(|&d| d.max(1)).product::<i64>() as usize
}

fn put_int<B: BufMut>(buf: &mut B, t: IntType, v: i64) {
    match t {
        IntType::Int32 => buf.put_i32_le(v as i32),
        IntType::Int64 => buf.put_i64_le(v),
    }
}

#[cfg(test)]
mod tests;
