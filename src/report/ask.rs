//! `ask`'s report: each question and its answer, as the model's answers are read (a
//! token model's or a logits-contract text model's spans, decoded here; an
//! answer-contract text model's own answer), in one document (`schema/ask.schema.json`).

use std::fmt::Write as _;

use serde::Serialize;

use super::Render;

/// What `ask` found.
#[derive(Debug, Clone, Serialize)]
pub struct AskReport {
    /// Always 1.
    pub schema: u32,
    /// The model asked, by its name on the server.
    pub model: String,
    /// The server endpoints as given, comma-separated.
    pub url: String,
    /// The protocol the server was spoken to in: `grpc` or `http`.
    pub protocol: &'static str,
    /// An answer-contract text model: `"answer"` (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contract: Option<&'static str>,
    /// Requests sent (an answer-contract text model's report).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Windows answered (a model whose spans bertqa decodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<u64>,
    /// Request latency, milliseconds.
    pub latency_ms: Latency,
    /// Each question's answer, in the order asked.
    pub answers: Vec<Answer>,
    /// Notes on the run for the person asking (padding that would change answers),
    /// naming settings as messages do; not part of the document.
    #[serde(skip)]
    pub notes: Vec<String>,
}

/// Request latency, milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// The slowest request.
    pub max: f64,
    /// Mean over the requests.
    pub mean: f64,
}

/// One question's answer.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Answer {
    /// A span bertqa decoded from the model's logits.
    Decoded(Decoded),
    /// The model's own answer (the answer contract).
    Given(Given),
}

/// A decoded answer: the best span, its score, probability and characters, and the
/// n-best list.
#[derive(Debug, Clone, Serialize)]
pub struct Decoded {
    /// The question, as asked.
    pub question: String,
    /// The answer (`""`: no answer; the reference's `"empty"` placeholder when no span
    /// is valid).
    pub answer: String,
    /// The model found no answer (SQuAD 2.0 rules).
    pub no_answer: bool,
    /// The answer's start logit plus its end logit (`None` when the answer is not in
    /// the n-best list).
    pub score: Option<f64>,
    /// The answer's probability among the n-best, 0–1 (`None` as `score`).
    pub probability: Option<f64>,
    /// Where the answer starts in the context, in characters (Unicode code points);
    /// `None` when it is not a span of the context.
    pub start_char: Option<usize>,
    /// Where it ends, exclusive (`None` as `start_char`).
    pub end_char: Option<usize>,
    /// SQuAD 2.0: the null score minus the best span's score (a logit difference;
    /// above the threshold, no answer); `None` under SQuAD 1.1 rules.
    pub null_odds: Option<f64>,
    /// The best candidates in order, the answer first (as many as asked for at most).
    pub nbest: Vec<Candidate>,
    /// The answer is the reference's `"empty"` placeholder (no span to answer with):
    /// the text shows no answer, the JSON keeps the reference's text.
    #[serde(skip)]
    pub placeholder: bool,
}

/// One n-best candidate.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    /// Its text, as the final answer would read.
    pub text: String,
    /// Its probability among the n-best (softmax of their scores), 0–1.
    pub probability: f64,
    /// The start logit of its span.
    pub start_logit: f64,
    /// The end logit of its span.
    pub end_logit: f64,
}

/// An answer-contract model's answer, with what the model said of it.
#[derive(Debug, Clone, Serialize)]
pub struct Given {
    /// The question, as asked.
    pub question: String,
    /// The model's answer (`""`: no answer).
    pub answer: String,
    /// The model gave an empty answer.
    pub no_answer: bool,
    /// The model's score for its answer (`None`: it gives none).
    pub score: Option<f32>,
    /// Where the answer starts in the context, in characters (Unicode code points), as
    /// the model says (`None`: it does not say).
    pub start_char: Option<i64>,
    /// Where it ends, exclusive, as the model says (`None`: it does not say).
    pub end_char: Option<i64>,
    /// The no-answer output when it is a score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_answer_score: Option<Option<f32>>,
    /// The no-answer output when it is a probability.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_answer_probability: Option<Option<f32>>,
}

