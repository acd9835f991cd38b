//! A model as a run meets it: [`Model`], one handle over the kinds of model bertqa
//! asks, each behind [`ModelKind`] in a file of its own: a model that takes token ids
//! (`tokens.rs`; bertqa cuts the windows) and a model that takes text (`text.rs`; the
//! server tokenizes, under the logits or the answer contract). A new kind is a new
//! file here implementing [`ModelKind`] (docs/design.md, "Model kinds").

use std::sync::Arc;

use super::binding::Binding;
use super::proto::{ModelConfig, ModelInferResponse, ModelMetadataResponse};
use super::request::InferRequest;
use super::text::{Contract, TextBinding, TextReply};
use super::{BindingOverrides, TextOverrides, TextPair};
use crate::error::{Error, Result};
use crate::types::Feature;

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
    /// Whether it takes text (the server tokenizes and makes the windows).
    fn takes_text(&self) -> bool {
        false
    }
    /// Whether it answers in words (the answer contract): the answers are given, not
    /// decoded here.
    fn answers_given(&self) -> bool {
        false
    }
    /// Whether its no-answer output is a probability (then the null odds themselves).
    fn no_answer_probability(&self) -> bool {
        false
    }
    /// Whether the server declares how many rows a request may carry.
    fn declares_batching(&self) -> bool {
        true
    }
    /// An ensemble's composing models (empty: none).
    fn steps(&self) -> &[String] {
        &[]
    }
    /// The name of its text contract (`None`: it takes token ids).
    fn contract_name(&self) -> Option<&'static str> {
        None
    }
    /// The binding as reports show it.
    fn to_json(&self) -> serde_json::Value;
    /// The binding as `bertqa models` words it, after the tensors.
    fn describe(&self, s: &mut String);
    /// What its contract gives, in words (`None`: a token model, nothing to add).
    fn contract_words(&self) -> Option<String> {
        None
    }
    /// Largest batch the server's own batcher forms from several requests (a token
    /// model's; 1 where unknown).
    fn server_batch(&self) -> usize {
        1
    }
    /// Bytes of a shared memory slot for `rows` rows of `seq_len` tokens, inputs and
    /// outputs (a token model's; a text model's slots are sized by its requests).
    fn slot_bytes(&self, _rows: usize, _seq_len: usize) -> usize {
        0
    }
    /// The contract its replies are read by (`None`: it takes token ids).
    fn contract(&self) -> Option<&Contract> {
        None
    }
    /// The request of `features`, padded to `seq_len` (a token model's).
    fn token_request(&self, _features: Vec<Arc<Feature>>, _seq_len: usize) -> Result<InferRequest> {
        Err(Error::Internal(format!(
            "features for model {:?}, which takes text",
            self.name()
        )))
    }
    /// The request of `pairs` (a text model's).
    fn text_request(&self, _pairs: Vec<TextPair>) -> Result<InferRequest> {
        Err(Error::Internal(format!(
            "questions for model {:?}, which takes token ids",
            self.name()
        )))
    }
    /// The replies to a text model's request of `rows` questions, read by its contract.
    fn replies(&self, _response: &ModelInferResponse, _rows: usize) -> Result<Vec<TextReply>> {
        Err(Error::Internal(format!(
            "a text model's reply from model {:?}, which takes token ids",
            self.name()
        )))
    }
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
    internal! {
        /// The model as its metadata (and configuration, when the server has one) says: one
        /// that takes text bound by its contract (`text`'s names), else by its token inputs
        /// (`tokens`' names).
        pub fn infer(
            metadata: &ModelMetadataResponse,
            config: Option<&ModelConfig>,
            version: &str,
            tokens: &BindingOverrides,
            text: &TextOverrides,
        ) -> Result<Model> {
            Ok(if super::text::takes_text(metadata) {
                TextBinding::infer(metadata, config, version, text)?.into()
            } else {
                Binding::infer(metadata, config, version, tokens)?.into()
            })
        }
    }

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

    /// Whether it takes text: a question and a context, tokenized (and cut into
    /// windows) by the server.
    pub fn takes_text(&self) -> bool {
        self.0.takes_text()
    }

    /// Whether it answers in words (a text model of the answer contract): its answers
    /// are given as they are, nothing is decoded here.
    pub fn answers_given(&self) -> bool {
        self.0.answers_given()
    }

    /// Whether its no-answer output is a probability (written as the null odds itself)
    /// rather than a score.
    pub fn no_answer_probability(&self) -> bool {
        self.0.no_answer_probability()
    }

    /// Whether the server declares how many rows a request may carry (all but a token
    /// model whose batching nobody declares: the client chooses).
    pub fn declares_batching(&self) -> bool {
        self.0.declares_batching()
    }

    /// An ensemble's composing models, in order (empty: not an ensemble, or a token
    /// model).
    pub fn steps(&self) -> &[String] {
        self.0.steps()
    }

    /// The name of a text model's contract (`logits`, `answer`; `None`: it takes token
    /// ids).
    pub fn contract_name(&self) -> Option<&'static str> {
        self.0.contract_name()
    }

    /// What a text model's contract gives, in words (`None`: it takes token ids).
    pub fn contract_words(&self) -> Option<String> {
        self.0.contract_words()
    }

    /// The binding as `bertqa models` words it, after the tensors.
    pub(crate) fn describe(&self, s: &mut String) {
        self.0.describe(s)
    }

    /// Largest batch the server's own batcher forms from several requests: a token
    /// model's declared limit with dynamic batching; 1 where unknown.
    pub(crate) fn server_batch(&self) -> usize {
        self.0.server_batch()
    }

    /// Bytes of a shared memory slot for a token model's `rows` rows of `seq_len` tokens.
    pub(crate) fn slot_bytes(&self, rows: usize, seq_len: usize) -> usize {
        self.0.slot_bytes(rows, seq_len)
    }

    /// The contract a text model's replies are read by (`None`: it takes token ids).
    pub(crate) fn contract(&self) -> Option<&Contract> {
        self.0.contract()
    }

    /// A token model's request of `features`, padded to `seq_len`.
    pub(crate) fn token_request(
        &self,
        features: Vec<Arc<Feature>>,
        seq_len: usize,
    ) -> Result<InferRequest> {
        self.0.token_request(features, seq_len)
    }

    /// A text model's request of `pairs`.
    pub(crate) fn text_request(&self, pairs: Vec<TextPair>) -> Result<InferRequest> {
        self.0.text_request(pairs)
    }

    /// A text model's replies to a request of `rows` questions.
    pub(crate) fn replies(
        &self,
        response: &ModelInferResponse,
        rows: usize,
    ) -> Result<Vec<TextReply>> {
        self.0.replies(response, rows)
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
