//! Reading a predictions file (`{qid: text}`) and a na-prob file (`{qid: number}`).
//!
//! Parsed as typed JSON objects, so a syntax or type error names the file, line and
//! column. A repeated key keeps its first position and its last value, as Python's
//! `json.load` does.

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::de::{DeserializeOwned, Deserializer, MapAccess, Visitor};

use crate::decode::Prediction;
use crate::error::{Error, Location, Result};
use rustc_hash::FxBuildHasher as WordHash;

/// An ordered `{question id: value}` object read from a file (or built in memory).
#[derive(Debug, Clone)]
pub struct IdMap<V> {
    /// Where it came from (named in errors); `None` when built in memory.
    pub path: Option<PathBuf>,
    entries: Vec<(String, V)>,
    /// Id → position, built on the first lookup for a map of ids known to be distinct
    /// ([`Predictions::from_decoded`]: scoring them in their question order looks
    /// nothing up).
    index: OnceLock<HashMap<String, usize, WordHash>>,
}

impl<V: PartialEq> PartialEq for IdMap<V> {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path && self.entries == other.entries
    }
}

/// `for (id, value) in &map`: the entries in order.
impl<'a, V> IntoIterator for &'a IdMap<V> {
    type Item = (&'a str, &'a V);
    type IntoIter =
        std::iter::Map<std::slice::Iter<'a, (String, V)>, fn(&'a (String, V)) -> (&'a str, &'a V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }
}

/// A predictions file: question id → answer text.
pub type Predictions = IdMap<String>;
/// A na-prob file: question id → no-answer score (BERT's `null_odds.json`).
pub type NaProbs = IdMap<f64>;

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap {
            path: None,
            entries: Vec::new(),
            index: OnceLock::from(HashMap::with_hasher(WordHash)),
        }
    }
}

impl<V> IdMap<V> {
    /// Builds a map from pairs; a repeated id keeps its first position, last value.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, V)>) -> Self {
        let pairs = pairs.into_iter();
        let mut m = IdMap::default();
        m.entries.reserve(pairs.size_hint().0);
        m.index_mut().reserve(pairs.size_hint().0);
        for (k, v) in pairs {
            m.insert(k, v);
        }
        m
    }

    /// Builds a map from pairs whose ids are all different (not checked), in their
    /// order, without hashing any until something is looked up.
    fn from_distinct(pairs: impl IntoIterator<Item = (String, V)>) -> Self {
        let m = IdMap {
            path: None,
            entries: pairs.into_iter().collect(),
            index: OnceLock::new(),
        };
        debug_assert_eq!(
            m.entries
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<std::collections::HashSet<_>>()
                .len(),
            m.entries.len(),
            "repeated ids"
        );
        m
    }

    fn index(&self) -> &HashMap<String, usize, WordHash> {
        self.index.get_or_init(|| {
            let mut index = HashMap::with_capacity_and_hasher(self.entries.len(), WordHash);
            for (i, (k, _)) in self.entries.iter().enumerate() {
                index.entry(k.clone()).or_insert(i);
            }
            index
        })
    }

    fn index_mut(&mut self) -> &mut HashMap<String, usize, WordHash> {
        self.index();
        self.index.get_mut().expect("just built")
    }

    fn insert(&mut self, k: String, v: V) {
        let at = self.entries.len();
        match self.index_mut().get(&k) {
            Some(&i) => self.entries[i].1 = v,
            None => {
                self.index_mut().insert(k.clone(), at);
                self.entries.push((k, v));
            }
        }
    }

    /// The value of question `id`; `None` when the map has no entry for it.
    pub fn get(&self, id: &str) -> Option<&V> {
        self.index().get(id).map(|&i| &self.entries[i].1)
    }

    /// Whether the map has an entry for question `id`.
    pub fn contains(&self, id: &str) -> bool {
        self.index().contains_key(id)
    }

    /// Entries in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// How many distinct question ids the map holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The file it was read from, for error locations.
    pub(crate) fn location(&self, qas_id: &str) -> Location {
        Location::question(
            self.path
                .clone()
                .unwrap_or_else(|| PathBuf::from("(in memory)")),
            qas_id,
        )
    }
}

impl Predictions {
    /// The answers of decoded predictions.
    /// Decoded predictions answer distinct questions (one each, of a dataset whose
    /// reader refuses repeated ids).
    pub fn from_decoded(preds: &[Prediction]) -> Self {
        Self::from_distinct(preds.iter().map(|p| (p.qas_id.clone(), p.answer.clone())))
    }
}

impl NaProbs {
    /// The null odds of decoded v2 predictions.
    pub fn from_decoded(preds: &[Prediction]) -> Self {
        Self::from_distinct(
            preds
                .iter()
                .filter_map(|p| p.null_odds.map(|o| (p.qas_id.clone(), o))),
        )
    }
}

/// Reads a predictions file: a JSON object of question id → answer string.
pub fn read_predictions(path: &Path) -> Result<Predictions> {
    read_map(path, "a JSON object of question id → answer text")
}

