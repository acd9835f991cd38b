//! What the integration tests share, in one place:
//! - here: paths (`root`, `fixture`, `SAMPLE`), running `bertqa` (`bertqa`,
//!   `spawn_bertqa`, `eval_args`, `eval`, `sample_eval`, `ask_oracle`), reading what it
//!   wrote (`show`, `ok`, `json_of`, `read`, `read_bytes`, `read_json`, `journaled`,
//!   `wait_for_journal`), the assertions several test files make (`assert_fails_with`,
//!   `assert_answered`, `assert_same_outputs`, `assert_same_files`, `assert_schema`), a
//!   command's JSON checked against its schema (`json_following`, `json_lines_following`),
//!   and `client` and `rt` for the library's async API;
//! - [`triton`]: the real local Triton of this test binary (`server`, `http_url`), servers
//!   of a test's own (`start_server_with`, `slow_server`, `start_server_on`,
//!   `kill_server`), free ports, and the numpy twin of `tiny-bert`;
//! - [`browser`]: headless Chromium for the HTML reports (`load`, `screenshot`, their
//!   console messages, `remote_urls`);
//! - [`pki`]: test certificate authorities and certificates;
//! - [`tls_proxy`]: a TLS-terminating proxy in front of Triton's HTTP port.

#![allow(dead_code)]

pub mod browser;
pub mod fake_triton;
pub mod formats;
pub mod nginx;
pub mod oip;
pub mod owned;
pub mod page_server;
pub mod pki;
pub mod shm_watch;
pub mod tls_proxy;
mod triton;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use bertqa::{ClientConfig, Protocol, TritonClient};
use serde_json::Value;

pub use triton::*;

/// The project root, the workspace's (where `bertqa` runs in these tests; this package
/// is `cli/`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
        .to_path_buf()
}

/// `tests/fixtures/squad/NAME`, as a string for the command line.
pub fn fixture(name: &str) -> String {
    root()
        .join("tests/fixtures/squad")
        .join(name)
        .display()
        .to_string()
}

/// Runs the `bertqa` binary with `args` in the project root.
pub fn bertqa<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bertqa"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run bertqa")
}

/// Starts `bertqa` with `args` in the project root, stdout and stderr piped, without
/// waiting for it (for tests that signal or kill it, or its server, mid-run). It starts
/// with SIGINT's default disposition, as from an interactive shell, whatever this test
/// process inherited: a script's `cargo test &` passes an ignored SIGINT on to its
/// children, and bertqa keeps an inherited ignore.
pub fn spawn_bertqa<S: AsRef<OsStr>>(args: &[S]) -> Child {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bertqa"));
    // SAFETY: signal(2) is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd.args(args)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bertqa")
}

