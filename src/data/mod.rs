//! Evaluation data as users hold it → [`Dataset`]: SQuAD JSON (v1.1 / v2.0, the
//! `crate::squad` reader), Hugging Face rows (the `squad` / `squad_v2` datasets and
//! those made in their image) as JSON Lines or Parquet, and MRQA JSON Lines; any of
//! them gzip-compressed, `-` for standard input, and several files read as one.
//!
//! Contract:
//! - The format is found from the content, not the name: gzip's and Parquet's magic
//!   bytes, then the keys of the first JSON line (`data`: SQuAD; `question` and
//!   `context`: Hugging Face rows; `header` or `qas`: MRQA). Anything else is "not a
//!   SQuAD, Hugging Face or MRQA file: it starts with …".
//! - Every format is turned into the SQuAD reader's records and converted by it, so the
//!   checks, warnings and the dataset are the same as for the same questions in SQuAD
//!   JSON: consecutive rows with one context share a paragraph, rows keep their order.
//! - A row or line that cannot be read is named by its line (Parquet: row group and
//!   row) and field.
//! - `Loaded::sha256` is the digest of the content (the decompressed bytes, file
//!   after file), so a journal's fingerprint does not depend on the compression.

mod mrqa;
mod rows;
mod to_squad;

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Location, Result};
use crate::squad::{self, Loaded};
use crate::types::Dataset;

pub use to_squad::write_squad;

/// A format bertqa reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// SQuAD JSON, v1.1 or v2.0.
    #[default]
    Squad,
    /// Hugging Face rows (`id`, `title`, `context`, `question`, `answers`) as JSON Lines.
    HfJsonl,
    /// The same rows as Parquet.
    HfParquet,
    /// MRQA JSON Lines (an optional header, then one context per line).
    Mrqa,
}

impl Format {
    /// The format's name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Squad => "SQuAD JSON",
            Format::HfJsonl => "Hugging Face JSON Lines",
            Format::HfParquet => "Hugging Face Parquet",
            Format::Mrqa => "MRQA JSON Lines",
        }
    }
}

/// The path that means standard input.
pub const STDIN: &str = "-";

impl crate::types::Dataset {
    /// Reads a dataset in any format `bertqa eval --data` reads (SQuAD JSON, Hugging
    /// Face JSON Lines or Parquet, gzipped or not, MRQA), as the command reads it. What
    /// the reader would warn about (an empty question, a blank context) is kept as
    /// read; [`load`] returns the warnings.
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<crate::types::Dataset> {
        let (loaded, _) = load(&[path.as_ref().to_path_buf()], false)?;
        Ok(loaded.dataset)
    }
}

/// Reads `paths` (one or more, `-` for standard input) as one dataset, with
/// `Loaded::sha256` when `digest`. Several files must be of one scoring family (MRQA
/// or not); their questions follow one another in the order given, and an id may
/// appear once in all.
pub fn load(paths: &[PathBuf], digest: bool) -> Result<(Loaded, Format)> {
    let Some((first, rest)) = paths.split_first() else {
        return Err(Error::Config("no data file given".into()));
    };
    let (mut loaded, format) = load_one(first, digest)?;
    let mut digests: Vec<String> = loaded.sha256.take().into_iter().collect();
    for path in rest {
        let (next, next_format) = load_one(path, digest)?;
        if (next_format == Format::Mrqa) != (format == Format::Mrqa) {
            return Err(Error::input(
                Location::file(path),
                format!(
                    "is {}, {} is {}: MRQA files are scored by other rules and cannot be \
                     read with other formats",
                    next_format.as_str(),
                    first.display(),
                    format.as_str()
                ),
            ));
        }
        digests.extend(next.sha256.clone());
        append(&mut loaded, next, path)?;
    }
    loaded.sha256 = match digests.len() {
        0 => None,
        1 => digests.pop(),
        _ => Some(crate::sha256::of_bytes(digests.join("\n").as_bytes())),
    };
    Ok((loaded, format))
}

/// Reads one file (or standard input).
fn load_one(path: &Path, digest: bool) -> Result<(Loaded, Format)> {
    let raw = if path.as_os_str() == STDIN {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(path, e))?;
        bytes
    } else {
        std::fs::read(path).map_err(|e| Error::io(path, e))?
    };
    let bytes = gunzip(raw, path)?;
    let sha256 = digest.then(|| crate::sha256::of_bytes(&bytes));
    let (mut loaded, format) = read_content(bytes, None, path)?;
    loaded.sha256 = sha256;
    Ok((loaded, format))
}

/// Reads `bytes` (decompressed first when they are gzip's) as `format`, or as their
/// content says when `None`; `path` names them in messages.
pub fn from_bytes(bytes: Vec<u8>, format: Option<Format>, path: &Path) -> Result<(Loaded, Format)> {
    read_content(gunzip(bytes, path)?, format, path)
}

fn read_content(bytes: Vec<u8>, format: Option<Format>, path: &Path) -> Result<(Loaded, Format)> {
    let format = match format {
        Some(f) => f,
        None => sniff(&bytes, path)?,
    };
    let loaded = match format {
        Format::Squad => {
            let raw = squad::parse(&bytes, path)?;
            drop(bytes);
            squad::convert(raw, path)?
        }
        Format::HfJsonl => squad::convert(rows::from_jsonl(&bytes, path)?, path)?,
        Format::HfParquet => squad::convert(rows::from_parquet(bytes, path)?, path)?,
        Format::Mrqa => {
            let (raw, warnings) = mrqa::read(&bytes, path)?;
            let mut loaded = squad::convert(raw, path)?;
            loaded.warnings.splice(0..0, warnings);
            loaded
        }
    };
    Ok((loaded, format))
}

