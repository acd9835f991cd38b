//! A text model's request ([`super::text`]): its two BYTES inputs, the questions and
//! the contexts of its pairs in Triton's wire form ([`super::bytes`]), carried in the
//! message or placed in a system shared memory slot.
//!
//! Contract:
//! - In shared memory the two tensors lie one after another from the slot's offset, the
//!   questions first, each exactly the bytes the message would carry
//!   ([`write_contents`], [`contents_len`]); each input then names the region, its
//!   offset and its byte size, and the message carries no contents.
//! - Outputs always come back in the message: their size is known only once the server
//!   has tokenized (the logits contract's windows) or answered (the answer's text).

use std::collections::HashMap;

use super::bytes;
use super::proto::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
use super::proto::{InferParameter, ModelInferRequest};
use super::request::{shm_parameters, ShmInputs};
use super::text::TextBinding;

/// Bytes of both BYTES tensors of `pairs` (question, context) together: what
/// [`write_contents`] writes.
pub(crate) fn contents_len(pairs: &[(&str, &str)]) -> usize {
    bytes::encoded_len(pairs.iter().map(|p| p.0.as_bytes()))
        + bytes::encoded_len(pairs.iter().map(|p| p.1.as_bytes()))
}

/// Writes the questions' tensor, then the contexts', into `out` (a slot with room for
/// [`contents_len`] bytes).
pub(crate) fn write_contents<B: ::bytes::BufMut>(pairs: &[(&str, &str)], out: &mut B) {
    bytes::encode_to(out, pairs.iter().map(|p| p.0.as_bytes()));
    bytes::encode_to(out, pairs.iter().map(|p| p.1.as_bytes()));
}

/// The parameters of the question's and the context's inputs: where they lie in
/// shared memory when placed `at` a slot (see the module's contract), none when
/// they travel in the message.
pub(crate) fn input_parameters(
    pairs: &[(&str, &str)],
    at: Option<&ShmInputs>,
) -> [HashMap<String, InferParameter>; 2] {
    let Some(at) = at else {
        return [HashMap::new(), HashMap::new()];
    };
    let questions = bytes::encoded_len(pairs.iter().map(|p| p.0.as_bytes()));
    let contexts = bytes::encoded_len(pairs.iter().map(|p| p.1.as_bytes()));
    [
        shm_parameters(&at.region, questions, at.offset),
        shm_parameters(&at.region, contexts, at.offset + questions as u64),
    ]
}

impl TextBinding {
    /// The shape of each input for `n` questions: `[n, 1]` for a model that batches,
    /// `[1]` for one that does not (then `n` is 1).
    pub(crate) fn input_shape(&self, n: usize) -> Vec<i64> {
        if self.max_batch_size > 0 {
            vec![n as i64, 1]
        } else {
            vec![1]
        }
    }

    /// The gRPC message asking the model about `pairs` (question, context): their
    /// tensors in the message, or (`at`) in a shared memory slot.
    pub(crate) fn request(
        &self,
        version: &str,
        pairs: &[(&str, &str)],
        at: Option<&ShmInputs>,
    ) -> ModelInferRequest {
        let shape = self.input_shape(pairs.len());
        let [q, c] = input_parameters(pairs, at);
        let input = |name: &str, parameters| InferInputTensor {
            name: name.to_string(),
            datatype: "BYTES".into(),
            shape: shape.clone(),
            parameters,
            ..Default::default()
        };
        let raw_input_contents = match at {
            Some(_) => Vec::new(),
            None => vec![
                bytes::encode(pairs.iter().map(|p| p.0.as_bytes())).into(),
                bytes::encode(pairs.iter().map(|p| p.1.as_bytes())).into(),
            ],
        };
        ModelInferRequest {
            model_name: self.model.clone(),
            model_version: version.to_string(),
            inputs: vec![input(&self.question, q), input(&self.context, c)],
            outputs: self
                .output_names()
                .into_iter()
                .map(|name| InferRequestedOutputTensor {
                    name: name.to_string(),
                    ..Default::default()
                })
                .collect(),
            raw_input_contents,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::proto::infer_parameter::ParameterChoice;
    use proptest::prelude::*;

    fn int(p: &HashMap<String, InferParameter>, key: &str) -> usize {
        match p[key].parameter_choice {
            Some(ParameterChoice::Int64Param(v)) => v as usize,
            _ => panic!("{key} is not an int64"),
        }
    }

    proptest! {
        /// Placed in shared memory, the message carries no contents, and the bytes
        /// written into the slot are the message's contents, each input at the offset
        /// and of the size its parameters give; outputs are asked for in the message.
        #[test]
        fn inputs_in_shared_memory_are_the_bytes_the_message_would_carry(
            texts in prop::collection::vec(("\\PC{0,20}", "\\PC{0,80}"), 1..5),
            offset in 0u64..1_000_000,
        ) {
            let pairs: Vec<(&str, &str)> =
                texts.iter().map(|(q, c)| (q.as_str(), c.as_str())).collect();
            let b = crate::backend::text::logits_binding_for_tests(8);
            let plain = b.request("1", &pairs, None);
            let at = ShmInputs { region: "r".into(), offset };
            let placed = b.request("1", &pairs, Some(&at));
            prop_assert!(placed.raw_input_contents.is_empty());
            prop_assert_eq!(plain.inputs[0].shape.clone(), vec![pairs.len() as i64, 1]);
            let mut slot = vec![0u8; contents_len(&pairs)];
            let mut room = &mut slot[..];
            write_contents(&pairs, &mut room);
            prop_assert!(room.is_empty());
            let mut next = offset as usize;
            for (t, raw) in placed.inputs.iter().zip(&plain.raw_input_contents) {
                prop_assert_eq!(
                    &t.parameters["shared_memory_region"].parameter_choice,
                    &Some(ParameterChoice::StringParam("r".into()))
                );
                let (at, size) = (int(&t.parameters, "shared_memory_offset"), int(&t.parameters, "shared_memory_byte_size"));
                prop_assert_eq!(at, next);
                let from = at - offset as usize;
                prop_assert_eq!(&slot[from..from + size], &raw[..]);
                next += size;
            }
            prop_assert_eq!(next - offset as usize, slot.len());
            prop_assert!(placed.outputs.iter().all(|o| o.parameters.is_empty()));
            prop_assert!(plain.inputs.iter().all(|t| t.parameters.is_empty()));
            let strip = |mut m: ModelInferRequest| {
                m.inputs.iter_mut().for_each(|t| t.parameters.clear());
                m.raw_input_contents.clear();
                m
            };
            prop_assert_eq!(strip(placed), strip(plain));
        }
    }

    #[test]
    fn a_model_without_batching_takes_one_pair_in_shape_1() {
        let m = crate::backend::text::logits_binding_for_tests(0).request(
            "",
            &[("Who?", "Ada wrote it.")],
            None,
        );
        assert_eq!(m.inputs[0].shape, vec![1]);
        assert_eq!(m.inputs[1].name, "context");
        assert_eq!(&m.raw_input_contents[0][..], b"\x04\x00\x00\x00Who?");
        assert_eq!(contents_len(&[("Who?", "Ada wrote it.")]), 8 + 4 + 13);
    }
}
