//! Nothing lost when a run stops early: the eval journal, `--resume` after SIGKILL, after the
//! server died, and after Ctrl-C; torn journals and journals of other settings. Runs use
//! `oracle-slow` (the oracle sleeping 40 ms per execution) with one feature per
//! request, so a run lasts a few seconds and is stopped once its journal holds a number
//! of features (never after a fixed time).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{
    assert_same_files, assert_schema, bertqa, journaled, kill_server, ok, read_bytes, read_json,
    server, show, slow_server, spawn_bertqa, wait_for_journal,
};

/// The answer files and per_question.jsonl.
const FILES: [&str; 4] = [
    "predictions.json",
    "nbest_predictions.json",
    "null_odds.json",
    "per_question.jsonl",
];

/// Relative to the project root, where bertqa runs.
const DATA: &str = "tests/fixtures/squad/v2-long.json";

/// eval arguments: 192 features of 384 tokens over 8 questions (doc stride 16), one
/// feature per request (also for the HTTP variant in http.rs).
pub(crate) fn args<'a>(
    url: &'a str,
    model: &'a str,
    out: &'a Path,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut a = vec![
        "eval",
        "--data",
        DATA,
        "--model",
        model,
        "--url",
        url,
        "--output-dir",
        out.to_str().unwrap(),
        "--doc-stride",
        "16",
        "--batch-size",
        "1",
        "--concurrency",
        "2",
        "--quiet",
    ];
    a.extend_from_slice(extra);
    a
}

fn journal(dir: &Path) -> PathBuf {
    dir.join("journal.bqj")
}

fn metrics(dir: &Path) -> Value {
    read_json(dir.join("metrics.json"))
}

/// Features the server has run through `model` so far.
fn inference_count(url: &str, model: &str) -> u64 {
    crate::common::rt().block_on(async {
        let client = bertqa::TritonClient::connect(&bertqa::ClientConfig {
            url: url.to_string(),
            ..Default::default()
        })
        .await
        .unwrap();
        let stats = client.model_statistics(model, "").await.unwrap();
        stats.iter().map(|s| s.inference_count).sum()
    })
}

/// The inference count once it has stopped changing for a second (requests a killed
/// client left in flight take 40 ms each here).
fn settled_count(url: &str, model: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = inference_count(url, model);
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = inference_count(url, model);
        if now == last {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "the server kept running requests"
        );
        last = now;
    }
}

#[test]
fn sigkill_then_resume_gives_identical_files_and_resends_no_journaled_feature() {
    let s = slow_server(None);
    let tmp = tempfile::tempdir().unwrap();
    let (reference, out) = (tmp.path().join("ref"), tmp.path().join("out"));
    ok(&bertqa(&args(&s.url, "oracle-slow", &reference, &[])));
    let total = metrics(&reference)["features"].as_u64().unwrap();
    assert_eq!(total, 192);
    assert!(
        !journal(&reference).exists(),
        "journal removed after a complete run"
    );

    let mut child = spawn_bertqa(&args(&s.url, "oracle-slow", &out, &[]));
    wait_for_journal(&mut child, &out, 30);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let kept = journaled(&out) as u64;
    assert!((30..total).contains(&kept), "{kept} journaled");
    // Without --save-logits the records keep only the answer candidates, so the
    // identical files below are decoded from compact records.
    let (_, contents) = bertqa::journal::read(&journal(&out)).unwrap();
    assert_eq!(contents.compact.len() as u64, kept);

    // The killed client's requests still in flight finish on the server: wait until
    // its count settles before taking it.
    let before = settled_count(&s.url, "oracle-slow");
    let o = bertqa(&args(&s.url, "oracle-slow", &out, &["--resume"]));
    ok(&o);
    let sent = inference_count(&s.url, "oracle-slow") - before;
    // Exactly the features not in the journal were sent: none journaled went again.
    assert_eq!(sent, total - kept, "{}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!("{kept} features already answered")),
        "{stderr}"
    );
    assert_same_files(&reference, &out, &FILES);
    assert_eq!(metrics(&out)["metrics"], metrics(&reference)["metrics"]);
    assert!(!journal(&out).exists());
}

/// A run resumed with `--save-logits` sends the features of compact records again:
/// its logits file equals an uninterrupted run's.
#[test]
fn resume_with_save_logits_sends_compact_records_again() {
    let s = slow_server(None);
    let tmp = tempfile::tempdir().unwrap();
    let (reference, out) = (tmp.path().join("ref"), tmp.path().join("out"));
    let save = ["--save-logits"];
    ok(&bertqa(&args(&s.url, "oracle-slow", &reference, &save)));

    let mut child = spawn_bertqa(&args(&s.url, "oracle-slow", &out, &[]));
    wait_for_journal(&mut child, &out, 30);
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = journaled(&out);
    let before = settled_count(&s.url, "oracle-slow");
    let o = bertqa(&args(
        &s.url,
        "oracle-slow",
        &out,
        &["--resume", "--save-logits"],
    ));
    ok(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!(
            "{kept} journaled features kept only their answer candidates"
        )),
        "{stderr}"
    );
    assert_eq!(inference_count(&s.url, "oracle-slow") - before, 192);
    assert_same_files(&reference, &out, &FILES);
    assert_same_files(&reference, &out, &["logits.bin"]);
}

