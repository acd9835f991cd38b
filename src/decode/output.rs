//! The reference's output files, byte for byte (spec §6.11, §7): Python
//! `json.dumps(obj, indent=4) + "\n"` with `ensure_ascii` and float `repr`, keys in
//! question order. Rendering is pure (bytes out); [`write_atomic`] writes through a
//! temporary file and a rename so a reader never sees half a file.
//!
//! A question id that occurs twice keeps its first position and its last value, as a
//! Python dict does.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use super::direct;
use super::Prediction;
use crate::error::{Error, Result};

/// `predictions.json`: `{qid: answer}`.
pub fn render_predictions(preds: &[Prediction]) -> Vec<u8> {
    render_object(preds, |_| true, |p, out, _| push_str(out, &p.answer))
}

/// `nbest_predictions.json`: `{qid: [{text, probability, start_logit, end_logit}, …]}`.
pub fn render_nbest(preds: &[Prediction]) -> Vec<u8> {
    let mut writer = NbestWriter::default();
    render_object(
        preds,
        |_| true,
        |p, out, indent| writer.value(p, out, indent),
    )
}

/// The texts of recently written floats: an n-best list repeats its logits (one start
/// with several ends) and, for a flat distribution, its probabilities. Direct-mapped
/// by the value's bits; an empty slot holds a NaN's bits, which are never looked up.
struct FloatTexts {
    bits: [u64; 64],
    /// Strings, not byte arrays: a hit is copied without checking UTF-8 again (that
    /// check was a fifth of the n-best file's rendering).
    texts: Vec<String>,
}

impl Default for FloatTexts {
    fn default() -> Self {
        FloatTexts {
            bits: [u64::MAX; 64],
            texts: vec![String::new(); 64],
        }
    }
}

impl FloatTexts {
    /// [`push_float`], from the cache when `x` was written recently.
    fn push(&mut self, out: &mut String, x: f64) {
        let bits = x.to_bits();
        if x.is_nan() {
            return push_float(out, x);
        }
        let slot = (bits ^ (bits >> 23) ^ (bits >> 47)) as usize % self.bits.len();
        if self.bits[slot] == bits {
            out.push_str(&self.texts[slot]);
            return;
        }
        let from = out.len();
        push_float(out, x);
        let text = &mut self.texts[slot];
        text.clear();
        text.push_str(&out[from..]);
        self.bits[slot] = bits;
    }
}

/// Writes n-best lists: the float cache and, for the depth of the last list, the
/// constant text between an entry's values, each written with one copy.
#[derive(Default)]
struct NbestWriter {
    floats: FloatTexts,
    /// The depth `pieces` were made for.
    depth: Option<usize>,
    /// `[` and the first entry's opening up to its text's value; the same after an
    /// entry; before each of the three numbers; an entry's close; the list's close.
    pieces: [String; 7],
}

impl NbestWriter {
    fn pieces(&mut self, depth: usize) -> &[String; 7] {
        if self.depth != Some(depth) {
            let nl = |d: usize| {
                let mut s = String::from("\n");
                s.extend(std::iter::repeat_n("    ", d));
                s
            };
            let open = format!("{}{{{}\"text\": ", nl(depth + 1), nl(depth + 2));
            let field = |key: &str| format!(",{}\"{key}\": ", nl(depth + 2));
            self.pieces = [
                format!("[{open}"),
                format!(",{open}"),
                field("probability"),
                field("start_logit"),
                field("end_logit"),
                nl(depth + 1) + "}",
                nl(depth) + "]",
            ];
            self.depth = Some(depth);
        }
        &self.pieces
    }

    fn value(&mut self, p: &Prediction, out: &mut String, indent: usize) {
        self.list(&p.nbest, out, indent);
    }

