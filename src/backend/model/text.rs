//! A model that takes text: the server tokenizes. Under the logits contract it answers
//! with windows of logits whose pieces bertqa rebuilds with the vocabulary; under the
//! answer contract it answers in words, with or without a no-answer output.

use std::sync::Arc;

use super::ModelKind;
use crate::backend::proto::ModelInferResponse;
use crate::backend::request::InferRequest;
use crate::backend::text::{Contract, TextBinding};
use crate::error::Result;

#[derive(Debug)]
pub(super) struct TextModel(pub(super) Arc<TextBinding>);

impl ModelKind for TextModel {
    fn name(&self) -> &str {
        &self.0.model
    }

    fn version(&self) -> &str {
        &self.0.version
    }

    fn platform(&self) -> &str {
        &self.0.platform
    }

    fn max_batch_size(&self) -> usize {
        self.0.max_batch_size
    }

    fn batch_limit(&self) -> usize {
        self.0.max_batch_size.max(1)
    }

    fn default_batch_size(&self) -> usize {
        self.0.per_request(self.batch_limit())
    }

    fn per_request(&self, batch_size: usize) -> usize {
        self.0.per_request(batch_size)
    }

    fn needs_tokenizer(&self) -> bool {
        !matches!(self.0.contract, Contract::Answer { .. })
    }

    fn gives_null_odds(&self) -> bool {
        !matches!(
            self.0.contract,
            Contract::Answer {
                no_answer: None,
                ..
            }
        )
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(&*self.0).unwrap_or(serde_json::Value::Null)
    }

    fn check_answer(&self, request: &InferRequest, response: &ModelInferResponse) -> Result<()> {
        self.0.replies(response, request.rows()).map(drop)
    }

    fn text(&self) -> Option<&Arc<TextBinding>> {
        Some(&self.0)
    }
}