#[test]
fn server_killed_mid_run_keeps_the_journal_and_resume_finishes_on_the_restarted_server() {
    let first = slow_server(None);
    let tmp = tempfile::tempdir().unwrap();
    let (reference, out) = (tmp.path().join("ref"), tmp.path().join("out"));

    let mut child = spawn_bertqa(&args(&first.url, "oracle-slow", &out, &[]));
    wait_for_journal(&mut child, &out, 30);
    kill_server(&first);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    // The last line is the error (retry notices may come before it).
    let stderr = String::from_utf8_lossy(&o.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains("questions done") && last.contains("--resume"),
        "{stderr}"
    );
    let kept = journaled(&out);
    assert!(kept >= 30);
    let m = metrics(&out);
    assert_eq!(m["partial"], true);
    assert!(
        m["reason"].as_str().unwrap().starts_with("error: "),
        "{m:#}"
    );
    assert_eq!(m["features"]["journaled"], kept as u64);

    let second = slow_server(None);
    let o = bertqa(&args(&second.url, "oracle-slow", &out, &["--resume"]));
    ok(&o);
    ok(&bertqa(&args(&second.url, "oracle-slow", &reference, &[])));
    assert_same_files(&reference, &out, &FILES);
    assert_eq!(metrics(&out)["metrics"], metrics(&reference)["metrics"]);
    assert!(metrics(&out).get("partial").is_none());
}

#[test]
fn sigint_writes_partial_results_and_resume_drops_a_torn_tail_and_refuses_other_settings() {
    let url = &server().url;
    let tmp = tempfile::tempdir().unwrap();
    let (reference, out) = (tmp.path().join("ref"), tmp.path().join("out"));
    // The oracle without the sleep answers the same logits.
    ok(&bertqa(&args(url, "oracle", &reference, &[])));

    let mut child = spawn_bertqa(&args(url, "oracle-slow", &out, &[]));
    wait_for_journal(&mut child, &out, 30);
    // SAFETY: plain kill(2) of the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("stopping: no new requests")
            && stderr.contains("error: interrupted; ")
            && stderr.contains("questions done")
            && stderr.contains("--resume"),
        "{stderr}"
    );
    assert!(o.stdout.is_empty(), "stdout carries results only");

    // Partial results: the questions fully answered, metrics marked partial.
    let m = metrics(&out);
    assert_schema("partial", &m);
    assert_eq!(m["reason"], "interrupted");
    let kept = journaled(&out);
    // Requests in flight were drained into the journal: all answered are journaled.
    assert_eq!(m["features"]["journaled"], kept as u64);
    assert_eq!(m["features"]["answered"], kept as u64);
    assert!(kept < 192, "stopped before the end");
    let preds = read_json(out.join("predictions.json"));
    let preds = preds.as_object().unwrap();
    assert_eq!(m["questions"]["done"], preds.len() as u64);
    assert_eq!(m["questions"]["total"], 8);
    let full = read_json(reference.join("predictions.json"));
    for (id, answer) in preds {
        assert_eq!(&full[id], answer, "partial answers are final answers");
    }

    // Other settings: refused, naming what differs; the journal is left alone.
    let before = read_bytes(journal(&out));
    let mut other = args(url, "oracle-slow", &out, &["--resume"]);
    let stride = other.iter().position(|a| *a == "16").unwrap();
    other[stride] = "17";
    let o = bertqa(&other);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("doc_stride: \"16\" in the journal, \"17\" now")
            && stderr.contains("journal.bqj")
            && stderr.lines().count() == 1,
        "{stderr}"
    );
    assert!(read_bytes(journal(&out)) == before);

    // A torn record at the end (a write cut short by SIGKILL) is dropped.
    let mut torn = before.clone();
    torn.extend_from_slice(&[200, 12, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    std::fs::write(journal(&out), &torn).unwrap();
    let o = bertqa(&args(url, "oracle-slow", &out, &["--resume"]));
    ok(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!("{kept} features already answered"))
            && stderr.contains("a torn record at the end (14 bytes) was dropped"),
        "{stderr}"
    );
    assert_same_files(&reference, &out, &FILES);
    assert_eq!(metrics(&out)["metrics"], metrics(&reference)["metrics"]);
    assert!(!journal(&out).exists());
}