    fn list(&mut self, nbest: &[super::NbestEntry], out: &mut String, indent: usize) {
        if nbest.is_empty() {
            out.push_str("[]");
            return;
        }
        self.pieces(indent);
        let NbestWriter { floats, pieces, .. } = self;
        for (i, e) in nbest.iter().enumerate() {
            out.push_str(&pieces[usize::from(i > 0)]);
            push_str(out, &e.text);
            out.push_str(&pieces[2]);
            floats.push(out, e.probability);
            out.push_str(&pieces[3]);
            floats.push(out, e.start_logit);
            out.push_str(&pieces[4]);
            floats.push(out, e.end_logit);
            out.push_str(&pieces[5]);
        }
        out.push_str(&pieces[6]);
    }
}

/// `null_odds.json` (v2): `{qid: diff}` for the questions that have null odds.
pub fn render_null_odds(preds: &[Prediction]) -> Vec<u8> {
    render_object(
        preds,
        |p| p.null_odds.is_some(),
        |p, out, _| push_float(out, p.null_odds.unwrap_or(f64::NAN)),
    )
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
    write_atomic(&dir.join("predictions.json"), &render_predictions(preds))?;
    match nbest {
        // The stream holds exactly these predictions' lists (each answered question's
        // went through it once). A run whose decoding failed keeps none of its
        // predictions: its streamed lists are dropped with the stream.
        Some(stream) if stream.lists() == preds.len() => stream.finish()?,
        // The largest file (about 30 MB for SQuAD dev) is written in chunks, never held
        // whole.
        other => {
            debug_assert!(
                other.is_none() || preds.is_empty(),
                "lists streamed elsewhere"
            );
            write_atomic_with(&dir.join("nbest_predictions.json"), |w| {
                let mut writer = NbestWriter::default();
                render_object_to(
                    preds,
                    |_| true,
                    |p, out, indent| writer.value(p, out, indent),
                    w,
                )
            })?
        }
    }
    if version_2 {
        write_atomic(&dir.join("null_odds.json"), &render_null_odds(preds))?;
    }
    Ok(())
}

/// Writes `bytes` to a temporary file next to `path`, syncs it, and renames it over
/// `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] with the contents written by `write` (buffered).
fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".to_string());
    let tmp = path.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    let result = (|| {
        // Written once, never read here: around the page cache (see `direct`).
        let mut f = super::direct::DirectFile::create(&tmp)?;
        write(&mut f)?;
        let f = f.finish()?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(path, e)
    })
}

/// A top-level object keyed by question id (Python dict semantics for repeated ids),
/// one value per prediction rendered by `value` at nesting depth 1; `None` leaves the
/// question out. Rendered straight into one buffer: a repeated id (rare) is rendered
/// once, from its last prediction that has a value, at its first position.
fn render_object(
    preds: &[Prediction],
    has_value: impl Fn(&Prediction) -> bool,
    value: impl FnMut(&Prediction, &mut String, usize),
) -> Vec<u8> {
    let mut out = Vec::new();
    render_object_to(preds, has_value, value, &mut out).expect("writing to memory");
    out
}

/// [`render_object`] into `w`, in chunks of about 64 KiB.
fn render_object_to(
    preds: &[Prediction],
    has_value: impl Fn(&Prediction) -> bool,
    mut value: impl FnMut(&Prediction, &mut String, usize),
    w: &mut dyn Write,
) -> std::io::Result<()> {
    // Python dict: first position, last value.
    let mut last: HashMap<&str, usize, crate::tokenize::WordHash> =
        HashMap::with_capacity_and_hasher(preds.len(), crate::tokenize::WordHash);
    for (i, p) in preds.iter().enumerate() {
        if has_value(p) {
            last.insert(&p.qas_id, i);
        }
    }
    let mut object = ObjectOut::default();
    for p in preds.iter().filter(|p| has_value(p)) {
        let Some(i) = last.remove(p.qas_id.as_str()) else {
            continue; // an id already written
        };
        object.key(&p.qas_id);
        value(&preds[i], &mut object.out, 1);
        object.write_if_full(w)?;
    }
    object.close(w)
}

