//! Shared memory on the one path `eval` and `perf` take: each run registers a region
//! with the server, sends its tensors through it, and unregisters it at the end.
//! Watched from the server's side (its system shared memory status, polled while the run
//! goes on and read after it) and in the run's report, which says a request was answered
//! with its tensors in the region.
//!
//! The runs use `oracle-slow` (40 ms per execution), so that the region lives long
//! enough to be seen, on the shared server: other tests' regions may be registered at
//! the same time, and only the names of the run's own process count (`bertqa-PID-…`).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{server, show, spawn_bertqa};

const DATA: &str = "data/sample-squad-v2.json";

/// The names of the regions the server has registered (HTTP
/// `GET /v2/systemsharedmemory/status`).
fn registered(http_port: u16) -> Vec<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", http_port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = "GET /v2/systemsharedmemory/status HTTP/1.1\r\nHost: localhost\r\n\
               Connection: close\r\n\r\n";
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    let (head, body) = buf.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{buf}");
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

/// What a run showed of its regions.
struct Watched {
    output: Output,
    /// Regions of its process seen registered while it ran.
    during: BTreeSet<String>,
    /// Regions of its process still registered after it ended.
    after: Vec<String>,
}

/// Runs `bertqa args` to its end, polling the shared server's regions meanwhile.
fn run_watching(args: &[&str]) -> Watched {
    let port = server().http_port;
    let mut child = spawn_bertqa(args);
    let prefix = format!("bertqa-{}-", child.id());
    // Read on threads of their own: a full pipe would stall the run.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            pipe.read_to_end(&mut bytes).unwrap();
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let ours = |names: Vec<String>| names.into_iter().filter(|n| n.starts_with(&prefix));
    let mut during = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("bertqa {args:?} did not finish");
        }
        during.extend(ours(registered(port)));
        std::thread::sleep(Duration::from_millis(5));
    };
    let output = Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    let after = ours(registered(port)).collect();
    Watched {
        output,
        during,
        after,
    }
}

/// One region registered while the run went on, none left after it.
fn assert_one_region_registered_then_unregistered(w: &Watched) {
    assert_eq!(w.output.status.code(), Some(0), "{}", show(&w.output));
    assert_eq!(
        w.during.len(),
        1,
        "one region registered during the run: {:?}\n{}",
        w.during,
        show(&w.output)
    );
    assert!(w.after.is_empty(), "left registered: {:?}", w.after);
}

#[test]
fn eval_registers_a_region_uses_it_and_unregisters_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let w = run_watching(&[
        "eval",
        "--data",
        DATA,
        "--model",
        "oracle-slow",
        "--url",
        &server().url,
        "--output-dir",
        out.to_str().unwrap(),
        "--batch-size",
        "1",
        "--concurrency",
        "2",
        "--shared-memory",
        "system",
        "--quiet",
    ]);
    assert_one_region_registered_then_unregistered(&w);
    let metrics: Value =
        serde_json::from_slice(&std::fs::read(out.join("metrics.json")).unwrap()).unwrap();
    let shm = &metrics["shared_memory"];
    assert_eq!(shm["used"], true, "inputs answered from the region: {shm}");
    assert_eq!(shm["outputs"], true, "outputs read from the region: {shm}");
    assert_eq!(shm["note"], Value::Null, "{shm}");
}

#[test]
fn perf_registers_a_region_uses_it_and_unregisters_it() {
    let w = run_watching(&[
        "perf",
        "--model",
        "oracle-slow",
        "--data",
        DATA,
        "--url",
        &server().url,
        "--batch-size",
        "1",
        "--concurrency-range",
        "2",
        "--measurement-request-count",
        "8",
        "--max-trials",
        "3",
        "--stability-percentage",
        "1000",
        "--shared-memory",
        "system",
        "--json",
        "--quiet",
    ]);
    assert_one_region_registered_then_unregistered(&w);
    let v: Value = serde_json::from_slice(&w.output.stdout)
        .unwrap_or_else(|e| panic!("{e}\n{}", show(&w.output)));
    assert_eq!(v["inputs"], "through shared memory, outputs too", "{v}");
}