#[test]
fn resume_without_a_journal_starts_from_the_beginning() {
    let url = &server().url;
    let tmp = tempfile::tempdir().unwrap();
    let o = bertqa(&args(url, "oracle", tmp.path(), &["--resume"]));
    ok(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("no journal in") && stderr.contains("starting from the beginning"),
        "{stderr}"
    );
    assert_eq!(metrics(tmp.path())["metrics"]["exact"], 100.0);
    assert!(!journal(tmp.path()).exists());
}

#[test]
fn sigterm_stops_like_ctrl_c() {
    let url = &server().url;
    let tmp = tempfile::tempdir().unwrap();
    let mut child = spawn_bertqa(&args(url, "oracle-slow", tmp.path(), &[]));
    wait_for_journal(&mut child, tmp.path(), 10);
    // SAFETY: plain kill(2) of the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("error: interrupted; "), "{stderr}");
    let m = metrics(tmp.path());
    assert_eq!(m["partial"], true);
    assert_eq!(m["features"]["journaled"], journaled(tmp.path()) as u64);
}

/// One run per output directory. A second `eval`, a `merge` and a
/// `compare` into the directory of a running `eval` exit 2 at once naming its pid, and
/// touch nothing; once the first run is SIGKILLed its lock binds no one: `--resume`
/// finishes the run.
#[test]
fn a_second_run_into_a_busy_output_directory_exits_2_and_a_killed_runs_lock_binds_no_one() {
    let url = &server().url;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut first = spawn_bertqa(&args(url, "oracle-slow", &out, &[]));
    wait_for_journal(&mut first, &out, 10);
    let busy = format!(
        "error: another bertqa (pid {}) is writing to {}",
        first.id(),
        out.display()
    );
    let out_s = out.to_str().unwrap();
    let shard = tmp.path().join("shard");
    let shard_s = shard.to_str().unwrap();
    let others: [Vec<&str>; 4] = [
        args(url, "oracle-slow", &out, &[]),
        args(url, "oracle-slow", &out, &["--resume"]),
        vec!["merge", shard_s, "--output-dir", out_s],
        vec![
            "compare",
            "--models",
            "oracle,oracle-slow",
            "--url",
            url,
            "--data",
            DATA,
            "--output-dir",
            out_s,
        ],
    ];
    for other in &others {
        let journal_before = journaled(&out);
        let started = Instant::now();
        let o = bertqa(other);
        assert_eq!(o.status.code(), Some(2), "{other:?}: {}", show(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.starts_with(&busy) && stderr.lines().count() == 1,
            "{other:?}: {stderr}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "refused at once"
        );
        assert!(
            journaled(&out) >= journal_before,
            "the first run's journal kept"
        );
        assert!(
            !out.join("metrics.json").exists(),
            "{other:?} wrote nothing"
        );
    }
    assert!(first.try_wait().unwrap().is_none(), "the first run goes on");

    first.kill().unwrap(); // SIGKILL: the lock file stays, its lock goes with the process
    first.wait().unwrap();
    let lock = out.join(".bertqa.lock");
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap().trim(),
        first.id().to_string()
    );
    let o = bertqa(&args(url, "oracle-slow", &out, &["--resume"]));
    ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("features already answered"),
        "{}",
        show(&o)
    );
    assert_eq!(metrics(&out)["questions"], 8);
    assert!(!lock.exists(), "a finished run takes its lock file away");
}

/// A run that fails before producing anything (connection refused,
/// an unknown model) leaves no output directory behind; one that existed is left as it
/// was.
#[test]
fn a_run_failing_before_any_output_leaves_no_output_directory() {
    let url = &server().url;
    let refused = format!("127.0.0.1:{}", crate::common::free_port());
    let tmp = tempfile::tempdir().unwrap();
    let existing = tmp.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    for (url, model, want) in [
        (refused.as_str(), "oracle", "cannot reach Triton"),
        (url.as_str(), "no-such-model", "not found"),
    ] {
        let new = tmp.path().join("new/out");
        for dir in [&new, &existing] {
            let o = bertqa(&args(url, model, dir, &[]));
            assert_eq!(o.status.code(), Some(2), "{}", show(&o));
            assert!(
                String::from_utf8_lossy(&o.stderr).contains(want),
                "{}",
                show(&o)
            );
        }
        assert!(
            !tmp.path().join("new").exists(),
            "{model}: no directory left"
        );
        assert_eq!(
            std::fs::read_dir(&existing).unwrap().count(),
            0,
            "left as it was"
        );
    }
    // The same for merge (no shard there) and compare (an unknown model).
    let new = tmp.path().join("new");
    let o = bertqa(&[
        "merge",
        "/nonexistent/shard",
        "--output-dir",
        new.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let o = bertqa(&[
        "compare",
        "--models",
        "oracle,no-such-model",
        "--url",
        url,
        "--data",
        DATA,
        "--output-dir",
        new.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(!new.exists());
}