/// `bytes`, decompressed when they are gzip's (its magic bytes, whatever the name).
fn gunzip(bytes: Vec<u8>, path: &Path) -> Result<Vec<u8>> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len() * 4);
    flate2::read::MultiGzDecoder::new(&bytes[..])
        .read_to_end(&mut out)
        .map_err(|e| {
            Error::input(
                Location::file(path),
                format!("a gzip file that cannot be decompressed: {e}"),
            )
        })?;
    Ok(out)
}

/// The format of `bytes` (decompressed), from the content.
fn sniff(bytes: &[u8], path: &Path) -> Result<Format> {
    if bytes.starts_with(b"PAR1") {
        return Ok(Format::HfParquet);
    }
    let text = squad::strip_bom(bytes);
    let start = text.iter().position(|b| !b.is_ascii_whitespace());
    let unknown = || {
        let shown: String = String::from_utf8_lossy(&text[start.unwrap_or(0)..])
            .chars()
            .take(40)
            .collect();
        Error::input(
            Location::file(path),
            format!("not a SQuAD, Hugging Face or MRQA file: it starts with {shown:?}"),
        )
    };
    let Some(start) = start else {
        return Err(unknown());
    };
    if text[start] != b'{' {
        // Other JSON (an array, a number) gets the SQuAD reader's words for it ("not a
        // SQuAD file: a JSON array …"); anything else is no format bertqa knows.
        let json = matches!(
            text[start],
            b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n'
        );
        return if json {
            Ok(Format::Squad)
        } else {
            Err(unknown())
        };
    }
    // SQuAD files open with "data" or "version": known without reading their one long
    // line (official files are a single line of megabytes).
    if matches!(first_key(&text[start..]), Some(b"data" | b"version")) {
        return Ok(Format::Squad);
    }
    let line_end = text[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |n| start + n);
    // A document of several lines (pretty-printed SQuAD JSON) does not end its first
    // line with its first object.
    let Some(keys) = top_level_keys(&text[start..line_end]) else {
        return Ok(Format::Squad);
    };
    let has = |k: &str| keys.iter().any(|x| x == k);
    Ok(if has("data") {
        Format::Squad
    } else if has("header") || has("qas") {
        Format::Mrqa
    } else if has("question") && has("context") {
        Format::HfJsonl
    } else if text[line_end..].iter().all(u8::is_ascii_whitespace) {
        // One JSON object of another shape: the SQuAD reader says what it holds.
        Format::Squad
    } else {
        return Err(unknown());
    })
}

/// The first key of the JSON object `text` starts with, as written (escapes left as
/// they are), when it has one.
fn first_key(text: &[u8]) -> Option<&[u8]> {
    let rest = text.strip_prefix(b"{")?;
    let rest = &rest[rest.iter().position(|b| !b.is_ascii_whitespace())?..];
    let rest = rest.strip_prefix(b"\"")?;
    let mut escaped = false;
    let end = rest.iter().position(|&b| {
        let close = b == b'"' && !escaped;
        escaped = b == b'\\' && !escaped;
        close
    })?;
    Some(&rest[..end])
}

/// The keys of a JSON object (values skipped), or `None` when `line` is not one
/// whole object.
fn top_level_keys(line: &[u8]) -> Option<Vec<String>> {
    use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};
    struct Keys;
    impl<'de> Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(
            self,
            mut map: A,
        ) -> std::result::Result<Self::Value, A::Error> {
            let mut keys = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<IgnoredAny>()?;
                keys.push(key);
            }
            Ok(keys)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    let keys = de.deserialize_map(Keys).ok()?;
    de.end().ok()?;
    Some(keys)
}

/// Appends `next` (read from `path`) to `into`: its paragraphs and questions after
/// those already there. An id already read is refused.
fn append(into: &mut Loaded, next: Loaded, path: &Path) -> Result<()> {
    let ids: std::collections::HashSet<&str> = into
        .dataset
        .examples
        .iter()
        .map(|e| e.qas_id.as_str())
        .collect();
    if let Some(e) = next
        .dataset
        .examples
        .iter()
        .find(|e| ids.contains(e.qas_id.as_str()))
    {
        return Err(Error::input(
            Location::question(path, &e.qas_id),
            "duplicate question id (already in an earlier `data` file)",
        ));
    }
    let Dataset {
        version,
        paragraphs,
        examples,
    } = next.dataset;
    let offset = into.dataset.paragraphs.len();
    let first = into.dataset.examples.len();
    if into.dataset.version.is_empty() {
        into.dataset.version = version;
    }
    into.dataset.paragraphs.extend(paragraphs);
    into.dataset
        .examples
        .extend(examples.into_iter().enumerate().map(|(i, mut e)| {
            e.example_index = first + i;
            e.paragraph_index += offset;
            e
        }));
    into.warnings.extend(next.warnings);
    into.answers_without_start += next.answers_without_start;
    Ok(())
}

#[cfg(test)]
mod tests;
