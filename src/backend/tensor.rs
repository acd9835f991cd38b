//! Translation between Triton's raw output tensors and our logits.
//!
//! Requests are written by [`InferRequest`] and its codec.
//! A response is checked against the binding and the request's shape once
//! ([`check_batch`]: name, dtype, shape, byte length of every output) before a single
//! value is read; then each row is converted by index in one pass (FP16 widened to f32
//! exactly), the two channels of a stacked `[batch, seq, 2]` output split in the same
//! pass.

use super::binding::{Binding, FloatType, OutputBinding, Outputs};
use super::proto::ModelInferResponse;
use super::request::InferRequest;
use crate::error::{Error, Result};
use crate::types::Logits;

/// The logits outputs of one response, checked against the binding and the batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checked<'a> {
    rows: usize,
    seq_len: usize,
    layout: Layout<'a>,
    /// Some output was read from shared memory.
    from_shm: bool,
}

/// Raw bytes of the checked outputs (`rows × seq_len` values each, or × 2 stacked).
#[derive(Debug, Clone, Copy)]
enum Layout<'a> {
    Split {
        start: (&'a [u8], FloatType),
        end: (&'a [u8], FloatType),
    },
    Stacked {
        logits: (&'a [u8], FloatType),
    },
}

/// Checks once that `response` holds the binding's outputs with the dtype, shape
/// (`[rows, seq_len]`, `[rows, seq_len, 2]` stacked, no batch dim for a model that
/// does not batch) and byte length a batch of `rows` needs.
#[cfg(test)]
pub(crate) fn check_batch<'a>(
    binding: &Binding,
    rows: usize,
    seq_len: usize,
    response: &'a ModelInferResponse,
) -> Result<Checked<'a>> {
    check_batch_in(binding, rows, seq_len, response, None)
}

/// `response` with outputs that came as typed contents (the protocol's other form, in
/// which KServe's model server answers) moved into `raw_output_contents` as raw
/// little-endian bytes, so that every answer is read as Triton's raw one. An answer
/// with raw contents is returned as it is.
pub(crate) fn into_raw_contents(mut response: ModelInferResponse) -> ModelInferResponse {
    if !response.raw_output_contents.is_empty()
        || response.outputs.iter().all(|o| o.contents.is_none())
    {
        return response;
    }
    fn le<T, const N: usize>(values: &[T], bytes: impl Fn(&T) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(bytes).collect()
    }
    response.raw_output_contents = response
        .outputs
        .iter_mut()
        .map(|o| {
            let c = o.contents.take().unwrap_or_default();
            let raw = match o.datatype.as_str() {
                "FP32" => le(&c.fp32_contents, |v| v.to_le_bytes()),
                "FP64" => le(&c.fp64_contents, |v| v.to_le_bytes()),
                "INT64" => le(&c.int64_contents, |v| v.to_le_bytes()),
                "INT32" => le(&c.int_contents, |v| v.to_le_bytes()),
                "UINT64" => le(&c.uint64_contents, |v| v.to_le_bytes()),
                "UINT32" => le(&c.uint_contents, |v| v.to_le_bytes()),
                "BOOL" => le(&c.bool_contents, |v| [u8::from(*v)]),
                // Other datatypes have no typed field of their own: nothing to move.
                _ => Vec::new(),
            };
            bytes::Bytes::from(raw)
        })
        .collect();
    response
}

