//! `perf --export-input-data`: the sweep's requests in perf_analyzer's `--input-data`
//! JSON, so that perf_analyzer or model_analyzer replays the same features
//! (docs/performance.md restates the format).
//!
//! Contract:
//! - `{"data": [entry, …]}`, one entry per batch row, in the order perf sends them
//!   ([`super::super::make_batches`]: file order, the last batch filled from the first
//!   features). perf_analyzer reads each entry as one batch-1 request's inputs.
//! - An entry maps every input of the binding, by the model's own names, to
//!   `{"content": [integers, row-major], "shape": [dims]}`; the shape is the row's, as
//!   the model declares it: without the batch dimension when the server declares
//!   batching (replay with `-b B`), with a leading 1 when the batch dimension is
//!   written in the model's dims (`max_batch_size: 0`; replay with `-b 1`).
//! - Each row is padded as perf pads its batch, so `-b B` with perf's batch size sends
//!   the tensors bertqa sends. The values are cut from the very bytes
//!   `crate::backend::prepare_request` builds for the request.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::super::Batch;
use crate::backend::binding::{Batching, IntType};
use crate::backend::{prepare_request, Binding, Model};
use crate::error::{Error, Result};

/// The document for `batches` to `model`, which takes token ids (an error for one that
/// takes text: it has no token tensors).
pub fn render_model(model: &Model, batches: &[Batch]) -> Result<Vec<u8>> {
    match model.tokens() {
        Some(binding) => render(binding, batches),
        None => Err(Error::Config(format!(
            "model {:?} takes text: no token tensors to write",
            model.name()
        ))),
    }
}

/// The document for `batches`.
pub fn render(binding: &Arc<Binding>, batches: &[Batch]) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    for batch in batches {
        let request = prepare_request(binding, batch.features.clone(), batch.seq_len)?;
        let rows = request.rows();
        let mut bytes = Vec::with_capacity(request.contents_len());
        request.write_contents(&mut bytes);
        let tensors = request.input_tensors();
        let mut entries: Vec<Map<String, Value>> = vec![Map::new(); rows];
        let mut at = 0;
        for ((input, tensor), len) in binding
            .inputs
            .iter()
            .zip(&tensors)
            .zip(request.input_lens())
        {
            let all = &bytes[at..at + len];
            at += len;
            let (row_len, row_shape) = if binding.has_batch_dim() {
                (len / rows, &tensor.shape[1..])
            } else if rows == 1 {
                (len, &tensor.shape[..])
            } else {
                return Err(Error::Internal(format!(
                    "{rows} rows in a request to model {:?}, which has no batch dimension",
                    binding.model
                )));
            };
            let shape: Vec<i64> = match binding.batching {
                Batching::Undeclared if binding.has_batch_dim() => std::iter::once(1)
                    .chain(row_shape.iter().copied())
                    .collect(),
                _ => row_shape.to_vec(),
            };
            for (row, entry) in entries.iter_mut().enumerate() {
                let content = integers(input.datatype, &all[row * row_len..(row + 1) * row_len]);
                entry.insert(
                    input.name.clone(),
                    json!({"content": content, "shape": shape}),
                );
            }
        }
        data.extend(entries.into_iter().map(Value::Object));
    }
    let mut out = serde_json::to_vec(&json!({ "data": data })).expect("JSON serializes");
    out.push(b'\n');
    Ok(out)
}

/// Little-endian raw elements as integers.
fn integers(dtype: IntType, raw: &[u8]) -> Vec<i64> {
    match dtype {
        IntType::Int32 => raw
            .chunks_exact(4)
            .map(|c| i64::from(i32::from_le_bytes(c.try_into().expect("4 bytes"))))
            .collect(),
        IntType::Int64 => raw
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::SeqLen;
    use crate::perf::make_batches;
    use crate::pipeline::Padding;
    use crate::types::Feature;

    /// NVIDIA's names, dims `[-1]` (any length), inputs of `dtype`.
    fn nvidia(dtype: IntType) -> Binding {
        let mut b = Binding::for_tests(
            "m",
            ["input__0", "input__1", "input__2"],
            ["output__0", "output__1"],
            &[-1],
            SeqLen::Dynamic,
        );
        for input in &mut b.inputs {
            input.datatype = dtype;
        }
        b
    }

    fn features(n: usize) -> Vec<Feature> {
        (0..n)
            .map(|i| {
                let q: Vec<u32> = vec![2054, 2003 + i as u32];
                let doc: Vec<u32> = (0..(5 + i as u32)).map(|t| 1000 + t).collect();
                Feature::from_pieces(1_000_000_000 + i as u64, i, &q, &doc)
            })
            .collect()
    }

    /// Every row's tensors decode back to the bytes bertqa sends, row by row.
    #[test]
    fn entries_decode_back_to_the_request_bytes() {
        for binding in [nvidia(IntType::Int64), nvidia(IntType::Int32)] {
            let binding = Arc::new(binding);
            let feats = features(5);
            let batches = make_batches(&feats, 2, Padding::Fixed(16));
            let doc: Value = serde_json::from_slice(&render(&binding, &batches).unwrap()).unwrap();
            let data = doc["data"].as_array().unwrap();
            // 3 batches of 2: the last filled from the first feature.
            assert_eq!(data.len(), 6);
            for (k, batch) in batches.iter().enumerate() {
                let request =
                    prepare_request(&binding, batch.features.clone(), batch.seq_len).unwrap();
                let mut sent = Vec::new();
                request.write_contents(&mut sent);
                let mut rebuilt: Vec<Vec<u8>> = vec![Vec::new(); binding.inputs.len()];
                for row in 0..2 {
                    let entry = &data[k * 2 + row];
                    for (i, input) in binding.inputs.iter().enumerate() {
                        let t = &entry[&input.name];
                        assert_eq!(t["shape"], json!([16]));
                        for x in t["content"].as_array().unwrap() {
                            let x = x.as_i64().unwrap();
                            match input.datatype {
                                IntType::Int32 => rebuilt[i].extend((x as i32).to_le_bytes()),
                                IntType::Int64 => rebuilt[i].extend(x.to_le_bytes()),
                            }
                        }
                    }
                }
                assert_eq!(rebuilt.concat(), sent, "batch {k}");
            }
        }
    }

    #[test]
    fn a_model_without_declared_batching_gets_a_leading_1() {
        let mut b = nvidia(IntType::Int64);
        b.batching = Batching::Undeclared;
        let binding = Arc::new(b);
        let batches = make_batches(&features(1), 1, Padding::Fixed(16));
        let doc: Value = serde_json::from_slice(&render(&binding, &batches).unwrap()).unwrap();
        assert_eq!(doc["data"][0]["input__0"]["shape"], json!([1, 16]));
    }
}
