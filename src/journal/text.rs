//! Records of a run against a model that takes text: what the model said about one
//! question, whole (its windows, or its answer), so that a resumed run decodes it again
//! without asking. Decoding it again gives the same bytes: it reads nothing else.
//!
//! After the record's `u64 unique_id` (the question's index in the run's data) and
//! `u32 n` (the body's length in bytes) comes `u32 k`, the kind, then the body:
//! - [`WINDOWS`]: `u32` windows, `u32` positions, then windows × positions f32 start
//!   logits, as many end logits, and windows × positions × 2 i64 offsets;
//! - [`ANSWER`]: `u8` of which parts follow (bit 0 score, 1 no-answer, 2 start, 3 end),
//!   f32 score, f32 no-answer, i64 start, i64 end (0 when absent), then the answer's
//!   UTF-8 bytes.

use crate::backend::text::{ServerWindows, TextAnswer, TextReply};

/// The kind of a record of a question's windows.
pub(super) const WINDOWS: u32 = u32::MAX - 1;
/// The kind of a record of a question's answer.
pub(super) const ANSWER: u32 = u32::MAX - 2;

/// Appends `record`'s kind and body to `out`.
pub(super) fn encode(record: &TextReply, out: &mut Vec<u8>) {
    let at = out.len();
    out.extend_from_slice(&[0; 8]); // n and k, filled in below
    let kind = match record {
        TextReply::Windows(w) => {
            out.extend_from_slice(&(w.windows as u32).to_le_bytes());
            out.extend_from_slice(&(w.seq as u32).to_le_bytes());
            for v in w.start.iter().chain(&w.end) {
                out.extend_from_slice(&v.to_le_bytes());
            }
            for o in w.offsets.iter().flatten() {
                out.extend_from_slice(&o.to_le_bytes());
            }
            WINDOWS
        }
        TextReply::Answer(a) => {
            let bits = u8::from(a.score.is_some())
                | u8::from(a.no_answer.is_some()) << 1
                | u8::from(a.start.is_some()) << 2
                | u8::from(a.end.is_some()) << 3;
            out.push(bits);
            out.extend_from_slice(&a.score.unwrap_or(0.0).to_le_bytes());
            out.extend_from_slice(&a.no_answer.unwrap_or(0.0).to_le_bytes());
            out.extend_from_slice(&a.start.unwrap_or(0).to_le_bytes());
            out.extend_from_slice(&a.end.unwrap_or(0).to_le_bytes());
            out.extend_from_slice(a.text.as_bytes());
            ANSWER
        }
    };
    let n = (out.len() - at - 8) as u32;
    out[at..at + 4].copy_from_slice(&n.to_le_bytes());
    out[at + 4..at + 8].copy_from_slice(&kind.to_le_bytes());
}

/// The record of kind `kind` in `body`, or `None` when it is not one.
pub(super) fn decode(kind: u32, body: &[u8]) -> Option<TextReply> {
    let u32_at = |i: usize| Some(u32::from_le_bytes(body.get(i..i + 4)?.try_into().ok()?));
    let f32_at = |i: usize| Some(f32::from_le_bytes(body.get(i..i + 4)?.try_into().ok()?));
    let i64_at = |i: usize| Some(i64::from_le_bytes(body.get(i..i + 8)?.try_into().ok()?));
    match kind {
        WINDOWS => {
            let (windows, seq) = (u32_at(0)? as usize, u32_at(4)? as usize);
            let n = windows.checked_mul(seq)?;
            if body.len() != 8 + n.checked_mul(8 + 16)? {
                return None;
            }
            let floats = |from: usize| {
                (0..n)
                    .map(|i| f32_at(from + 4 * i))
                    .collect::<Option<Vec<_>>>()
            };
            let offsets_at = 8 + 8 * n;
            Some(TextReply::Windows(ServerWindows {
                windows,
                seq,
                start: floats(8)?,
                end: floats(8 + 4 * n)?,
                offsets: (0..n)
                    .map(|i| {
                        Some([
                            i64_at(offsets_at + 16 * i)?,
                            i64_at(offsets_at + 16 * i + 8)?,
                        ])
                    })
                    .collect::<Option<Vec<_>>>()?,
            }))
        }
        ANSWER => {
            let bits = *body.first()?;
            let has = |b: u8| bits & (1 << b) != 0;
            Some(TextReply::Answer(TextAnswer {
                score: has(0).then(|| f32_at(1)).flatten(),
                no_answer: has(1).then(|| f32_at(5)).flatten(),
                start: has(2).then(|| i64_at(9)).flatten(),
                end: has(3).then(|| i64_at(17)).flatten(),
                text: String::from_utf8(body.get(25..)?.to_vec()).ok()?,
            }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(r: &TextReply) -> TextReply {
        let mut out = Vec::new();
        encode(r, &mut out);
        let n = u32::from_le_bytes(out[..4].try_into().unwrap()) as usize;
        let kind = u32::from_le_bytes(out[4..8].try_into().unwrap());
        assert_eq!(out.len(), 8 + n);
        decode(kind, &out[8..]).unwrap()
    }

    #[test]
    fn records_come_back_as_written() {
        let w = TextReply::Windows(ServerWindows {
            windows: 2,
            seq: 3,
            start: vec![0.5, -1.0, f32::MIN, 2.0, 3.0, f32::INFINITY],
            end: vec![1.0; 6],
            offsets: vec![[-1, -1], [0, 3], [4, 1 << 40], [-1, -1], [5, 6], [7, 8]],
        });
        assert_eq!(roundtrip(&w), w);
        let a = TextReply::Answer(TextAnswer {
            text: "Miriam Holt ✓".into(),
            score: Some(1.5),
            no_answer: None,
            start: Some(64),
            end: Some(75),
        });
        assert_eq!(roundtrip(&a), a);
        let bare = TextReply::Answer(TextAnswer {
            text: String::new(),
            score: None,
            no_answer: Some(-2.0),
            start: None,
            end: None,
        });
        assert_eq!(roundtrip(&bare), bare);
        // A body of the wrong length, or not UTF-8, is not a record.
        assert!(decode(WINDOWS, &[2, 0, 0, 0, 3, 0, 0, 0, 1]).is_none());
        let mut bad = Vec::new();
        encode(&a, &mut bad);
        let last = bad.len() - 1;
        bad[last] = 0xff;
        assert!(decode(ANSWER, &bad[8..]).is_none());
    }
}
