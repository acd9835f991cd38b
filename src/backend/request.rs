//! An inference request as bertqa sends it, and its `ModelInferRequest` wire form
//! written by hand (protocol facts §3.4, §4).
//!
//! [`prepare_request`] only checks a batch and keeps its features; the tensors are
//! written later, by [`InferCodec`](super::codec::InferCodec), straight from the
//! unpadded [`Feature`]s into tonic's send buffer: no `Vec<u8>` per tensor and no
//! second copy by prost. The bytes are exactly what prost writes for the equivalent
//! message ([`InferRequest::to_proto`]; checked by property tests):
//!
//! - fields in tag order, fields at their default value (empty string, empty packed
//!   shape) left out, map entries in the order given, a parameter value left out when
//!   it has no arm set — prost's rules;
//! - raw contents little-endian and row-major, padded to the batch's sequence length
//!   (spec §4.4: pad id 0, segment 0, mask 0), one entry per input in the model's
//!   declared input order.
//!
//! The request is cheap to clone (shared features), so a retry re-encodes the same
//! bytes without copying the batch.

use std::sync::Arc;

use bytes::BufMut;

use super::binding::{Binding, InputBinding, InputRole, IntType};
use super::proto::infer_parameter::ParameterChoice;
use super::proto::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
use super::proto::{InferParameter, ModelInferRequest};
use crate::error::{Error, Result};
use crate::types::Feature;

/// One `ModelInfer` call: a batch of features for a bound model, padded to `seq_len`.
#[derive(Debug, Clone)]
pub struct InferRequest {
    binding: Arc<Binding>,
    features: Arc<Vec<Arc<Feature>>>,
    seq_len: usize,
    /// Request id (`ModelInferRequest.id`), echoed by the server; empty: none.
    id: String,
    /// Request-level parameters, written in this order.
    parameters: Vec<(String, InferParameter)>,
    /// Where the input tensors lie when they are not in the message.
    shm: Option<ShmInputs>,
    /// Where the server is to write the outputs instead of returning them in the message.
    shm_out: Option<ShmOutputs>,
}

/// Where a request's input tensors lie in a registered system shared memory region
/// instead of in the message (facts §5.4): one after another from `offset`, in the
/// binding's input order, exactly as [`InferRequest::write_contents`] lays them out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShmInputs {
    /// The region's registered name.
    pub region: Arc<str>,
    /// Byte offset of the first input in the region.
    pub offset: u64,
}

/// Where the server writes a request's output tensors in a registered system shared
/// memory region instead of returning their bytes in the response (facts §5.4): one
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
    Ok(InferRequest {
        binding: binding.clone(),
        features: Arc::new(features),
        seq_len,
        id: String::new(),
        parameters: Vec::new(),
        shm: None,
        shm_out: None,
    })
}

impl InferRequest {
    /// Sets the request id the server echoes back.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Adds a request-level parameter (e.g. `priority`, `timeout`; facts §5.3).
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
    /// [`ShmOutputs`] says, [`outputs_len`](Self::outputs_len) bytes in all) instead of
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

    /// Bytes of every output tensor of this batch together.
    pub fn outputs_len(&self) -> usize {
        self.binding.outputs_len(self.rows(), self.seq_len)
    }