/// Predictions held in memory as the JSON text of a predictions file; `label` names
/// them in messages (as a file's path would).
pub fn predictions_from_bytes(bytes: &[u8], label: &Path) -> Result<Predictions> {
    map_of_bytes(bytes, label, "a JSON object of question id → answer text")
}

/// Reads a na-prob file: a JSON object of question id → finite number.
pub fn read_na_probs(path: &Path) -> Result<NaProbs> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    na_probs_from_bytes(&bytes, path)
}

/// Na-probs held in memory as the JSON text of a na-prob file; `label` names them in
/// messages.
pub fn na_probs_from_bytes(bytes: &[u8], label: &Path) -> Result<NaProbs> {
    let path = label;
    let m: NaProbs = map_of_bytes(bytes, path, "a JSON object of question id → number")?;
    if let Some((id, v)) = m.iter().find(|(_, v)| !v.is_finite()) {
        return Err(Error::input(
            m.location(id),
            format!("na-prob {v} is not a finite number"),
        ));
    }
    Ok(m)
}

fn read_map<V: DeserializeOwned>(path: &Path, what: &'static str) -> Result<IdMap<V>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    map_of_bytes(&bytes, path, what)
}

fn map_of_bytes<V: DeserializeOwned>(
    bytes: &[u8],
    path: &Path,
    what: &'static str,
) -> Result<IdMap<V>> {
    let mut de = serde_json::Deserializer::from_slice(crate::squad::strip_bom(bytes));
    let parsed = de
        .deserialize_map(MapVisitor::<V> {
            what,
            marker: PhantomData,
        })
        .and_then(|m| de.end().map(|()| m));
    let mut m = parsed.map_err(|e| json_error(path, &e))?;
    m.path = Some(path.to_path_buf());
    Ok(m)
}

struct MapVisitor<V> {
    what: &'static str,
    marker: PhantomData<V>,
}

impl<'de, V: DeserializeOwned> Visitor<'de> for MapVisitor<V> {
    type Value = IdMap<V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.what)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut m = IdMap::default();
        while let Some((k, v)) = access.next_entry::<String, V>()? {
            m.insert(k, v);
        }
        Ok(m)
    }
}

fn json_error(path: &Path, e: &serde_json::Error) -> Error {
    Error::json(path, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.json");
        std::fs::write(&p, text).unwrap();
        (dir, p)
    }

    /// Built from distinct ids without an index, a map looks ids up (the index built
    /// on first use) and compares as one built with it.
    #[test]
    fn maps_of_distinct_ids_look_up_as_indexed_ones() {
        let pairs: Vec<(String, String)> = (0..50)
            .map(|i| (format!("q{i}"), format!("a{i}")))
            .collect();
        let lazy = Predictions::from_distinct(pairs.clone());
        let eager = Predictions::from_pairs(pairs);
        assert!(lazy.index.get().is_none());
        assert_eq!(lazy, eager);
        assert_eq!(lazy.get("q7").map(String::as_str), Some("a7"));
        assert!(lazy.contains("q49") && !lazy.contains("q50"));
        assert!(lazy.index.get().is_some());
        assert_eq!(lazy.iter().nth(3), eager.iter().nth(3));
    }

    #[test]
    fn reads_in_order_with_python_duplicate_semantics() {
        let (_d, p) = write(r#"{"b": "x", "a": "y", "b": "z"}"#);
        let m = read_predictions(&p).unwrap();
        let v: Vec<(&str, &String)> = m.iter().collect();
        assert_eq!(v, [("b", &"z".to_string()), ("a", &"y".to_string())]);
    }

    #[test]
    fn a_byte_order_mark_is_accepted() {
        let (_d, p) = write("\u{feff}{\"a\": \"x\"}");
        assert_eq!(read_predictions(&p).unwrap().get("a").unwrap(), "x");
        let (_d, p) = write("\u{feff}{\"a\": 0.5}");
        assert_eq!(read_na_probs(&p).unwrap().get("a"), Some(&0.5));
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let (_d, p) = write("{\n  \"a\": \"x\",\n  \"b\": 3\n}");
        let e = read_predictions(&p).unwrap_err().to_string();
        assert!(e.contains("p.json:3:"), "{e}");
        assert!(e.contains("invalid type"), "{e}");
        let (_d, p) = write("{\"a\": \"x\"");
        assert!(read_predictions(&p)
            .unwrap_err()
            .to_string()
            .contains("p.json:1:"));
        let (_d, p) = write("[1, 2]");
        let e = read_predictions(&p).unwrap_err().to_string();
        assert!(e.contains("question id"), "{e}");
        let (_d, p) = write("{\"a\": \"1\"} x");
        assert!(read_predictions(&p).is_err());
        let (_d, p) = write("{\"a\": 1, \"b\": -2.5e0}");
        let n = read_na_probs(&p).unwrap();
        assert_eq!(n.get("b"), Some(&-2.5));
        let (_d, p) = write("{\"a\": \"1\"}");
        assert!(read_na_probs(&p).is_err());
    }
}
