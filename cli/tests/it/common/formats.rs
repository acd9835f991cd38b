//! The test data in every format bertqa reads, written by the formats' own tools
//! (`scripts/data/convert.py`: Python's json and gzip, pyarrow for Parquet; never bertqa
//! itself), once per test binary and input file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use super::root;

/// The python of the data tools' venv (`scripts/testbed/setup_data_tools.sh`).
fn python() -> &'static str {
    static PY: OnceLock<String> = OnceLock::new();
    PY.get_or_init(|| super::triton::set_up("scripts/testbed/setup_data_tools.sh"))
}

/// Runs a Python snippet of the data tools' venv (pyarrow at hand) with `args`.
pub fn python_with(code: &str, args: &[&Path]) {
    let o = Command::new(python())
        .arg("-c")
        .arg(code)
        .args(args)
        .output()
        .expect("run python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The directory of `squad` (relative to the project root) converted: `rows.jsonl`,
/// `rows.jsonl.gz`, `rows.parquet`, `rows-1.parquet` + `rows-2.parquet`,
/// `mrqa.jsonl.gz` and `answerable.json` (see the script's header).
pub fn converted(squad: &str) -> PathBuf {
    static DIRS: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut dirs = DIRS.get_or_init(Default::default).lock().unwrap();
    if let Some(d) = dirs.get(squad) {
        return d.clone();
    }
    let dir = std::env::temp_dir().join(format!(
        "bertqa-formats-{}-{}",
        std::process::id(),
        dirs.len()
    ));
    let o = Command::new(python())
        .arg(root().join("scripts/data/convert.py"))
        .arg(root().join(squad))
        .arg(&dir)
        .output()
        .expect("run scripts/data/convert.py");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    dirs.insert(squad.to_string(), dir.clone());
    dir
}