    /// The shared-memory parameters of requested output `index` (none when the outputs
    /// come back in the message), in the order they are written.
    fn output_parameters(&self, index: usize) -> ShmParams<'_> {
        let at = self.shm_out.as_ref()?;
        let values = self.binding.output_values(self.rows(), self.seq_len);
        let outputs = self.binding.output_bindings();
        let len = |o: &&super::binding::OutputBinding| values * o.datatype.size();
        let before: usize = outputs[..index].iter().map(len).sum();
        Some(shm_parameters(
            &at.region,
            len(&outputs[index]),
            at.offset + before as u64,
        ))
    }

    /// Bytes of every input tensor together (what [`write_contents`](Self::write_contents)
    /// writes).
    pub fn contents_len(&self) -> usize {
        contents_len(&self.binding, self.rows(), self.seq_len)
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
        for input in &self.binding.inputs {
            self.put_contents(out, input);
        }
    }

    /// The shared-memory parameters of input `index` (none without shared memory), in
    /// the order they are written.
    fn tensor_parameters(&self, index: usize) -> ShmParams<'_> {
        let at = self.shm.as_ref()?;
        let inputs = &self.binding.inputs;
        let before: usize = inputs[..index].iter().map(|i| self.raw_len(i)).sum();
        Some(shm_parameters(
            &at.region,
            self.raw_len(&inputs[index]),
            at.offset + before as u64,
        ))
    }

    /// The model binding the request was prepared for.
    pub fn binding(&self) -> &Arc<Binding> {
        &self.binding
    }

    /// The features, one per batch row.
    pub fn features(&self) -> &[Arc<Feature>] {
        &self.features
    }

    /// Batch rows (features).
    pub fn rows(&self) -> usize {
        self.features.len()
    }

    /// Tokens per row on the wire.
    pub fn seq_len(&self) -> usize {
        self.seq_len
    }

    /// The model name, for messages.
    pub fn model(&self) -> &str {
        &self.binding.model
    }

    /// The features back, without copying them when no clone of the request is left.
    pub fn into_features(self) -> Vec<Arc<Feature>> {
        Arc::try_unwrap(self.features).unwrap_or_else(|shared| shared.as_ref().clone())
    }

    /// Shape of `input` on the wire: `[rows] +` per-row dims for a batching model.
    fn shape<'a>(&'a self, input: &'a InputBinding) -> impl Iterator<Item = i64> + 'a {
        let batch = (self.binding.max_batch_size > 0).then_some(self.rows() as i64);
        let per_row: &[i64] = match input.role {
            InputRole::UniqueIds => &input.dims,
            _ => &[],
        };
        let seq = (input.role != InputRole::UniqueIds).then_some(self.seq_len as i64);
        batch
            .into_iter()
            .chain(per_row.iter().map(|&d| d.max(1)))
            .chain(seq)
    }

    fn raw_len(&self, input: &InputBinding) -> usize {
        input_len(input, self.rows(), self.seq_len)
    }

    fn input_tensor_len(&self, input: &InputBinding, parameters: &ShmParams<'_>) -> usize {
        let shape: usize = self.shape(input).map(|d| varint_len(d as u64)).sum();
        string_field_len(&input.name)
            + string_field_len(input.datatype.wire())
            + if shape == 0 {
                0
            } else {
                1 + delimited_len(shape)
            }
            + shm_params_len(parameters)
    }

    fn output_tensor_len(&self, name: &str, parameters: &ShmParams<'_>) -> usize {
        string_field_len(name) + shm_params_len(parameters)
    }

    /// Length of the encoded `ModelInferRequest` (the gRPC message, without framing).
    pub fn encoded_len(&self) -> usize {
        let b = &self.binding;
        let mut n =
            string_field_len(&b.model) + string_field_len(&b.version) + string_field_len(&self.id);
        for (key, value) in &self.parameters {
            n += map_field_len(key, ParamRef::of(value));
        }
        for (i, input) in b.inputs.iter().enumerate() {
            let parameters = self.tensor_parameters(i);
            n += 1 + delimited_len(self.input_tensor_len(input, &parameters));
        }
        for (k, name) in b.output_names().enumerate() {
            n += 1 + delimited_len(self.output_tensor_len(name, &self.output_parameters(k)));
        }
        if self.shm.is_none() {
            for input in &b.inputs {
                n += 1 + delimited_len(self.raw_len(input));
            }
        }
        n
    }

    /// Writes the `ModelInferRequest` message ([`encoded_len`](Self::encoded_len)
    /// bytes) into `buf`, tensor contents included.
    pub fn encode<B: BufMut>(&self, buf: &mut B) {
        let b = &self.binding;
        put_string_field(buf, 1, &b.model);
        put_string_field(buf, 2, &b.version);
        put_string_field(buf, 3, &self.id);
        for (key, value) in &self.parameters {
            put_map_entry(buf, 4, key, ParamRef::of(value));
        }
        for (i, input) in b.inputs.iter().enumerate() {
            let parameters = self.tensor_parameters(i);
            put_key(buf, 5);
            put_varint(buf, self.input_tensor_len(input, &parameters) as u64);
            put_string_field(buf, 1, &input.name);
            put_string_field(buf, 2, input.datatype.wire());
            let shape: usize = self.shape(input).map(|d| varint_len(d as u64)).sum();
            if shape > 0 {
                put_key(buf, 3);
                put_varint(buf, shape as u64);
                for d in self.shape(input) {
                    put_varint(buf, d as u64);
                }
            }
            for &(key, value) in parameters.iter().flatten() {
                put_map_entry(buf, 4, key, Some(value));
            }
        }
        for (k, name) in b.output_names().enumerate() {
            let parameters = self.output_parameters(k);
            put_key(buf, 6);
            put_varint(buf, self.output_tensor_len(name, &parameters) as u64);
            put_string_field(buf, 1, name);
            for &(key, value) in parameters.iter().flatten() {
                put_map_entry(buf, 2, key, Some(value));
            }
        }
        if self.shm.is_none() {
            for input in &b.inputs {
                put_key(buf, 7);
                put_varint(buf, self.raw_len(input) as u64);
                self.put_contents(buf, input);
            }
        }
    }

    /// The raw contents of one input for every row.
    fn put_contents<B: BufMut>(&self, buf: &mut B, input: &InputBinding) {
        let t = input.datatype;
        let seq = self.seq_len;
        for f in self.features.iter() {
            let len = f.len();
            match input.role {
                InputRole::InputIds => {
                    put_ids(buf, t, &f.input_ids);
                    buf.put_bytes(0, (seq - len) * t.size());
                }
                InputRole::SegmentIds => {
                    let doc = f.doc_offset().min(len);
                    buf.put_bytes(0, doc * t.size());
                    put_ones(buf, t, len - doc);
                    buf.put_bytes(0, (seq - len) * t.size());
                }
                InputRole::InputMask => {
                    put_ones(buf, t, len);
                    buf.put_bytes(0, (seq - len) * t.size());
                }
                InputRole::UniqueIds => {
                    for _ in 0..unique_width(input) {
                        put_int(buf, t, f.unique_id as i64);
                    }
                }
            }
        }
    }

    /// The equivalent prost message, tensors built position by position. The codec
    /// never uses it: it is the reference the hand-written encoding is checked against,
    /// and what in-process fakes of the server read.
    pub fn to_proto(&self) -> ModelInferRequest {
        let b = &self.binding;
        let seq = self.seq_len;
        let inputs = b
            .inputs
            .iter()
            .enumerate()
            .map(|(i, input)| InferInputTensor {
                name: input.name.clone(),
                datatype: input.datatype.wire().into(),
                shape: self.shape(input).collect(),
                parameters: shm_params_proto(&self.tensor_parameters(i)),
                ..Default::default()
            })
            .collect();
        let raw = b
            .inputs
            .iter()
            .filter(|_| self.shm.is_none())
            .map(|input| {
                let mut bytes = Vec::with_capacity(self.raw_len(input));
                let mut push = |v: i64| match input.datatype {
                    IntType::Int32 => bytes.extend_from_slice(&(v as i32).to_le_bytes()),
                    IntType::Int64 => bytes.extend_from_slice(&v.to_le_bytes()),
                };
                for f in self.features.iter() {
                    match input.role {
                        InputRole::UniqueIds => {
                            for _ in 0..unique_width(input) {
                                push(f.unique_id as i64);
                            }
                        }
                        role => {
                            for pos in 0..seq {
                                push(i64::from(match role {
                                    InputRole::InputIds => {
                                        f.input_ids.get(pos).copied().unwrap_or(0)
                                    }
                                    InputRole::SegmentIds => f.segment_id(pos),
                                    _ => f.input_mask(pos),
                                }));
                            }
                        }
                    }
                }
                bytes::Bytes::from(bytes)
            })
            .collect();
        ModelInferRequest {
            model_name: b.model.clone(),
            model_version: b.version.clone(),
            id: self.id.clone(),
            parameters: self.parameters.iter().cloned().collect(),
            inputs,
            outputs: b
                .output_names()
                .enumerate()
                .map(|(k, name)| InferRequestedOutputTensor {
                    name: name.into(),
                    parameters: shm_params_proto(&self.output_parameters(k)),
                })
                .collect(),
            raw_input_contents: raw,
        }
    }
}

