//! Hugging Face rows (`squad`, `squad_v2` and datasets made in their image): one
//! question per row, `id`, `title`, `context`, `question`, `answers: {text: [...],
//! answer_start: [...]}` (empty lists: unanswerable), as JSON Lines (`to_json`) or
//! Parquet (how the hub stores them), into the SQuAD reader's records.

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Location, Result};
use crate::squad::{RawAnswer, RawArticle, RawFile, RawParagraph, RawQa};

/// One row.
#[derive(Deserialize)]
struct Row {
    id: String,
    #[serde(default)]
    title: String,
    context: String,
    question: String,
    answers: Answers,
}

#[derive(Deserialize)]
struct Answers {
    text: Vec<String>,
    /// `null`: the offset is unknown, as the SQuAD reader takes it (scoring reads texts
    /// only).
    answer_start: Vec<Option<i64>>,
}

/// Rows into articles (consecutive rows of one title) and paragraphs (consecutive
/// rows of one context).
#[derive(Default)]
struct Builder {
    file: RawFile,
    title: Option<String>,
}

impl Builder {
    /// Adds a row; `place` names it in messages ("line 3", "row group 0, row 7").
    fn push(&mut self, row: Row, path: &Path, place: &dyn Fn() -> String) -> Result<()> {
        let Answers { text, answer_start } = row.answers;
        if text.len() != answer_start.len() {
            return Err(Error::input(
                Location::file(path),
                format!(
                    "{}: field `answers`: {} texts but {} answer_start values",
                    place(),
                    text.len(),
                    answer_start.len()
                ),
            ));
        }
        let mut answers = Vec::with_capacity(text.len());
        for (text, start) in text.into_iter().zip(answer_start) {
            let answer_start = start
                .map(|start| {
                    usize::try_from(start).map_err(|_| {
                        Error::input(
                            Location::file(path),
                            format!(
                                "{}: field `answers.answer_start`: {start} is negative",
                                place()
                            ),
                        )
                    })
                })
                .transpose()?;
            answers.push(RawAnswer { text, answer_start });
        }
        let qa = RawQa {
            id: row.id,
            question: Some(row.question),
            is_impossible: answers.is_empty(),
            answers,
        };
        if self.title.as_deref() != Some(row.title.as_str()) || self.file.data.is_empty() {
            self.file.data.push(RawArticle::default());
            self.title = Some(row.title);
        }
        let article = self.file.data.last_mut().expect("an article");
        match article.paragraphs.last_mut() {
            Some(p) if p.context == row.context => p.qas.push(qa),
            _ => article.paragraphs.push(RawParagraph {
                context: row.context,
                qas: vec![qa],
            }),
        }
        Ok(())
    }
}

/// Rows as JSON Lines (blank lines skipped).
pub(super) fn from_jsonl(bytes: &[u8], path: &Path) -> Result<RawFile> {
    let mut builder = Builder::default();
    for (i, line) in crate::squad::strip_bom(bytes)
        .split(|&b| b == b'\n')
        .enumerate()
    {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let row: Row =
            serde_json::from_slice(line).map_err(|e| line_error(path, i + 1, line, &e))?;
        builder.push(row, path, &|| format!("line {}", i + 1))?;
    }
    Ok(builder.file)
}

/// A line that is not a row, named by line, column and (for a field of the wrong type
/// or a missing one) the field.
fn line_error(path: &Path, line: usize, text: &[u8], e: &serde_json::Error) -> Error {
    let location = Location::at(path, line, e.column().max(1));
    let message = e.to_string();
    let message = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(m, _)| m);
    Error::input(
        location,
        format!("{}{message}", field_of(text).unwrap_or_default()),
    )
}

/// For a line that is JSON but not a row: "field `F`: " naming the first field of a
/// wrong type (the typed reader's message does not name it).
fn field_of(text: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(text).ok()?;
    let obj = v.as_object()?;
    let string = |k: &str| obj.get(k).is_some_and(serde_json::Value::is_string);
    for k in ["id", "context", "question"] {
        if obj.contains_key(k) && !string(k) {
            return Some(format!("field `{k}`: "));
        }
    }
    if obj.contains_key("title") && !string("title") {
        return Some("field `title`: ".into());
    }
    let answers = obj.get("answers")?;
    for k in ["text", "answer_start"] {
        if !answers.get(k).is_some_and(serde_json::Value::is_array) {
            return Some(format!("field `answers.{k}`: "));
        }
    }
    Some("field `answers`: ".into())
}

