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

use super::Prediction;
use crate::error::{Error, Result};

/// `predictions.json`: `{qid: answer}`.
pub fn render_predictions(preds: &[Prediction]) -> Vec<u8> {
    render_object(preds, |p, out, _| {
        push_str(out, &p.answer);
        Some(())
    })
}

/// `nbest_predictions.json`: `{qid: [{text, probability, start_logit, end_logit}, …]}`.
pub fn render_nbest(preds: &[Prediction]) -> Vec<u8> {
    render_object(preds, |p, out, indent| {
        if p.nbest.is_empty() {
            out.push_str("[]");
            return Some(());
        }
        out.push('[');
        for (i, e) in p.nbest.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            newline(out, indent + 1);
            out.push('{');
            let fields = [
                ("probability", e.probability),
                ("start_logit", e.start_logit),
                ("end_logit", e.end_logit),
            ];
            newline(out, indent + 2);
            out.push_str("\"text\": ");
            push_str(out, &e.text);
            for (key, value) in fields {
                out.push(',');
                newline(out, indent + 2);
                push_str(out, key);
                out.push_str(": ");
                out.push_str(&py_float_repr(value));
            }
            newline(out, indent + 1);
            out.push('}');
        }
        newline(out, indent);
        out.push(']');
        Some(())
    })
}

/// `null_odds.json` (v2): `{qid: diff}` for the questions that have null odds.
pub fn render_null_odds(preds: &[Prediction]) -> Vec<u8> {
    render_object(preds, |p, out, _| {
        let odds = p.null_odds?;
        out.push_str(&py_float_repr(odds));
        Some(())
    })
}

/// Writes `predictions.json`, `nbest_predictions.json` and, for v2, `null_odds.json`
/// into `dir` (created if missing), each atomically.
pub fn write_outputs(dir: &Path, preds: &[Prediction], version_2: bool) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    write_atomic(&dir.join("predictions.json"), &render_predictions(preds))?;
    write_atomic(&dir.join("nbest_predictions.json"), &render_nbest(preds))?;
    if version_2 {
        write_atomic(&dir.join("null_odds.json"), &render_null_odds(preds))?;
    }
    Ok(())
}

/// Writes `bytes` to a temporary file next to `path`, syncs it, and renames it over
/// `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".to_string());
    let tmp = path.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
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
/// question out.
fn render_object(
    preds: &[Prediction],
    value: impl Fn(&Prediction, &mut String, usize) -> Option<()>,
) -> Vec<u8> {
    // Python dict: first position, last value.
    let mut order: Vec<(&str, String)> = Vec::with_capacity(preds.len());
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(preds.len());
    for p in preds {
        let mut v = String::new();
        if value(p, &mut v, 1).is_none() {
            continue;
        }
        match index.get(p.qas_id.as_str()) {
            Some(&i) => order[i].1 = v,
            None => {
                index.insert(&p.qas_id, order.len());
                order.push((&p.qas_id, v));
            }
        }
    }
    let mut out = String::with_capacity(order.iter().map(|(k, v)| k.len() + v.len() + 12).sum());
    if order.is_empty() {
        out.push_str("{}");
    } else {
        out.push('{');
        for (i, (k, v)) in order.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            newline(&mut out, 1);
            push_str(&mut out, k);
            out.push_str(": ");
            out.push_str(v);
        }
        newline(&mut out, 0);
        out.push('}');
    }
    out.push('\n');
    out.into_bytes()
}

fn newline(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str("    ");
    }
}

/// A JSON string as Python's `json.dumps(ensure_ascii=True)` writes it: `\"`, `\\`,
/// `\n`, `\r`, `\t`, `\b`, `\f`, and `\uXXXX` (lower-case hex, surrogate pairs for
/// astral characters) for every other character outside U+0020–U+007E.
pub(crate) fn push_str(out: &mut String, s: &str) {
    use std::fmt::Write as _;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
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

/// Python's `repr(float)`: the shortest round-trip digits; plain notation when the
/// decimal exponent is in −4..16 (with `.0` for integral values), otherwise
/// `d.ddde±XX`; `NaN`, `Infinity`, `-Infinity` as `json.dumps` writes them.
pub fn py_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    // Rust's `{:e}` gives the shortest round-trip digits ("-1.2345e-5", "1e16", "0e0"),
    // but when two shortest candidates are equally close it rounds the tie up, where
    // Python's dtoa rounds half to even (9.2206573486328125 → …812). The exact,
    // half-even rounding to the same number of digits is Python's answer whenever it
    // still round-trips.
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
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut out = String::with_capacity(digits.len() + 8);
    if neg {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
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
        let _ = std::fmt::Write::write_fmt(&mut out, format_args!("{:02}", exp.abs()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{NbestEntry, Prediction};

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
