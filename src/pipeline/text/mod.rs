//! A text model's replies decoded (its window source: questions sent as text, the
//! server tokenizing; its answer reader: the model's contract). The run sends and
//! journals them as any request (`dispatch`, `collect`); the decode stage hands each
//! question's reply here.
//!
//! Contract:
//! - *Logits contract*: the windows become features ([`windows::features`]) and are
//!   decoded by the same rules as features built here; NaN and infinite logits are −∞
//!   and counted, as for a token model. Window unique ids start at
//!   `FIRST_UNIQUE_ID + example_index × IDS_PER_QUESTION`.
//! - *Answer contract*: the model's answer is the prediction; its n-best list is that
//!   one answer (probability 1, the model's score as `start_logit`, `end_logit` 0).
//!   With SQuAD 2.0 rules and a no-answer *score* and a score, the null odds are their
//!   difference (`no_answer − score`, run_squad's) and the answer is `""` above the
//!   null threshold; a no-answer *probability* is written as the odds itself. Without a
//!   no-answer output there are no null odds. No vocabulary is needed.

pub(crate) mod windows;

use std::sync::Arc;

use crate::backend::text::{Contract, TextAnswer, TextReply};
use crate::decode::non_finite::{sanitize, NonFinite};
use crate::decode::{DecodeConfig, ExampleDecoder, NbestEntry, NbestKeys, Prediction, Window};
use crate::error::{Error, Result};
use crate::tokenize::BertTokenizer;
use crate::types::{Dataset, Example, Feature, Logits};

/// Unique ids of a question's windows start at `FIRST_UNIQUE_ID + example_index ×
/// IDS_PER_QUESTION` (far more windows than any context makes).
const FIRST_UNIQUE_ID: u64 = 1_000_000_000;
const IDS_PER_QUESTION: u64 = 1_000_000;

/// What decoding a text model's replies reads.
pub(super) struct Decoding<'a> {
    pub dataset: &'a Dataset,
    /// Needed by the logits contract (pieces are rebuilt from the vocabulary).
    pub tokenizer: Option<&'a BertTokenizer>,
    pub config: &'a DecodeConfig,
    /// Keep the logits contract's windows (features and logits) in the result.
    pub keep: bool,
}

/// A question decoded from its reply.
pub(super) struct Decoded {
    pub prediction: Prediction,
    pub non_finite: NonFinite,
    /// With `keep`: the windows as features, and their logits.
    pub features: Vec<Arc<Feature>>,
    pub logits: Vec<Logits>,
}

/// Decodes what model `model`, of `contract`, said about question `i` (see the
/// module's contract).
pub(super) fn decode(
    model: &str,
    contract: &Contract,
    d: &Decoding<'_>,
    decoder: &mut dyn ExampleDecoder,
    i: usize,
    reply: TextReply,
) -> Result<Decoded> {
    let example = &d.dataset.examples[i];
    let mut non_finite = NonFinite::default();
    match (reply, contract) {
        (TextReply::Windows(w), Contract::Logits { offsets, .. }) => {
            let tokenizer = d.tokenizer.ok_or_else(|| {
                Error::Internal("the logits contract decoded without a vocabulary".into())
            })?;
            let question = windows::Question {
                paragraph: d.dataset.paragraph_of(example),
                example_index: i,
                first_unique_id: FIRST_UNIQUE_ID + i as u64 * IDS_PER_QUESTION,
                model,
                offsets_output: offsets,
            };
            let (features, mut logits) = windows::features(&question, &w, tokenizer)?;
            for l in &mut logits {
                let n = sanitize(l);
                if n > 0 {
                    non_finite.values += n;
                    non_finite.features += 1;
                }
            }
            let views: Vec<Window<'_>> = features
                .iter()
                .zip(&logits)
                .map(|(f, l)| Window::new(f, l))
                .collect();
            let prediction = decoder.decode_example(
                d.config,
                example.paragraph_index,
                d.dataset.paragraph_of(example),
                &example.qas_id,
                &views,
                Some(tokenizer),
            )?;
            drop(views);
            let (features, logits) = if d.keep {
                (features.into_iter().map(Arc::new).collect(), logits)
            } else {
                (Vec::new(), Vec::new())
            };
            Ok(Decoded {
                prediction,
                non_finite,
                features,
                logits,
            })
        }
        (TextReply::Answer(a), Contract::Answer { no_answer, .. }) => {
            let probability = no_answer.as_ref().is_some_and(|n| n.probability);
            Ok(Decoded {
                prediction: answer_prediction(example, a, probability, d.config),
                non_finite,
                features: Vec::new(),
                logits: Vec::new(),
            })
        }
        _ => Err(Error::Internal(format!(
            "a journaled answer of question {:?} does not follow model {:?}'s contract",
            example.qas_id, model
        ))),
    }
}