/// A top-level object being written in chunks: `{`, then `key: value` entries at depth
/// 1 (the caller writes each value into `out`), then the close. The text starts at
/// `out[head..]`; what comes before is padding that is never written (see
/// [`ObjectOut::aligned`]).
struct ObjectOut {
    out: String,
    head: usize,
    /// Bytes gathered before they are written.
    chunk: usize,
    written: usize,
}

impl Default for ObjectOut {
    fn default() -> Self {
        let mut out = String::with_capacity(2 * ObjectOut::CHUNK);
        out.push('{');
        ObjectOut {
            out,
            head: 0,
            chunk: ObjectOut::CHUNK,
            written: 0,
        }
    }
}

impl ObjectOut {
    /// Bytes gathered before they are written.
    const CHUNK: usize = 1 << 16;

    /// An object written in chunks of `chunk` bytes to a [`DirectFile`] from `out`
    /// itself ([`ObjectOut::write_direct_if_full`]): its text is kept starting at a
    /// block-aligned address of `out`, behind a padding of spaces.
    fn aligned(chunk: usize) -> Self {
        let out = String::with_capacity(chunk + chunk / 4 + 2 * direct::BLOCK);
        let mut object = ObjectOut {
            out,
            head: 0,
            chunk,
            written: 0,
        };
        object.realign("{".to_string());
        object
    }

    /// Replaces the text by `rest` (ASCII, as all JSON written here is), placed at the
    /// first block-aligned address of `out`.
    fn realign(&mut self, rest: String) {
        self.out.clear();
        let pad = self.out.as_ptr().align_offset(direct::BLOCK);
        self.out.extend(std::iter::repeat_n(' ', pad));
        self.head = pad;
        self.out.push_str(&rest);
    }

    /// [`ObjectOut::write_if_full`] to a [`DirectFile`]: the whole blocks go out from
    /// `out` itself when its text starts aligned (no copy), and the rest (less than a
    /// block) moves to the front, aligned again.
    fn write_direct_if_full(&mut self, f: &mut direct::DirectFile) -> std::io::Result<()> {
        if self.out.len() - self.head < self.chunk {
            return Ok(());
        }
        let text = &self.out.as_bytes()[self.head..];
        let sent = f.write_in_place(text)?;
        match std::str::from_utf8(&text[sent..]) {
            Ok(rest) => {
                let rest = rest.to_string();
                self.realign(rest);
            }
            Err(_) => {
                // Cut inside a character (never for the ASCII JSON written here):
                // gathered by the file instead.
                f.write_all(&text[sent..])?;
                self.realign(String::new());
            }
        }
        Ok(())
    }

    /// Starts an entry: what follows in `out` is its value.
    fn key(&mut self, key: &str) {
        if self.written > 0 {
            self.out.push(',');
        }
        newline(&mut self.out, 1);
        push_str(&mut self.out, key);
        self.out.push_str(": ");
        self.written += 1;
    }

    fn write_if_full(&mut self, w: &mut dyn Write) -> std::io::Result<()> {
        if self.out.len() - self.head >= self.chunk {
            w.write_all(&self.out.as_bytes()[self.head..])?;
            self.out.clear();
            self.head = 0;
        }
        Ok(())
    }

    /// Closes the object (`{}` when empty) and writes what is left.
    fn close(&mut self, w: &mut dyn Write) -> std::io::Result<()> {
        self.push_close();
        w.write_all(&self.out.as_bytes()[self.head..])
    }

    /// [`ObjectOut::close`] to a [`DirectFile`], the whole blocks from `out` itself.
    fn close_direct(&mut self, f: &mut direct::DirectFile) -> std::io::Result<()> {
        self.push_close();
        let text = &self.out.as_bytes()[self.head..];
        let sent = f.write_in_place(text)?;
        f.write_all(&text[sent..])
    }