/// The parameters that place a tensor in shared memory, in the order they are written;
/// none when it travels in the message. Borrowed: a request allocates nothing for them
/// (as owned maps they were about forty allocations per request, counted twice: for the
/// length, then for the bytes).
type ShmParams<'a> = Option<[(&'static str, ParamRef<'a>); 3]>;

/// The parameters that place a tensor of `len` bytes at `offset` of shared memory region
/// `region` (facts §5.4), in the order they are written.
fn shm_parameters(region: &str, len: usize, offset: u64) -> [(&'static str, ParamRef<'_>); 3] {
    [
        ("shared_memory_region", ParamRef::String(region)),
        ("shared_memory_byte_size", ParamRef::Int64(len as i64)),
        ("shared_memory_offset", ParamRef::Int64(offset as i64)),
    ]
}

/// Bytes of the map entries of `parameters` (field key and length prefix included).
fn shm_params_len(parameters: &ShmParams<'_>) -> usize {
    parameters
        .iter()
        .flatten()
        .map(|&(k, v)| map_field_len(k, Some(v)))
        .sum()
}

/// `parameters` as the prost message's map.
fn shm_params_proto(
    parameters: &ShmParams<'_>,
) -> std::collections::HashMap<String, InferParameter> {
    parameters
        .iter()
        .flatten()
        .map(|&(k, v)| (k.to_string(), v.to_proto()))
        .collect()
}