/// Rows as Parquet: every row group, in order. The parquet crate asserts (panics) on
/// some damaged files instead of returning an error: such a panic is caught here and
/// reported as a file that cannot be read (its message may also reach stderr).
pub(super) fn from_parquet(bytes: Vec<u8>, path: &Path) -> Result<RawFile> {
    let read = std::panic::catch_unwind(|| parquet_rows(bytes, path));
    read.unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "the reader failed".into());
        Err(Error::input(
            Location::file(path),
            format!("a Parquet file that cannot be read (damaged: {why})"),
        ))
    })
}

fn parquet_rows(bytes: Vec<u8>, path: &Path) -> Result<RawFile> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let bad = |e: parquet::errors::ParquetError| {
        Error::input(
            Location::file(path),
            format!("a Parquet file that cannot be read: {e}"),
        )
    };
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes)).map_err(bad)?;
    let schema = reader.metadata().file_metadata().schema_descr();
    let columns: Vec<String> = schema
        .root_schema()
        .get_fields()
        .iter()
        .map(|f| f.name().to_string())
        .collect();
    for want in ["id", "context", "question", "answers"] {
        if !columns.iter().any(|c| c == want) {
            return Err(Error::input(
                Location::file(path),
                format!(
                    "a Parquet file without the column `{want}` of Hugging Face's rows \
                     (its columns: {})",
                    columns.join(", ")
                ),
            ));
        }
    }
    let mut builder = Builder::default();
    for g in 0..reader.num_row_groups() {
        let group = reader.get_row_group(g).map_err(bad)?;
        for (r, row) in group.get_row_iter(None).map_err(bad)?.enumerate() {
            let place = || format!("row group {g}, row {r}");
            let row =
                row.map_err(|e| Error::input(Location::file(path), format!("{}: {e}", place())))?;
            let row = parquet_row(&row)
                .map_err(|m| Error::input(Location::file(path), format!("{}: {m}", place())))?;
            builder.push(row, path, &place)?;
        }
    }
    Ok(builder.file)
}

/// A Parquet row as a [`Row`], or what is wrong with it ("field `F`: …").
fn parquet_row(row: &parquet::record::Row) -> std::result::Result<Row, String> {
    use parquet::record::Field;
    let field = |name: &str| -> std::result::Result<Option<&Field>, String> {
        Ok(row
            .get_column_iter()
            .find(|(n, _)| n.as_str() == name)
            .map(|(_, f)| f))
    };
    let string = |name: &str, required: bool| -> std::result::Result<String, String> {
        match field(name)? {
            Some(Field::Str(s)) => Ok(s.clone()),
            Some(Field::Null) | None if !required => Ok(String::new()),
            Some(other) => Err(format!("field `{name}`: expected a string, found {other}")),
            None => Err(format!("field `{name}`: missing")),
        }
    };
    let answers = match field("answers")? {
        Some(Field::Group(g)) => g,
        Some(other) => return Err(format!("field `answers`: expected a struct, found {other}")),
        None => return Err("field `answers`: missing".into()),
    };
    let list = |name: &str| -> std::result::Result<Vec<Field>, String> {
        match answers.get_column_iter().find(|(n, _)| n.as_str() == name) {
            Some((_, Field::ListInternal(l))) => Ok(l.elements().to_vec()),
            Some((_, Field::Null)) => Ok(Vec::new()),
            Some((_, other)) => Err(format!(
                "field `answers.{name}`: expected a list, found {other}"
            )),
            None => Err(format!("field `answers.{name}`: missing")),
        }
    };
    let text = list("text")?
        .into_iter()
        .map(|f| match f {
            Field::Str(s) => Ok(s),
            other => Err(format!(
                "field `answers.text`: expected strings, found {other}"
            )),
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let answer_start = list("answer_start")?
        .into_iter()
        .map(|f| match f {
            Field::Int(i) => Ok(Some(i64::from(i))),
            Field::Long(i) => Ok(Some(i)),
            Field::Null => Ok(None),
            other => Err(format!(
                "field `answers.answer_start`: expected integers, found {other}"
            )),
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(Row {
        id: string("id", true)?,
        title: string("title", false)?,
        context: string("context", true)?,
        question: string("question", true)?,
        answers: Answers { text, answer_start },
    })
}