    fn push_close(&mut self) {
        if self.written == 0 {
            self.out.push('}');
        } else {
            newline(&mut self.out, 0);
            self.out.push('}');
        }
        self.out.push('\n');
    }
}

/// `nbest_predictions.json` written while questions are decoded, so that no n-best list
/// is kept for the whole run (about 17 MB on SQuAD dev, a twentieth of the client's CPU
/// in first touches of memory), byte-identical to [`render_nbest`] of the same
/// predictions in question order. Each question's list is handed over as it is decoded
/// ([`NbestStream::push`], by question index); lists that come before an earlier
/// question's wait for it, and [`NbestStream::finish`] writes those still waiting (the
/// questions of an interrupted run that were answered) in question order. Question ids
/// must be unique (the SQuAD reader refuses repeated ones). The file is written to a
/// temporary name next to its place and renamed there by `finish`; a stream dropped
/// unfinished removes it.
pub struct NbestStream {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    file: Option<super::direct::DirectFile>,
    object: ObjectOut,
    writer: NbestWriter,
    /// The question whose list is written next.
    next: usize,
    /// Lists of later questions (id, list) waiting for `next`.
    waiting: std::collections::BTreeMap<usize, (String, Vec<super::NbestEntry>)>,
    /// The first write error; later lists are dropped and `finish` reports it.
    error: Option<std::io::Error>,
    /// Lists written (or dropped after an error).
    pushed: usize,
}

impl std::fmt::Debug for NbestStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NbestStream")
            .field("tmp", &self.tmp)
            .field("next", &self.next)
            .field("waiting", &self.waiting.len())
            .finish()
    }
}