/// The prediction of an answer-contract answer (see the module's contract).
///
/// `probability`: the no-answer output is a probability, not a score.
fn answer_prediction(
    example: &Example,
    a: TextAnswer,
    probability: bool,
    config: &DecodeConfig,
) -> Prediction {
    let score = a.score.map(f64::from);
    let null_odds = match (config.version_2_with_negative, a.no_answer) {
        (false, _) | (true, None) => None,
        (true, Some(no_answer)) => Some(match score {
            Some(score) if !probability => f64::from(no_answer) - score,
            _ => f64::from(no_answer),
        }),
    };
    let answer = match (null_odds, score) {
        (Some(odds), Some(_)) if !probability && odds > config.null_score_diff_threshold => {
            String::new()
        }
        _ => a.text.clone(),
    };
    Prediction {
        qas_id: example.qas_id.clone(),
        nbest: vec![NbestEntry {
            text: a.text,
            probability: 1.0,
            start_logit: score.unwrap_or(0.0),
            end_logit: 0.0,
            span: None,
            keys: NbestKeys::Squad,
        }],
        answer,
        null_odds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Example {
        Example {
            example_index: 0,
            qas_id: "q1".into(),
            question_text: "Who?".into(),
            paragraph_index: 0,
            answers: Vec::new(),
            is_impossible: false,
        }
    }

    fn answer(text: &str, score: Option<f32>, no_answer: Option<f32>) -> TextAnswer {
        TextAnswer {
            text: text.into(),
            score,
            no_answer,
            start: None,
            end: None,
        }
    }

    fn v2() -> DecodeConfig {
        DecodeConfig {
            version_2_with_negative: true,
            ..DecodeConfig::default()
        }
    }

    #[test]
    fn the_answer_contract_gives_one_entry_and_null_odds_only_from_a_no_answer_output() {
        let e = example();
        // A no-answer score: odds = no-answer − score; above the threshold, no answer.
        let p = answer_prediction(&e, answer("Ada", Some(3.0), Some(1.0)), false, &v2());
        assert_eq!((p.answer.as_str(), p.null_odds), ("Ada", Some(-2.0)));
        assert_eq!(p.nbest.len(), 1);
        assert_eq!(
            (
                p.nbest[0].probability,
                p.nbest[0].start_logit,
                p.nbest[0].end_logit
            ),
            (1.0, 3.0, 0.0)
        );
        let p = answer_prediction(&e, answer("Ada", Some(1.0), Some(3.0)), false, &v2());
        assert_eq!((p.answer.as_str(), p.null_odds), ("", Some(2.0)));
        assert_eq!(
            p.nbest[0].text, "Ada",
            "the model's answer stays in the n-best list"
        );
        // A probability is the odds as it is; the model's answer stands.
        let p = answer_prediction(&e, answer("Ada", Some(1.0), Some(0.9)), true, &v2());
        assert_eq!(p.answer, "Ada");
        assert!((p.null_odds.unwrap() - 0.9).abs() < 1e-6);
        // No no-answer output, or SQuAD 1.1 rules: no null odds.
        let p = answer_prediction(&e, answer("Ada", None, None), false, &v2());
        assert_eq!((p.null_odds, p.nbest[0].start_logit), (None, 0.0));
        let p = answer_prediction(
            &e,
            answer("Ada", Some(1.0), Some(3.0)),
            false,
            &DecodeConfig::default(),
        );
        assert_eq!((p.answer.as_str(), p.null_odds), ("Ada", None));
    }
}
