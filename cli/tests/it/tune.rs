//! `bertqa tune` on a Triton of its own in explicit model-control mode
//! ([`tune_server`], `models/tune`: models no other test uses, one per test): the search
//! finds what a deliberately poor configuration misses, its config.pbtxt confirms it on
//! a fresh server, and whatever happens (a normal end, an interrupt, a candidate that
//! fails to load, a kill followed by `--restore`) the model's configuration read from
//! the server afterwards equals the one before.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::browser::rendered;
use crate::common::{
    assert_fails_with, assert_schema, bertqa, json_of, model_config, ok, root, server, show,
    spawn_bertqa, start_server_on, tune_server, Server, SAMPLE,
};

/// `tune --model MODEL` on the tune server over gRPC, its repository calls over HTTP,
/// with `extra`.
fn tune_args(model: &str, out: &Path, extra: &[&str]) -> Vec<String> {
    let s = tune_server();
    let mut args: Vec<String> = [
        "tune",
        "--model",
        model,
        "--data",
        SAMPLE,
        "--url",
        &s.url,
        "--control-url",
        &format!("127.0.0.1:{}", s.http_port),
        "--metrics-url",
        &format!("127.0.0.1:{}", s.metrics_port),
        "--output-dir",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// A small search of the fixed-cost models: two values per setting, and the budget.
const SPACE: [&str; 10] = [
    "--max-batch-sizes",
    "8,32",
    "--queue-delays-us",
    "0,2000",
    "--instances",
    "1,2",
    "--preferred-batch-sizes",
    "none",
    "--latency-threshold",
    "150",
];

/// Short measurement windows (a level takes a second or two).
const SHORT: [&str; 6] = [
    "--measurement-request-count",
    "24",
    "--stability-percentage",
    "50",
    "--max-trials",
    "4",
];

/// Long windows: a signal comes while a candidate is measured.
const LONG: [&str; 4] = ["--measurement-interval-ms", "2000", "--concurrency", "4"];

fn config(model: &str) -> Value {
    model_config(tune_server().http_port, model)
}

/// Waits until the server reports `model` in a candidate configuration of a run.
fn wait_for_marker(model: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while config(model)["parameters"].get("bertqa_tune").is_none() {
        assert!(
            Instant::now() < deadline,
            "no candidate of {model} loaded in 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn features_per_s(c: &Value) -> f64 {
    c["throughput"]["features_per_s"].as_f64().unwrap()
}

#[test]
fn tune_finds_twice_a_poor_configurations_throughput_and_its_config_confirms_it() {
    let model = "tune-fixed-cost";
    let before = config(model);
    let tmp = tempfile::tempdir().unwrap();
    let (out, pbtxt, html) = (
        tmp.path().join("out"),
        tmp.path().join("config.pbtxt"),
        tmp.path().join("tune.html"),
    );
    let mut args = tune_args(model, &out, &[&SPACE[..], &SHORT].concat());
    args.extend(
        [
            "--concurrency-range",
            "1:16",
            "--json",
            "--quiet",
            "--write-config",
            pbtxt.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ]
        .map(String::from),
    );
    let o = bertqa(&args);
    let v = json_of(&o);
    assert_schema("tune", &v);
    assert_eq!(config(model), before, "the configuration is back");
    assert_eq!(v["restored"], true);
    assert_eq!(crate::common::read_json(out.join("tune.json")), v);
    assert_eq!(
        crate::common::read_json(out.join("original-config.json")),
        before
    );
    assert_eq!(
        crate::common::read_json(out.join("tune-state.json"))["restored"],
        true
    );
    // The configuration found: max batch 8, one instance, no dynamic batching.
    let baseline = &v["baseline"];
    assert_eq!(
        baseline["config"],
        serde_json::json!({"max_batch_size": 8, "instance_count": 1, "dynamic_batching": null})
    );
    assert_eq!(baseline["within_budget"], true, "{baseline}");
    let best = &v["best"];
    assert_eq!(best["within_budget"], true);
    assert!(
        features_per_s(best) >= 2.0 * features_per_s(baseline),
        "best {best}\nbaseline {baseline}"
    );
    assert!(best["config"]["dynamic_batching"].is_object(), "{best}");
    assert!(!v["pareto"].as_array().unwrap().is_empty());
    // Half the grid's 16 points, the found configuration aside, at most; a candidate
    // that would serve as one measured (max batch 32 without dynamic batching, should
    // the search stay without it) is skipped, not loaded, and says so.
    let candidates = v["candidates"].as_array().unwrap();
    assert!(candidates.len() <= 1 + 8, "{} candidates", candidates.len());
    let status = |s: &str| candidates.iter().filter(|c| c["status"] == s).count();
    for c in candidates.iter().filter(|c| c["status"] == "skipped") {
        assert!(
            c["error"].as_str().unwrap().starts_with("serves as #0"),
            "{c}"
        );
    }
    assert_eq!(
        status("measured") + status("cut") + status("skipped"),
        candidates.len(),
        "{v}"
    );
    // The best few measured again in alternation; the best named by those figures.
    let remeasured = v["remeasured"].as_array().unwrap();
    assert!(!remeasured.is_empty() && remeasured.len() <= 3, "{v}");
    assert!(remeasured.contains(&v["best_index"]), "{v}");
    for i in remeasured {
        let r = &candidates[i.as_u64().unwrap() as usize]["remeasured"];
        assert_eq!(r["rounds"].as_array().unwrap().len(), 2, "{r}");
        let (lo, hi) = (
            r["spread"][0].as_f64().unwrap(),
            r["spread"][1].as_f64().unwrap(),
        );
        let mean = r["features_per_s"].as_f64().unwrap();
        assert!(0.0 < lo && lo <= mean && mean <= hi, "{r}");
    }
    assert_eq!(best["remeasured"]["within_budget"], true, "{best}");
    // The page: a point per candidate, the best ringed, the budget line.
    let dom = rendered(&html);
    assert_eq!(
        dom.matches("<circle class=\"candidate\"").count(),
        candidates.len() - status("skipped")
    );
    assert_eq!(dom.matches("<circle class=\"best\"").count(), 1);
    assert!(dom.contains("<line class=\"budget\""));
    confirm_on_a_fresh_server(model, &pbtxt, best);
}

/// Loads `pbtxt` as `model`'s configuration into a fresh server of its own and runs
/// `perf` at the best's concurrency: the throughput tune reported, within the noise of
/// two shared cores.
fn confirm_on_a_fresh_server(model: &str, pbtxt: &Path, best: &Value) {
    let tmp = tempfile::tempdir().unwrap();
    // The test models find their code at ../lib from the repository.
    std::os::unix::fs::symlink(root().join("models/lib"), tmp.path().join("lib")).unwrap();
    let dir = tmp.path().join("repo").join(model);
    std::fs::create_dir_all(dir.join("1")).unwrap();
    std::fs::copy(
        root().join("models/tune").join(model).join("1/model.py"),
        dir.join("1/model.py"),
    )
    .unwrap();
    std::fs::copy(pbtxt, dir.join("config.pbtxt")).unwrap();
    let fresh: Server = start_server_on(&tmp.path().join("repo"), &[], None);
    let served = model_config(fresh.http_port, model);
    assert_eq!(served["max_batch_size"], best["config"]["max_batch_size"]);
    assert_eq!(
        served["instance_group"][0]["count"],
        best["config"]["instance_count"]
    );
    let concurrency = best["concurrency"].to_string();
    let o = bertqa(&[
        "perf",
        "--model",
        model,
        "--data",
        SAMPLE,
        "--url",
        &fresh.url,
        "--batch-size",
        "1",
        "--concurrency",
        &concurrency,
        "--shared-memory",
        "none",
        "--measurement-request-count",
        "48",
        "--no-metrics",
        "--json",
        "--quiet",
    ]);
    let v = json_of(&o);
    let measured = v["levels"][0]["throughput"]["features_per_s"]
        .as_f64()
        .unwrap();
    let reported = features_per_s(best);
    assert!(
        measured >= 0.7 * reported,
        "perf measured {measured} features/s, tune reported {reported}"
    );
}

#[test]
fn tune_from_tiny_berts_shipped_configuration_finds_one_as_good_or_says_it_is_best() {
    let model = "tune-tiny-bert";
    let before = config(model);
    let tmp = tempfile::tempdir().unwrap();
    let o = bertqa(&tune_args(
        model,
        tmp.path(),
        &[
            "--max-batch-sizes",
            "8",
            "--queue-delays-us",
            "100,2000",
            "--instances",
            "1",
            "--preferred-batch-sizes",
            "none",
            "--concurrency",
            "4",
            "--latency-threshold",
            "20000",
            "--measurement-request-count",
            "8",
            "--max-trials",
            "3",
            "--stability-percentage",
            "100",
            "--warmup",
            "2",
            "--quiet",
        ],
    ));
    ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(config(model), before);
    // The shipped configuration (max batch 8, delay 100 us) is candidate 0, and the
    // only other candidate is the delay of 2000 us.
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.iter().any(|l| l
            .trim_start()
            .starts_with("0  max batch 8, 1 instance, delay 100 us")),
        "{text}"
    );
    assert!(
        text.contains(
            "best: the configuration found (max batch 8, 1 instance, delay 100 us) serves best"
        ) || text.contains("best: #1, max batch 8, 1 instance, delay 2000 us: "),
        "{text}"
    );
    assert!(text.contains("the original configuration is back (read back and equal)"));
}

#[test]
fn a_candidate_that_fails_to_load_is_reported_and_the_original_is_back() {
    let model = "tune-refuses-16";
    let before = config(model);
    let tmp = tempfile::tempdir().unwrap();
    // Max batch 8 or 16, dynamic batching off or at 0 us, one level of 4 in flight.
    let one_level = [
        "--queue-delays-us",
        "0",
        "--instances",
        "1",
        "--preferred-batch-sizes",
        "none",
        "--concurrency",
        "4",
        "--latency-threshold",
        "1000",
        "--measurement-request-count",
        "12",
        "--stability-percentage",
        "100",
        "--json",
        "--quiet",
    ];
    let o = bertqa(&tune_args(
        model,
        tmp.path(),
        &[&["--max-batch-sizes", "8,16"][..], &one_level].concat(),
    ));
    let v = json_of(&o);
    assert_eq!(config(model), before);
    let candidates = v["candidates"].as_array().unwrap();
    let failed: Vec<&Value> = candidates
        .iter()
        .filter(|c| c["status"] == "failed_to_load")
        .collect();
    // Every candidate of max batch size 16 that was loaded, and only those, with the
    // server's words (without dynamic batching, 16 serves as the 8 found: skipped).
    assert!(!failed.is_empty(), "{v}");
    for c in candidates.iter().filter(|c| c["status"] != "skipped") {
        assert_eq!(
            c["status"] == "failed_to_load",
            c["config"]["max_batch_size"] == 16,
            "{c}"
        );
    }
    for c in &failed {
        let error = c["error"].as_str().unwrap();
        assert!(
            error.contains("refusing max_batch_size 16 (test fault)"),
            "{c}"
        );
        assert!(c["throughput"].is_null());
    }
    // The search went on after it.
    assert!(
        candidates
            .iter()
            .filter(|c| c["status"] == "measured")
            .count()
            >= 2,
        "{v}"
    );
    // --keep-best leaves the best loaded, without the marker; --restore then puts the
    // original back.
    let kept = tmp.path().join("kept");
    let o = bertqa(&tune_args(
        model,
        &kept,
        &[&["--max-batch-sizes", "8", "--keep-best"][..], &one_level].concat(),
    ));
    let v = json_of(&o);
    assert_eq!(
        (&v["kept_best"], &v["restored"]),
        (&Value::Bool(true), &Value::Bool(false)),
        "{v}"
    );
    let loaded = config(model);
    assert_eq!(
        loaded["max_batch_size"],
        v["best"]["config"]["max_batch_size"]
    );
    assert!(loaded["dynamic_batching"].is_object(), "{loaded}");
    assert!(
        loaded["parameters"].get("bertqa_tune").is_none(),
        "{loaded}"
    );
    // The directory holds the only copy of the original: a new run may not reuse it.
    let o = bertqa(&tune_args(
        model,
        &kept,
        &[&["--max-batch-sizes", "8"][..], &one_level].concat(),
    ));
    assert_fails_with(
        &o,
        &["serves the best configuration a run kept", "--restore"],
    );
    let o = bertqa(&["tune", "--restore", "--output-dir", kept.to_str().unwrap()]);
    ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("is back, in place of the best configuration"),
        "{}",
        show(&o)
    );
    assert_eq!(config(model), before);
}

#[test]
fn an_interrupt_mid_candidate_puts_the_original_back() {
    let model = "tune-fixed-cost-sigint";
    let before = config(model);
    let tmp = tempfile::tempdir().unwrap();
    let child = spawn_bertqa(&tune_args(model, tmp.path(), &[&SPACE[..], &LONG].concat()));
    wait_for_marker(model);
    std::thread::sleep(Duration::from_millis(700));
    // SAFETY: plain kill(2) of the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("stopped by an interrupt after")
            && stderr.contains("the original configuration is back"),
        "{stderr}"
    );
    assert_eq!(config(model), before);
    // What was measured before the interrupt is reported.
    let v = crate::common::read_json(tmp.path().join("tune.json"));
    assert_eq!(v["restored"], true);
    assert!(v["candidates"].as_array().unwrap().len() >= 2, "{v}");
}

#[test]
fn after_a_kill_models_warns_tune_refuses_and_restore_puts_the_original_back() {
    let model = "tune-fixed-cost-sigkill";
    let before = config(model);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut child = spawn_bertqa(&tune_args(model, &out, &[&SPACE[..], &LONG].concat()));
    wait_for_marker(model);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let s = tune_server();
    let o = bertqa(&["models", "--url", &s.url, "--model", model]);
    ok(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!(
            "warning: model {model:?} is in a candidate configuration of a `bertqa tune` that did not finish"
        )) && stderr.contains(&format!("--restore --output-dir {}", out.display())),
        "{stderr}"
    );
    // A new run refuses to start, naming the way back.
    let again = tmp.path().join("again");
    let o = bertqa(&tune_args(model, &again, &[&SPACE[..], &SHORT].concat()));
    assert_fails_with(
        &o,
        &["unfinished tune", "bertqa tune --restore --output-dir"],
    );
    assert!(!again.join("tune-state.json").exists());
    let o = bertqa(&["tune", "--restore", "--output-dir", out.to_str().unwrap()]);
    ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("is back"),
        "{}",
        show(&o)
    );
    assert_eq!(config(model), before);
    assert_eq!(
        crate::common::read_json(out.join("tune-state.json"))["restored"],
        true
    );
    let o = bertqa(&["models", "--url", &s.url, "--model", model]);
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("warning"),
        "{}",
        show(&o)
    );
    let o = bertqa(&["tune", "--restore", "--output-dir", out.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("was already back"),
        "{}",
        show(&o)
    );
}

