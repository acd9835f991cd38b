//! A model that takes text: the server tokenizes. Under the logits contract it answers
//! with windows of logits whose pieces bertqa rebuilds with the vocabulary; under the
//! answer contract it answers in words, with or without a no-answer output.

use std::fmt::Write as _;
use std::sync::Arc;

use super::ModelKind;
use crate::backend::proto::ModelInferResponse;
use crate::backend::request::InferRequest;
use crate::backend::text::{Contract, TextBinding, TextReply};
use crate::backend::TextPair;
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

    fn takes_text(&self) -> bool {
        true
    }

    fn answers_given(&self) -> bool {
        matches!(self.0.contract, Contract::Answer { .. })
    }

    fn no_answer_probability(&self) -> bool {
        matches!(&self.0.contract, Contract::Answer { no_answer: Some(n), .. } if n.probability)
    }

    fn steps(&self) -> &[String] {
        &self.0.steps
    }

    fn contract_name(&self) -> Option<&'static str> {
        Some(self.0.contract.name())
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(&*self.0).unwrap_or(serde_json::Value::Null)
    }

    fn describe(&self, s: &mut String) {
        describe_text(s, &self.0);
    }

    fn contract_words(&self) -> Option<String> {
        Some(contract_words(&self.0))
    }

    fn contract(&self) -> Option<&Contract> {
        Some(&self.0.contract)
    }

    fn text_request(&self, pairs: Vec<TextPair>) -> Result<InferRequest> {
        InferRequest::text(&self.0, pairs)
    }

    fn replies(&self, response: &ModelInferResponse, rows: usize) -> Result<Vec<TextReply>> {
        self.0.replies(response, rows)
    }

    fn check_answer(&self, request: &InferRequest, response: &ModelInferResponse) -> Result<()> {
        self.0.replies(response, request.rows()).map(drop)
    }

    fn text(&self) -> Option<&Arc<TextBinding>> {
        Some(&self.0)
    }
}

/// A text model's binding: its inputs, and the contract its outputs follow.
fn describe_text(s: &mut String, b: &TextBinding) {
    let batch = match b.max_batch_size {
        0 => "one question per request".to_string(),
        n => format!("up to {n} questions per request"),
    };
    let _ = writeln!(
        s,
        "binding (text: the {} contract, {batch}):",
        b.contract.name()
    );
    let _ = writeln!(s, "  {:<12} <- {} (BYTES)", "question", b.question);
    let _ = writeln!(s, "  {:<12} <- {} (BYTES)", "context", b.context);
    let row = |s: &mut String, role: &str, name: Option<&str>| {
        let _ = writeln!(s, "  {role:<12} -> {}", name.unwrap_or("(not given)"));
    };
    match &b.contract {
        Contract::Answer {
            answer,
            score,
            no_answer,
            start,
            end,
        } => {
            row(s, "answer", Some(answer));
            row(s, "score", score.as_deref());
            let no = no_answer.as_ref().map(|n| {
                let what = if n.probability {
                    "a probability"
                } else {
                    "a score"
                };
                format!("{} ({what})", n.name)
            });
            row(s, "no answer", no.as_deref());
            row(s, "start char", start.as_deref());
            row(s, "end char", end.as_deref());
        }
        Contract::Logits {
            start_logits,
            end_logits,
            offsets,
        } => {
            row(s, "start_logits", Some(start_logits));
            row(s, "end_logits", Some(end_logits));
            row(s, "offsets", Some(offsets));
        }
    }
}

/// What a text model's contract gives, in words (what the answer files can hold): the
/// text report's `text model` line.
fn contract_words(b: &TextBinding) -> String {
    let steps = if b.steps.is_empty() {
        String::new()
    } else {
        format!("ensemble {}; ", b.steps.join(" -> "))
    };
    let gives = match &b.contract {
        Contract::Logits { .. } => {
            "the logits contract: each window's logits and token offsets, decoded here \
             (n-best lists and null odds as for a token model)"
                .to_string()
        }
        Contract::Answer {
            score, no_answer, ..
        } => {
            let score = if score.is_some() { "with" } else { "without" };
            let odds = match no_answer {
                Some(n) if n.probability => "a no-answer probability (the null odds)",
                Some(_) => "a no-answer score (null odds: no-answer score - score)",
                None => "no no-answer output (no null odds)",
            };
            format!("the answer contract: one answer per question {score} a score, {odds}")
        }
    };
    format!("{steps}{gives}")
}
