//! `--requests-jsonl`: one JSON line per request of a sweep, written as requests
//! complete.
//!
//! Contract:
//! - A line per request sent, warm-up and unreported windows included, in completion
//!   order: `level` (`{"concurrency": n}`, `{"request_rate_per_s": r}`, or `null` for
//!   warm-up), `window` (the level's window the request was counted in, 1-based; 0
//!   before the first window, `trials + 1` after the last: the report merges windows
//!   `trials − 2 ..= trials`), `send_unix_s` (wall clock at the start of its encoding),
//!   `latency_ms` and its parts `send_ms`, `wait_ms`, `recv_ms`, `batch_size`,
//!   `seq_len` (`null` for a model that takes text: the server tokenizes), `features`
//!   (the unique ids of its rows; for a model that takes text, its questions' places in
//!   the data, 0-based), `endpoint`, `outcome` (`ok` or `error`), `code` (`null`, or
//!   the error's code, e.g. `UNAVAILABLE`) and `retries` (always 0: perf does not
//!   retry; a failed request ends the sweep).
//! - Lines are handed to a writer thread and flushed whenever it has nothing more to
//!   write, so the file can be read (and tailed) while the run goes on. The file is not
//!   written atomically for that reason.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Mutex;
use std::thread::JoinHandle;

use serde::Serialize;

use super::Level;
use crate::error::{Error, Result};

/// One line.
#[derive(Debug, Serialize)]
pub(crate) struct Line<'a> {
    pub level: Option<LevelKey>,
    pub window: Option<u64>,
    pub send_unix_s: f64,
    pub latency_ms: f64,
    pub send_ms: f64,
    pub wait_ms: f64,
    pub recv_ms: f64,
    pub batch_size: usize,
    /// `None` for a model that takes text (the server tokenizes).
    pub seq_len: Option<usize>,
    pub features: Vec<u64>,
    pub endpoint: &'a str,
    pub outcome: &'static str,
    pub code: Option<&'static str>,
    pub retries: u32,
}

/// The level as the perf JSON names it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LevelKey {
    Concurrency(usize),
    RequestRatePerS(f64),
}

impl From<Level> for LevelKey {
    fn from(l: Level) -> Self {
        match l {
            Level::Concurrency(n) => LevelKey::Concurrency(n),
            Level::RequestRate(r) => LevelKey::RequestRatePerS(r),
        }
    }
}

/// The open file and its writer thread.
#[derive(Debug)]
pub struct RequestLog {
    path: PathBuf,
    tx: Mutex<Option<mpsc::Sender<String>>>,
    writer: Mutex<Option<JoinHandle<std::io::Result<()>>>>,
}

impl RequestLog {
    /// Creates (truncates) `path` and starts its writer.
    pub fn create(path: &Path) -> Result<RequestLog> {
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        let (tx, rx) = mpsc::channel::<String>();
        let writer = std::thread::Builder::new()
            .name("requests-jsonl".into())
            .spawn(move || {
                let mut out = BufWriter::new(file);
                while let Ok(line) = rx.recv() {
                    out.write_all(line.as_bytes())?;
                    while let Ok(more) = rx.try_recv() {
                        out.write_all(more.as_bytes())?;
                    }
                    out.flush()?;
                }
                out.flush()
            })
            .map_err(|e| Error::system("the requests log's writer", e))?;
        Ok(RequestLog {
            path: path.to_path_buf(),
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Queues one line (a failed writer is reported by [`RequestLog::finish`]).
    pub(crate) fn write(&self, line: &Line<'_>) {
        let mut text = serde_json::to_string(line).expect("a request line serializes");
        text.push('\n');
        if let Some(tx) = self.tx.lock().expect("requests-jsonl lock").as_ref() {
            let _ = tx.send(text);
        }
    }

    /// Writes what is queued, closes the file; the first write error, naming the file.
    pub fn finish(&self) -> Result<()> {
        drop(self.tx.lock().expect("requests-jsonl lock").take());
        match self.writer.lock().expect("requests-jsonl lock").take() {
            Some(handle) => match handle.join() {
                Ok(written) => written.map_err(|e| Error::io(&self.path, e)),
                Err(_) => Err(Error::Internal(format!(
                    "the writer of {} panicked",
                    self.path.display()
                ))),
            },
            None => Ok(()),
        }
    }
}

impl Drop for RequestLog {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(level: Option<Level>, window: Option<u64>) -> Line<'static> {
        Line {
            level: level.map(LevelKey::from),
            window,
            send_unix_s: 1.5,
            latency_ms: 2.25,
            send_ms: 0.25,
            wait_ms: 1.75,
            recv_ms: 0.25,
            batch_size: 2,
            seq_len: Some(384),
            features: vec![1000000000, 1000000001],
            endpoint: "127.0.0.1:8001",
            outcome: "ok",
            code: None,
            retries: 0,
        }
    }

    #[test]
    fn lines_are_written_in_order_and_readable_before_the_end() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("requests.jsonl");
        let log = RequestLog::create(&path).unwrap();
        log.write(&line(None, None));
        log.write(&line(Some(Level::Concurrency(4)), Some(2)));
        // Flushed by the writer as soon as it is idle, before finish.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::fs::read_to_string(&path).unwrap().lines().count() < 2 {
            assert!(std::time::Instant::now() < deadline, "not flushed");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        log.write(&line(Some(Level::RequestRate(12.5)), Some(0)));
        log.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let v: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(v.len(), 3);
        assert!(v[0]["level"].is_null());
        assert_eq!(v[1]["level"]["concurrency"], 4);
        assert_eq!(v[1]["window"], 2);
        assert_eq!(v[2]["level"]["request_rate_per_s"], 12.5);
        assert_eq!(v[2]["features"][1], 1000000001u64);
        assert_eq!(v[2]["code"], serde_json::Value::Null);
    }

    #[test]
    fn a_file_that_cannot_be_created_is_named() {
        let e = RequestLog::create(Path::new("/nonexistent-dir/r.jsonl")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent-dir/r.jsonl"), "{e}");
    }
}
