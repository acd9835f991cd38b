//! One run per output directory: `eval`, `merge` and `compare` hold an advisory lock on
//! theirs (`flock(2)` on `D/.bertqa.lock`, which holds the pid of the run) from before
//! they read anything until they end. A second run into the same directory fails at once
//! naming the first, before it touches anything; the kernel releases the lock when the
//! process ends however it ends, so a lock left by a killed run never blocks the next
//! one (`--resume` included).
//!
//! A directory this run created is removed again when the run ends with nothing in it
//! (a run that failed before producing anything: connection refused, unknown model); a
//! directory that existed before is left as it was.

use std::fs::File;
use std::io::{Read as _, Seek as _, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// The lock file's name inside the output directory.
pub(crate) const LOCK_FILE: &str = ".bertqa.lock";

/// An output directory this process holds until it is dropped.
#[derive(Debug)]
pub(crate) struct OutputDir {
    lock: PathBuf,
    /// Held (locked) while this value lives; closing it releases the lock.
    file: Option<File>,
    /// The directories this run created, the deepest first.
    created: Vec<PathBuf>,
}

impl OutputDir {
    /// Creates `dir` if needed and takes its lock, or fails with
    /// `another bertqa (pid N) is writing to D` when another process holds it.
    pub(crate) fn claim(dir: &Path) -> anyhow::Result<OutputDir> {
        let created = missing_ancestors(dir);
        std::fs::create_dir_all(dir).map_err(|e| bertqa::Error::io(dir, e))?;
        let mut held = OutputDir {
            lock: dir.join(LOCK_FILE),
            file: None,
            created,
        };
        // A run ending unlinks its lock file while holding it: a file opened just before
        // may be locked once that run lets go, yet no longer be the one at the path. Such a
        // lock is dropped and taken again on the file now there.
        for _ in 0..10 {
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&held.lock)
                .map_err(|e| bertqa::Error::io(&held.lock, e))?;
            if !try_lock(&file).map_err(|e| bertqa::Error::io(&held.lock, e))? {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                // Not ours to remove: the directory is the other run's now.
                held.created.clear();
                anyhow::bail!(
                    "another bertqa (pid {}) is writing to {}; wait for it to finish or choose \
                     another --output-dir",
                    match pid.trim() {
                        "" => "unknown",
                        p => p,
                    },
                    dir.display()
                );
            }
            if same_file(&file, &held.lock) {
                file.set_len(0)
                    .and_then(|()| file.rewind())
                    .and_then(|()| writeln!(file, "{}", std::process::id()))
                    .map_err(|e| bertqa::Error::io(&held.lock, e))?;
                held.file = Some(file);
                return Ok(held);
            }
        }
        anyhow::bail!(
            "{}: the lock file keeps being replaced; is another bertqa starting and ending there?",
            held.lock.display()
        )
    }
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        if self.file.is_none() {
            return;
        }
        // Removed while still held (see `claim`), then released by closing it.
        let _ = std::fs::remove_file(&self.lock);
        self.file = None;
        for d in &self.created {
            // Fails, and so leaves it, unless the directory is empty.
            if std::fs::remove_dir(d).is_err() {
                break;
            }
        }
    }
}

/// `dir` and those of its ancestors that do not exist yet, the deepest first.
fn missing_ancestors(dir: &Path) -> Vec<PathBuf> {
    dir.ancestors()
        .filter(|d| !d.as_os_str().is_empty())
        .take_while(|d| !d.exists())
        .map(Path::to_path_buf)
        .collect()
}

/// Takes an exclusive lock on `file` without waiting (`flock(2)` on Unix): false when
/// another open file description holds it.
fn try_lock(file: &File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// Whether the open `file` is still the one at `path`.
fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_fails_naming_the_pid_and_a_released_directory_is_claimed_again() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        let first = OutputDir::claim(&dir).unwrap();
        let text = std::fs::read_to_string(dir.join(LOCK_FILE)).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
        // Another open file description (as another process has) is refused.
        let e = OutputDir::claim(&dir).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "another bertqa (pid {}) is writing to {}",
                std::process::id(),
                dir.display()
            )),
            "{e}"
        );
        assert!(dir.exists(), "the refused claim removes nothing");
        std::fs::write(dir.join("out.json"), "{}").unwrap();
        drop(first);
        assert!(!dir.join(LOCK_FILE).exists());
        assert!(
            dir.join("out.json").exists(),
            "a directory with files stays"
        );
        drop(OutputDir::claim(&dir).unwrap());
    }

    #[test]
    fn an_empty_directory_is_removed_only_when_this_run_created_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("new/deeper");
        drop(OutputDir::claim(&dir).unwrap());
        assert!(!tmp.path().join("new").exists(), "created, empty: removed");
        let existing = tmp.path().join("existing");
        std::fs::create_dir(&existing).unwrap();
        drop(OutputDir::claim(&existing).unwrap());
        assert!(existing.exists(), "existed before: kept");
        assert_eq!(std::fs::read_dir(&existing).unwrap().count(), 0);
    }
}