#[test]
fn a_step_of_a_text_ensemble_is_tuned_through_the_ensemble() {
    let (ensemble, step) = ("tune-text-ensemble", "tune-text-null");
    let models = [ensemble, "tune-text-tokenizer", step];
    let before: Vec<Value> = models.iter().map(|m| config(m)).collect();
    let tmp = tempfile::tempdir().unwrap();
    let o = bertqa(&tune_args(
        ensemble,
        tmp.path(),
        &[
            "--step",
            step,
            "--instances",
            "1,2",
            "--concurrency",
            "2",
            "--latency-threshold",
            "5000",
            "--measurement-request-count",
            "8",
            "--stability-percentage",
            "100",
            "--json",
            "--quiet",
        ],
    ));
    let v = json_of(&o);
    assert_schema("tune", &v);
    assert_eq!(v["model"], step);
    // No batch dimension: the instance count alone varies.
    let counts: Vec<&Value> = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["status"], "measured", "{c}");
            assert_eq!(c["config"]["max_batch_size"], 0);
            assert!(c["config"]["dynamic_batching"].is_null());
            &c["config"]["instance_count"]
        })
        .collect();
    assert_eq!(counts, [1, 2]);
    assert!(v["warnings"][0]
        .as_str()
        .unwrap()
        .contains("has no batch dimension (max_batch_size 0): only its instance count"));
    // The step is back, and the ensemble and its other step were never changed.
    let after: Vec<Value> = models.iter().map(|m| config(m)).collect();
    assert_eq!(after, before);
}

