//! Slices: every question belongs to one slice per dimension (its question word, whether
//! it has an answer, how many windows its context needs, where its answer lies in them,
//! how long the answer is, how sure the reference run was), so that a run's errors, or
//! the changes between two runs, can be seen to gather in one kind of question.
//! docs/algorithm.md ("Slices") states each rule; this module applies them.

mod assign;
mod resample;
mod scored;
pub(crate) mod stats;
mod table;

pub(crate) use assign::{assign, margin, margin_of, null_margins, QuestionSlices, RunFacts};
pub use resample::Statistics;
pub(crate) use resample::{quantile, RunValues};
pub(crate) use scored::tabled;
pub use scored::Slice;
pub(crate) use table::{standing_out, tested};

#[cfg(test)]
mod tests;

/// The dimensions, in the order the reports list them.
pub(crate) const DIMENSIONS: [&str; 7] = [
    "question_type",
    "answerable",
    "context_windows",
    "answer_windows",
    "answer_length",
    "margin",
    "null_margin",
];

/// Where a question's windows lie in its context (docs/algorithm.md §8.8).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The windows its context was cut into.
    pub(crate) windows: usize,
    /// Its first gold answer's slice of `answer_windows` (`single`, `one`, `overlap`,
    /// `cut`); `None` for a question without one.
    pub(crate) answer: Option<&'static str>,
}

impl Placement {
    /// `spans` (each window's first context token and its count of them), with the
    /// first gold answer's first and last context token (`Some(None)`: the answer
    /// cannot be placed; `None`: the question has none).
    pub(crate) fn of(
        spans: &[(usize, usize)],
        answer: Option<Option<(usize, usize)>>,
    ) -> Placement {
        Placement {
            windows: spans.len(),
            answer: answer.map(|tokens| answer_windows(spans, tokens)),
        }
    }
}

/// The question word: the first of `what`, `which`, `who` (`whom`, `whose`), `when`,
/// `where`, `why`, `how` among the lowercased question's words (runs of letters and
/// digits), `how many` and `how much` told apart; `other` when there is none.
pub(crate) fn question_type(question: &str) -> &'static str {
    if question.is_ascii() {
        // The same words without lowercasing a copy: for ASCII text `to_lowercase` and
        // `is_alphanumeric` are their ASCII versions.
        let words = question
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(Word::Ascii);
        return first_question_word(words);
    }
    let lower = question.to_lowercase();
    let words = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(Word::Lower);
    first_question_word(words)
}

/// A word of a question: lowercased, or ASCII compared without regard to case.
enum Word<'a> {
    Lower(&'a str),
    Ascii(&'a str),
}

impl Word<'_> {
    /// Whether the word can be a question word: each is three to five bytes long and
    /// starts with `w` or `h`. Most words are not, and are passed over without being
    /// compared to each.
    fn may_be_asked(&self) -> bool {
        let w = match self {
            Word::Lower(w) | Word::Ascii(w) => w.as_bytes(),
        };
        (3..=5).contains(&w.len()) && matches!(w[0].to_ascii_lowercase(), b'w' | b'h')
    }

    fn is(&self, lower: &str) -> bool {
        match self {
            Word::Lower(w) => *w == lower,
            Word::Ascii(w) => w.eq_ignore_ascii_case(lower),
        }
    }
}

fn first_question_word<'a>(mut words: impl Iterator<Item = Word<'a>>) -> &'static str {
    const SIMPLE: [(&str, &str); 8] = [
        ("what", "what"),
        ("which", "which"),
        ("who", "who"),
        ("whom", "who"),
        ("whose", "who"),
        ("when", "when"),
        ("where", "where"),
        ("why", "why"),
    ];
    while let Some(word) = words.next() {
        if !word.may_be_asked() {
            continue;
        }
        if let Some(&(_, slice)) = SIMPLE.iter().find(|(w, _)| word.is(w)) {
            return slice;
        }
        if word.is("how") {
            return match words.next() {
                Some(w) if w.is("many") => "how_many",
                Some(w) if w.is("much") => "how_much",
                _ => "how",
            };
        }
    }
    "other"
}

