//! JSON as Python's `json.dumps(obj, indent=4)` writes it (§6.11, §7): a `serde_json`
//! [`Formatter`] for the reference's output files.
//!
//! - Layout: four spaces per level, `", "`-free separators (`,` at line ends, `": "`
//!   after keys), `[]` and `{}` for empty containers.
//! - Strings with `ensure_ascii`: `\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`, and `\uXXXX`
//!   (lower-case hex, surrogate pairs for astral characters) for every other character
//!   outside U+0020–U+007E.
//! - Floats as `repr(float)` ([`py_float_repr`]). `serde_json` turns a NaN or an infinity
//!   into `null` before a formatter sees it, so floats that may not be finite are
//!   serialized through `py_float`, which hands their Python text (`NaN`, `Infinity`,
//!   `-Infinity`) over as a byte array; this formatter writes byte arrays as raw text.

use std::io::{self, Write};

use serde::{Serialize, Serializer};
use serde_json::ser::{CharEscape, Formatter};

/// The formatter of Python's `json.dumps(obj, indent=4)` (module header).
#[derive(Debug, Default, Clone)]
pub(crate) struct PyFormatter {
    depth: usize,
    has_value: bool,
}

impl PyFormatter {
    /// A formatter for a value nested `depth` levels deep (its lines are indented as
    /// they are there): for values written one at a time into a larger document.
    pub(crate) fn at_depth(depth: usize) -> Self {
        PyFormatter {
            depth,
            has_value: false,
        }
    }
}

fn newline<W: ?Sized + Write>(w: &mut W, depth: usize) -> io::Result<()> {
    /// A newline and up to four levels of indentation (the n-best file goes three deep).
    const INDENTS: &[u8] = b"\n                ";
    match INDENTS.get(..1 + 4 * depth) {
        Some(text) => w.write_all(text),
        None => {
            w.write_all(b"\n")?;
            (0..depth).try_for_each(|_| w.write_all(b"    "))
        }
    }
}

impl Formatter for PyFormatter {
    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        write_float(w, f64::from(value))
    }

    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        write_float(w, value)
    }

    /// Raw text: how [`py_float`] passes on the Python text of a non-finite float.
    fn write_byte_array<W: ?Sized + Write>(&mut self, w: &mut W, value: &[u8]) -> io::Result<()> {
        w.write_all(value)
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        // `"`, `\` and controls below U+0020 come as char escapes; the rest is here.
        // Most fragments are printable ASCII, written as they are.
        if fragment.is_ascii() && !fragment.as_bytes().contains(&0x7f) {
            return w.write_all(fragment.as_bytes());
        }
        let mut rest = fragment;
        while let Some(at) = rest.bytes().position(|b| !(b' '..=b'~').contains(&b)) {
            w.write_all(&rest.as_bytes()[..at])?;
            let c = rest[at..].chars().next().expect("a character starts here");
            for unit in c.encode_utf16(&mut [0; 2]) {
                write!(w, "\\u{unit:04x}")?;
            }
            rest = &rest[at + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }

    fn write_char_escape<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        let text: &[u8] = match escape {
            CharEscape::Quote => b"\\\"",
            CharEscape::ReverseSolidus => b"\\\\",
            CharEscape::Solidus => b"/",
            CharEscape::Backspace => b"\\b",
            CharEscape::FormFeed => b"\\f",
            CharEscape::LineFeed => b"\\n",
            CharEscape::CarriageReturn => b"\\r",
            CharEscape::Tab => b"\\t",
            CharEscape::AsciiControl(b) => return write!(w, "\\u{b:04x}"),
        };
        w.write_all(text)
    }

    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            newline(w, self.depth)?;
        }
        w.write_all(b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        newline(w, self.depth)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            newline(w, self.depth)?;
        }
        w.write_all(b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        newline(w, self.depth)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// Writes `value` into `w` as Python's `json.dumps(value, indent=4)`, nested `depth`
/// levels deep (0 for a whole document; no trailing newline).
pub(crate) fn write_value<W: Write, T: Serialize + ?Sized>(
    w: &mut W,
    value: &T,
    depth: usize,
) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(w, PyFormatter::at_depth(depth));
    value.serialize(&mut ser).map_err(io::Error::from)
}

/// `json.dumps(value, indent=4) + "\n"`.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into memory cannot fail, and the values written here always serialize.
    let _ = write_value(&mut out, value, 0);
    out.push(b'\n');
    out
}

/// Serializes an `f64` field that may be NaN or infinite for [`PyFormatter`] (module
/// header); use with `#[serde(serialize_with = "py_float")]`.
pub(crate) fn py_float<S: Serializer>(x: &f64, s: S) -> std::result::Result<S::Ok, S::Error> {
    match non_finite_text(*x) {
        Some(text) => s.serialize_bytes(text.as_bytes()),
        None => s.serialize_f64(*x),
    }
}

/// An `f64` that may be NaN or infinite, serialized as [`py_float`] does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PyFloat(pub f64);

impl Serialize for PyFloat {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        py_float(&self.0, s)
    }
}

/// `json.dumps`'s text for a float that is not finite.
fn non_finite_text(x: f64) -> Option<&'static str> {
    if x.is_nan() {
        Some("NaN")
    } else if x.is_infinite() {
        Some(if x > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        None
    }
}

/// Python's `repr(float)`: the shortest round-trip digits; plain notation when the
/// decimal exponent is in −4..16 (with `.0` for integral values), otherwise
/// `d.ddde±XX`; `NaN`, `Infinity`, `-Infinity` as `json.dumps` writes them.
pub fn py_float_repr(x: f64) -> String {
    let mut out = Vec::with_capacity(24);
    let _ = write_float(&mut out, x);
    String::from_utf8(out).expect("ASCII")
}