#[test]
fn tune_refuses_a_server_that_cannot_load_configurations_in_one_sentence() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().to_str().unwrap();
    let common = [
        "--data",
        SAMPLE,
        "--latency-threshold",
        "100",
        "--output-dir",
        out,
    ];
    let http = format!("127.0.0.1:{}", server().http_port);
    let ml = crate::common::oip::mlserver();
    let cases: [(&[&str], &[&str]); 4] = [
        // The shared Triton runs without explicit model control.
        (
            &["--model", "null", "--protocol", "http", "--url", &http],
            &["--model-control-mode=explicit --load-model=null"],
        ),
        // MLServer has no model configuration.
        (
            &[
                "--model",
                "tiny-bert",
                "--protocol",
                "http",
                "--url",
                &ml.http,
            ],
            &["mlserver", "no model_configuration"],
        ),
        // gRPC alone: the repository calls need the HTTP address.
        (
            &["--model", "null", "--url", &server().url],
            &["--control-url"],
        ),
        // A text ensemble: which step?
        (
            &["--model", "qa-text-logits", "--url", &server().url],
            &["is an ensemble: name the step to tune with --step (its steps: "],
        ),
    ];
    for (args, want) in cases {
        let o = bertqa(&[&["tune"][..], args, &common].concat());
        assert_fails_with(&o, want);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{}", show(&o));
    }
    // Nothing was written.
    assert!(!tmp.path().join("tune-state.json").exists());
}

