//! Triton's BYTES tensors on the wire: each element is a 4-byte little-endian length
//! followed by that many bytes, elements one after another, in row-major order. The same
//! layout travels in gRPC's raw contents, in HTTP's binary data and in shared memory.
//! Text elements (questions, contexts, answers) are UTF-8, checked when read.

use crate::error::{Error, Result};

/// The wire form of `elements`.
pub(crate) fn encode<'a>(elements: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_to(&mut out, elements);
    out
}

/// Appends the wire form of `elements` to `out` (a shared memory slot with room for
/// [`encoded_len`] bytes, or a growing buffer).
pub(crate) fn encode_to<'a, B: bytes::BufMut>(
    out: &mut B,
    elements: impl IntoIterator<Item = &'a [u8]>,
) {
    for e in elements {
        let len = u32::try_from(e.len()).expect("a BYTES element is under 4 GiB");
        out.put_u32_le(len);
        out.put_slice(e);
    }
}

/// Bytes of the wire form of `elements` (what [`encode`] makes).
pub(crate) fn encoded_len<'a>(elements: impl IntoIterator<Item = &'a [u8]>) -> usize {
    elements.into_iter().map(|e| 4 + e.len()).sum()
}

/// The elements of a BYTES tensor's raw bytes; `Err` says where the layout breaks (in
/// words for a [`Error::TensorMismatch`]).
pub(crate) fn decode(raw: &[u8]) -> std::result::Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < raw.len() {
        let Some(prefix) = raw.get(at..at + 4) else {
            return Err(format!(
                "element {} has a length prefix of {} bytes, not 4 (at byte {at})",
                out.len(),
                raw.len() - at
            ));
        };
        let len = u32::from_le_bytes(prefix.try_into().expect("4 bytes")) as usize;
        let start = at + 4;
        let Some(element) = raw.get(start..start + len) else {
            return Err(format!(
                "element {} claims {len} bytes but {} remain (at byte {at})",
                out.len(),
                raw.len() - start
            ));
        };
        out.push(element);
        at = start + len;
    }
    Ok(out)
}

/// The elements of `tensor` (of `model`) as text: exactly `count` UTF-8 strings.
pub(crate) fn decode_text<'a>(
    raw: &'a [u8],
    count: usize,
    model: &str,
    tensor: &str,
) -> Result<Vec<&'a str>> {
    let mismatch = |expected: String, actual: String| Error::TensorMismatch {
        model: model.to_string(),
        tensor: tensor.to_string(),
        expected,
        actual,
    };
    let elements = decode(raw).map_err(|why| mismatch("BYTES elements".into(), why))?;
    if elements.len() != count {
        return Err(mismatch(
            format!("{count} element{}", if count == 1 { "" } else { "s" }),
            format!("{}", elements.len()),
        ));
    }
    elements
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            std::str::from_utf8(e).map_err(|u| {
                mismatch(
                    "UTF-8 text".into(),
                    format!("element {i}: invalid UTF-8 at byte {}", u.valid_up_to()),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn elements_are_length_prefixed_little_endian() {
        let raw = encode(["hé".as_bytes(), b"", b"abc"]);
        assert_eq!(
            raw,
            [3, 0, 0, 0, b'h', 0xc3, 0xa9, 0, 0, 0, 0, 3, 0, 0, 0, b'a', b'b', b'c']
        );
        assert_eq!(decode(&raw).unwrap(), vec!["hé".as_bytes(), b"", b"abc"]);
        assert_eq!(decode(&[]).unwrap(), Vec::<&[u8]>::new());
    }

    #[test]
    fn a_broken_layout_says_where() {
        assert_eq!(
            decode(&[1, 0, 0, 0, b'a', 1, 0]).unwrap_err(),
            "element 1 has a length prefix of 2 bytes, not 4 (at byte 5)"
        );
        let mut raw = encode([b"ab".as_slice()]);
        raw.extend_from_slice(&[9, 0, 0, 0, b'x']);
        assert_eq!(
            decode(&raw).unwrap_err(),
            "element 1 claims 9 bytes but 1 remain (at byte 6)"
        );
    }

    #[test]
    fn text_is_checked_for_its_count_and_utf8() {
        let raw = encode(["Miriam Holt".as_bytes()]);
        assert_eq!(
            decode_text(&raw, 1, "m", "answer").unwrap(),
            vec!["Miriam Holt"]
        );
        let e = decode_text(&raw, 2, "m", "answer").unwrap_err().to_string();
        assert_eq!(
            e,
            "model \"m\", tensor \"answer\": expected 2 elements, got 1"
        );
        let bad = encode([b"ok".as_slice(), &[b'a', 0xff, b'b']]);
        let e = decode_text(&bad, 2, "m", "answer").unwrap_err().to_string();
        assert_eq!(
            e,
            "model \"m\", tensor \"answer\": expected UTF-8 text, got element 1: invalid UTF-8 at byte 1"
        );
    }

    proptest! {
        #[test]
        fn encode_then_decode_gives_the_elements_back(
            elements in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..8)
        ) {
            let raw = encode(elements.iter().map(Vec::as_slice));
            let back: Vec<Vec<u8>> = decode(&raw).unwrap().into_iter().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(&back, &elements);
            // Written into a slice of exactly its length (a shared memory slot), the same.
            let len = encoded_len(elements.iter().map(Vec::as_slice));
            prop_assert_eq!(len, raw.len());
            let mut slot = vec![0xaa; len];
            let mut room = &mut slot[..];
            encode_to(&mut room, elements.iter().map(Vec::as_slice));
            prop_assert!(room.is_empty());
            prop_assert_eq!(slot, raw);
        }

        #[test]
        fn decode_never_panics(raw in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&raw);
        }
    }
}
