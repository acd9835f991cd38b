//! SHA-256 (FIPS 180-4), for fingerprinting input files in the eval journal and the
//! shard records (`journal`, the `merge` command). The `sha2` crate uses the CPU's SHA
//! instructions where it has them: the data file is hashed on every `eval`, so this is
//! on the client's CPU budget.

use sha2::Digest as _;

use crate::error::{Error, Result};

/// An incremental SHA-256.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sha256(sha2::Sha256);

impl Sha256 {
    /// Adds bytes.
    pub(crate) fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The digest as lower-case hex.
    pub(crate) fn hex(self) -> String {
        self.0
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// SHA-256 of bytes, hex.
pub(crate) fn of_bytes(data: &[u8]) -> String {
    let mut h = Sha256::default();
    h.update(data);
    h.hex()
}

/// SHA-256 of a file's contents, hex (read in chunks).
pub fn of_file(path: &std::path::Path) -> Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut h = Sha256::default();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(h.hex())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests_and_any_split_gives_the_same() {
        assert_eq!(
            of_bytes(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            of_bytes(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            of_bytes(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let whole = of_bytes(&data);
        // python3 -c "import hashlib; print(hashlib.sha256(bytes((i*7+3)%256 for i in range(1000))).hexdigest())"
        assert_eq!(
            whole,
            "1e9bc38cbf860b9ec31918b065f9b52476c549a782e0e7990bed8ce3868d2371"
        );
        for split in [1, 55, 56, 63, 64, 65, 500] {
            let mut h = Sha256::default();
            for chunk in data.chunks(split) {
                h.update(chunk);
            }
            assert_eq!(h.hex(), whole, "chunks of {split}");
        }
    }
}
