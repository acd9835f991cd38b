//! A token model's request: features padded to the batch's sequence length, written
//! as the binding's integer tensors (algorithm §4.4: pad id 0, segment 0, mask 0),
//! little-endian and row-major, one entry per input in the model's declared order.

use std::sync::Arc;

use bytes::BufMut;

use super::Payload;
use crate::backend::binding::{without_trailing_ones, Binding, InputBinding, InputRole, IntType};
use crate::error::{Error, Result};
use crate::types::Feature;

/// Features for a bound model, padded to `seq_len`. The features are shared, so a
/// retry builds the same message again without copying the batch.
#[derive(Debug)]
pub(super) struct TokenPayload {
    binding: Arc<Binding>,
    features: Vec<Arc<Feature>>,
    seq_len: usize,
}

impl TokenPayload {
    /// Checks the batch: between one feature and the model's max batch size, none
    /// longer than `seq_len`.
    pub(super) fn new(
        binding: &Arc<Binding>,
        features: Vec<Arc<Feature>>,
        seq_len: usize,
    ) -> Result<TokenPayload> {
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
        Ok(TokenPayload {
            binding: binding.clone(),
            features,
            seq_len,
        })
    }

    /// Shape of `input` on the wire: `[rows] +` per-row dims for a batching model.
    fn shape(&self, input: &InputBinding) -> Vec<i64> {
        let batch = self
            .binding
            .has_batch_dim()
            .then_some(self.features.len() as i64);
        let per_row: &[i64] = match input.role {
            InputRole::UniqueIds => &input.dims,
            _ => &[],
        };
        let seq = (input.role != InputRole::UniqueIds).then_some(self.seq_len as i64);
        // A token input declared with trailing dimensions of size 1 (`[seq, 1]`) is
        // sent with them: the same bytes in the shape the model declares.
        let ones = match input.role {
            InputRole::UniqueIds => 0,
            _ => input.dims.len() - without_trailing_ones(&input.dims).len(),
        };
        batch
            .into_iter()
            .chain(per_row.iter().map(|&d| d.max(1)))
            .chain(seq)
            .chain(std::iter::repeat_n(1, ones))
            .collect()
    }

    /// The raw contents of one input for every row.
    fn put_contents<B: BufMut>(&self, buf: &mut B, input: &InputBinding) {
        let t = input.datatype;
        let seq = self.seq_len;
        let ones = |buf: &mut B, n: usize| (0..n).for_each(|_| put_int(buf, t, 1));
        for f in &self.features {
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
}

impl Payload for TokenPayload {
    fn model(&self) -> &str {
        &self.binding.model
    }

    fn version(&self) -> &str {
        &self.binding.version
    }

    fn rows(&self) -> usize {
        self.features.len()
    }

    fn seq_len(&self) -> usize {
        self.seq_len
    }

    fn inputs(&self) -> Vec<(&str, &'static str, Vec<i64>)> {
        self.binding
            .inputs
            .iter()
            .map(|input| {
                (
                    input.name.as_str(),
                    input.datatype.wire(),
                    self.shape(input),
                )
            })
            .collect()
    }

    fn input_lens(&self) -> Vec<usize> {
        let rows = self.features.len();
        self.binding
            .inputs
            .iter()
            .map(|i| input_len(i, rows, self.seq_len))
            .collect()
    }

    fn write_contents(&self, mut out: &mut [u8]) {
        for input in &self.binding.inputs {
            self.put_contents(&mut out, input);
        }
        debug_assert!(out.is_empty(), "contents_len bytes written");
    }

    fn raw_contents(&self) -> Vec<bytes::Bytes> {
        let rows = self.features.len();
        self.binding
            .inputs
            .iter()
            .map(|input| {
                let mut bytes = Vec::with_capacity(input_len(input, rows, self.seq_len));
                self.put_contents(&mut bytes, input);
                bytes::Bytes::from(bytes)
            })
            .collect()
    }

    fn outputs(&self) -> Vec<(&str, Option<usize>)> {
        let values = self
            .binding
            .output_values(self.features.len(), self.seq_len);
        self.binding
            .output_bindings()
            .iter()
            .map(|o| (o.name.as_str(), Some(values * o.datatype.size())))
            .collect()
    }

    fn binding(&self) -> Option<&Arc<Binding>> {
        Some(&self.binding)
    }

    fn features(&self) -> &[Arc<Feature>] {
        &self.features
    }
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
pub(super) fn unique_width(input: &InputBinding) -> usize {
    input.dims.iter().map(|&d| d.max(1)).product::<i64>() as usize
}

fn put_int<B: BufMut>(buf: &mut B, t: IntType, v: i64) {
    match t {
        IntType::Int32 => buf.put_i32_le(v as i32),
        IntType::Int64 => buf.put_i64_le(v),
    }
}
