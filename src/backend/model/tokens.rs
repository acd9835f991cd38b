//! A model that takes token ids: bertqa cuts the windows, pads them and reads the
//! start and end logits back (split, stacked, or with offsets: the binding says).

use std::sync::Arc;

use super::ModelKind;
use std::fmt::Write as _;

use crate::backend::binding::{Batching, Binding, Outputs};
use crate::backend::proto::ModelInferResponse;
use crate::backend::request::{prepare_request, InferRequest};
use crate::backend::{shm, tensor};
use crate::error::Result;
use crate::types::Feature;

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

    fn declares_batching(&self) -> bool {
        self.0.batching != Batching::Undeclared
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(&*self.0).unwrap_or(serde_json::Value::Null)
    }

    fn describe(&self, s: &mut String) {
        describe_tokens(s, &self.0);
    }

    fn server_batch(&self) -> usize {
        self.0.server_batch()
    }

    fn slot_bytes(&self, rows: usize, seq_len: usize) -> usize {
        shm::slot_bytes(&self.0, rows, seq_len)
    }

    fn token_request(&self, features: Vec<Arc<Feature>>, seq_len: usize) -> Result<InferRequest> {
        prepare_request(&self.0, features, seq_len)
    }

    fn check_answer(&self, request: &InferRequest, response: &ModelInferResponse) -> Result<()> {
        tensor::decode_response(request, response).map(drop)
    }

    fn tokens(&self) -> Option<&Arc<Binding>> {
        Some(&self.0)
    }
}

/// A token model's binding: which tensor takes what.
fn describe_tokens(s: &mut String, b: &Binding) {
    let _ = writeln!(s, "binding (sequence length {}):", b.seq_len);
    if b.batching == Batching::Undeclared {
        let _ = writeln!(
            s,
            "  batch        the leading -1, not declared by the server: {} features \
             per request unless `batch_size` says otherwise",
            b.default_batch_size()
        );
    }
    for i in &b.inputs {
        let _ = writeln!(
            s,
            "  {:<12} <- {} ({})",
            i.role.as_str(),
            i.name,
            i.datatype.wire()
        );
    }
    match &b.outputs {
        Outputs::Split { start, end } => {
            for (role, t) in [("start_logits", start), ("end_logits", end)] {
                let _ = writeln!(s, "  {role:<12} -> {} ({})", t.name, t.datatype.wire());
            }
        }
        Outputs::Stacked { logits } => {
            let _ = writeln!(
                s,
                "  {:<12} -> {} ({}, [batch, seq, 2]: start = 0, end = 1)",
                "logits",
                logits.name,
                logits.datatype.wire()
            );
        }
    }
}