/// [`check_batch`] for a request whose outputs the server may have written into shared
/// memory: `shm` is the memory from the request's output offset on (laid out as
/// [`ShmOutputs`](super::request::ShmOutputs) says), read for every output whose raw
/// entry in the response is empty. An output returned in the message is read from the
/// message.
pub(crate) fn check_batch_in<'a>(
    binding: &Binding,
    rows: usize,
    seq_len: usize,
    response: &'a ModelInferResponse,
    shm: Option<&'a [u8]>,
) -> Result<Checked<'a>> {
    let batched = binding.has_batch_dim();
    let stacked = matches!(binding.outputs, Outputs::Stacked { .. });
    let mut want: Vec<i64> = Vec::with_capacity(3);
    if batched {
        want.push(rows as i64);
    }
    want.push(seq_len as i64);
    if stacked {
        want.push(2);
    }
    let values = binding.output_values(rows, seq_len);
    let from_shm = std::cell::Cell::new(false);
    // Where each output lies in `shm`: one after another in the binding's order.
    let shm_offset = |o: &OutputBinding| -> usize {
        binding
            .output_bindings()
            .iter()
            .take_while(|b| b.name != o.name)
            .map(|b| values * b.datatype.size())
            .sum()
    };
    let find = |o: &OutputBinding| -> Result<(&'a [u8], FloatType)> {
        let mismatch = |expected: String, actual: String| Error::TensorMismatch {
            model: binding.model.clone(),
            tensor: o.name.clone(),
            expected,
            actual,
        };
        let Some(i) = response.outputs.iter().position(|t| t.name == o.name) else {
            return Err(mismatch(
                "an output tensor of that name".into(),
                format!(
                    "missing (response has {:?})",
                    response
                        .outputs
                        .iter()
                        .map(|t| t.name.as_str())
                        .collect::<Vec<_>>()
                ),
            ));
        };
        let t = &response.outputs[i];
        if t.datatype != o.datatype.wire() {
            return Err(mismatch(o.datatype.wire().into(), t.datatype.clone()));
        }
        // Trailing dimensions of size 1 hold the same layout.
        let fits = t.shape.len() >= want.len()
            && t.shape[..want.len()] == want[..]
            && t.shape[want.len()..].iter().all(|&d| d == 1);
        if !fits {
            return Err(mismatch(
                format!("shape {want:?}"),
                format!("shape {:?}", t.shape),
            ));
        }
        let need = values * o.datatype.size();
        let mut bytes: &[u8] = response
            .raw_output_contents
            .get(i)
            .map(|b| &b[..])
            .unwrap_or(&[]);
        if let (true, Some(shm)) = (bytes.is_empty(), shm) {
            let at = shm_offset(o);
            bytes = shm.get(at..at + need).unwrap_or(&[]);
            from_shm.set(true);
        }
        if bytes.len() != need {
            return Err(mismatch(
                format!("{need} bytes of raw contents"),
                format!("{} bytes", bytes.len()),
            ));
        }
        Ok((bytes, o.datatype))
    };
    let layout = match &binding.outputs {
        Outputs::Split { start, end } => Layout::Split {
            start: find(start)?,
            end: find(end)?,
        },
        Outputs::Stacked { logits } => Layout::Stacked {
            logits: find(logits)?,
        },
    };
    Ok(Checked {
        rows,
        seq_len,
        layout,
        from_shm: from_shm.get(),
    })
}

impl Checked<'_> {
    /// Batch rows.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Replaces the contents of `start` and `end` by row `row`'s start and end logits
    /// (`seq_len` values each): buffers can be reused from row to row, and fresh ones
    /// are filled without being zeroed first.
    ///
    /// # Panics
    /// When `row` is not below [`rows`](Self::rows).
    pub(crate) fn row_into(&self, row: usize, start: &mut Vec<f32>, end: &mut Vec<f32>) {
        assert!(row < self.rows, "row {row} of {}", self.rows);
        let n = self.seq_len;
        start.clear();
        end.clear();
        match self.layout {
            Layout::Split {
                start: (s, st),
                end: (e, et),
            } => {
                widen(st, row_bytes(s, st, row, n), start);
                widen(et, row_bytes(e, et, row, n), end);
            }
            Layout::Stacked { logits: (b, t) } => {
                start.resize(n, 0.0);
                end.resize(n, 0.0);
                widen_pairs(t, row_bytes(b, t, row, 2 * n), start, end);
            }
        }
    }

    /// Row `row`'s start and end logits where they lie, without copying: for separate
    /// FP32 outputs whose rows are 4-byte aligned, on a little-endian machine (the wire's
    /// byte order); `None` otherwise (read them with [`Checked::row_into`]).
    ///
    /// # Panics
    /// When `row` is not below [`rows`](Self::rows).
    pub(crate) fn row_f32(&self, row: usize) -> Option<(&[f32], &[f32])> {
        assert!(row < self.rows, "row {row} of {}", self.rows);
        let Layout::Split {
            start: (s, FloatType::Fp32),
            end: (e, FloatType::Fp32),
        } = self.layout
        else {
            return None;
        };
        let n = self.seq_len;
        Some((
            as_f32(row_bytes(s, FloatType::Fp32, row, n))?,
            as_f32(row_bytes(e, FloatType::Fp32, row, n))?,
        ))
    }

    /// Every row's logits, tagged with the unique ids of the batch's features in order.
    pub(crate) fn logits(&self, unique_ids: impl IntoIterator<Item = u64>) -> Vec<Logits> {
        let mut out = Vec::with_capacity(self.rows);
        for (row, unique_id) in unique_ids.into_iter().take(self.rows).enumerate() {
            let mut l = Logits {
                unique_id,
                start: Vec::with_capacity(self.seq_len),
                end: Vec::with_capacity(self.seq_len),
            };
            self.row_into(row, &mut l.start, &mut l.end);
            out.push(l);
        }
        out
    }
}

