//! What a sweep sends, for any kind of model: its requests, prepared once (the model's
//! [`InferRequest`]s, built as a run builds them) and sent in turn, cycled; each with
//! what its `--requests-jsonl` line names.

use std::sync::Arc;

use super::text::{TextLoad, TextRequest};
use super::Batch;
use crate::backend::shm;
use crate::backend::{Binding, InferRequest, Model};
use crate::error::{Error, Result};

/// A sweep's requests and the model they go to.
#[derive(Debug, Clone)]
pub struct Requests {
    model: Model,
    /// The version whose statistics are read (empty: the server's choice).
    version: String,
    planned: Vec<Planned>,
}

/// One request and the rows its log line names: its features' unique ids, or its
/// questions' places in the data.
#[derive(Debug, Clone)]
pub(super) struct Planned {
    pub(super) request: InferRequest,
    pub(super) ids: Vec<u64>,
}

impl Requests {
    /// A request of each of `batches` for the model bound as `binding` (at least one).
    pub fn tokens(binding: Arc<Binding>, batches: Vec<Batch>) -> Result<Requests> {
        Requests::features(&binding.into(), batches)
    }

    /// The requests of `load`, a model that takes text (at least one).
    pub fn text(load: TextLoad) -> Result<Requests> {
        Requests::questions(&load.binding.into(), load.version, load.requests)
    }

    /// A request of each of `batches` for `model`, which takes token ids (at least one).
    pub fn features(model: &Model, batches: Vec<Batch>) -> Result<Requests> {
        if batches.is_empty() {
            return Err(Error::Config(
                "no features to send (the data produced no windows)".into(),
            ));
        }
        let planned = batches
            .into_iter()
            .map(|b| {
                let ids = b.features.iter().map(|f| f.unique_id).collect();
                let request = model.token_request(b.features, b.seq_len)?;
                Ok(Planned { request, ids })
            })
            .collect::<Result<_>>()?;
        Ok(Requests {
            version: model.version().to_string(),
            model: model.clone(),
            planned,
        })
    }

    /// The requests `requests` for `model`, which takes text (at least one); `version`:
    /// the version whose statistics are read (empty: the server's choice).
    pub fn questions(
        model: &Model,
        version: String,
        requests: Vec<TextRequest>,
    ) -> Result<Requests> {
        if requests.is_empty() {
            return Err(Error::Config("no questions to send".into()));
        }
        let planned = requests
            .into_iter()
            .map(|r| {
                let request = model.text_request(r.pairs)?;
                Ok(Planned {
                    request,
                    ids: r.questions,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Requests {
            model: model.clone(),
            version,
            planned,
        })
    }

    /// Distinct requests, cycled.
    pub fn len(&self) -> usize {
        self.planned.len()
    }

    /// Always false: there is at least one request.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The model they go to.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The `i`-th request, cycled.
    pub(super) fn get(&self, i: usize) -> &Planned {
        &self.planned[i % self.planned.len()]
    }

    /// The model and version whose statistics are read.
    pub(super) fn statistics_of(&self) -> (&str, &str) {
        (self.model.name(), &self.version)
    }

    /// An ensemble's composing models (empty: none, or a token model).
    pub(super) fn steps(&self) -> &[String] {
        self.model.steps()
    }

    /// Bytes of a shared memory slot that holds any of the requests' inputs and, when
    /// known before the answer, outputs.
    pub(super) fn slot_bytes(&self) -> usize {
        let slots = self
            .planned
            .iter()
            .map(|p| shm::request_slot_bytes(&p.request));
        slots.max().unwrap_or(0)
    }
}
