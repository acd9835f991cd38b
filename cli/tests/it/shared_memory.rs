//! Shared memory on the one path `eval` and `perf` take: each run registers a region
//! with the server, sends its tensors through it, and unregisters it at the end.
//! Watched from the server's side (its system shared memory status, polled while the run
//! goes on and read after it) and in the run's report, which says a request was answered
//! with its tensors in the region.
//!
//! The runs use `oracle-slow` (40 ms per execution), so that the region lives long
//! enough to be seen, on the shared server: other tests' regions may be registered at
//! the same time, and only the names of the run's own process count (`bertqa-PID-…`).

use serde_json::Value;

use crate::common::shm_watch::{assert_one_region_registered_then_unregistered, run_watching};
use crate::common::{server, show, SHORT_LEVEL};

const DATA: &str = "data/sample-squad-v2.json";

#[test]
fn eval_registers_a_region_uses_it_and_unregisters_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let w = run_watching(
        server().http_port,
        &[
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
        ],
    );
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
    let w = run_watching(
        server().http_port,
        &[
            &[
                "perf",
                "--model",
                "oracle-slow",
                "--data",
                DATA,
                "--url",
                &server().url,
                "--batch-size",
                "1",
                "--shared-memory",
                "system",
                "--json",
                "--quiet",
            ][..],
            &SHORT_LEVEL,
        ]
        .concat(),
    );
    assert_one_region_registered_then_unregistered(&w);
    let v: Value = serde_json::from_slice(&w.output.stdout)
        .unwrap_or_else(|e| panic!("{e}\n{}", show(&w.output)));
    assert_eq!(v["inputs"], "through shared memory, outputs too", "{v}");
}
