//! Output files replaced atomically: the bytes go to a temporary file in the target's
//! directory (so the rename stays on one file system), which is synced and then renamed
//! over the target. A reader sees the old file or the whole new one, never half a file;
//! a run that fails or is interrupted before `AtomicFile::commit` leaves the target as
//! it was (the temporary file is removed when dropped).
//!
//! Temporary names are `.{name}.XXXXXX.tmp` next to `{name}`, so that those left by a
//! killed process can be found again (`remove_leftovers`).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::error::{Error, Result};

/// Bytes gathered before a write to the temporary file.
const BUFFER: usize = 1 << 16;

/// An output file being written under a temporary name (module header).
#[derive(Debug)]
pub(crate) struct AtomicFile {
    path: PathBuf,
    file: BufWriter<NamedTempFile>,
}

impl AtomicFile {
    /// Starts writing `path` (its directory must exist).
    pub(crate) fn create(path: &Path) -> Result<AtomicFile> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let file = tempfile::Builder::new()
            .prefix(&temp_prefix(path))
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(|e| Error::io(path, e))?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            file: BufWriter::with_capacity(BUFFER, file),
        })
    }

    /// The file's final path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes and syncs the temporary file, then renames it over the target.
    pub(crate) fn commit(self) -> Result<()> {
        self.put_in_place(true)
    }

    /// [`AtomicFile::commit`] without the sync: for a file that can be made again (the
    /// rename still makes it all or nothing for readers, short of a crash of the system).
    pub(crate) fn commit_unsynced(self) -> Result<()> {
        self.put_in_place(false)
    }

    fn put_in_place(self, sync: bool) -> Result<()> {
        let path = self.path;
        let file = self
            .file
            .into_inner()
            .map_err(|e| Error::io(&path, e.into_error()))?;
        if sync {
            file.as_file().sync_all().map_err(|e| Error::io(&path, e))?;
        }
        file.persist(&path).map_err(|e| Error::io(&path, e.error))?;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Writes `bytes` to `path` atomically (module header).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] with the contents written by `write` (buffered).
pub(crate) fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut AtomicFile) -> io::Result<()>,
) -> Result<()> {
    let mut file = AtomicFile::create(path)?;
    write(&mut file).map_err(|e| Error::io(path, e))?;
    file.commit()
}

/// Removes the temporary files of `path` that killed processes left behind. For a file
/// that only one process writes at a time (a run's own output directory).
pub(crate) fn remove_leftovers(path: &Path) {
    let (Some(dir), Some(_)) = (path.parent(), path.file_name()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = temp_prefix(path);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// `.{name}.`: the start of `path`'s temporary names.
fn temp_prefix(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".to_string());
    format!(".{name}.")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn atomic_write_replaces_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        std::fs::write(&p, "old").unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(names(dir.path()), ["out.json"]);
    }

    /// A file dropped before its commit leaves the target as it was and no temporary
    /// file; a failed write reports the target's path.
    #[test]
    fn uncommitted_files_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        std::fs::write(&p, "old").unwrap();
        let mut f = AtomicFile::create(&p).unwrap();
        f.write_all(b"half").unwrap();
        drop(f);
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(names(dir.path()), ["out.json"]);
        let err = write_atomic_with(&p, |_| Err(io::Error::other("disk full"))).unwrap_err();
        assert!(err.to_string().contains("out.json"), "{err}");
        assert_eq!(names(dir.path()), ["out.json"]);
    }

    #[test]
    fn leftovers_of_killed_runs_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        std::fs::write(dir.path().join(".out.json.a1b2c3.tmp"), "{").unwrap();
        std::fs::write(dir.path().join(".other.json.a1b2c3.tmp"), "{").unwrap();
        remove_leftovers(&p);
        assert_eq!(names(dir.path()), [".other.json.a1b2c3.tmp"]);
    }
}
