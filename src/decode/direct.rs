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
//! bytes gather in a [`BLOCK`]-aligned buffer that goes out [`CAPACITY`] bytes at a time,
//! and [`DirectFile::finish`] writes the whole blocks of what is left directly and the
//! last partial block through the page cache (the flag is cleared for it). Any sign
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
    /// `CAPACITY + BLOCK` bytes: the buffer is the [`BLOCK`]-aligned `CAPACITY` bytes
    /// from `start`.
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
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => (open(path, false)?, false),
            Err(e) => return Err(e),
        };
        let memory = vec![0u8; CAPACITY + BLOCK];
        let start = memory.as_ptr().align_offset(BLOCK);
        Ok(DirectFile {
            file,
            memory,
            start,
            len: 0,
            direct,
        })
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
        if self.direct {
            set_direct(&self.file, false)?;
            self.direct = false;
        }
        Ok(())
    }

    /// Writes buffer bytes `from..to` at the file's position.
    fn write_out(&mut self, mut from: usize, to: usize) -> io::Result<()> {
        while from < to {
            let chunk = &self.memory[self.start + from..self.start + to];
            match self.file.write(chunk) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    from += n;
                    // A short direct write leaves an unaligned rest.
                    if n % BLOCK != 0 {
                        self.buffered()?;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if self.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                    self.buffered()?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Write for DirectFile {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
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
