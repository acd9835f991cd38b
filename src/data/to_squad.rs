//! A dataset written as SQuAD JSON (`bertqa features --to squad`), so that data read
//! from any format can be handed to tools that take SQuAD files.

use std::io::Write;

use serde::Serialize;

use crate::types::Dataset;

#[derive(Serialize)]
struct File<'a> {
    version: &'a str,
    data: Vec<Article<'a>>,
}

#[derive(Serialize)]
struct Article<'a> {
    title: &'a str,
    paragraphs: Vec<Paragraph<'a>>,
}

#[derive(Serialize)]
struct Paragraph<'a> {
    context: &'a str,
    qas: Vec<Qa<'a>>,
}

#[derive(Serialize)]
struct Qa<'a> {
    id: &'a str,
    question: &'a str,
    answers: Vec<Answer<'a>>,
    /// Written for SQuAD 2.0 data only, as the official files do.
    #[serde(skip_serializing_if = "Option::is_none")]
    is_impossible: Option<bool>,
}

#[derive(Serialize)]
struct Answer<'a> {
    text: &'a str,
    answer_start: usize,
}

/// Writes `dataset` as one SQuAD JSON document (one article; questions in their order,
/// grouped by paragraph), `is_impossible` on every question when the SQuAD 2.0 rules
/// apply, then a newline.
pub fn write_squad(dataset: &Dataset, out: &mut dyn Write) -> std::io::Result<()> {
    let v2 = dataset.looks_like_v2();
    let mut paragraphs: Vec<Paragraph<'_>> = Vec::new();
    let mut last = None;
    for e in &dataset.examples {
        if last != Some(e.paragraph_index) {
            last = Some(e.paragraph_index);
            paragraphs.push(Paragraph {
                context: &dataset.paragraphs[e.paragraph_index].context,
                qas: Vec::new(),
            });
        }
        let qa = Qa {
            id: &e.qas_id,
            question: &e.question_text,
            answers: e
                .answers
                .iter()
                .map(|a| Answer {
                    text: &a.text,
                    answer_start: a.answer_start,
                })
                .collect(),
            is_impossible: v2.then_some(e.is_impossible),
        };
        paragraphs.last_mut().expect("a paragraph").qas.push(qa);
    }
    let version = if dataset.version.is_empty() {
        if v2 {
            "v2.0"
        } else {
            "1.1"
        }
    } else {
        &dataset.version
    };
    let file = File {
        version,
        data: vec![Article {
            title: "",
            paragraphs,
        }],
    };
    serde_json::to_writer(&mut *out, &file)?;
    out.write_all(b"\n")
}
