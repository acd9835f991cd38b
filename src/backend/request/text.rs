//! A text model's request: the question and context pairs of its rows, written as two
//! BYTES tensors (`text_request.rs` lays them out).

use std::sync::Arc;

use super::Payload;
use crate::backend::text::TextBinding;
use crate::backend::text_request::{input_lens, raw_contents, write_contents, TextPair};
use crate::error::{Error, Result};

/// A text model's questions and contexts, one pair a row.
#[derive(Debug)]
pub(super) struct TextPayload {
    binding: Arc<TextBinding>,
    pairs: Vec<TextPair>,
}

impl TextPayload {
    /// Checks the batch: between one pair and the model's max batch size (one for a
    /// model without batching).
    pub(super) fn new(binding: &Arc<TextBinding>, pairs: Vec<TextPair>) -> Result<TextPayload> {
        let limit = binding.max_batch_size.max(1);
        if pairs.is_empty() || pairs.len() > limit {
            return Err(Error::Config(format!(
                "a request of {} questions for model {:?}, which takes 1 to {limit}",
                pairs.len(),
                binding.model
            )));
        }
        Ok(TextPayload {
            binding: binding.clone(),
            pairs,
        })
    }
}

impl Payload for TextPayload {
    fn model(&self) -> &str {
        &self.binding.model
    }

    fn version(&self) -> &str {
        &self.binding.version
    }

    fn rows(&self) -> usize {
        self.pairs.len()
    }

    fn inputs(&self) -> Vec<(&str, &'static str, Vec<i64>)> {
        let shape = self.binding.input_shape(self.pairs.len());
        vec![
            (self.binding.question.as_str(), "BYTES", shape.clone()),
            (self.binding.context.as_str(), "BYTES", shape),
        ]
    }

    fn input_lens(&self) -> Vec<usize> {
        input_lens(&self.pairs).to_vec()
    }

    fn write_contents(&self, mut out: &mut [u8]) {
        write_contents(&self.pairs, &mut out);
        debug_assert!(out.is_empty(), "contents_len bytes written");
    }

    fn raw_contents(&self) -> Vec<::bytes::Bytes> {
        raw_contents(&self.pairs).into()
    }

    fn outputs(&self) -> Vec<(&str, Option<usize>)> {
        let names = self.binding.output_names();
        names.into_iter().map(|name| (name, None)).collect()
    }

    fn pairs(&self) -> Option<&[TextPair]> {
        Some(&self.pairs)
    }
}
