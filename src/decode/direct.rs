//! A large output file written around the page cache (`O_DIRECT`, Linux).
//!
//! `nbest_predictions.json` is tens of megabytes that this process writes once and never
//! reads. Written through the page cache, every 4 KiB page of it is a fresh page that is
//! allocated, charged, copied into and, by the `fsync` before the rename, written back
//! from this process; replacing an earlier run's file frees as many again. Written
//! directly, the device copies the bytes from one reused buffer: the system CPU of an
//! evaluation on SQuAD-dev-sized drops by about a fifth (`scripts/bench.sh`, user+sys).
//!
//! Direct writes must start at aligned offsets, from aligned memory, in whole blocks: the
//! bytes gather in a [`BLOCK`]-aligned buffer that goes out [`CAPACITY`] bytes at a time
//! (or, from a caller that renders into its own aligned text, go out from there:
//! [`DirectFile::write_in_place`]), and [`DirectFile::finish`] writes the whole blocks of
//! what is left directly and the last partial block through the page cache (the flag is
//! cleared for it). Any sign
//! that the file system will not take direct writes (the open or a write refused with
//! `EINVAL`, a short write) turns the flag off for good, and the rest is written as any
//! file is: the bytes in the file never depend on the path they took.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// Alignment of offsets, lengths and memory for direct writes: the largest logical
/// block size of common devices.
pub const BLOCK: usize = 4096;

/// Bytes gathered before a write (a multiple of [`BLOCK`]).
pub const CAPACITY: usize = 1 << 20;

/// A file being written, directly while the file system allows it (module header).
pub struct DirectFile {
    file: File,
    /// `CAPACITY + BLOCK` bytes once anything is gathered (empty before): the buffer is
    /// the [`BLOCK`]-aligned `CAPACITY` bytes from `start`.
    memory: Vec<u8>,
    start: usize,
    /// Bytes gathered in the buffer.
    len: usize,
    /// Whether the file is open with `O_DIRECT`.
    direct: bool,
}

impl std::fmt::Debug for DirectFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectFile")
            .field("direct", &self.direct)
            .field("gathered", &self.len)
            .finish()
    }
}

impl DirectFile {
    /// Creates (or truncates) `path`, for direct writes when the file system takes them.
    pub fn create(path: &Path) -> io::Result<DirectFile> {
        let (file, direct) = match open(path, true) {
            Ok(file) => (file, true),
            Err(e) if refused(&e) => (open(path, false)?, false),
            Err(e) => return Err(e),
        };
        Ok(DirectFile {
            file,
            memory: Vec::new(),
            start: 0,
            len: 0,
            direct,
        })
    }

    /// Writes the whole blocks at the start of `data` from where they lie, when `data`
    /// starts [`BLOCK`]-aligned and nothing is gathered: returns how many bytes went
    /// out, and the caller keeps the rest (less than a block). Otherwise `data` is
    /// gathered or written whole, as [`Write::write_all`] does, and its length returned.
    /// For a caller that renders into its own aligned buffer, saving the copy.
    pub fn write_in_place(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.len > 0 || (self.direct && data.as_ptr().align_offset(BLOCK) != 0) {
            self.write_all(data)?;
            return Ok(data.len());
        }
        let whole = if self.direct {
            data.len() / BLOCK * BLOCK
        } else {
            data.len()
        };
        put(&mut self.file, &mut self.direct, &data[..whole])?;
        Ok(whole)
    }

    /// Bytes gathered in its own buffer (not yet written).
    #[cfg(test)]
    pub fn gathered(&self) -> usize {
        self.len
    }

    /// Writes what is gathered and returns the file (not yet synced).
    pub fn finish(mut self) -> io::Result<File> {
        let whole = self.len / BLOCK * BLOCK;
        self.write_out(0, whole)?;
        if self.len > whole {
            // The last partial block cannot go out directly.
            self.buffered()?;
            self.write_out(whole, self.len)?;
        }
        self.len = 0;
        Ok(self.file)
    }

    /// Turns direct writes off for the rest of the file.
    fn buffered(&mut self) -> io::Result<()> {
        buffered(&self.file, &mut self.direct)
    }

    /// Writes buffer bytes `from..to` at the file's position.
    fn write_out(&mut self, from: usize, to: usize) -> io::Result<()> {
        let bytes = &self.memory[self.start + from..self.start + to];
        put(&mut self.file, &mut self.direct, bytes)
    }
}

/// Whether `e` is a file system's way of saying it does not take direct writes.
fn refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL) | Some(libc::EOPNOTSUPP)
    )
}

/// Turns direct writes of `file` off for good.
fn buffered(file: &File, direct: &mut bool) -> io::Result<()> {
    if *direct {
        set_direct(file, false)?;
        *direct = false;
    }
    Ok(())
}

