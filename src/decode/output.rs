//! The reference's output files, byte for byte (§6.11, §7): Python
//! `json.dumps(obj, indent=4) + "\n"` ([`super::pyjson`]), keys in question order,
//! each file replaced atomically ([`crate::output_file`]).
//!
//! A question id that occurs twice keeps its first position and its last value, as a
//! Python dict does.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::path::Path;

use serde::{Serialize, Serializer};

use super::pyjson::{self, PyFloat};
use super::{NbestEntry, NbestKeys, Prediction};
use crate::error::{Error, Result};
use crate::output_file::{self, AtomicFile};

/// `predictions.json`: `{qid: answer}`.
pub fn render_predictions(preds: &[Prediction]) -> Vec<u8> {
    render(preds, |p| Some(p.answer.as_str()))
}

/// `nbest_predictions.json`: `{qid: [{text, probability, start_logit, end_logit}, …]}`.
pub fn render_nbest(preds: &[Prediction]) -> Vec<u8> {
    render(preds, |p| Some(NbestList(&p.nbest)))
}

/// `null_odds.json` (v2): `{qid: diff}` for the questions that have null odds.
pub fn render_null_odds(preds: &[Prediction]) -> Vec<u8> {
    render(preds, |p| p.null_odds.map(PyFloat))
}

/// An n-best list as the output files hold it (the spans are not written).
struct NbestList<'a>(&'a [NbestEntry]);

#[cfg(test)]
#[derive(Serialize)]
struct EntryOut<'a> {
    text: &'a str,
    #[serde(serialize_with = "pyjson::py_float")]
    probability: f64,
    #[serde(serialize_with = "pyjson::py_float")]
    start_logit: f64,
    #[serde(serialize_with = "pyjson::py_float")]
    end_logit: f64,
}

impl Serialize for NbestList<'_> {
    /// Rendered by [`write_nbest_list`] and handed to [`PyFormatter`](pyjson::PyFormatter)
    /// as raw text: the n-best file is the largest output, and its fixed keys need no
    /// escaping pass each.
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut text = Vec::with_capacity(160 * self.0.len() + 8);
        write_nbest_list(&mut text, self.0).map_err(serde::ser::Error::custom)?;
        s.serialize_bytes(&text)
    }
}

/// One question's n-best list as `json.dumps(indent=4)` writes it one level deep in the
/// file's object (byte-identical to serializing [`EntryOut`]s through the formatter; the
/// decode tests compare the two).
fn write_nbest_list(w: &mut Vec<u8>, entries: &[NbestEntry]) -> io::Result<()> {
    if entries.is_empty() {
        w.extend_from_slice(b"[]");
        return Ok(());
    }
    w.push(b'[');
    for (i, e) in entries.iter().enumerate() {
        w.extend_from_slice(if i == 0 {
            b"\n        {"
        } else {
            b",\n        {"
        });
        let keys: [&[u8]; 4] = match e.keys {
            NbestKeys::Squad => [b"text", b"probability", b"start_logit", b"end_logit"],
            NbestKeys::RunQa => [b"start_logit", b"end_logit", b"text", b"probability"],
            NbestKeys::RunQaPlaceholder => [b"text", b"start_logit", b"end_logit", b"probability"],
        };
        for (j, key) in keys.into_iter().enumerate() {
            w.extend_from_slice(if j == 0 {
                b"\n            \""
            } else {
                b",\n            \""
            });
            w.extend_from_slice(key);
            w.extend_from_slice(b"\": ");
            match key {
                b"text" => pyjson::write_str(w, &e.text)?,
                b"probability" => pyjson::write_float(w, e.probability)?,
                b"start_logit" => pyjson::write_float(w, e.start_logit)?,
                _ => pyjson::write_float(w, e.end_logit)?,
            }
        }
        w.extend_from_slice(b"\n        }");
    }
    w.extend_from_slice(b"\n    ]");
    Ok(())
}

