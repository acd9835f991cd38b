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

use super::binding::Binding;
use super::proto::infer_parameter::ParameterChoice;
use super::proto::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
use super::proto::{InferParameter, ModelInferRequest};
use super::text::TextBinding;
use super::text_request::TextPair;
use crate::error::Result;
use crate::types::Feature;

/// One `ModelInfer` call: a batch of features for a bound model, padded to `seq_len`
/// ([`prepare_request`]), or a text model's questions and contexts
/// ([`InferRequest::text`]). Every inference request bertqa sends is one of these, and
/// goes through [`Infer`](super::Infer).
#[derive(Debug, Clone)]
pub struct InferRequest {
    payload: Arc<dyn Payload>,
    /// Request id (`ModelInferRequest.id`), echoed by the server; empty: none.
    id: String,
    /// Request-level parameters.
    parameters: Vec<(String, InferParameter)>,
    /// Where the input tensors lie when they are not in the message.
    shm: Option<ShmInputs>,
    /// Where the server is to write the outputs instead of returning them in the message.
    shm_out: Option<ShmOutputs>,
}

/// What a request carries: the one place where a token model's request
/// (`tokens.rs`) and a text model's (`text.rs`) differ. Everything else about
/// a request (its id, parameters, shared memory placement, the message) is the same
/// for both.
pub(crate) trait Payload: std::fmt::Debug + Send + Sync {
    /// The model name.
    fn model(&self) -> &str;
    /// The model version asked for (`""`: the server's choice).
    fn version(&self) -> &str;
    /// Batch rows: features, or questions.
    fn rows(&self) -> usize;
    /// Tokens per row on the wire (0: the server tokenizes).
    fn seq_len(&self) -> usize {
        0
    }
    /// Each input tensor as the message describes it: name, datatype, shape; in the
    /// binding's input order.
    fn inputs(&self) -> Vec<(&str, &'static str, Vec<i64>)>;
    /// Bytes of each input tensor's raw contents, in the order of `inputs`.
    fn input_lens(&self) -> Vec<usize>;
    /// Writes every input's raw contents one after another into `out`, which holds
    /// exactly the sum of `input_lens`.
    fn write_contents(&self, out: &mut [u8]);
    /// Each input's raw contents as the message carries them.
    fn raw_contents(&self) -> Vec<bytes::Bytes>;
    /// The outputs asked for, in the binding's output order, each with its bytes when
    /// they are known before the server answers (`None`: a text model's outputs, whose
    /// size depends on the answer; they always come back in the message).
    fn outputs(&self) -> Vec<(&str, Option<usize>)>;
    /// The token binding (`None`: a text model's request).
    fn binding(&self) -> Option<&Arc<Binding>> {
        None
    }
    /// The features, one per row (none in a text model's request).
    fn features(&self) -> &[Arc<Feature>] {
        &[]
    }
    /// The (question, context) pairs, one per row (`None`: a token request).
    fn pairs(&self) -> Option<&[TextPair]> {
        None
    }
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
    Ok(InferRequest::of(tokens::TokenPayload::new(
        binding, features, seq_len,
    )?))
}

impl InferRequest {
    fn of(payload: impl Payload + 'static) -> InferRequest {
        InferRequest {
            payload: Arc::new(payload),
            id: String::new(),
            parameters: Vec::new(),
            shm: None,
            shm_out: None,
        }
    }

    /// A text model's request about `pairs` (question, context), one row each: between
    /// one pair and the model's max batch size (one for a model without batching).
    pub fn text(binding: &Arc<TextBinding>, pairs: Vec<TextPair>) -> Result<InferRequest> {
        Ok(InferRequest::of(text::TextPayload::new(binding, pairs)?))
    }
}

impl InferRequest {
    /// Sets the request id the server echoes back.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
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
        self.payload.outputs().iter().map(|(_, len)| *len).sum()
    }

    /// Bytes of every input tensor together (what [`write_contents`](Self::write_contents)
    /// writes).
    pub fn contents_len(&self) -> usize {
        self.input_lens().iter().sum()
    }

    /// Appends every input tensor's raw bytes to `out`, in the binding's input order:
    /// the bytes the message carries when shared memory is not used.
    pub fn write_contents(&self, out: &mut Vec<u8>) {
        let from = out.len();
        out.resize(from + self.contents_len(), 0);
        self.payload.write_contents(&mut out[from..]);
    }

    /// [`write_contents`](Self::write_contents) into a buffer of exactly
    /// [`contents_len`](Self::contents_len) bytes (a slice of a shared memory slot).
    pub fn write_contents_to(&self, out: &mut [u8]) {
        self.payload.write_contents(out);
    }

    /// The token binding the request was prepared for (`None`: a text model's request).
    pub fn binding(&self) -> Option<&Arc<Binding>> {
        self.payload.binding()
    }

    /// The (question, context) pairs of a text model's request, one per row (`None`: a
    /// token request).
    pub fn pairs(&self) -> Option<&[TextPair]> {
        self.payload.pairs()
    }

    /// The features, one per batch row (none in a text model's request).
    pub fn features(&self) -> &[Arc<Feature>] {
        self.payload.features()
    }

    /// Batch rows: features, or questions.
    pub fn rows(&self) -> usize {
        self.payload.rows()
    }

    /// Tokens per row on the wire (0 for a text model's request: the server tokenizes).
    pub fn seq_len(&self) -> usize {
        self.payload.seq_len()
    }

    /// The model name, for messages.
    pub fn model(&self) -> &str {
        self.payload.model()
    }

    /// The model version asked for (`""`: the server's choice).
    pub fn version(&self) -> &str {
        self.payload.version()
    }

    /// The features back (none for a text model's request).
    pub fn into_features(self) -> Vec<Arc<Feature>> {
        self.payload.features().to_vec()
    }

    /// Bytes of each input tensor's raw contents, in the order of
    /// [`input_tensors`](Self::input_tensors).
    pub fn input_lens(&self) -> Vec<usize> {
        self.payload.input_lens()
    }

    /// The `ModelInferRequest` message: tensors in the message, or the shared memory
    /// parameters that say where they lie.
    pub fn to_proto(&self) -> ModelInferRequest {
        let raw_input_contents = match self.shm {
            Some(_) => Vec::new(),
            None => self.payload.raw_contents(),
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
    pub(crate) fn parameters(&self) -> &[(String, InferParameter)] {
        &self.parameters
    }

    /// The input tensors as the message describes them (name, datatype, shape, and the
    /// shared memory parameters when they lie in a region), in the binding's order:
    /// what any protocol sends ahead of the bytes [`write_contents`](Self::write_contents)
    /// lays out.
    pub fn input_tensors(&self) -> Vec<InferInputTensor> {
        let mut input_at = self.shm.as_ref().map(|at| at.offset);
        let lens = self.input_lens();
        self.payload
            .inputs()
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
        let mut output_at = self.shm_out.as_ref().map(|at| at.offset);
        self.payload
            .outputs()
            .into_iter()
            .map(|(name, len)| {
                let parameters = match (&self.shm_out, output_at.as_mut(), len) {
                    (Some(at), Some(offset), Some(len)) => {
                        let p = shm_parameters(&at.region, len, *offset);
                        *offset += len as u64;
                        p
                    }
                    _ => HashMap::new(),
                };
                InferRequestedOutputTensor {
                    name: name.to_string(),
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

mod text;
mod tokens;

pub(crate) use tokens::contents_len;

#[cfg(test)]
mod tests;