/// Little-endian FP32 bytes as the values they hold, in place: `None` when they are not
/// aligned for `f32` or the machine is big-endian (the wire's byte order is little).
fn as_f32(bytes: &[u8]) -> Option<&[f32]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    bytemuck::try_cast_slice(bytes).ok()
}

/// Row `row` of a tensor of `per_row` values per row.
fn row_bytes(bytes: &[u8], t: FloatType, row: usize, per_row: usize) -> &[u8] {
    let w = per_row * t.size();
    &bytes[row * w..(row + 1) * w]
}

/// Reads the logits of `request`'s features (one per row, same order) from its
/// response.
pub fn decode_response(
    request: &InferRequest,
    response: &ModelInferResponse,
) -> Result<Vec<Logits>> {
    decode_response_in(request, response, None).map(|(logits, _)| logits)
}

/// [`decode_response`] for a request whose outputs may lie in shared memory (`shm`: the
/// memory from its output offset on, see [`check_batch_in`]); also says whether any
/// output was read from there.
pub(crate) fn decode_response_in(
    request: &InferRequest,
    response: &ModelInferResponse,
    shm: Option<&[u8]>,
) -> Result<(Vec<Logits>, bool)> {
    let checked = check_response_in(request, response, shm)?;
    let logits = checked.logits(request.features().iter().map(|f| f.unique_id));
    Ok((logits, checked.from_shm))
}

/// [`check_batch_in`] for `request`'s batch and sequence length.
pub(crate) fn check_response_in<'a>(
    request: &InferRequest,
    response: &'a ModelInferResponse,
    shm: Option<&'a [u8]>,
) -> Result<Checked<'a>> {
    let binding = request.binding().ok_or_else(|| {
        Error::Internal(format!(
            "a text model's answer (model {:?}) read as token logits",
            request.model()
        ))
    })?;
    check_batch_in(binding, request.rows(), request.seq_len(), response, shm)
}

impl Checked<'_> {
    /// Whether some output was read from shared memory.
    pub(crate) fn read_from_shm(&self) -> bool {
        self.from_shm
    }
}

fn fp32(b: [u8; 4]) -> f32 {
    f32::from_le_bytes(b)
}

fn fp16(b: [u8; 2]) -> f32 {
    half::f16::from_le_bytes(b).to_f32()
}

/// Little-endian FP32/FP16 values appended to `out` (FP16 widened exactly): one
/// exact-size pass over fixed-width words, which the compiler turns into a plain copy
/// for FP32.
fn widen(t: FloatType, src: &[u8], out: &mut Vec<f32>) {
    match t {
        FloatType::Fp32 => out.extend(src.chunks_exact(4).map(|c| fp32([c[0], c[1], c[2], c[3]]))),
        FloatType::Fp16 => out.extend(src.chunks_exact(2).map(|c| fp16([c[0], c[1]]))),
    }
}