/// Writes `predictions.json`, `nbest_predictions.json` and, for v2, `null_odds.json`
/// into `dir` (created if missing), each atomically.
pub fn write_outputs(dir: &Path, preds: &[Prediction], version_2: bool) -> Result<()> {
    write_outputs_with(dir, preds, version_2, None)
}

/// [`write_outputs`], the n-best file finished from `nbest` when given (the lists were
/// streamed there as they were decoded and are no longer in `preds`).
pub fn write_outputs_with(
    dir: &Path,
    preds: &[Prediction],
    version_2: bool,
    nbest: Option<NbestStream>,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    output_file::write_atomic(&dir.join("predictions.json"), &render_predictions(preds))?;
    match nbest {
        // The stream holds exactly these predictions' lists (each answered question's
        // went through it once). A run whose decoding failed keeps none of its
        // predictions: its streamed lists are dropped with the stream.
        Some(stream) if stream.lists() == preds.len() => stream.finish()?,
        // The largest file (about 30 MB for SQuAD dev) goes out as it is rendered,
        // never held whole.
        other => {
            debug_assert!(
                other.is_none() || preds.is_empty(),
                "lists streamed elsewhere"
            );
            output_file::write_atomic_with(&dir.join("nbest_predictions.json"), |w| {
                write_object(w, preds, |p| Some(NbestList(&p.nbest))).map(drop)
            })?
        }
    }
    if version_2 {
        output_file::write_atomic(&dir.join("null_odds.json"), &render_null_odds(preds))?;
    }
    Ok(())
}

/// A top-level object rendered into memory ([`write_object`]).
fn render<'a, T: Serialize>(
    preds: &'a [Prediction],
    value: impl Fn(&'a Prediction) -> Option<T>,
) -> Vec<u8> {
    write_object(Vec::new(), preds, value).expect("writing to memory")
}

/// A top-level object keyed by question id, one value per prediction (`None` leaves
/// the question out), with Python dict semantics for repeated ids: the entry stands at
/// the id's first position with a value and holds its last value.
fn write_object<'a, W: Write, T: Serialize>(
    w: W,
    preds: &'a [Prediction],
    value: impl Fn(&'a Prediction) -> Option<T>,
) -> io::Result<W> {
    let mut last: HashMap<&str, usize> = HashMap::with_capacity(preds.len());
    for (i, p) in preds.iter().enumerate() {
        if value(p).is_some() {
            last.insert(&p.qas_id, i);
        }
    }
    let mut object = ObjectWriter::new(w)?;
    for p in preds.iter().filter(|p| value(p).is_some()) {
        // None: an id already written.
        if let Some(v) = last
            .remove(p.qas_id.as_str())
            .and_then(|i| value(&preds[i]))
        {
            object.entry(&p.qas_id, &v)?;
        }
    }
    object.finish()
}

/// A top-level object written one entry at a time: `{`, then `"key": value` entries at
/// depth 1, then the close (`{}` when empty) and a newline.
#[derive(Debug)]
struct ObjectWriter<W> {
    w: W,
    entries: usize,
}

impl<W: Write> ObjectWriter<W> {
    fn new(mut w: W) -> io::Result<Self> {
        w.write_all(b"{")?;
        Ok(ObjectWriter { w, entries: 0 })
    }

    fn entry<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> io::Result<()> {
        let sep: &[u8] = if self.entries == 0 {
            b"\n    "
        } else {
            b",\n    "
        };
        self.w.write_all(sep)?;
        pyjson::write_value(&mut self.w, key, 1)?;
        self.w.write_all(b": ")?;
        pyjson::write_value(&mut self.w, value, 1)?;
        self.entries += 1;
        Ok(())
    }

    fn finish(mut self) -> io::Result<W> {
        let close: &[u8] = if self.entries == 0 { b"}\n" } else { b"\n}\n" };
        self.w.write_all(close)?;
        Ok(self.w)
    }
}