/// [`py_float_repr`] into `w`.
///
/// The digits come from Ryū: the shortest digit string that round-trips and, among
/// those, the closest to `x`, an exact tie rounded half to even, which is what Python's
/// `dtoa` mode 0 answers (Rust's own `{:e}` rounds such ties up: 9.2206573486328125
/// gives …813 there, …812 in Python). Only the layout is Python's own.
pub(crate) fn write_float<W: ?Sized + Write>(w: &mut W, x: f64) -> io::Result<()> {
    if let Some(text) = non_finite_text(x) {
        return w.write_all(text.as_bytes());
    }
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(x);
    // Ryū lays out a decimal exponent of −5..=15 without one and Python −4..=15, in the
    // same way ("0.00123", "12.5", "300.0"): from 1e-4 up, Ryū's text is Python's.
    if x == 0.0 || (1e-4..1e16).contains(&x.abs()) {
        return w.write_all(text.as_bytes());
    }
    // Python writes `d.ddde±XX`; Ryū `d.ddde±X`, or `0.0000ddd` from 1e-5 to 1e-4.
    let (sign, text) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text),
    };
    let (digits, exp) = match text.split_once('e') {
        Some((mantissa, exp)) => (mantissa.replace('.', ""), exp.parse::<i32>().unwrap_or(0)),
        None => {
            let digits = text.trim_start_matches(['0', '.']);
            // Zeros after the point, plus one.
            let exp = -((text.len() - 2 - digits.len()) as i32) - 1;
            (digits.to_string(), exp)
        }
    };
    let (first, rest) = digits.split_at(1);
    let point = if rest.is_empty() { "" } else { "." };
    let exp_sign = if exp < 0 { '-' } else { '+' };
    write!(
        w,
        "{sign}{first}{point}{rest}e{exp_sign}{:02}",
        exp.unsigned_abs()
    )
}

/// A string as the formatter writes it (`"…"`, ASCII escapes), with printable ASCII
/// written as it is without serde's escaping pass.
pub(crate) fn write_str(w: &mut Vec<u8>, s: &str) -> io::Result<()> {
    let plain = s
        .bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\');
    if plain {
        w.push(b'"');
        w.extend_from_slice(s.as_bytes());
        w.push(b'"');
        Ok(())
    } else {
        write_value(w, s, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        let cases: [(f64, &str); 25] = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (-3.0, "-3.0"),
            (0.5, "0.5"),
            (1e-5, "1e-05"),
            (3.2e-5, "3.2e-05"),
            (-3.2e-5, "-3.2e-05"),
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
            (-1e-7, "-1e-07"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (x, want) in cases {
            assert_eq!(py_float_repr(x), want, "{x:e}");
        }
    }

    /// Rust's shortest digits, re-rounded half to even when that still round-trips,
    /// laid out as Python does (checked against Python on the cases above): the oracle.
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
    /// rounding ties occur) and their sums and differences, as the outputs hold them,
    /// and every decimal exponent.
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
            for m in [1.0, 1.5, 9.999_999_999_999_99, 5.0, 2.5, 3.25] {
                let x: f64 = format!("{m}e{e}").parse().unwrap();
                assert_eq!(py_float_repr(x), slow_repr(x), "{x:e}");
                assert_eq!(py_float_repr(-x), slow_repr(-x), "{x:e}");
            }
        }
    }

    proptest::proptest! {
        /// Any finite double, and values around the 1e-5, 1e-4, 1e15 and 1e16 edges.
        #[test]
        fn float_repr_equals_the_oracle_anywhere(bits in proptest::num::u64::ANY, k in 0u32..40) {
            let edges: [f64; 4] = [1e-4, 1e16, 1e-5, 1e15];
            let near = f64::from_bits(
                edges[(k % 4) as usize].to_bits().wrapping_add(u64::from(k / 4)).wrapping_sub(5),
            );
            for x in [f64::from_bits(bits), near, -near] {
                proptest::prop_assert_eq!(py_float_repr(x), slow_repr(x), "{:e}", x);
            }
        }
    }

    #[test]
    fn strings_are_ascii_escaped() {
        let s = String::from_utf8(to_vec("a\"b\\c\n\t\r\u{8}\u{c}/\u{7f}é😀\u{1}\u{1f}")).unwrap();
        assert_eq!(
            s,
            "\"a\\\"b\\\\c\\n\\t\\r\\b\\f/\\u007f\\u00e9\\ud83d\\ude00\\u0001\\u001f\"\n"
        );
    }

    #[derive(Serialize)]
    struct Entry {
        text: &'static str,
        #[serde(serialize_with = "py_float")]
        x: f64,
        list: Vec<i64>,
        empty: Vec<i64>,
        nested: std::collections::BTreeMap<&'static str, ()>,
    }

    #[test]
    fn layout_is_python_indent_4() {
        let e = Entry {
            text: "x",
            x: f64::NEG_INFINITY,
            list: vec![1, -2],
            empty: vec![],
            nested: Default::default(),
        };
        assert_eq!(
            String::from_utf8(to_vec(&[&e])).unwrap(),
            "[\n    {\n        \"text\": \"x\",\n        \"x\": -Infinity,\n        \
             \"list\": [\n            1,\n            -2\n        ],\n        \
             \"empty\": [],\n        \"nested\": {}\n    }\n]\n"
        );
        let mut out = Vec::new();
        write_value(&mut out, &[f64::NAN, 0.5], 2).unwrap();
        assert_eq!(out, b"[\n            null,\n            0.5\n        ]");
    }
}
