//! MRQA JSON Lines (the 2019 shared task's format): an optional header line (an object
//! with `header`, skipped only as the first line), then one context per line with its
//! questions (`qid`, `question`, `answers`: the strings scoring uses,
//! `detected_answers`: their `char_spans`, whose ends are inclusive), into the SQuAD
//! reader's records. Every question is answerable. A `qid` seen before replaces the
//! earlier question, as the MRQA evaluator keeps the later line's answers (a warning).

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Location, Result};
use crate::squad::{RawAnswer, RawArticle, RawFile, RawParagraph, RawQa, Warning};

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    header: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    context: Option<String>,
    #[serde(default)]
    qas: Option<Vec<Qa>>,
}

#[derive(Deserialize)]
struct Qa {
    qid: String,
    question: String,
    answers: Vec<String>,
    #[serde(default)]
    detected_answers: Vec<Detected>,
}

#[derive(Deserialize)]
struct Detected {
    text: String,
    #[serde(default)]
    char_spans: Vec<[usize; 2]>,
}

/// The file's records and its warnings (replaced questions).
pub(super) fn read(bytes: &[u8], path: &Path) -> Result<(RawFile, Vec<Warning>)> {
    let mut paragraphs: Vec<RawParagraph> = Vec::new();
    // qid → (paragraph, question) of its latest line.
    let mut seen: HashMap<String, (usize, usize)> = HashMap::new();
    let mut replaced = Vec::new();
    let mut warnings = Vec::new();
    let mut first = true;
    for (i, text) in crate::squad::strip_bom(bytes)
        .split(|&b| b == b'\n')
        .enumerate()
    {
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let n = i + 1;
        let line: Line = serde_json::from_slice(text).map_err(|e| {
            let m = e.to_string();
            let m = m.rsplit_once(" at line ").map_or(m.as_str(), |(m, _)| m);
            Error::input(Location::at(path, n, e.column().max(1)), m)
        })?;
        let is_first = std::mem::replace(&mut first, false);
        if line.header.is_some() && line.context.is_none() {
            if is_first {
                continue;
            }
            return Err(Error::input(
                Location::at(path, n, 1),
                "a header line after the first line",
            ));
        }
        let missing = |field: &str| {
            Error::input(Location::at(path, n, 1), format!("missing field `{field}`"))
        };
        let context = line.context.ok_or_else(|| missing("context"))?;
        let qas = line.qas.ok_or_else(|| missing("qas"))?;
        let index = paragraphs.len();
        let context_chars = context.chars().count();
        let mut raw_qas = Vec::with_capacity(qas.len());
        for qa in qas {
            if let Some(earlier) = seen.insert(qa.qid.clone(), (index, raw_qas.len())) {
                replaced.push(earlier);
                warnings.push(Warning {
                    location: Location::question(path, &qa.qid),
                    message: format!(
                        "question id seen before; line {n}'s question replaces it (the MRQA \
                         evaluator keeps the later answers)"
                    ),
                });
            }
            let answers = qa
                .answers
                .into_iter()
                .map(|text| {
                    // The start of a detected span of the same text, when there is one
                    // inside the context (scoring reads only the text).
                    let answer_start = qa
                        .detected_answers
                        .iter()
                        .find(|d| d.text == text)
                        .and_then(|d| d.char_spans.first())
                        .map(|span| span[0])
                        .filter(|&start| start < context_chars);
                    RawAnswer { text, answer_start }
                })
                .collect();
            raw_qas.push(RawQa {
                id: qa.qid,
                question: Some(qa.question),
                answers,
                is_impossible: false,
            });
        }
        paragraphs.push(RawParagraph {
            context,
            qas: raw_qas,
        });
    }
    // Replaced questions leave their lines (latest first, so indices stay right).
    replaced.sort_unstable_by(|a, b| b.cmp(a));
    for (p, q) in replaced {
        paragraphs[p].qas.remove(q);
    }
    let file = RawFile {
        version: None,
        data: vec![RawArticle { paragraphs }],
    };
    Ok((file, warnings))
}
