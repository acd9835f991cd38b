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

use std::sync::Arc;

use super::bytes;
use super::text::TextBinding;

/// A question and its context, as a text model's request carries them.
pub type TextPair = (Arc<str>, Arc<str>);

/// Bytes of the questions' tensor and of the contexts' tensor of `pairs` (question,
/// context), in that order.
pub(crate) fn input_lens<Q: AsRef<str>, C: AsRef<str>>(pairs: &[(Q, C)]) -> [usize; 2] {
    [
        bytes::encoded_len(pairs.iter().map(|p| p.0.as_ref().as_bytes())),
        bytes::encoded_len(pairs.iter().map(|p| p.1.as_ref().as_bytes())),
    ]
}

/// Bytes one (question, context) pair adds to a request's inputs.
pub(crate) fn pair_len(question: &str, context: &str) -> usize {
    bytes::encoded_len([question.as_bytes()]) + bytes::encoded_len([context.as_bytes()])
}

/// Bytes of both BYTES tensors of `pairs` together: what [`write_contents`] writes.
#[cfg(test)]
pub(crate) fn contents_len<Q: AsRef<str>, C: AsRef<str>>(pairs: &[(Q, C)]) -> usize {
    input_lens(pairs).iter().sum()
}

/// Writes the questions' tensor, then the contexts', into `out` (a slot with room for
/// [`contents_len`] bytes).
pub(crate) fn write_contents<B: ::bytes::BufMut>(pairs: &[TextPair], out: &mut B) {
    bytes::encode_to(out, pairs.iter().map(|p| p.0.as_bytes()));
    bytes::encode_to(out, pairs.iter().map(|p| p.1.as_bytes()));
}

/// The two tensors' contents as the message carries them.
pub(crate) fn raw_contents(pairs: &[TextPair]) -> [::bytes::Bytes; 2] {
    [
        bytes::encode(pairs.iter().map(|p| p.0.as_bytes())).into(),
        bytes::encode(pairs.iter().map(|p| p.1.as_bytes())).into(),
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
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::backend::proto::infer_parameter::ParameterChoice;
    use crate::backend::proto::{InferParameter, ModelInferRequest};
    use crate::backend::request::{InferRequest, ShmInputs};
    use proptest::prelude::*;

    fn int(p: &HashMap<String, InferParameter>, key: &str) -> usize {
        match p[key].parameter_choice {
            Some(ParameterChoice::Int64Param(v)) => v as usize,
            _ => panic!("{key} is not an int64"),
        }
    }

    fn request(max_batch_size: usize, pairs: Vec<TextPair>) -> InferRequest {
        let b = Arc::new(crate::backend::text::logits_binding_for_tests(
            max_batch_size,
        ));
        InferRequest::text(&b, pairs).unwrap()
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
            let pairs: Vec<TextPair> = texts.iter().map(|(q, c)| (q.as_str().into(), c.as_str().into())).collect();
            let r = request(8, pairs.clone());
            let plain = r.to_proto();
            let at = ShmInputs { region: "r".into(), offset };
            let placed = r.clone().with_shm_inputs(at).to_proto();
            prop_assert!(placed.raw_input_contents.is_empty());
            prop_assert_eq!(plain.inputs[0].shape.clone(), vec![pairs.len() as i64, 1]);
            prop_assert_eq!(r.contents_len(), contents_len(&pairs));
            let mut slot = vec![0u8; contents_len(&pairs)];
            r.write_contents_to(&mut slot);
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
        let pair: Vec<TextPair> = vec![("Who?".into(), "Ada wrote it.".into())];
        let m = request(0, pair.clone()).to_proto();
        assert_eq!(m.inputs[0].shape, vec![1]);
        assert_eq!(m.inputs[1].name, "context");
        assert_eq!(&m.raw_input_contents[0][..], b"\x04\x00\x00\x00Who?");
        assert_eq!(contents_len(&pair), 8 + 4 + 13);
    }

    #[test]
    fn a_request_holds_one_to_max_batch_size_pairs() {
        let b = Arc::new(crate::backend::text::logits_binding_for_tests(0));
        let pair: TextPair = ("Who?".into(), "Ada.".into());
        assert!(InferRequest::text(&b, vec![]).is_err());
        assert!(InferRequest::text(&b, vec![pair.clone(), pair.clone()]).is_err());
        assert_eq!(InferRequest::text(&b, vec![pair]).unwrap().rows(), 1);
    }
}