/// `has_answer` or `no_answer` (SQuAD 2.0 data only).
pub(crate) fn answerable(has_answer: bool) -> &'static str {
    match has_answer {
        true => "has_answer",
        false => "no_answer",
    }
}

/// The windows the question's context was cut into: `1` (also a question with none),
/// `2`, `3+`.
pub(crate) fn context_windows(windows: usize) -> &'static str {
    match windows {
        0 | 1 => "1",
        2 => "2",
        _ => "3+",
    }
}

/// Where the first gold answer lies among the windows (`spans`: each window's first
/// context token and its count of context tokens; `answer`: the answer's first and last
/// context token, `None` when it cannot be placed in the context): `single` (one
/// window in all), `one` (inside exactly one of several), `overlap` (inside two or
/// more), `cut` (no window holds it whole).
pub(crate) fn answer_windows(
    spans: &[(usize, usize)],
    answer: Option<(usize, usize)>,
) -> &'static str {
    if spans.len() <= 1 {
        return "single";
    }
    let Some((first, last)) = answer else {
        return "cut";
    };
    let holding = spans
        .iter()
        .filter(|&&(start, len)| start <= first && last < start + len)
        .count();
    match holding {
        0 => "cut",
        1 => "one",
        _ => "overlap",
    }
}

/// The words (runs of non-whitespace) of the first gold answer: `1` (also none), `2-3`,
/// `4-7`, `8+`.
pub(crate) fn answer_length(answer: &str) -> &'static str {
    match answer.split_whitespace().count() {
        0 | 1 => "1",
        2 | 3 => "2-3",
        4..=7 => "4-7",
        _ => "8+",
    }
}

/// The quartile of each value among `values` (`q1` the smallest): ordered by value,
/// ties by position, the value at rank r (from 0) of n is in quartile ⌊4r/n⌋ + 1.
pub(crate) fn quartiles(values: &[f64]) -> Vec<&'static str> {
    const NAMES: [&str; 4] = ["q1", "q2", "q3", "q4"];
    let n = values.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]).then(i.cmp(&j)));
    let mut out = vec![NAMES[0]; n];
    for (rank, &i) in order.iter().enumerate() {
        out[i] = NAMES[4 * rank / n];
    }
    out
}

/// A question's slices as a JSON object, `{"dimension": "slice", ...}`, for the
/// dimensions it has, in their order (flips.jsonl's `slices`).
pub(crate) fn names(question: &QuestionSlices) -> serde_json::Map<String, serde_json::Value> {
    DIMENSIONS
        .iter()
        .zip(question)
        .filter_map(|(d, s)| Some((d.to_string(), serde_json::Value::from((*s)?))))
        .collect()
}

/// Every slice name of each dimension of [`DIMENSIONS`].
const NAMES: [&[&str]; DIMENSIONS.len()] = [
    &[
        "what", "which", "who", "when", "where", "why", "how", "how_many", "how_much", "other",
    ],
    &["has_answer", "no_answer"],
    &["1", "2", "3+"],
    &["single", "one", "overlap", "cut"],
    &["1", "2-3", "4-7", "8+"],
    &["q1", "q2", "q3", "q4"],
    &["q1", "q2", "q3", "q4"],
];

/// A question's slices read back from a JSON object [`names`] wrote; what is not a
/// slice of its dimension is left out.
pub(crate) fn parse(object: &serde_json::Map<String, serde_json::Value>) -> QuestionSlices {
    let mut out = [None; DIMENSIONS.len()];
    for (d, dimension) in DIMENSIONS.iter().enumerate() {
        let name = object.get(*dimension).and_then(|v| v.as_str());
        out[d] = name.and_then(|n| NAMES[d].iter().copied().find(|&k| k == n));
    }
    out
}