impl Decoded {
    /// `question`'s decoded answer `a`, with its first `candidates` n-best entries.
    pub(crate) fn of(question: &str, a: crate::Answer, candidates: usize) -> Decoded {
        Decoded {
            question: question.to_string(),
            answer: a.text,
            no_answer: a.no_answer,
            score: a.score,
            probability: a.probability,
            start_char: a.start_char,
            end_char: a.end_char,
            null_odds: a.null_odds,
            nbest: a
                .nbest
                .into_iter()
                .take(candidates)
                .map(|c| Candidate {
                    text: c.text,
                    probability: c.probability,
                    start_logit: c.start_logit,
                    end_logit: c.end_logit,
                })
                .collect(),
            placeholder: a.placeholder,
        }
    }
}

impl Given {
    /// An answer-contract model's answer `a` to `question`, as the model said it
    /// (`probability`: its no-answer output is a probability, not a score).
    pub(crate) fn of(question: &str, a: crate::backend::TextAnswer, probability: bool) -> Given {
        Given {
            question: question.to_string(),
            no_answer: a.text.is_empty(),
            answer: a.text,
            score: a.score,
            start_char: a.start,
            end_char: a.end,
            no_answer_score: (!probability).then_some(a.no_answer),
            no_answer_probability: probability.then_some(a.no_answer),
        }
    }
}

impl Render for AskReport {
    type Json<'a> = &'a AskReport;

    fn json(&self) -> &AskReport {
        self
    }

    fn text(&self, _verbose: bool) -> String {
        let mut s = String::new();
        for (i, a) in self.answers.iter().enumerate() {
            if i > 0 {
                s.push('\n');
            }
            match a {
                Answer::Decoded(d) => decoded_text(&mut s, d),
                Answer::Given(g) => given_text(&mut s, g),
            }
        }
        s
    }
}

fn decoded_text(s: &mut String, a: &Decoded) {
    let _ = writeln!(s, "Q: {}", a.question);
    if a.no_answer {
        let _ = writeln!(
            s,
            "A: (no answer)   null odds {:.3}",
            a.null_odds.unwrap_or(0.0)
        );
    } else if a.placeholder {
        let _ = match a.null_odds {
            Some(odds) => writeln!(s, "A: (no answer)   null odds {odds:.3}"),
            None => writeln!(s, "A: (no answer)"),
        };
    } else {
        let span = match (a.start_char, a.end_char) {
            (Some(x), Some(y)) => format!(", characters {x}..{y}"),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "A: {}   (score {:.3}, probability {:.3}{span})",
            a.answer,
            a.score.unwrap_or(0.0),
            a.probability.unwrap_or(0.0),
        );
    }
    if a.nbest.len() > 1 {
        for (r, e) in a.nbest.iter().enumerate() {
            let _ = writeln!(
                s,
                "   {:>2}. {:<40} p={:.4}  start {:.3}  end {:.3}",
                r + 1,
                format!("{:?}", e.text),
                e.probability,
                e.start_logit,
                e.end_logit
            );
        }
    }
}

fn given_text(s: &mut String, a: &Given) {
    let _ = writeln!(s, "Q: {}", a.question);
    let mut said = Vec::new();
    if let Some(x) = a.score {
        said.push(format!("score {:.3}", f64::from(x)));
    }
    if let Some(Some(x)) = a.no_answer_score {
        said.push(format!("no answer score {:.3}", f64::from(x)));
    }
    if let Some(Some(x)) = a.no_answer_probability {
        said.push(format!("no answer probability {:.3}", f64::from(x)));
    }
    if let (Some(x), Some(y)) = (a.start_char, a.end_char) {
        said.push(format!("characters {x}..{y}"));
    }
    let answer = match a.answer.as_str() {
        "" => "(no answer)",
        text => text,
    };
    let said = if said.is_empty() {
        String::new()
    } else {
        format!("   ({})", said.join(", "))
    };
    let _ = writeln!(s, "A: {answer}{said}");
}
