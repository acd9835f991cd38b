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
                }
                InputRole::SegmentIds => {
                    let doc = f.doc_offset().min(len);
                    buf.put_bytes(0, doc * t.size());
                    ones(buf, len - doc);
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
mod tests {
    use super::*;
    use crate::backend::binding::{FloatType, OutputBinding, Outputs, SeqLen};
    use proptest::prelude::*;
    use prost::Message;

    fn feature(unique_id: u64, q: &[u32], doc: &[u32]) -> Arc<Feature> {
        Arc::new(Feature::from_pieces(unique_id, 0, q, doc))
    }

    fn input(name: &str, role: InputRole, datatype: IntType, dims: Vec<i64>) -> InputBinding {
        InputBinding {
            name: name.into(),
            role,
            datatype,
            dims,
        }
    }

    fn binding(inputs: Vec<InputBinding>, max_batch_size: usize) -> Arc<Binding> {
        let out = |name: &str| OutputBinding {
            name: name.into(),
            datatype: FloatType::Fp32,
            dims: vec![-1],
        };
        Arc::new(Binding {
            model: "m".into(),
            version: String::new(),
            platform: "test".into(),
            inputs,
            outputs: Outputs::Split {
                start: out("start"),
                end: out("end"),
            },
            max_batch_size,
            seq_len: SeqLen::Dynamic,
            dynamic_batching: false,
            batching: Default::default(),
        })
    }

    /// A token input declared `[seq, 1]` is sent in that shape, with the same bytes.
    #[test]
    fn trailing_dims_of_size_1_are_sent_as_declared() {
        let b = binding(
            vec![
                input("ids", InputRole::InputIds, IntType::Int32, vec![-1, 1]),
                input("seg", InputRole::SegmentIds, IntType::Int32, vec![-1]),
                input("mask", InputRole::InputMask, IntType::Int32, vec![-1, 1, 1]),
            ],
            8,
        );
        let r = prepare_request(&b, vec![feature(1, &[5], &[6, 8])], 8).unwrap();
        let shapes: Vec<Vec<i64>> = r.input_tensors().into_iter().map(|t| t.shape).collect();
        assert_eq!(shapes, vec![vec![1, 8, 1], vec![1, 8], vec![1, 8, 1, 1]]);
        assert!(r.input_lens().into_iter().all(|n| n == 8 * 4));
    }

    #[test]
    fn known_batch_has_the_padded_tensors_of_the_spec() {
        let b = binding(
            vec![
                input("ids", InputRole::InputIds, IntType::Int64, vec![-1]),
                input("seg", InputRole::SegmentIds, IntType::Int32, vec![-1]),
                input("mask", InputRole::InputMask, IntType::Int32, vec![-1]),
                input("uid", InputRole::UniqueIds, IntType::Int64, vec![1]),
            ],
            8,
        );
        let f = feature(7, &[5], &[6, 8]);
        let r = prepare_request(&b, vec![f], 8).unwrap();
        let m = r.to_proto();
        assert_eq!(m.model_name, "m");
        assert_eq!(
            m.inputs.iter().map(|t| t.shape.clone()).collect::<Vec<_>>(),
            vec![vec![1, 8], vec![1, 8], vec![1, 8], vec![1, 1]]
        );
        let i64s = |b: &[u8]| -> Vec<i64> {
            b.chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        let i32s = |b: &[u8]| -> Vec<i32> {
            b.chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        let raw = &m.raw_input_contents;
        assert_eq!(i64s(&raw[0]), [101, 5, 102, 6, 8, 102, 0, 0]);
        assert_eq!(i32s(&raw[1]), [0, 0, 0, 1, 1, 1, 0, 0]);
        assert_eq!(i32s(&raw[2]), [1, 1, 1, 1, 1, 1, 0, 0]);
        assert_eq!(i64s(&raw[3]), [7]);
        assert_eq!(
            m.outputs
                .iter()
                .map(|o| o.name.as_str())
                .collect::<Vec<_>>(),
            ["start", "end"]
        );
    }

    #[test]
    fn batches_that_cannot_be_sent_are_refused() {
        let b = binding(
            vec![input("ids", InputRole::InputIds, IntType::Int64, vec![-1])],
            2,
        );
        let f = || feature(1, &[1], &[2, 3]);
        assert!(prepare_request(&b, vec![], 8).is_err());
        assert!(prepare_request(&b, vec![f(), f(), f()], 8).is_err());
        assert!(prepare_request(&b, vec![f()], 5).is_err());
        assert!(prepare_request(&b, vec![f()], 6).is_ok());
    }

    #[test]
    fn into_features_gives_the_batch_back_shared_or_not() {
        let b = binding(
            vec![input("ids", InputRole::InputIds, IntType::Int64, vec![-1])],
            2,
        );
        let r =
            prepare_request(&b, vec![feature(1, &[1], &[2]), feature(2, &[1], &[2])], 8).unwrap();
        let clone = r.clone();
        let ids = |v: Vec<Arc<Feature>>| v.iter().map(|f| f.unique_id).collect::<Vec<_>>();
        assert_eq!(ids(r.into_features()), [1, 2]);
        assert_eq!(ids(clone.into_features()), [1, 2]);
    }

    fn arb_input() -> impl Strategy<Value = (String, IntType, Vec<i64>)> {
        (
            "[a-z_]{0,12}",
            prop_oneof![Just(IntType::Int32), Just(IntType::Int64)],
            proptest::collection::vec(-2i64..300, 0..3),
        )
    }

    /// A feature of `q` question pieces and `d` doc pieces, ids from `seed`.
    fn arb_feature() -> impl Strategy<Value = Arc<Feature>> {
        (
            any::<u64>(),
            proptest::collection::vec(any::<u32>(), 0..6),
            proptest::collection::vec(any::<u32>(), 0..150),
        )
            .prop_map(|(uid, q, doc)| feature(uid, &q, &doc))
    }

    /// One input's raw contents, value by value: the reference of the writer.
    fn reference_contents(r: &InferRequest, input: &InputBinding) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut push = |v: i64| match input.datatype {
            IntType::Int32 => bytes.extend_from_slice(&(v as i32).to_le_bytes()),
            IntType::Int64 => bytes.extend_from_slice(&v.to_le_bytes()),
        };
        for f in r.features() {
            match input.role {
                InputRole::UniqueIds => {
                    for _ in 0..unique_width(input) {
                        push(f.unique_id as i64);
                    }
                }
                role => {
                    for pos in 0..r.seq_len() {
                        push(i64::from(match role {
                            InputRole::InputIds => f.input_ids.get(pos).copied().unwrap_or(0),
                            InputRole::SegmentIds => f.segment_id(pos),
                            _ => f.input_mask(pos),
                        }));
                    }
                }
            }
        }
        bytes
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// The message's raw contents are the tensors built position by position from
        /// the features (ids, segment ids, mask, padding), for any binding and batch.
        #[test]
        fn raw_contents_are_the_padded_tensors_position_by_position(
            inputs in proptest::collection::vec(arb_input(), 3..=4),
            unique_first in any::<bool>(),
            batched in any::<bool>(),
            features in proptest::collection::vec(arb_feature(), 1..5),
            extra in 0usize..200,
        ) {
            let roles = [InputRole::InputIds, InputRole::SegmentIds, InputRole::InputMask];
            let mut bound: Vec<InputBinding> = inputs
                .iter()
                .zip(roles.iter().chain([&InputRole::UniqueIds]))
                .map(|((name, t, dims), &role)| input(name, role, *t, dims.clone()))
                .collect();
            if unique_first {
                bound.rotate_right(1);
            }
            let max_batch = if batched { 8 } else { 0 };
            let features = if batched { features } else { features[..1].to_vec() };
            let b = binding(bound, max_batch);
            let seq = features.iter().map(|f| f.len()).max().unwrap() + extra;
            let r = prepare_request(&b, features, seq).unwrap();
            let m = r.to_proto();
            prop_assert_eq!(m.raw_input_contents.len(), b.inputs.len());
            let mut all = Vec::new();
            for (input, raw) in b.inputs.iter().zip(&m.raw_input_contents) {
                let want = reference_contents(&r, input);
                prop_assert!(raw[..] == want[..], "{:?} differs", input.role);
                all.extend_from_slice(&want);
            }
            let mut contents = Vec::new();
            r.write_contents(&mut contents);
            prop_assert_eq!(contents.len(), r.contents_len());
            prop_assert!(contents == all);
            // The message survives prost's encoding unchanged.
            let back = ModelInferRequest::decode(m.encode_to_vec().as_slice()).unwrap();
            prop_assert_eq!(back, m);
        }

        /// With the inputs in shared memory the message is prost's (read back: the
        /// tensors' parameter maps have no fixed order) and carries no tensor bytes; the
        /// contents written to the region are the bytes the message would have carried,
        /// at the offsets its parameters give.
        #[test]
        fn shared_memory_requests_name_where_their_contents_lie(
            inputs in proptest::collection::vec(arb_input(), 3..=4),
            region in "[a-z0-9_-]{1,20}",
            offset in 0u64..1_000_000,
            features in proptest::collection::vec(arb_feature(), 1..5),
        ) {
            let roles = [InputRole::InputIds, InputRole::SegmentIds, InputRole::InputMask];
            let bound: Vec<InputBinding> = inputs
                .iter()
                .zip(roles.iter().chain([&InputRole::UniqueIds]))
                .map(|((name, t, dims), &role)| input(name, role, *t, dims.clone()))
                .collect();
            let b = binding(bound, 8);
            let seq = features.iter().map(|f| f.len()).max().unwrap();
            let plain = prepare_request(&b, features, seq).unwrap();
            let outputs_at = offset + plain.contents_len() as u64 + 64;
            let r = plain.clone().with_shm_inputs(ShmInputs {
                region: region.as_str().into(),
                offset,
            }).with_shm_outputs(ShmOutputs {
                region: region.as_str().into(),
                offset: outputs_at,
            });
            let m = r.to_proto();
            prop_assert!(m.raw_input_contents.is_empty());
            let mut contents = Vec::new();
            r.write_contents(&mut contents);
            prop_assert_eq!(contents.len(), r.contents_len());
            let raw = plain.to_proto().raw_input_contents;
            for (t, bytes) in m.inputs.iter().zip(&raw) {
                let int = |key: &str| match t.parameters[key].parameter_choice {
                    Some(ParameterChoice::Int64Param(v)) => v as usize,
                    _ => panic!("{key} is not an int64"),
                };
                prop_assert_eq!(
                    &t.parameters["shared_memory_region"].parameter_choice,
                    &Some(ParameterChoice::StringParam(region.clone()))
                );
                let at = int("shared_memory_offset") - offset as usize;
                let size = int("shared_memory_byte_size");
                prop_assert_eq!(&contents[at..at + size], &bytes[..]);
            }
            // Each output asks for its whole tensor, one after another from the offset.
            let mut next = outputs_at as usize;
            for (o, want) in m.outputs.iter().zip(b.output_bindings()) {
                let int = |key: &str| match o.parameters[key].parameter_choice {
                    Some(ParameterChoice::Int64Param(v)) => v as usize,
                    _ => panic!("{key} is not an int64"),
                };
                prop_assert_eq!(&o.name, &want.name);
                prop_assert_eq!(int("shared_memory_offset"), next);
                let size = int("shared_memory_byte_size");
                prop_assert_eq!(size, r.rows() * seq * want.datatype.size());
                next += size;
            }
            prop_assert_eq!(next - outputs_at as usize, r.outputs_len().unwrap());
            // Without them, the outputs come back in the message again.
            let back = r.without_shm_outputs();
            prop_assert!(back.to_proto().outputs.iter().all(|o| o.parameters.is_empty()));
        }
    }
}
