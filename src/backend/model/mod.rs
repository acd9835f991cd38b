//! A model as a run meets it: [`Model`], one handle over the kinds of model bertqa
//! asks, each behind [`ModelKind`] in a file of its own: a model that takes token ids
//! (`tokens.rs`; bertqa cuts the windows) and a model that takes text (`text.rs`; the
//! server tokenizes, under the logits or the answer contract). A new kind is a new
//! file here implementing [`ModelKind`] (docs/design.md, "Model kinds").

use std::sync::Arc;

use super::binding::Binding;
use super::proto::ModelInferResponse;
use super::request::InferRequest;
use super::text::TextBinding;
use crate::error::Result;

mod text;
mod tokens;

/// How bertqa talks to a model: its token inputs (bertqa builds the windows), or text
/// (a question and a context; the server makes the windows). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Model(Arc<dyn ModelKind>);

/// What differs between the kinds of model: what they are called and how they batch,
/// what they need here, and how their answers are read.
pub(crate) trait ModelKind: std::fmt::Debug + Send + Sync {
    fn name(&self) -> &str;
    fn version(&self) -> &str;
    fn platform(&self) -> &str;
    /// The largest batch the server accepts (0: no batch dimension).
    fn max_batch_size(&self) -> usize;
    /// The most rows one request may carry.
    fn batch_limit(&self) -> usize;
    /// Rows a request carries unless told otherwise.
    fn default_batch_size(&self) -> usize;
    /// Rows a request carries when `batch_size` are asked for.
    fn per_request(&self, batch_size: usize) -> usize {
        batch_size
    }
    /// The fixed sequence length of the model's token inputs (`None`: any length, or
    /// none of ours).
    fn fixed_len(&self) -> Option<usize> {
        None
    }
    /// Whether its answers are decoded here with a tokenizer.
    fn needs_tokenizer(&self) -> bool {
        true
    }
    /// Whether its answers come with null odds (SQuAD 2.0's no-answer score).
    fn gives_null_odds(&self) -> bool {
        true
    }
    /// The binding as reports show it.
    fn to_json(&self) -> serde_json::Value;
    /// Reads `response` to `request` as a run would and drops the answers: a warm-up
    /// request's check that the model answers as its binding says.
    fn check_answer(&self, request: &InferRequest, response: &ModelInferResponse) -> Result<()>;
    /// The token binding of a model that takes token ids.
    fn tokens(&self) -> Option<&Arc<Binding>> {
        None
    }
    /// The text binding of a model that takes text.
    fn text(&self) -> Option<&Arc<TextBinding>> {
        None
    }
}

impl Model {
    /// The model's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The version asked for (`""`: the server's choice).
    pub fn version(&self) -> &str {
        self.0.version()
    }

    /// The platform or backend the server names (`onnxruntime_onnx`, `ensemble`, ...).
    pub fn platform(&self) -> &str {
        self.0.platform()
    }

    /// The largest batch the server accepts (0: no batch dimension).
    pub fn max_batch_size(&self) -> usize {
        self.0.max_batch_size()
    }

    /// The most features (or questions, for a model that takes text) one request may
    /// carry.
    pub fn batch_limit(&self) -> usize {
        self.0.batch_limit()
    }

    /// Features (or questions) a request carries by default: the model's largest batch
    /// for a model that takes token ids, as many questions as its contract and
    /// batching allow for one that takes text.
    pub fn default_batch_size(&self) -> usize {
        self.0.default_batch_size()
    }

    /// Rows a request carries when `batch_size` are asked for: as many for a model that
    /// takes token ids; for one that takes text, one under the logits contract or
    /// without batching, else up to its max batch size.
    pub fn per_request(&self, batch_size: usize) -> usize {
        self.0.per_request(batch_size)
    }

    /// The fixed sequence length of a model that takes token ids (`None`: any length,
    /// or a model that takes text).
    pub fn fixed_len(&self) -> Option<usize> {
        self.0.fixed_len()
    }

    /// The token binding of a model that takes token ids (`None`: it takes text).
    pub fn tokens(&self) -> Option<&Arc<Binding>> {
        self.0.tokens()
    }

    /// The text binding of a model that takes text (`None`: it takes token ids).
    pub fn text(&self) -> Option<&Arc<TextBinding>> {
        self.0.text()
    }

    /// Whether its answers are decoded here with a tokenizer: all but a text model of
    /// the answer contract, which answers in words.
    pub fn needs_tokenizer(&self) -> bool {
        self.0.needs_tokenizer()
    }

    /// Whether the model's answers come with null odds: all but a text model of the
    /// answer contract without a no-answer output.
    pub fn gives_null_odds(&self) -> bool {
        self.0.gives_null_odds()
    }

    /// The binding as reports show it.
    pub fn to_json(&self) -> serde_json::Value {
        self.0.to_json()
    }

    /// Reads `response` to `request` and drops the answers (a warm-up's check).
    pub(crate) fn check_answer(
        &self,
        request: &InferRequest,
        response: &ModelInferResponse,
    ) -> Result<()> {
        self.0.check_answer(request, response)
    }
}

impl From<Arc<Binding>> for Model {
    fn from(b: Arc<Binding>) -> Model {
        Model(Arc::new(tokens::TokenModel(b)))
    }
}

impl From<Binding> for Model {
    fn from(b: Binding) -> Model {
        Arc::new(b).into()
    }
}

impl From<Arc<TextBinding>> for Model {
    fn from(b: Arc<TextBinding>) -> Model {
        Model(Arc::new(text::TextModel(b)))
    }
}

impl From<TextBinding> for Model {
    fn from(b: TextBinding) -> Model {
        Arc::new(b).into()
    }
}
