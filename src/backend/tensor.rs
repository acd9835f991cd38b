//! Translation between our feature batches / logits and Triton's raw tensors.
//!
//! Raw contents are little-endian and row-major (protocol facts §4). Inputs are written
//! straight from the unpadded [`Feature`]s into one byte buffer per input, padded to
//! the batch's sequence length (§4.4: pad id 0, segment 0, mask 0). Outputs are
//! checked against the binding (name, dtype, shape) before a single value is read;
//! FP16 values are widened to f32 exactly.

use super::binding::{Binding, FloatType, InputRole, IntType, OutputBinding, Outputs};
use super::proto::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
use super::proto::{ModelInferRequest, ModelInferResponse};
use crate::error::{Error, Result};
use crate::types::{Feature, Logits};

/// Builds the inference request for `features` padded to `seq_len` tokens.
///
/// `seq_len` must be at least the longest feature; for a fixed-length model it is the
/// model's length.
pub fn encode_request(
    binding: &Binding,
    features: &[&Feature],
    seq_len: usize,
) -> Result<ModelInferRequest> {
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
    let batched = binding.max_batch_size > 0;
    let mut inputs = Vec::with_capacity(binding.inputs.len());
    let mut raw = Vec::with_capacity(binding.inputs.len());
    for input in &binding.inputs {
        let (per_row, bytes) = match input.role {
            InputRole::UniqueIds => {
                let width = input.dims.iter().product::<i64>().max(1) as usize;
                let mut buf = Vec::with_capacity(rows * width * input.datatype.size());
                for f in features {
                    for _ in 0..width {
                        push_int(&mut buf, input.datatype, f.unique_id as i64);
                    }
                }
                (
                    input.dims.iter().map(|&d| d.max(1)).collect::<Vec<_>>(),
                    buf,
                )
            }
            role => (
                vec![seq_len as i64],
                encode_tokens(role, input.datatype, features, seq_len),
            ),
        };
        let mut shape = Vec::with_capacity(per_row.len() + 1);
        if batched {
            shape.push(rows as i64);
        }
        shape.extend(per_row);
        inputs.push(InferInputTensor {
            name: input.name.clone(),
            datatype: input.datatype.wire().into(),
            shape,
            ..Default::default()
        });
        raw.push(bytes::Bytes::from(bytes));
    }
    let outputs = binding
        .output_names()
        .into_iter()
        .map(|name| InferRequestedOutputTensor {
            name: name.into(),
            ..Default::default()
        })
        .collect();
    Ok(ModelInferRequest {
        model_name: binding.model.clone(),
        model_version: binding.version.clone(),
        inputs,
        outputs,
        raw_input_contents: raw,
        ..Default::default()
    })
}

fn push_int(buf: &mut Vec<u8>, t: IntType, v: i64) {
    match t {
        IntType::Int32 => buf.extend_from_slice(&(v as i32).to_le_bytes()),
        IntType::Int64 => buf.extend_from_slice(&v.to_le_bytes()),
    }
}

/// One token input (ids, segments or mask) for all rows, padded to `seq_len`.
fn encode_tokens(role: InputRole, t: IntType, features: &[&Feature], seq_len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; features.len() * seq_len * t.size()];
    let size = t.size();
    for (row, f) in features.iter().enumerate() {
        let base = row * seq_len * size;
        let len = f.len();
        let write = |buf: &mut [u8], pos: usize, v: u32| {
            let at = base + pos * size;
            match t {
                IntType::Int32 => buf[at..at + 4].copy_from_slice(&v.to_le_bytes()),
                IntType::Int64 => buf[at..at + 8].copy_from_slice(&u64::from(v).to_le_bytes()),
            }
        };
        match role {
            InputRole::InputIds => {
                for (pos, &id) in f.input_ids.iter().enumerate() {
                    write(&mut buf, pos, id);
                }
            }
            InputRole::SegmentIds => {
                for pos in f.doc_offset()..len {
                    write(&mut buf, pos, 1);
                }
            }
            InputRole::InputMask => {
                for pos in 0..len {
                    write(&mut buf, pos, 1);
                }
            }
            InputRole::UniqueIds => unreachable!("unique ids are encoded by the caller"),
        }
    }
    buf
}

/// Reads the logits of `features` (same order as the request) from a response.
pub fn decode_response(
    binding: &Binding,
    features: &[&Feature],
    seq_len: usize,
    response: &ModelInferResponse,
) -> Result<Vec<Logits>> {
    let rows = features.len();
    let batched = binding.max_batch_size > 0;
    let find = |o: &OutputBinding| -> Result<&[u8]> {
        let Some(i) = response.outputs.iter().position(|t| t.name == o.name) else {
            return Err(Error::TensorMismatch {
                model: binding.model.clone(),
                tensor: o.name.clone(),
                expected: "an output tensor of that name".into(),
                actual: format!(
                    "missing (response has {:?})",
                    response
                        .outputs
                        .iter()
                        .map(|t| t.name.as_str())
                        .collect::<Vec<_>>()
                ),
            });
        };
        let t = &response.outputs[i];
        let mismatch = |expected: String, actual: String| Error::TensorMismatch {
            model: binding.model.clone(),
            tensor: o.name.clone(),
            expected,
            actual,
        };
        if t.datatype != o.datatype.wire() {
            return Err(mismatch(o.datatype.wire().into(), t.datatype.clone()));
        }
        let stacked = matches!(binding.outputs, Outputs::Stacked { .. });
        let mut want: Vec<i64> = Vec::new();
        if batched {
            want.push(rows as i64);
        }
        want.push(seq_len as i64);
        if stacked {
            want.push(2);
        }
        if t.shape != want {
            return Err(mismatch(
                format!("shape {want:?}"),
                format!("shape {:?}", t.shape),
            ));
        }
        let bytes: &[u8] = response
            .raw_output_contents
            .get(i)
            .map(|b| &b[..])
            .unwrap_or(&[]);
        let need = want.iter().product::<i64>() as usize * o.datatype.size();
        if bytes.len() != need {
            return Err(mismatch(
                format!("{need} bytes of raw contents"),
                format!("{} bytes", bytes.len()),
            ));
        }
        Ok(bytes)
    };
    let mut out = Vec::with_capacity(rows);
    match &binding.outputs {
        Outputs::Split { start, end } => {
            let s = find(start)?;
            let e = find(end)?;
            let row_bytes_s = seq_len * start.datatype.size();
            let row_bytes_e = seq_len * end.datatype.size();
            for (row, f) in features.iter().enumerate() {
                out.push(Logits {
                    unique_id: f.unique_id,
                    start: floats(
                        start.datatype,
                        &s[row * row_bytes_s..(row + 1) * row_bytes_s],
                    ),
                    end: floats(end.datatype, &e[row * row_bytes_e..(row + 1) * row_bytes_e]),
                });
            }
        }
        Outputs::Stacked { logits } => {
            let b = find(logits)?;
            let row_bytes = seq_len * 2 * logits.datatype.size();
            for (row, f) in features.iter().enumerate() {
                let both = floats(logits.datatype, &b[row * row_bytes..(row + 1) * row_bytes]);
                let (start, end) = both.chunks_exact(2).map(|p| (p[0], p[1])).unzip();
                out.push(Logits {
                    unique_id: f.unique_id,
                    start,
                    end,
                });
            }
        }
    }
    Ok(out)
}

/// Little-endian FP32/FP16 bytes → f32 (FP16 widened exactly).
pub fn floats(t: FloatType, bytes: &[u8]) -> Vec<f32> {
    match t {
        FloatType::Fp32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        FloatType::Fp16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
    }
}
