//! A model that takes token ids: bertqa cuts the windows, pads them and reads the
//! start and end logits back (split, stacked, or with offsets: the binding says).

use std::sync::Arc;

use super::ModelKind;
use crate::backend::binding::Binding;
use crate::backend::proto::ModelInferResponse;
use crate::backend::request::InferRequest;
use crate::backend::tensor;
use crate::error::Result;

#[derive(Debug)]
pub(super) struct TokenModel(pub(super) Arc<Binding>);

impl ModelKind for TokenModel {
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
        self.0.batch_limit()
    }

    fn default_batch_size(&self) -> usize {
        self.0.default_batch_size()
    }

    fn fixed_len(&self) -> Option<usize> {
        self.0.fixed_len()
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(&*self.0).unwrap_or(serde_json::Value::Null)
    }

    fn check_answer(&self, request: &InferRequest, response: &ModelInferResponse) -> Result<()> {
        tensor::decode_response(request, response).map(drop)
    }

    fn tokens(&self) -> Option<&Arc<Binding>> {
        Some(&self.0)
    }
}
