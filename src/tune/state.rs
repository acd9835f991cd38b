//! What a `tune` run keeps in its output directory so that its model can be put back
//! by another process (`tune --restore`), even after the run was killed.
//!
//! Contract:
//! - `original-config.json`: the configuration read before any change, as the server
//!   wrote it. `tune-state.json`: which model on which server, the run's marker, and
//!   whether the original is back. Both are written (atomically) before the first load
//!   and `tune-state.json` again once the original is back.
//! - An output directory whose state says the original is not back (or that the best
//!   was kept) is refused for a new run: it holds the only copy of that model's
//!   original configuration.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Location, Result};

pub(crate) const STATE_FILE: &str = "tune-state.json";
pub(crate) const ORIGINAL_FILE: &str = "original-config.json";

/// `tune-state.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// The tuned model's name.
    pub model: String,
    /// The server's HTTP address the configuration is loaded through.
    pub control_url: String,
    /// The `parameters` entry candidates carry ([`super::config::MARKER`]).
    pub marker: String,
    /// The original configuration is back (or, with `kept_best`, the best is loaded).
    pub restored: bool,
    /// The best candidate was left loaded instead of the original (`keep_best`); false
    /// when the key is absent.
    #[serde(default)]
    pub kept_best: bool,
}

/// The marker text of a run writing into `dir` (`restore`: the way back from `dir`,
/// made absolute).
pub(crate) fn marker_text(run: &str, dir: &Path, restore: super::RestoreWords<'_>) -> String {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    format!(
        "tune run {run}; put the original back with: {}",
        restore(&dir)
    )
}

fn path(dir: &Path, file: &str) -> PathBuf {
    dir.join(file)
}

/// Refuses `dir` when it holds the original of a model that does not serve it now (a
/// run that did not finish, or `keep_best`): it may be the only copy. The refusal names
/// the way back from `dir` by `restore`.
pub(crate) fn check_free(dir: &Path, restore: super::RestoreWords<'_>) -> Result<()> {
    match read(dir) {
        Ok((state, _)) if !state.restored || state.kept_best => Err(Error::Config(format!(
            "{}: holds the original configuration of model {:?} on {}, which {}: put it back \
             with `{}`, or choose another `output_dir`",
            path(dir, STATE_FILE).display(),
            state.model,
            state.control_url,
            if state.kept_best {
                "serves the best configuration a run kept"
            } else {
                "a run did not put back"
            },
            restore(dir)
        ))),
        _ => Ok(()),
    }
}

/// Writes the state and, the first time, the original.
pub(crate) fn write(dir: &Path, state: &State, original: Option<&Value>) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    if let Some(original) = original {
        let mut bytes = serde_json::to_vec_pretty(original).expect("JSON value");
        bytes.push(b'\n');
        crate::output_file::write_atomic(&path(dir, ORIGINAL_FILE), &bytes)?;
    }
    let mut bytes = serde_json::to_vec_pretty(state).expect("state");
    bytes.push(b'\n');
    crate::output_file::write_atomic(&path(dir, STATE_FILE), &bytes)
}

/// The state and original of `dir`.
pub fn read(dir: &Path) -> Result<(State, Value)> {
    let state: State = read_json(&path(dir, STATE_FILE))?;
    let original: Value = read_json(&path(dir, ORIGINAL_FILE))?;
    Ok((state, original))
}

fn read_json<T: serde::de::DeserializeOwned>(file: &Path) -> Result<T> {
    let bytes = std::fs::read(file).map_err(|e| Error::io(file, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::Input {
        location: Location::at(file, e.line(), e.column()),
        message: format!("not tune's record: {e}"),
    })
}
