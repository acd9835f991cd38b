//! The `--save-logits` file: every feature's raw logits, so answers can be decoded
//! again (another threshold, the other post-processing mode) without the server.
//!
//! Format (little-endian): the 8 bytes `BQLOGIT1`, then per feature in ascending
//! `unique_id`: `u64 unique_id`, `u32 n`, `n` × f32 start logits, `n` × f32 end logits,
//! where `n` is the sequence length the model saw (padded positions included: the
//! reference ranks the top start/end indexes over the whole padded sequence, §6.2).
//! The values are the exact f32s the server returned (FP16 widened exactly).

use std::io::{BufReader, Read, Write};
use std::path::Path;

use crate::error::{Error, Location, Result};
use crate::types::Logits;

const MAGIC: &[u8; 8] = b"BQLOGIT1";

/// Serializes logits (in the given order).
pub fn write_to(mut out: impl Write, logits: &[Logits]) -> std::io::Result<()> {
    out.write_all(MAGIC)?;
    for l in logits {
        let n = l.start.len().min(l.end.len());
        out.write_all(&l.unique_id.to_le_bytes())?;
        out.write_all(&(n as u32).to_le_bytes())?;
        for v in &l.start[..n] {
            out.write_all(&v.to_le_bytes())?;
        }
        for v in &l.end[..n] {
            out.write_all(&v.to_le_bytes())?;
        }
    }
    out.flush()
}

/// Writes a logits file atomically (temporary file, then rename; not synced: the file
/// can be made again).
pub fn save(path: &Path, logits: &[Logits]) -> Result<()> {
    let mut file = crate::output_file::AtomicFile::create(path)?;
    write_to(&mut file, logits).map_err(|e| Error::io(path, e))?;
    file.commit_unsynced()
}

/// Reads a logits file written by [`save`].
pub fn load(path: &Path) -> Result<Vec<Logits>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    read_from(BufReader::new(file), path)
}

/// Parses the format from a reader; `path` names it in errors.
pub fn read_from(mut input: impl Read, path: &Path) -> Result<Vec<Logits>> {
    let bad = |what: String| Error::input(Location::file(path), what);
    let mut magic = [0u8; 8];
    input
        .read_exact(&mut magic)
        .map_err(|_| bad("not a bertqa logits file (too short)".into()))?;
    if &magic != MAGIC {
        return Err(bad("not a bertqa logits file (bad magic)".into()));
    }
    let mut out = Vec::new();
    let mut head = [0u8; 12];
    loop {
        match read_full(&mut input, &mut head).map_err(|e| Error::io(path, e))? {
            0 => break,
            12 => {}
            _ => return Err(bad(format!("truncated after {} features", out.len()))),
        }
        let unique_id = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
        let n = u32::from_le_bytes(head[8..].try_into().expect("4 bytes")) as usize;
        if n > 1 << 20 {
            return Err(bad(format!("feature {unique_id}: implausible length {n}")));
        }
        let mut buf = vec![0u8; n * 8];
        if read_full(&mut input, &mut buf).map_err(|e| Error::io(path, e))? != buf.len() {
            return Err(bad(format!("truncated in feature {unique_id}")));
        }
        let floats = |b: &[u8]| -> Vec<f32> {
            b.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        };
        out.push(Logits {
            unique_id,
            start: floats(&buf[..n * 4]),
            end: floats(&buf[n * 4..]),
        });
    }
    Ok(out)
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_exact_and_truncation_is_an_error() {
        let logits = vec![
            Logits {
                unique_id: 1_000_000_000,
                start: vec![1.5, -0.0, f32::MIN_POSITIVE, 3.25e-7],
                end: vec![f32::MAX, 2.0, -7.125, 0.1],
            },
            Logits {
                unique_id: 1_000_000_001,
                start: vec![],
                end: vec![],
            },
        ];
        let mut bytes = Vec::new();
        write_to(&mut bytes, &logits).unwrap();
        let back = read_from(&bytes[..], Path::new("x.bin")).unwrap();
        assert_eq!(back.len(), 2);
        for (a, b) in logits.iter().zip(&back) {
            assert_eq!(a.unique_id, b.unique_id);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a.start), bits(&b.start));
            assert_eq!(bits(&a.end), bits(&b.end));
        }
        let e = read_from(&bytes[..bytes.len() - 3], Path::new("x.bin")).unwrap_err();
        assert!(e.to_string().starts_with("x.bin: truncated"), "{e}");
        let e = read_from(&b"NOTLOGIT"[..], Path::new("x.bin")).unwrap_err();
        assert!(e.to_string().contains("bad magic"), "{e}");
    }
}