/// Bytes of every input tensor of `binding` together, for `rows` features padded to
/// `seq_len` tokens.
pub fn contents_len(binding: &Binding, rows: usize, seq_len: usize) -> usize {
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

/// Token ids, widened or kept, through a stack buffer: one `put_slice` per 64 ids.
fn put_ids<B: BufMut>(buf: &mut B, t: IntType, ids: &[u32]) {
    const CHUNK: usize = 64;
    let mut tmp = [0u8; CHUNK * 8];
    for chunk in ids.chunks(CHUNK) {
        let n = match t {
            IntType::Int32 => {
                for (d, &id) in tmp.chunks_exact_mut(4).zip(chunk) {
                    d.copy_from_slice(&id.to_le_bytes());
                }
                chunk.len() * 4
            }
            IntType::Int64 => {
                for (d, &id) in tmp.chunks_exact_mut(8).zip(chunk) {
                    d.copy_from_slice(&u64::from(id).to_le_bytes());
                }
                chunk.len() * 8
            }
        };
        buf.put_slice(&tmp[..n]);
    }
}

/// 64 ones, little-endian, per integer type.
const ONES_PER_CHUNK: usize = 64;
static ONES_I32: [u8; ONES_PER_CHUNK * 4] = ones::<{ ONES_PER_CHUNK * 4 }>(4);
static ONES_I64: [u8; ONES_PER_CHUNK * 8] = ones::<{ ONES_PER_CHUNK * 8 }>(8);

const fn ones<const N: usize>(size: usize) -> [u8; N] {
    let mut a = [0u8; N];
    let mut i = 0;
    while i < N {
        a[i] = 1;
        i += size;
    }
    a
}

/// `count` elements of value 1.
fn put_ones<B: BufMut>(buf: &mut B, t: IntType, mut count: usize) {
    let ones: &[u8] = match t {
        IntType::Int32 => &ONES_I32,
        IntType::Int64 => &ONES_I64,
    };
    while count > 0 {
        let n = count.min(ONES_PER_CHUNK);
        buf.put_slice(&ones[..n * t.size()]);
        count -= n;
    }
}

/// Bytes of a base-128 varint.
fn varint_len(v: u64) -> usize {
    // 1 byte per started group of 7 bits; 0 takes one byte.
    (64 - (v | 1).leading_zeros()).div_ceil(7) as usize
}

fn put_varint<B: BufMut>(buf: &mut B, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// A length-delimited field's key (all fields here have numbers below 16: one byte).
fn put_key<B: BufMut>(buf: &mut B, field: u8) {
    buf.put_u8(field << 3 | 2);
}

/// Length prefix plus `len` bytes of payload.
fn delimited_len(len: usize) -> usize {
    varint_len(len as u64) + len
}

/// A string field: nothing when empty (proto3 default), else key, length, bytes.
fn string_field_len(s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        1 + delimited_len(s.len())
    }
}

fn put_string_field<B: BufMut>(buf: &mut B, field: u8, s: &str) {
    if !s.is_empty() {
        put_key(buf, field);
        put_varint(buf, s.len() as u64);
        buf.put_slice(s.as_bytes());
    }
}

/// An `InferParameter`'s oneof arm, borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ParamRef<'a> {
    Bool(bool),
    Int64(i64),
    String(&'a str),
    Double(f64),
    Uint64(u64),
}

impl<'a> ParamRef<'a> {
    /// The arm `value` has set (none: no arm).
    fn of(value: &'a InferParameter) -> Option<ParamRef<'a>> {
        Some(match value.parameter_choice.as_ref()? {
            ParameterChoice::BoolParam(v) => ParamRef::Bool(*v),
            ParameterChoice::Int64Param(v) => ParamRef::Int64(*v),
            ParameterChoice::StringParam(s) => ParamRef::String(s),
            ParameterChoice::DoubleParam(v) => ParamRef::Double(*v),
            ParameterChoice::Uint64Param(v) => ParamRef::Uint64(*v),
        })
    }

    fn to_proto(self) -> InferParameter {
        InferParameter {
            parameter_choice: Some(match self {
                ParamRef::Bool(v) => ParameterChoice::BoolParam(v),
                ParamRef::Int64(v) => ParameterChoice::Int64Param(v),
                ParamRef::String(s) => ParameterChoice::StringParam(s.to_string()),
                ParamRef::Double(v) => ParameterChoice::DoubleParam(v),
                ParamRef::Uint64(v) => ParameterChoice::Uint64Param(v),
            }),
        }
    }
}

/// A `map<string, InferParameter>` field's entry with its key and length prefix.
fn map_field_len(key: &str, value: Option<ParamRef<'_>>) -> usize {
    1 + delimited_len(map_entry_len(key, value))
}

/// Writes one entry of the `map<string, InferParameter>` field `field`.
fn put_map_entry<B: BufMut>(buf: &mut B, field: u8, key: &str, value: Option<ParamRef<'_>>) {
    put_key(buf, field);
    put_varint(buf, map_entry_len(key, value) as u64);
    put_string_field(buf, 1, key);
    if let Some(choice) = value {
        put_key(buf, 2);
        put_varint(buf, parameter_len(choice) as u64);
        put_parameter(buf, choice);
    }
}

/// One `map<string, InferParameter>` entry: key (1) unless empty, value (2) unless it
/// has no arm set.
fn map_entry_len(key: &str, value: Option<ParamRef<'_>>) -> usize {
    string_field_len(key) + value.map_or(0, |c| 1 + delimited_len(parameter_len(c)))
}

/// An `InferParameter` with its oneof arm set: the arm is written even at its default.
fn parameter_len(choice: ParamRef<'_>) -> usize {
    1 + match choice {
        ParamRef::Bool(_) => 1,
        ParamRef::Int64(v) => varint_len(v as u64),
        ParamRef::String(s) => delimited_len(s.len()),
        ParamRef::Double(_) => 8,
        ParamRef::Uint64(v) => varint_len(v),
    }
}

fn put_parameter<B: BufMut>(buf: &mut B, choice: ParamRef<'_>) {
    // Keys: field number << 3 | wire type (0 varint, 1 fixed64, 2 length-delimited).
    match choice {
        ParamRef::Bool(v) => {
            buf.put_u8(1 << 3);
            buf.put_u8(u8::from(v));
        }
        ParamRef::Int64(v) => {
            buf.put_u8(2 << 3);
            put_varint(buf, v as u64);
        }
        ParamRef::String(s) => put_string_arm(buf, s),
        ParamRef::Double(v) => {
            buf.put_u8(4 << 3 | 1);
            buf.put_f64_le(v);
        }
        ParamRef::Uint64(v) => {
            buf.put_u8(5 << 3);
            put_varint(buf, v);
        }
    }
}

/// A oneof string arm is written even when empty.
fn put_string_arm<B: BufMut>(buf: &mut B, s: &str) {
    put_key(buf, 3);
    put_varint(buf, s.len() as u64);
    buf.put_slice(s.as_bytes());
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
        })
    }

    fn wire(r: &InferRequest) -> Vec<u8> {
        let mut buf = Vec::new();
        r.encode(&mut buf);
        buf
    }

    #[test]
    fn varint_lengths_at_the_group_boundaries() {
        for (v, n) in [
            (0u64, 1),
            (1, 1),
            (127, 1),
            (128, 2),
            (16_383, 2),
            (16_384, 3),
            (u64::from(u32::MAX), 5),
            (u64::MAX, 10),
        ] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!((varint_len(v), buf.len()), (n, n), "{v}");
            assert_eq!(prost::encoding::encoded_len_varint(v), n, "{v}");
        }
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
        let m = ModelInferRequest::decode(wire(&r).as_slice()).unwrap();
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

    fn arb_parameter() -> impl Strategy<Value = InferParameter> {
        let choice = prop_oneof![
            any::<bool>().prop_map(ParameterChoice::BoolParam),
            any::<i64>().prop_map(ParameterChoice::Int64Param),
            ".{0,20}".prop_map(ParameterChoice::StringParam),
            any::<f64>().prop_map(ParameterChoice::DoubleParam),
            any::<u64>().prop_map(ParameterChoice::Uint64Param),
        ];
        proptest::option::weighted(0.9, choice)
            .prop_map(|parameter_choice| InferParameter { parameter_choice })
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// The hand-written bytes are prost's, for any binding, batch, id and parameters.
        #[test]
        fn hand_written_wire_bytes_equal_prosts(
            inputs in proptest::collection::vec(arb_input(), 3..=4),
            unique_first in any::<bool>(),
            batched in any::<bool>(),
            model in "[a-zA-Z0-9_-]{0,20}",
            version in "[0-9]{0,3}",
            id in ".{0,30}",
            params in proptest::collection::hash_map("[a-z_]{0,10}", arb_parameter(), 0..4),
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
            let mut b = (*binding(bound, max_batch)).clone();
            b.model = model;
            b.version = version;
            let b = Arc::new(b);
            let seq = features.iter().map(|f| f.len()).max().unwrap() + extra;
            // The map's own iteration order is the order prost writes its entries in.
            let mut r = prepare_request(&b, features, seq).unwrap().with_id(id);
            let map: std::collections::HashMap<String, InferParameter> = params;
            for (k, v) in &map {
                r = r.with_parameter(k.clone(), v.clone());
            }
            let mut message = r.to_proto();
            message.parameters = map;
            let expected = message.encode_to_vec();
            let got = wire(&r);
            prop_assert_eq!(r.encoded_len(), expected.len());
            prop_assert!(got == expected, "wire bytes differ from prost's");
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
            let got = wire(&r);
            prop_assert_eq!(r.encoded_len(), got.len());
            let m = ModelInferRequest::decode(got.as_slice()).unwrap();
            prop_assert!(m.raw_input_contents.is_empty());
            prop_assert_eq!(&m, &r.to_proto());
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
            prop_assert_eq!(next - outputs_at as usize, r.outputs_len());
            // Without them, the outputs come back in the message again.
            let back = r.without_shm_outputs();
            prop_assert!(back.to_proto().outputs.iter().all(|o| o.parameters.is_empty()));
            prop_assert_eq!(back.encoded_len(), wire(&back).len());
        }
    }
}