/// Writes `bytes` at `file`'s position: directly while `direct` holds (the bytes then
/// start aligned and are whole blocks), through the page cache after any sign that
/// direct writes are not taken.
fn put(file: &mut File, direct: &mut bool, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match file.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                bytes = &bytes[n..];
                // A short direct write leaves an unaligned rest.
                if n % BLOCK != 0 {
                    buffered(file, direct)?;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if *direct && refused(&e) => {
                buffered(file, direct)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Write for DirectFile {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.memory.is_empty() {
            self.memory = vec![0u8; CAPACITY + BLOCK];
            self.start = self.memory.as_ptr().align_offset(BLOCK);
        }
        let n = data.len().min(CAPACITY - self.len);
        let at = self.start + self.len;
        self.memory[at..at + n].copy_from_slice(&data[..n]);
        self.len += n;
        if self.len == CAPACITY {
            self.write_out(0, CAPACITY)?;
            self.len = 0;
        }
        Ok(n)
    }

    /// Only whole buffers go out before [`DirectFile::finish`]: nothing to do.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(target_os = "linux")]
fn open(path: &Path, direct: bool) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    if direct {
        options.custom_flags(libc::O_DIRECT);
    }
    options.open(path)
}

/// Elsewhere there is no direct flag to ask for: refused, so the file is written plainly.
#[cfg(not(target_os = "linux"))]
fn open(path: &Path, direct: bool) -> io::Result<File> {
    if direct {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    File::create(path)
}

#[cfg(target_os = "linux")]
fn set_direct(file: &File, on: bool) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: F_GETFL and F_SETFL only read and set the status flags of a descriptor
    // this file owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let flags = if on {
        flags | libc::O_DIRECT
    } else {
        flags & !libc::O_DIRECT
    };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn set_direct(_: &File, _: bool) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length around the block and buffer sizes, written in pieces of awkward
    /// sizes, reads back byte for byte; the file is written directly wherever the file
    /// system takes direct writes.
    #[test]
    fn bytes_read_back_whatever_the_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let bytes: Vec<u8> = (0..3 * CAPACITY + 3 * BLOCK)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        for len in [
            0,
            1,
            BLOCK - 1,
            BLOCK,
            BLOCK + 1,
            CAPACITY - 1,
            CAPACITY,
            CAPACITY + BLOCK + 17,
            3 * CAPACITY + 2 * BLOCK,
        ] {
            for piece in [1000usize, 65536, CAPACITY + 5] {
                let takes_direct = open(&path, true).is_ok();
                let mut f = DirectFile::create(&path).unwrap();
                assert_eq!(f.direct, takes_direct);
                for chunk in bytes[..len].chunks(piece) {
                    f.write_all(chunk).unwrap();
                }
                f.finish().unwrap().sync_all().unwrap();
                let back = std::fs::read(&path).unwrap();
                assert!(back == bytes[..len], "len {len} piece {piece}");
            }
        }
    }

    /// Text written in place from an aligned buffer (whole blocks, the rest kept by the
    /// caller), from an unaligned one (gathered), and after gathered bytes (gathered
    /// again) makes the same file.
    #[test]
    fn in_place_writes_take_whole_aligned_blocks_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let bytes: Vec<u8> = (0..5 * BLOCK + 77).map(|i| (i % 241) as u8).collect();
        // Room for the bytes from the first aligned address, wherever the vector lies.
        let mut memory = vec![0u8; bytes.len() + BLOCK];
        let at = memory.as_ptr().align_offset(BLOCK);
        memory[at..at + bytes.len()].copy_from_slice(&bytes);
        let aligned = &memory[at..at + bytes.len()];
        let takes_direct = open(&path, true).is_ok();
        let mut f = DirectFile::create(&path).unwrap();
        let sent = f.write_in_place(aligned).unwrap();
        if takes_direct {
            assert_eq!(sent, 5 * BLOCK);
            assert_eq!(f.len, 0, "nothing gathered");
        } else {
            assert_eq!(sent, bytes.len());
        }
        // The rest, then an unaligned slice: gathered.
        f.write_all(&bytes[sent..]).unwrap();
        let unaligned = &memory[at + 1..at + 1 + 2 * BLOCK];
        assert_eq!(f.write_in_place(unaligned).unwrap(), unaligned.len());
        // Something gathered: in place no more.
        assert_eq!(f.write_in_place(aligned).unwrap(), aligned.len());
        f.finish().unwrap();
        let want = [&bytes[..], unaligned, &bytes[..]].concat();
        assert!(std::fs::read(&path).unwrap() == want);
    }

    /// Turned off half way (as after a refused write), the file is the same.
    #[test]
    fn writes_carry_on_through_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let bytes: Vec<u8> = (0..2 * CAPACITY + 999).map(|i| (i % 253) as u8).collect();
        let mut f = DirectFile::create(&path).unwrap();
        f.write_all(&bytes[..CAPACITY + 10]).unwrap();
        f.buffered().unwrap();
        assert!(!f.direct);
        f.write_all(&bytes[CAPACITY + 10..]).unwrap();
        f.finish().unwrap();
        assert!(std::fs::read(&path).unwrap() == bytes);
    }
}