/// `eval --data DATA --model MODEL --output-dir OUT --quiet` and `extra` (the server,
/// `--json`, ...).
pub fn eval_args(data: &str, model: &str, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "eval",
        "--data",
        data,
        "--model",
        model,
        "--output-dir",
        out.to_str().unwrap(),
        "--quiet",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// `perf` flags for one short level that ends after a few windows whatever their spread
/// (tests that look at what a level did, not at its figures).
pub const SHORT_LEVEL: [&str; 8] = [
    "--concurrency-range",
    "2",
    "--measurement-request-count",
    "8",
    "--max-trials",
    "3",
    "--stability-percentage",
    "1000",
];

/// The bundled SQuAD 2.0 sample (16 questions, 52 features), relative to the project root.
pub const SAMPLE: &str = "data/sample-squad-v2.json";

/// `eval --json` of `model` on [`SAMPLE`] into `out`, with `extra` (the server, ...).
pub fn sample_eval(model: &str, out: &Path, extra: &[&str]) -> Vec<String> {
    eval_args(SAMPLE, model, out, &[extra, &["--json"]].concat())
}

/// `bertqa eval` of `model` on `data` into `out` against the shared server (the text
/// report, `--quiet`), with `extra`.
pub fn eval(data: &str, model: &str, out: &Path, extra: &[&str]) -> Output {
    let url = &server().url;
    bertqa(&eval_args(
        data,
        model,
        out,
        &[&["--url", url][..], extra].concat(),
    ))
}

/// The context of [`ask_oracle`]: its question comes from the bundled sample, so the
/// oracle knows the answer.
pub const CONTEXT: &str = "The lighthouse at Varne Point was built in 1874 by the engineer \
                           Miriam Holt, who designed its tower of granite blocks.";

/// `bertqa ask --json` of `oracle` about [`CONTEXT`], with `extra` (the server, TLS, ...).
pub fn ask_oracle(extra: &[&str]) -> Output {
    let mut args = vec![
        "ask",
        "--model",
        "oracle",
        "--json",
        "--question",
        "Who designed the lighthouse at Varne Point?",
        "--context",
        CONTEXT,
    ];
    args.extend_from_slice(extra);
    bertqa(&args)
}

/// stdout and stderr of an output, for assertion messages.
pub fn show(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Exit 0.
pub fn ok(o: &Output) {
    assert_eq!(o.status.code(), Some(0), "{}", show(o));
}

/// The JSON report on stdout of a run that exited 0.
pub fn json_of(o: &Output) -> Value {
    ok(o);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}\n{}", show(o)))
}

/// A JSON array of strings (a report's list of slice names, say).
pub fn strings(v: &Value) -> Vec<&str> {
    let items = v.as_array().unwrap_or_else(|| panic!("not an array: {v}"));
    items.iter().map(|s| s.as_str().unwrap()).collect()
}

/// Exit 2, nothing on stdout, and one `error: ` line on stderr holding every piece of
/// `want`.
pub fn assert_fails_with(o: &Output, want: &[&str]) {
    assert_eq!(o.status.code(), Some(2), "{}", show(o));
    assert!(o.stdout.is_empty(), "{}", show(o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("error: "), "{}", show(o));
    for w in want {
        assert!(err.contains(w), "missing {w:?}\n{}", show(o));
    }
}

/// [`ask_oracle`] answered right; its JSON report.
pub fn assert_answered(o: &Output) -> Value {
    let v = json_of(o);
    assert_eq!(v["answers"][0]["answer"], "Miriam Holt", "{}", show(o));
    v
}

/// A text file.
pub fn read(p: impl AsRef<Path>) -> String {
    let p = p.as_ref();
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A file's bytes.
pub fn read_bytes(p: impl AsRef<Path>) -> Vec<u8> {
    let p = p.as_ref();
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A JSON file.
pub fn read_json(p: impl AsRef<Path>) -> Value {
    let p = p.as_ref();
    serde_json::from_str(&read(p)).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The reference's answer files (`null_odds.json` only under the SQuAD 2.0 rules).
pub const ANSWER_FILES: [&str; 3] = [
    "predictions.json",
    "nbest_predictions.json",
    "null_odds.json",
];

/// Each of `files` is byte-identical in directories `a` and `b`.
pub fn assert_same_files(a: &Path, b: &Path, files: &[&str]) {
    for f in files {
        assert!(
            read_bytes(a.join(f)) == read_bytes(b.join(f)),
            "{f} differs between {} and {}",
            a.display(),
            b.display()
        );
    }
}

/// The three answer files of two runs are byte-identical.
pub fn assert_same_outputs(a: &Path, b: &Path) {
    assert_same_files(a, b, &ANSWER_FILES);
}

/// `v` follows `schema/NAME.schema.json`.
pub fn assert_schema(name: &str, v: &Value) {
    let schema = read_json(root().join(format!("schema/{name}.schema.json")));
    let validator = jsonschema::validator_for(&schema).expect("valid schema");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{v:#}");
}

/// `bertqa ARGS`, a command printing one JSON document (`--json`): it exits 0 and the
/// document follows `schema/NAME.schema.json`. The document, for further checks.
pub fn json_following(name: &str, args: &[&str]) -> Value {
    let v = json_of(&bertqa(args));
    assert_schema(name, &v);
    v
}

/// `bertqa ARGS`, a command printing JSON lines (`features`): it exits 0, prints at
/// least one line, and each follows `schema/NAME.schema.json`. The lines, parsed.
pub fn json_lines_following(name: &str, args: &[&str]) -> Vec<Value> {
    let o = bertqa(args);
    ok(&o);
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(!lines.is_empty(), "no lines\n{}", show(&o));
    for v in &lines {
        assert_schema(name, v);
    }
    lines
}

/// Features in the journal of a run writing to `dir` (0 while there is none).
pub fn journaled(dir: &Path) -> usize {
    bertqa::journal::read(&dir.join("journal.bqj")).map_or(0, |(_, c)| c.answered())
}

/// Waits until the journal of `child`, a run writing to `dir`, holds at least `n`
/// features; fails if the run ends first or after 120 s.
pub fn wait_for_journal(child: &mut Child, dir: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while journaled(dir) < n {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("bertqa ended before journaling {n} features: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "no {n} journaled features in 120 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A tokio runtime for async library calls in tests.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A library client of the server at `url` over `protocol`.
pub fn client(rt: &tokio::runtime::Runtime, protocol: Protocol, url: String) -> TritonClient {
    let config = ClientConfig {
        url,
        protocol,
        ..Default::default()
    };
    rt.block_on(TritonClient::connect(&config))
        .expect("connect")
}

/// `compare --json` of `models` on the data file `data` (under the project's root).
pub fn compare_on(
    data: &str,
    models: &str,
    out: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    let data = root().join(data);
    let mut args = vec![
        "compare",
        "--models",
        models,
        "--data",
        data.to_str().unwrap(),
        "--url",
        &server().url,
        "--output-dir",
        out.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    bertqa(&args)
}