impl NbestStream {
    /// Starts `dir/nbest_predictions.json` (under a temporary name; `dir` is created if
    /// missing). Temporary files left by killed runs of this stream are removed.
    pub fn create(dir: &Path) -> Result<NbestStream> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        const NAME: &str = "nbest_predictions.json";
        let stale = format!(".{NAME}.stream");
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().starts_with(&stale) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        let path = dir.join(NAME);
        let tmp = dir.join(format!("{stale}{}", std::process::id()));
        // Tens of megabytes written once and never read here: around the page cache.
        let file = super::direct::DirectFile::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        Ok(NbestStream {
            path,
            tmp,
            file: Some(file),
            object: ObjectOut::aligned(direct::CAPACITY),
            writer: NbestWriter::default(),
            next: 0,
            waiting: Default::default(),
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
        super::recycle_texts(nbest);
        self.next = index + 1;
        while let Some(entry) = self.waiting.first_entry() {
            if *entry.key() != self.next {
                break;
            }
            let (id, nbest) = entry.remove();
            self.write(&id, &nbest);
            super::recycle_texts(nbest);
            self.next += 1;
        }
    }

    fn write(&mut self, id: &str, nbest: &[super::NbestEntry]) {
        self.pushed += 1;
        // After the first error nothing more is written: the file is discarded.
        if self.error.is_some() {
            return;
        }
        self.object.key(id);
        self.writer.list(nbest, &mut self.object.out, 1);
        let Some(file) = self.file.as_mut() else {
            return;
        };
        if let Err(e) = self.object.write_direct_if_full(file) {
            self.error = Some(e);
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
        let result = match self.error.take() {
            Some(e) => Err(e),
            None => (|| {
                let mut file = self.file.take().expect("open until finished");
                self.object.close_direct(&mut file)?;
                let file = file.finish()?;
                file.sync_all()?;
                std::fs::rename(&self.tmp, &self.path)
            })(),
        };
        result.map_err(|e| Error::io(&self.path, e))
    }
}

impl Drop for NbestStream {
    fn drop(&mut self) {
        // Renamed by `finish`; otherwise the unfinished file goes.
        let _ = std::fs::remove_file(&self.tmp);
    }
}

fn newline(out: &mut String, depth: usize) {
    /// A newline and up to four levels of indentation (the n-best file goes three deep).
    const INDENTS: &str = "\n                ";
    match INDENTS.get(..1 + 4 * depth) {
        Some(s) => out.push_str(s),
        None => {
            out.push('\n');
            for _ in 0..depth {
                out.push_str("    ");
            }
        }
    }
}

/// A JSON string as Python's `json.dumps(ensure_ascii=True)` writes it: `\"`, `\\`,
/// `\n`, `\r`, `\t`, `\b`, `\f`, and `\uXXXX` (lower-case hex, surrogate pairs for
/// astral characters) for every other character outside U+0020–U+007E.
pub fn push_str(out: &mut String, s: &str) {
    use std::fmt::Write as _;
    out.push('"');
    let mut rest = s;
    loop {
        // The longest prefix that is written as is: printable ASCII but `"` and `\\`.
        let plain = plain_prefix(rest.as_bytes());
        out.push_str(&rest[..plain]);
        rest = &rest[plain..];
        let Some(c) = rest.chars().next() else {
            break;
        };
        rest = &rest[c.len_utf8()..];
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// The length of the longest prefix of `s` that a JSON string holds as is: printable
/// ASCII but `"` and `\\`. Checked 16 bytes at a time without branching (compiled to
/// vector compares), then byte by byte in the first chunk that has one to escape.
fn plain_prefix(s: &[u8]) -> usize {
    let escaped = |b: u8| !(b' '..=b'~').contains(&b) || b == b'"' || b == b'\\';
    let mut at = 0;
    for chunk in s.chunks_exact(16) {
        if chunk.iter().fold(false, |any, &b| any | escaped(b)) {
            break;
        }
        at += 16;
    }
    at + s[at..]
        .iter()
        .position(|&b| escaped(b))
        .unwrap_or(s.len() - at)
}

/// Python's `repr(float)`: the shortest round-trip digits; plain notation when the
/// decimal exponent is in −4..16 (with `.0` for integral values), otherwise
/// `d.ddde±XX`; `NaN`, `Infinity`, `-Infinity` as `json.dumps` writes them.
pub fn py_float_repr(x: f64) -> String {
    let mut out = String::with_capacity(24);
    push_float(&mut out, x);
    out
}

/// [`py_float_repr`] appended to `out` (no allocation of its own).
///
/// The digits come from Ryū: the shortest digit string that round-trips and, among
/// those, the closest to `x`, an exact tie rounded half to even, which is what Python's
/// `dtoa` mode 0 answers (Rust's own `{:e}` rounds such ties up: 9.2206573486328125
/// gives …813 there, …812 in Python). Only the layout is Python's own.
pub fn push_float(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("NaN");
        return;
    }
    if x.is_infinite() {
        out.push_str(if x > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    // Ryū lays out a decimal exponent of −5..=15 without one and Python −4..=15, in
    // the same way ("0.00123", "12.5", "300.0"): from 1e-4 up, Ryū's text is Python's.
    // (No double below 1e-4 has "0.0001…" as its shortest digits.)
    if x == 0.0 || (1e-4..1e16).contains(&x.abs()) {
        out.push_str(ryu::Buffer::new().format_finite(x));
        return;
    }
    push_float_relaid(out, x);
}

/// [`push_float`] for a finite `x`, Python's layout rebuilt from Ryū's digits.
fn push_float_relaid(out: &mut String, x: f64) {
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(x).as_bytes();
    let (neg, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    // Ryū writes "d.ddde±X", "ddd.ddd", "ddd.0" or "0.000ddd": collect the significant
    // digits and the decimal exponent of the first one.
    let (mantissa, exp_part) = match text.iter().position(|&b| b == b'e') {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    let mut digits = [0u8; 24];
    let mut n = 0usize;
    let mut point: Option<usize> = None;
    let mut leading = 0i32; // zeros before the first significant digit, after the point
    for &b in mantissa {
        if b == b'.' {
            point = Some(n);
        } else if n == 0 && b == b'0' {
            if point.is_some() {
                leading += 1;
            }
        } else {
            digits[n] = b;
            n += 1;
        }
    }
    while n > 1 && digits[n - 1] == b'0' {
        n -= 1;
    }
    let exp: i32 = match exp_part {
        Some(e) => std::str::from_utf8(e)
            .ok()
            .and_then(|e| e.parse().ok())
            .unwrap_or(0),
        None if n == 0 => 0,
        None => match point {
            // Digits before the point: the exponent is their count − 1.
            Some(p) if p > 0 => p as i32 - 1,
            // "0.00ddd": −(zeros after the point + 1).
            _ => -(leading + 1),
        },
    };
    if n == 0 {
        digits[0] = b'0';
        n = 1;
    }
    let digits = std::str::from_utf8(&digits[..n]).unwrap_or("0");
    if neg {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(digits);
                for _ in digits.len()..int_len {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push('0');
        }
        let _ = std::fmt::Write::write_fmt(out, format_args!("{e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{NbestEntry, Prediction};

    proptest::proptest! {
        /// The chunked scan finds the first byte to escape, as a plain scan does.
        #[test]
        fn plain_prefix_is_the_first_escape(s in "[ -~\"\\\\\\n\u{e9}\u{1f600}]{0,70}") {
            let b = s.as_bytes();
            let slow = b
                .iter()
                .position(|&c| !(b' '..=b'~').contains(&c) || c == b'"' || c == b'\\')
                .unwrap_or(b.len());
            proptest::prop_assert_eq!(plain_prefix(b), slow);
        }

        /// The cache of float texts writes what push_float writes, on values that repeat.
        #[test]
        fn float_texts_equal_push_float(picks in proptest::collection::vec(0usize..12, 0..200)) {
            let values = [0.0, -0.0, 0.05, 1e-7, -3.25, 1e16, 7.0, 0.1, f64::NAN, f64::INFINITY, 2.5e-5, 123.456];
            let mut cache = FloatTexts::default();
            let (mut a, mut b) = (String::new(), String::new());
            for &i in &picks {
                cache.push(&mut a, values[i]);
                push_float(&mut b, values[i]);
                a.push(',');
                b.push(',');
            }
            proptest::prop_assert_eq!(a, b);
        }

        /// Ryū's own text, where it is used as is, equals the layout rebuilt from its
        /// digits: any finite double, and values around the 1e-4 and 1e16 edges.
        #[test]
        fn ryu_text_is_python_layout_where_used(bits in proptest::num::u64::ANY, k in 0u32..40) {
            let edges: [f64; 4] = [1e-4, 1e16, 1e-5, 1e15];
            let near = f64::from_bits(
                edges[(k % 4) as usize].to_bits().wrapping_add(u64::from(k / 4)).wrapping_sub(5),
            );
            for x in [f64::from_bits(bits), near, -near] {
                if x.is_finite() {
                    let mut fast = String::new();
                    push_float(&mut fast, x);
                    let mut relaid = String::new();
                    push_float_relaid(&mut relaid, x);
                    proptest::prop_assert_eq!(fast, relaid, "{:e}", x);
                }
            }
        }
    }

    #[test]
    fn float_repr_matches_python() {
        let cases: [(f64, &str); 23] = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (-3.0, "-3.0"),
            (0.5, "0.5"),
            (1e-5, "1e-05"),
            (3.2e-5, "3.2e-05"),
            (0.0001, "0.0001"),
            (0.00012345, "0.00012345"),
            (1e16, "1e+16"),
            (1.2345678901234568e17, "1.2345678901234568e+17"),
            (9999999999999998.0, "9999999999999998.0"),
            (123456789012345.6, "123456789012345.6"),
            (1000000.0, "1000000.0"),
            (7.123456478118896, "7.123456478118896"),
            (0.0001406660647884666, "0.0001406660647884666"),
            (0.6913411921098548, "0.6913411921098548"),
            (f64::from(9.220_657_f32), "9.220657348632812"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (x, want) in cases {
            assert_eq!(py_float_repr(x), want, "{x:e}");
        }
    }

    /// The previous implementation (Rust's shortest digits, re-rounded half to even when
    /// that still round-trips), checked against Python on the cases above: the oracle
    /// for the Ryū-based one.
    fn slow_repr(x: f64) -> String {
        if !x.is_finite() {
            return py_float_repr(x);
        }
        let shortest = format!("{x:e}");
        let digits = shortest
            .split_once('e')
            .map_or(0, |(m, _)| m.chars().filter(char::is_ascii_digit).count());
        let even = format!("{x:.prec$e}", prec = digits.saturating_sub(1));
        let sci = if even.parse::<f64>() == Ok(x) {
            even
        } else {
            shortest
        };
        let (mantissa, exp) = sci.split_once('e').unwrap();
        let exp: i32 = exp.parse().unwrap();
        let (neg, mantissa) = match mantissa.strip_prefix('-') {
            Some(m) => (true, m),
            None => (false, mantissa),
        };
        let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
        let mut out = String::new();
        if neg {
            out.push('-');
        }
        if (-4..16).contains(&exp) {
            if exp < 0 {
                out.push_str("0.");
                out.push_str(&"0".repeat((-exp - 1) as usize));
                out.push_str(&digits);
            } else {
                let int_len = exp as usize + 1;
                if digits.len() <= int_len {
                    out.push_str(&digits);
                    out.push_str(&"0".repeat(int_len - digits.len()));
                    out.push_str(".0");
                } else {
                    out.push_str(&digits[..int_len]);
                    out.push('.');
                    out.push_str(&digits[int_len..]);
                }
            }
        } else {
            out.push_str(&digits[..1]);
            if digits.len() > 1 {
                out.push('.');
                out.push_str(&digits[1..]);
            }
            out.push_str(&format!(
                "e{}{:02}",
                if exp < 0 { '-' } else { '+' },
                exp.abs()
            ));
        }
        out
    }

    /// Random doubles, widened f32 logits (whose exact decimal expansions are short, so
    /// rounding ties occur) and their sums and differences, as the outputs hold them.
    #[test]
    fn float_repr_equals_the_slow_oracle() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let bits = next();
            let candidates = [
                f64::from_bits(bits),
                f64::from(f32::from_bits(bits as u32)),
                f64::from(f32::from_bits(bits as u32))
                    + f64::from(f32::from_bits((bits >> 32) as u32)),
                f64::from((bits % 2_000_000) as f32 / 1000.0 - 1000.0),
                (bits % 1_000_000) as f64 / 1e6,
            ];
            for x in candidates {
                assert_eq!(py_float_repr(x), slow_repr(x), "{x:e} ({:#x})", x.to_bits());
            }
        }
        for e in -330..330 {
            for m in [1.0, 1.5, 9.999_999_999_999_99, 5.0, 2.5] {
                let x: f64 = format!("{m}e{e}").parse().unwrap();
                assert_eq!(py_float_repr(x), slow_repr(x), "{x:e}");
                assert_eq!(py_float_repr(-x), slow_repr(-x), "{x:e}");
            }
        }
    }

    #[test]
    fn strings_are_ascii_escaped() {
        let mut s = String::new();
        push_str(&mut s, "a\"b\\c\n\t\u{7f}é😀\u{1}");
        assert_eq!(s, r#""a\"b\\c\n\t\u007f\u00e9\ud83d\ude00\u0001""#);
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
        // Several megabytes: written in place from the aligned text several times.
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
        // Every chunk went out from the text's own buffer, none through the file's.
        assert_eq!(stream.file.as_ref().unwrap().gathered(), 0);
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
        let stale = dir.path().join(".nbest_predictions.json.stream1");
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

    #[test]
    fn atomic_write_replaces_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        std::fs::write(&p, "old").unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