/// A progress that panics once candidate `.0` is measured (loaded: not the
/// configuration found, candidate 0).
struct PanicAt(usize);

impl bertqa::perf::PerfProgress for PanicAt {}

impl bertqa::tune::TuneProgress for PanicAt {
    fn done(
        &self,
        index: usize,
        _candidate: &bertqa::tune::report::Candidate,
        _standing: &bertqa::tune::Standing,
    ) {
        if index == self.0 {
            panic!("injected at candidate {index}");
        }
    }
}

/// A panic inside the search (here a progress callback's, once candidate 2 is loaded
/// and measured, through the library's `Tune`; candidate 1, max batch 32 without
/// dynamic batching, is skipped) still puts the original back before it goes on.
#[test]
fn a_panic_inside_the_search_puts_the_original_back() {
    use bertqa::backend::{describe, Binding, ClientConfig, Protocol};
    use bertqa::perf::{Budget, Load, PerfConfig, Window};
    use bertqa::tune::{search::Space, Control, Tune, Workload};
    let model = "tune-fixed-cost-panic";
    let before = config(model);
    let s = tune_server();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let connect = |url: String, protocol| {
        let config = ClientConfig {
            url,
            protocol,
            request_timeout: Duration::from_secs(600),
            ..ClientConfig::default()
        };
        rt.block_on(bertqa::Pool::single(&config)).unwrap()
    };
    let server = connect(s.url.clone(), Protocol::Grpc);
    let http = connect(format!("127.0.0.1:{}", s.http_port), Protocol::Http);
    let control = rt.block_on(Control::open(http, model)).unwrap();
    let (metadata, model_config) = rt
        .block_on(describe(server.first_client(), model, ""))
        .unwrap();
    let binding =
        Binding::infer(&metadata, model_config.as_ref(), "", &Default::default()).unwrap();
    let tokenizer =
        bertqa::BertTokenizer::from_vocab_file(&root().join("vocab/vocab.txt"), true).unwrap();
    let dataset = bertqa::squad::read(&root().join(SAMPLE)).unwrap();
    let (features, _) = bertqa::features::build(&tokenizer, Default::default(), &dataset).unwrap();
    let padding = bertqa::Padding::for_model(&binding, 384, true);
    let tmp = tempfile::tempdir().unwrap();
    let tune = Tune {
        model,
        control: &control,
        server: &server,
        workload: Workload::Tokens {
            batches: bertqa::perf::make_batches(&features, 1, padding),
            overrides: Default::default(),
        },
        perf: PerfConfig {
            load: Load::Concurrency(vec![2]),
            window: Window::Count(8),
            max_trials: 3,
            stability_percent: 50.0,
            budget: Some(Budget {
                threshold_us: 150_000.0,
                percentile: 99.0,
                binary_search: false,
            }),
            ..PerfConfig::default()
        },
        space: Space {
            max_batch_sizes: vec![8, 32],
            delays_us: vec![0],
            instances: vec![1],
            preferred: vec![],
        },
        exhaustive: false,
        remeasure: 0,
        keep_best: false,
        output_dir: tmp.path(),
        stop: Default::default(),
    };
    let caught =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tune.run(&rt, &PanicAt(2))));
    let payload = caught.err().expect("the panic goes on");
    let said = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert_eq!(said, "injected at candidate 2");
    assert_eq!(config(model), before);
    let (state, _) = bertqa::tune::state::read(tmp.path()).unwrap();
    assert!(state.restored, "the state says the original is back");
}