/// `nbest_predictions.json` written while questions are decoded, so that no n-best list
/// is kept for the whole run, byte-identical to [`render_nbest`] of the same
/// predictions in question order. Each question's list is handed over as it is decoded
/// ([`NbestStream::push`], by question index); lists that come before an earlier
/// question's wait for it, and [`NbestStream::finish`] writes those still waiting (the
/// questions of an interrupted run that were answered) in question order. Question ids
/// must be unique (the SQuAD reader refuses repeated ones). The file is written under
/// a temporary name and put in place by `finish`; a stream dropped unfinished leaves
/// nothing behind.
#[derive(Debug)]
pub struct NbestStream {
    object: ObjectWriter<AtomicFile>,
    /// The question whose list is written next.
    next: usize,
    /// Lists of later questions (id, list) waiting for `next`.
    waiting: BTreeMap<usize, (String, Vec<NbestEntry>)>,
    /// The first write error; later lists are dropped and `finish` reports it.
    error: Option<io::Error>,
    /// Lists written (or dropped after an error).
    pushed: usize,
}

impl NbestStream {
    /// Starts `dir/nbest_predictions.json` (`dir` is created if missing). Temporary
    /// files left by killed runs are removed.
    pub fn create(dir: &Path) -> Result<NbestStream> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join("nbest_predictions.json");
        output_file::remove_leftovers(&path);
        let file = AtomicFile::create(&path)?;
        let object = ObjectWriter::new(file).map_err(|e| Error::io(&path, e))?;
        Ok(NbestStream {
            object,
            next: 0,
            waiting: BTreeMap::new(),
            error: None,
            pushed: 0,
        })
    }

    /// Takes question `index`'s n-best list out of `p` (leaving it empty) and writes it
    /// with those waiting for it, or keeps it until the questions before it came.
    pub fn push(&mut self, index: usize, p: &mut Prediction) {
        let nbest = std::mem::take(&mut p.nbest);
        if index != self.next {
            self.waiting.insert(index, (p.qas_id.clone(), nbest));
            return;
        }
        self.write(&p.qas_id, &nbest);
        self.next = index + 1;
        while let Some(entry) = self.waiting.first_entry() {
            if *entry.key() != self.next {
                break;
            }
            let (id, nbest) = entry.remove();
            self.write(&id, &nbest);
            self.next += 1;
        }
    }

    fn write(&mut self, id: &str, nbest: &[NbestEntry]) {
        self.pushed += 1;
        // After the first error nothing more is written: the file is discarded.
        if self.error.is_none() {
            if let Err(e) = self.object.entry(id, &NbestList(nbest)) {
                self.error = Some(e);
            }
        }
    }

    /// Lists handed over so far (written or waiting).
    pub fn lists(&self) -> usize {
        self.pushed + self.waiting.len()
    }

    /// Writes the lists still waiting (in question order), closes the object, syncs the
    /// file and renames it into place.
    pub fn finish(mut self) -> Result<()> {
        for (_, (id, nbest)) in std::mem::take(&mut self.waiting) {
            self.write(&id, &nbest);
        }
        if let Some(e) = self.error.take() {
            return Err(Error::io(self.object.w.path(), e));
        }
        let path = self.object.w.path().to_path_buf();
        let file = self.object.finish().map_err(|e| Error::io(&path, e))?;
        file.commit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The n-best list written directly equals the same entries serialized through the
    /// formatter: plain, escaped and non-ASCII texts, every float form, and no entries.
    #[test]
    fn nbest_list_equals_the_formatter() {
        let entry = |text: &str, p: f64, s: f64, e: f64| NbestEntry {
            text: text.into(),
            probability: p,
            start_logit: s,
            end_logit: e,
            span: None,
            keys: NbestKeys::Squad,
        };
        let lists = [
            vec![],
            vec![entry("plain text", 0.5, 1.25, -3.0)],
            vec![
                entry("say \"hi\" \\ back\tslash", 1e-7, f64::NAN, f64::INFINITY),
                entry(
                    "caf\u{e9} \u{1f600} \u{7f}",
                    123456789012345680.0,
                    -0.0,
                    1e22,
                ),
                entry("", 0.1 + 0.2, f64::NEG_INFINITY, 5e-324),
            ],
        ];
        for list in &lists {
            let mut direct = Vec::new();
            write_nbest_list(&mut direct, list).unwrap();
            let entries: Vec<EntryOut<'_>> = list
                .iter()
                .map(|e| EntryOut {
                    text: &e.text,
                    probability: e.probability,
                    start_logit: e.start_logit,
                    end_logit: e.end_logit,
                })
                .collect();
            let mut through_serde = Vec::new();
            pyjson::write_value(&mut through_serde, &entries, 1).unwrap();
            assert_eq!(
                String::from_utf8(direct).unwrap(),
                String::from_utf8(through_serde).unwrap()
            );
        }
    }

    fn pred(id: &str, answer: &str, nbest: Vec<NbestEntry>, odds: Option<f64>) -> Prediction {
        Prediction {
            qas_id: id.to_string(),
            answer: answer.to_string(),
            nbest,
            null_odds: odds,
        }
    }

    #[test]
    fn layout_is_python_indent_4() {
        let e = NbestEntry {
            text: "x".into(),
            probability: 1.0,
            start_logit: 0.5,
            end_logit: -2.0,
            span: None,
            keys: NbestKeys::Squad,
        };
        let preds = vec![
            pred("q1", "x", vec![e], Some(-1.5)),
            pred("q2", "", vec![], None),
        ];
        assert_eq!(
            String::from_utf8(render_predictions(&preds)).unwrap(),
            "{\n    \"q1\": \"x\",\n    \"q2\": \"\"\n}\n"
        );
        assert_eq!(
            String::from_utf8(render_nbest(&preds)).unwrap(),
            "{\n    \"q1\": [\n        {\n            \"text\": \"x\",\n            \
             \"probability\": 1.0,\n            \"start_logit\": 0.5,\n            \
             \"end_logit\": -2.0\n        }\n    ],\n    \"q2\": []\n}\n"
        );
        assert_eq!(
            String::from_utf8(render_null_odds(&preds)).unwrap(),
            "{\n    \"q1\": -1.5\n}\n"
        );
        assert_eq!(render_null_odds(&[]), b"{}\n");
    }

    /// Logits that are not finite are written as Python writes them.
    #[test]
    fn non_finite_values_are_python_names() {
        let e = NbestEntry {
            text: "\u{e9}".into(),
            probability: f64::NAN,
            start_logit: f64::INFINITY,
            end_logit: f64::NEG_INFINITY,
            span: None,
            keys: NbestKeys::Squad,
        };
        let preds = vec![pred("q", "", vec![e], Some(f64::NAN))];
        assert_eq!(
            String::from_utf8(render_nbest(&preds)).unwrap(),
            "{\n    \"q\": [\n        {\n            \"text\": \"\\u00e9\",\n            \
             \"probability\": NaN,\n            \"start_logit\": Infinity,\n            \
             \"end_logit\": -Infinity\n        }\n    ]\n}\n"
        );
        assert_eq!(render_null_odds(&preds), b"{\n    \"q\": NaN\n}\n");
    }

    /// Predictions with n-best lists long enough that a few of them pass a write chunk.
    fn many_predictions(n: usize) -> Vec<Prediction> {
        (0..n)
            .map(|i| {
                let nbest = (0..(i % 23))
                    .map(|j| NbestEntry {
                        text: format!("answer {i} \u{e9}{j}"),
                        probability: 1.0 / (j + 1) as f64,
                        start_logit: i as f64 * 0.25,
                        end_logit: -(j as f64),
                        span: None,
                        keys: NbestKeys::Squad,
                    })
                    .collect();
                pred(&format!("q{i}"), "a", nbest, None)
            })
            .collect()
    }

    /// The streamed file equals the rendered one whatever order the lists come in, and
    /// a run that answered only some questions gets those, in question order; the lists
    /// are taken out of the predictions.
    #[test]
    fn streamed_nbest_equals_the_rendered_file() {
        // Several megabytes: more than the file's buffer several times.
        let preds = many_predictions(3000);
        let dir = tempfile::tempdir().unwrap();
        // Mostly in order, some late, some early (as windows come back).
        let mut order: Vec<usize> = (0..preds.len()).collect();
        for chunk in order.chunks_mut(7) {
            chunk.reverse();
        }
        order.swap(3, 250);
        let mut stream = NbestStream::create(dir.path()).unwrap();
        let mut taken = preds.clone();
        for &i in &order {
            stream.push(i, &mut taken[i]);
            assert!(taken[i].nbest.is_empty());
        }
        stream.finish().unwrap();
        let path = dir.path().join("nbest_predictions.json");
        assert!(std::fs::read(&path).unwrap() == render_nbest(&preds));
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );

        // Questions 0, 5 and 6 were never answered (an interrupted run).
        let answered: Vec<Prediction> = preds
            .iter()
            .enumerate()
            .filter(|(i, _)| ![0, 5, 6].contains(i))
            .map(|(_, p)| p.clone())
            .collect();
        let mut stream = NbestStream::create(dir.path()).unwrap();
        let mut taken = preds.clone();
        for &i in order.iter().filter(|i| ![0, 5, 6].contains(*i)) {
            stream.push(i, &mut taken[i]);
        }
        write_outputs_with(dir.path(), &answered, false, Some(stream)).unwrap();
        assert!(std::fs::read(&path).unwrap() == render_nbest(&answered));

        // Nothing answered: an empty object.
        NbestStream::create(dir.path()).unwrap().finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}\n");

        // Decoding failed after some lists were streamed: the run keeps no prediction,
        // and the n-best file agrees with predictions.json (both empty).
        let mut stream = NbestStream::create(dir.path()).unwrap();
        let mut taken = preds.clone();
        for (i, p) in taken.iter_mut().enumerate().take(5) {
            stream.push(i, p);
        }
        assert_eq!(stream.lists(), 5);
        write_outputs_with(dir.path(), &[], false, Some(stream)).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}\n");
        assert_eq!(
            std::fs::read(dir.path().join("predictions.json")).unwrap(),
            b"{}\n"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "no temporary file left"
        );
    }

    /// An unfinished stream leaves no file behind; a temporary file of a killed run is
    /// removed by the next stream, and the finished file replaces an older one.
    #[test]
    fn unfinished_streams_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nbest_predictions.json");
        std::fs::write(&path, b"old").unwrap();
        let mut preds = many_predictions(3);
        let mut stream = NbestStream::create(dir.path()).unwrap();
        stream.push(0, &mut preds[0]);
        drop(stream);
        let names = |d: &Path| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(dir.path()), ["nbest_predictions.json"]);
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        let stale = dir.path().join(".nbest_predictions.json.a1b2c3.tmp");
        std::fs::write(&stale, b"{").unwrap();
        let stream = NbestStream::create(dir.path()).unwrap();
        assert!(!stale.exists());
        stream.finish().unwrap();
        assert_eq!(names(dir.path()), ["nbest_predictions.json"]);
        assert_eq!(std::fs::read(&path).unwrap(), b"{}\n");
    }

    #[test]
    fn repeated_id_keeps_first_position_last_value() {
        let preds = vec![
            pred("a", "1", vec![], None),
            pred("b", "2", vec![], None),
            pred("a", "3", vec![], None),
        ];
        assert_eq!(
            String::from_utf8(render_predictions(&preds)).unwrap(),
            "{\n    \"a\": \"3\",\n    \"b\": \"2\"\n}\n"
        );
    }
}