/// Interleaved `(start, end)` pairs → the two buffers, in one pass.
#[allow(clippy::needless_range_loop)]
fn widen_pairs(t: FloatType, src: &[u8], start: &mut [f32], end: &mut [f32]) {
    let n = start.len().min(end.len());
    match t {
        FloatType::Fp32 => {
            let src = &src[..8 * n];
            for i in 0..n {
                let at = 8 * i;
                start[i] = fp32([src[at], src[at + 1], src[at + 2], src[at + 3]]);
                end[i] = fp32([src[at + 4], src[at + 5], src[at + 6], src[at + 7]]);
            }
        }
        FloatType::Fp16 => {
            let src = &src[..4 * n];
            for i in 0..n {
                let at = 4 * i;
                start[i] = fp16([src[at], src[at + 1]]);
                end[i] = fp16([src[at + 2], src[at + 3]]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::binding::SeqLen;
    use crate::backend::proto::model_infer_response::InferOutputTensor;

    #[test]
    fn typed_contents_become_raw_contents() {
        use crate::backend::proto::InferTensorContents;
        let typed = |datatype: &str, contents| InferOutputTensor {
            name: "o".into(),
            datatype: datatype.into(),
            contents: Some(contents),
            ..Default::default()
        };
        let response = ModelInferResponse {
            outputs: vec![
                typed(
                    "FP32",
                    InferTensorContents {
                        fp32_contents: vec![1.5, -0.25],
                        ..Default::default()
                    },
                ),
                typed(
                    "INT64",
                    InferTensorContents {
                        int64_contents: vec![-2],
                        ..Default::default()
                    },
                ),
            ],
            ..Default::default()
        };
        let r = into_raw_contents(response);
        let fp32: Vec<u8> = [1.5f32, -0.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(&r.raw_output_contents[0][..], &fp32[..]);
        assert_eq!(&r.raw_output_contents[1][..], &(-2i64).to_le_bytes());
        assert!(r.outputs.iter().all(|o| o.contents.is_none()));
        // Raw answers (Triton's) are left alone.
        let raw = ModelInferResponse {
            raw_output_contents: vec![bytes::Bytes::from_static(&[1, 2])],
            ..Default::default()
        };
        assert_eq!(into_raw_contents(raw.clone()), raw);
    }

    fn out(name: &str, datatype: FloatType, dims: Vec<i64>) -> OutputBinding {
        OutputBinding {
            name: name.into(),
            datatype,
            dims,
        }
    }

    fn binding(outputs: Outputs, max_batch_size: usize) -> Binding {
        Binding {
            model: "m".into(),
            version: String::new(),
            platform: "test".into(),
            inputs: vec![],
            outputs,
            max_batch_size,
            seq_len: SeqLen::Dynamic,
            dynamic_batching: false,
            batching: Default::default(),
        }
    }

    fn response(tensors: Vec<(&str, &str, Vec<i64>, Vec<u8>)>) -> ModelInferResponse {
        let (outputs, raw) = tensors
            .into_iter()
            .map(|(name, datatype, shape, bytes)| {
                (
                    InferOutputTensor {
                        name: name.into(),
                        datatype: datatype.into(),
                        shape,
                        ..Default::default()
                    },
                    bytes::Bytes::from(bytes),
                )
            })
            .unzip();
        ModelInferResponse {
            outputs,
            raw_output_contents: raw,
            ..Default::default()
        }
    }

    fn le32(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn le16(v: &[f32]) -> Vec<u8> {
        v.iter()
            .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
            .collect()
    }

    fn split() -> Outputs {
        Outputs::Split {
            start: out("s", FloatType::Fp32, vec![-1]),
            end: out("e", FloatType::Fp16, vec![-1]),
        }
    }

    #[test]
    fn split_rows_are_read_by_row_and_fp16_is_widened_exactly() {
        let b = binding(split(), 4);
        // Values exact in FP16, among them the smallest subnormal and the largest.
        let start = [1.5, -2.25, 3.0, 0.125, 7.0, -0.5];
        let end = [65504.0, 5.960_464_5e-8, -1.0, 2.0, 0.0, -65504.0];
        let r = response(vec![
            ("e", "FP16", vec![2, 3], le16(&end)),
            ("s", "FP32", vec![2, 3], le32(&start)),
        ]);
        let logits = check_batch(&b, 2, 3, &r).unwrap().logits([10, 11]);
        assert_eq!(logits.len(), 2);
        assert_eq!(logits[0].unique_id, 10);
        assert_eq!(logits[0].start, start[..3]);
        assert_eq!(logits[1].start, start[3..]);
        assert_eq!(logits[0].end, end[..3]);
        assert_eq!(logits[1].end, end[3..]);
    }

    #[test]
    fn fp32_rows_are_read_in_place_when_aligned_and_copied_otherwise() {
        let fp32 = Outputs::Split {
            start: out("s", FloatType::Fp32, vec![-1]),
            end: out("e", FloatType::Fp32, vec![-1]),
        };
        let start = [1.5, f32::NAN, 3.0, 0.125, f32::INFINITY, -0.5];
        let end = [6.0, 5.0, -1.0, 2.0, 0.0, f32::MIN];
        let r = response(vec![
            ("s", "FP32", vec![2, 3], le32(&start)),
            ("e", "FP32", vec![2, 3], le32(&end)),
        ]);
        let b = binding(fp32.clone(), 4);
        let checked = check_batch(&b, 2, 3, &r).unwrap();
        let (mut s, mut e) = (Vec::new(), Vec::new());
        for row in 0..2 {
            let (rs, re) = checked.row_f32(row).expect("aligned FP32");
            checked.row_into(row, &mut s, &mut e);
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(rs), bits(&s));
            assert_eq!(bits(re), bits(&e));
            assert_eq!(bits(rs), bits(&start[3 * row..3 * row + 3]));
        }
        // Shared memory off the alignment: read by copying.
        let mut buf = [0u8; 2 + 48];
        let off = if buf.as_ptr().align_offset(4) == 1 {
            2
        } else {
            1
        };
        let bytes = [le32(&start), le32(&end)].concat();
        buf[off..off + 48].copy_from_slice(&bytes);
        let shm = &buf[off..off + 48];
        assert_ne!(shm.as_ptr().align_offset(4), 0);
        let empty = response(vec![
            ("s", "FP32", vec![2, 3], vec![]),
            ("e", "FP32", vec![2, 3], vec![]),
        ]);
        let c = check_batch_in(&b, 2, 3, &empty, Some(shm)).unwrap();
        assert!(c.row_f32(0).is_none());
        assert_eq!(c.logits([1, 2])[1].end, end[3..]);
        // FP16 and stacked outputs are widened or split: never in place.
        let r16 = response(vec![
            ("e", "FP16", vec![2, 3], le16(&[0.0; 6])),
            ("s", "FP32", vec![2, 3], le32(&[0.0; 6])),
        ]);
        let b16 = binding(split(), 4);
        assert!(check_batch(&b16, 2, 3, &r16).unwrap().row_f32(1).is_none());
        let stacked = binding(
            Outputs::Stacked {
                logits: out("l", FloatType::Fp32, vec![-1, 2]),
            },
            4,
        );
        let rs = response(vec![("l", "FP32", vec![2, 3, 2], le32(&[0.0; 12]))]);
        assert!(check_batch(&stacked, 2, 3, &rs)
            .unwrap()
            .row_f32(0)
            .is_none());
    }

    /// NaN (of any sign and payload), +∞ and −∞ read in place are the wire's values bit
    /// for bit, as copying reads them, in start and end rows alike; their candidates,
    /// ranked where they lie, say they are not finite (so the pipeline copies the row
    /// out, replaces them and ranks again).
    #[test]
    fn non_finite_fp32_rows_read_in_place_as_they_are() {
        let fp32 = Outputs::Split {
            start: out("s", FloatType::Fp32, vec![-1]),
            end: out("e", FloatType::Fp32, vec![-1]),
        };
        let quiet_negative_nan = f32::from_bits(0xffc0_0001);
        let start = [
            f32::NAN,
            1.0,
            f32::INFINITY,
            -2.0,
            0.5,
            0.25,
            f32::NEG_INFINITY,
            quiet_negative_nan,
            3.0,
        ];
        let end = [
            f32::NEG_INFINITY,
            0.0,
            2.0,
            f32::INFINITY,
            f32::NAN,
            -1.0,
            1.0,
            2.0,
            3.0,
        ];
        let r = response(vec![
            ("s", "FP32", vec![3, 3], le32(&start)),
            ("e", "FP32", vec![3, 3], le32(&end)),
        ]);
        let b = binding(fp32, 4);
        let checked = check_batch(&b, 3, 3, &r).unwrap();
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let (mut s, mut e) = (Vec::new(), Vec::new());
        let mut scratch = Vec::new();
        for row in 0..3 {
            let (rs, re) = checked.row_f32(row).expect("aligned FP32");
            checked.row_into(row, &mut s, &mut e);
            assert_eq!(bits(rs), bits(&start[3 * row..3 * row + 3]), "row {row}");
            assert_eq!(bits(re), bits(&end[3 * row..3 * row + 3]), "row {row}");
            assert_eq!((bits(rs), bits(re)), (bits(&s), bits(&e)), "row {row}");
            let c = crate::decode::Candidates::of_rows(rs, re, 2, &mut scratch);
            assert!(!c.finite(), "row {row}");
        }
    }

    #[test]
    fn stacked_channels_are_split_in_one_pass_into_reused_buffers() {
        for t in [FloatType::Fp32, FloatType::Fp16] {
            let b = binding(
                Outputs::Stacked {
                    logits: out("l", t, vec![-1, 2]),
                },
                0,
            );
            // No batch dimension for a model that does not batch.
            let pairs = [1.0, -1.0, 2.0, -2.0, 4.0, -4.0, 8.0, -8.0];
            let bytes = match t {
                FloatType::Fp32 => le32(&pairs),
                FloatType::Fp16 => le16(&pairs),
            };
            let r = response(vec![("l", t.wire(), vec![4, 2], bytes)]);
            let c = check_batch(&b, 1, 4, &r).unwrap();
            // Reused buffers: whatever they held is replaced.
            let (mut s, mut e) = (vec![9.0; 7], vec![9.0; 1]);
            c.row_into(0, &mut s, &mut e);
            assert_eq!(
                (s.as_slice(), e.as_slice()),
                (&[1.0, 2.0, 4.0, 8.0][..], &[-1.0, -2.0, -4.0, -8.0][..])
            );
        }
    }

    #[test]
    fn outputs_in_shared_memory_are_read_where_the_request_placed_them() {
        let b = binding(split(), 4);
        let start = [1.5, -2.25, 3.0, 0.125, 7.0, -0.5];
        let end = [2.0, 4.0, -1.0, 0.5, 0.0, -8.0];
        // Start (FP32) then end (FP16), one after another in the binding's order, and
        // then whatever the slot held before.
        let mut shm = le32(&start);
        shm.extend(le16(&end));
        shm.extend([0xAB; 16]);
        // The server's answer: empty raw entries, in its own order.
        let empty = response(vec![
            ("e", "FP16", vec![2, 3], Vec::new()),
            ("s", "FP32", vec![2, 3], Vec::new()),
        ]);
        let c = check_batch_in(&b, 2, 3, &empty, Some(&shm)).unwrap();
        assert!(c.from_shm);
        let logits = c.logits([1, 2]);
        assert_eq!(logits[1].start, start[3..]);
        assert_eq!(logits[1].end, end[3..]);
        // Without the memory the empty entries are a mismatch, not zeros.
        assert!(check_batch(&b, 2, 3, &empty).is_err());
        // Too little memory for the batch: refused.
        assert!(check_batch_in(&b, 2, 3, &empty, Some(&shm[..30])).is_err());
        // An answer with the bytes in the message (a retry without shared memory) is
        // read from the message.
        let full = response(vec![
            ("s", "FP32", vec![2, 3], le32(&[9.0; 6])),
            ("e", "FP16", vec![2, 3], le16(&[9.0; 6])),
        ]);
        let c = check_batch_in(&b, 2, 3, &full, Some(&shm)).unwrap();
        assert!(!c.from_shm);
        assert_eq!(c.logits([1])[0].start, [9.0; 3]);
        // One stacked output: pairs from the start of the memory.
        let b = binding(
            Outputs::Stacked {
                logits: out("l", FloatType::Fp32, vec![-1, 2]),
            },
            4,
        );
        let pairs = le32(&[1.0, -1.0, 2.0, -2.0]);
        let r = response(vec![("l", "FP32", vec![1, 2, 2], Vec::new())]);
        let c = check_batch_in(&b, 1, 2, &r, Some(&pairs)).unwrap();
        let l = &c.logits([5])[0];
        assert_eq!(
            (l.start.as_slice(), l.end.as_slice()),
            (&[1.0, 2.0][..], &[-1.0, -2.0][..])
        );
    }

    #[test]
    fn responses_that_do_not_fit_the_batch_are_refused_before_reading() {
        let b = binding(split(), 4);
        let good_s = ("s", "FP32", vec![2, 3], le32(&[0.0; 6]));
        let good_e = ("e", "FP16", vec![2, 3], le16(&[0.0; 6]));
        assert!(check_batch(&b, 2, 3, &response(vec![good_s.clone(), good_e.clone()])).is_ok());
        let cases = [
            (vec![good_s.clone()], "missing"),
            (
                vec![good_s.clone(), ("e", "FP32", vec![2, 3], le32(&[0.0; 6]))],
                "FP16",
            ),
            (
                vec![good_s.clone(), ("e", "FP16", vec![3, 2], le16(&[0.0; 6]))],
                "shape [2, 3]",
            ),
            (
                vec![good_s.clone(), ("e", "FP16", vec![2, 3], le16(&[0.0; 5]))],
                "12 bytes",
            ),
        ];
        for (tensors, why) in cases {
            let e = check_batch(&b, 2, 3, &response(tensors)).unwrap_err();
            assert!(e.to_string().contains(why), "{e} lacks {why:?}");
        }
        // The batch, not the response, says how many rows there must be.
        let r = response(vec![good_s, good_e]);
        assert!(check_batch(&b, 3, 3, &r).is_err());
        assert!(check_batch(&b, 2, 2, &r).is_err());
    }
}
