//! Error paths against an in-process fake Triton (`common::fake_triton`): answers a real
//! server cannot be made to give on demand. The happy paths are tested against the real
//! server in `models.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bertqa::proto::model_infer_response::InferOutputTensor;
use bertqa::proto::*;
use bertqa::types::Feature;
use bertqa::Error;
use bertqa::{
    bind, decode_response, prepare_request, Binding, BindingOverrides, ClientConfig, GrpcCall,
    InferRequest, Pool, PoolConfig, RetryPolicy, TritonClient,
};
use tonic::Status;

use crate::common::fake_triton::{nvidia, serve, Fake};
use crate::common::{bertqa, rt, show};

fn connect(rt: &tokio::runtime::Runtime, url: &str, timeout_ms: u64) -> TritonClient {
    let c = ClientConfig {
        url: url.into(),
        connect_timeout: Duration::from_millis(2000),
        request_timeout: Duration::from_millis(timeout_ms),
        ..Default::default()
    };
    rt.block_on(TritonClient::connect(&c)).unwrap()
}

fn one_feature() -> Feature {
    Feature {
        unique_id: 1_000_000_000,
        example_index: 0,
        doc_span_index: 0,
        input_ids: vec![101, 2054, 102, 1996, 102],
        query_len: 1,
        token_to_orig: vec![0],
        token_is_max_context: vec![true],
        template: None,
    }
}

/// Infers through the fake with `respond` building the response outputs.
fn infer_with(
    respond: impl Fn() -> (Vec<InferOutputTensor>, Vec<Vec<u8>>) + Send + Sync + 'static,
) -> Result<Vec<bertqa::types::Logits>, Error> {
    let mut fake = nvidia();
    fake.infer = Arc::new(move |req| {
        assert_eq!(req.raw_input_contents.len(), 3);
        assert_eq!(req.raw_input_contents[0].len(), 384 * 8);
        let (outputs, raw) = respond();
        Ok(ModelInferResponse {
            model_name: "m".into(),
            outputs,
            raw_output_contents: raw.into_iter().map(Into::into).collect(),
            ..Default::default()
        })
    });
    let (rt, url) = serve(fake);
    let c = connect(&rt, &url, 5000);
    let b = rt.block_on(bind(&c, "m", "", &BindingOverrides::default()))?;
    let f = one_feature();
    let req = prepare_request(&Arc::new(b), vec![Arc::new(f)], 384)?;
    let resp = rt.block_on(c.infer(req.clone()))?;
    decode_response(&req, &resp)
}

/// A request of one feature padded to 384 tokens.
fn one_request(b: &Binding, f: &Feature) -> InferRequest {
    prepare_request(&Arc::new(b.clone()), vec![Arc::new(f.clone())], 384).unwrap()
}

fn out(name: &str, datatype: &str, shape: Vec<i64>) -> InferOutputTensor {
    InferOutputTensor {
        name: name.into(),
        datatype: datatype.into(),
        shape,
        ..Default::default()
    }
}

#[test]
fn correct_fake_response_decodes() {
    let logits = infer_with(|| {
        let start: Vec<u8> = (0..384).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let end: Vec<u8> = (0..384).flat_map(|i| (-(i as f32)).to_le_bytes()).collect();
        (
            vec![
                out("output__0", "FP32", vec![1, 384]),
                out("output__1", "FP32", vec![1, 384]),
            ],
            vec![start, end],
        )
    })
    .unwrap();
    assert_eq!(logits[0].start[7], 7.0);
    assert_eq!(logits[0].end[383], -383.0);
}

#[test]
fn wrong_output_shape_names_the_tensor() {
    let e = infer_with(|| {
        (
            vec![
                out("output__0", "FP32", vec![1, 383]),
                out("output__1", "FP32", vec![1, 384]),
            ],
            vec![vec![0; 383 * 4], vec![0; 384 * 4]],
        )
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "model \"m\", tensor \"output__0\": expected shape [1, 384], got shape [1, 383]"
    );
}

#[test]
fn wrong_output_dtype_names_the_tensor() {
    let e = infer_with(|| {
        (
            vec![
                out("output__0", "FP32", vec![1, 384]),
                out("output__1", "FP64", vec![1, 384]),
            ],
            vec![vec![0; 384 * 4], vec![0; 384 * 8]],
        )
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "model \"m\", tensor \"output__1\": expected FP32, got FP64"
    );
}

#[test]
fn missing_output_and_short_contents_are_errors() {
    let e = infer_with(|| {
        (
            vec![out("output__0", "FP32", vec![1, 384])],
            vec![vec![0; 384 * 4]],
        )
    })
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("tensor \"output__1\": expected an output tensor of that name, got missing"),
        "{e}"
    );
    let e = infer_with(|| {
        (
            vec![
                out("output__0", "FP32", vec![1, 384]),
                out("output__1", "FP32", vec![1, 384]),
            ],
            vec![vec![0; 384 * 4], vec![0; 10]],
        )
    })
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("expected 1536 bytes of raw contents, got 10 bytes"),
        "{e}"
    );
}

#[test]
fn server_errors_are_typed() {
    let mut fake = nvidia();
    fake.infer = Arc::new(|_| {
        Err(Status::unavailable(
            "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'",
        ))
    });
    let (rt, url) = serve(fake);
    let c = connect(&rt, &url, 5000);
    let b = rt
        .block_on(bind(&c, "m", "", &BindingOverrides::default()))
        .unwrap();
    let f = one_feature();
    let e = rt.block_on(c.infer(one_request(&b, &f))).unwrap_err();
    assert!(matches!(e, Error::PermissionDenied { .. }), "{e}");

    let mut fake = nvidia();
    fake.infer = Arc::new(|_| {
        Err(Status::internal(
            "Failed to process the request(s) for model 'm'",
        ))
    });
    let (rt, url) = serve(fake);
    let c = connect(&rt, &url, 5000);
    let e = rt.block_on(c.infer(one_request(&b, &f))).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("Triton at {url} answered Internal for model \"m\": Failed to process the request(s) for model 'm'")
    );

    // A server that takes a minute: the 300 ms deadline ends the call long before.
    let mut fake = nvidia();
    fake.delay = Some(Duration::from_secs(60));
    let (rt, url) = serve(fake);
    let c = connect(&rt, &url, 300);
    let t = Instant::now();
    let e = rt.block_on(c.infer(one_request(&b, &f))).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Timeout {
                timeout_ms: 300,
                ..
            }
        ),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

#[test]
fn unrecognised_layout_lists_tensors_and_flags() {
    let mut fake = nvidia();
    fake.inputs = vec![
        ("tokens", "INT64", vec![-1, 384]),
        ("types", "INT64", vec![-1, 384]),
        ("mask", "INT64", vec![-1, 384]),
    ];
    let (rt, url) = serve(fake);
    let c = connect(&rt, &url, 5000);
    let e = rt
        .block_on(bind(&c, "m", "", &BindingOverrides::default()))
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("cannot tell what input \"tokens\" is for"),
        "{msg}"
    );
    assert!(
        msg.contains("`input_ids`, `segment_ids` and `input_mask`"),
        "{msg}"
    );
    // One line naming the tensor; the model's tensors are kept for `-v`.
    assert!(!msg.contains('\n') && !msg.contains("[-1, 384]"), "{msg}");
    match &e {
        bertqa::Error::Binding { tensors, .. } => {
            assert!(tensors.contains(&"input  types INT64 [-1, 384]".to_string()))
        }
        other => panic!("{other:?}"),
    }
    let ask = |verbose: bool| {
        let mut args = vec![
            "ask",
            "--url",
            &url,
            "--model",
            "m",
            "--question",
            "q",
            "--context",
            "c",
        ];
        if verbose {
            args.push("-v");
        }
        bertqa(&args)
    };
    let o = ask(false);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot tell what input \"tokens\" is for"),
        "{err}"
    );
    let err = String::from_utf8_lossy(&ask(true).stderr).to_string();
    assert!(
        err.contains("\n  tensors of model \"m\":\n    input  tokens INT64 [-1, 384]\n"),
        "{err}"
    );
    // The flags map it.
    let o = BindingOverrides {
        input_ids: Some("tokens".into()),
        segment_ids: Some("types".into()),
        input_mask: Some("mask".into()),
        ..Default::default()
    };
    let b = rt.block_on(bind(&c, "m", "", &o)).unwrap();
    assert_eq!(b.inputs[0].name, "tokens");

    // The CLI shows the failure in the report.
    let o = bertqa(&["models", "--url", &url, "--model", "m"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("binding: model \"m\": cannot tell"));
    let o = bertqa(&[
        "models",
        "--url",
        &url,
        "--model",
        "m",
        "--input-ids",
        "tokens",
        "--segment-ids",
        "types",
        "--input-mask",
        "mask",
    ]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("input_ids    <- tokens (INT64)"),
        "{}",
        show(&o)
    );

    // Wrong input dtype is named.
    let mut fake = nvidia();
    fake.inputs[1].1 = "FP32";
    let (rt, url) = serve(fake);
    let c = connect(&rt, &url, 5000);
    let e = rt
        .block_on(bind(&c, "m", "", &BindingOverrides::default()))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "model \"m\", tensor \"input__1\": expected INT32 or INT64, got FP32"
    );
}

#[test]
fn model_not_ready_is_reported_with_ready_models() {
    let mut fake = nvidia();
    fake.ready = false;
    let (rt, url) = serve(fake);
    let c = connect(&rt, &url, 5000);
    let e = rt.block_on(c.model_metadata("m", "")).unwrap_err();
    match &e {
        Error::ModelNotReady { state, ready, .. } => {
            assert_eq!(state, "UNAVAILABLE: load failed");
            assert_eq!(ready, &vec!["other".to_string()]);
        }
        other => panic!("{other}"),
    }
    // `models --model m`: the run completes, the readiness gate fails → exit 1.
    let o = bertqa(&["models", "--url", &url, "--model", "m"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("gate failed: model \"m\" is not ready"));
}

#[test]
fn a_server_that_never_answers_is_bounded_by_the_timeout() {
    // Accepts TCP connections and never speaks HTTP/2.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    let t = Instant::now();
    let o = bertqa(&[
        "models",
        "--url",
        &url,
        "--connect-timeout-ms",
        "500",
        "--timeout-ms",
        "800",
    ]);
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&url), "{err}");
}

/// A pool over `urls` with a fast backoff.
fn pool(rt: &tokio::runtime::Runtime, urls: &[&str], retries: u32) -> Pool {
    pool_of(rt, urls, 2, GrpcCall::Unary, retries)
}

/// A pool of one connection to `url` whose requests go on a stream.
fn stream_pool(rt: &tokio::runtime::Runtime, url: &str, retries: u32) -> Pool {
    pool_of(rt, &[url], 1, GrpcCall::Stream, retries)
}

fn pool_of(
    rt: &tokio::runtime::Runtime,
    urls: &[&str],
    connections: usize,
    transport: GrpcCall,
    retries: u32,
) -> Pool {
    let config = PoolConfig {
        urls: urls.iter().map(|u| u.to_string()).collect(),
        connections,
        client: ClientConfig {
            url: String::new(),
            connect_timeout: Duration::from_millis(2000),
            request_timeout: Duration::from_millis(5000),
            transport,
            ..Default::default()
        },
        retry: RetryPolicy {
            retries,
            base_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
            retry_model_errors: false,
        },
        wait_ready: Duration::ZERO,
    };
    rt.block_on(Pool::connect(&config, "m", "")).unwrap()
}

/// The binding of the fake's model "m", asked through `p`.
fn bound(rt: &tokio::runtime::Runtime, p: &Pool) -> Binding {
    rt.block_on(bind(
        p.first_client(),
        "m",
        "",
        &BindingOverrides::default(),
    ))
    .unwrap()
}

/// Sends `n` one-feature requests through `p` one after another.
fn send_each(rt: &tokio::runtime::Runtime, p: &Pool, n: usize) -> Vec<Result<(), Error>> {
    let b = bound(rt, p);
    let f = one_feature();
    (0..n)
        .map(|_| rt.block_on(p.infer(one_request(&b, &f))).map(drop))
        .collect()
}

#[test]
fn a_stream_that_ends_is_opened_again_and_its_cut_request_retried() {
    let mut fake = scripted(vec![]);
    fake.stream_cut = Some(2);
    let (unary, streamed) = (fake.unary_calls.clone(), fake.streamed.clone());
    let (rt, url) = serve(fake);
    let p = stream_pool(&rt, &url, 3);
    // Two answers per stream: the third request finds the stream cut (UNAVAILABLE, as
    // a lost connection), is retried on a new stream, and so on.
    assert!(send_each(&rt, &p, 5).iter().all(Result::is_ok));
    assert_eq!(streamed.load(Ordering::SeqCst), 5);
    assert_eq!(unary.load(Ordering::SeqCst), 0, "all on streams");
    let stats = p.retry_stats();
    assert_eq!(stats.retries.get("UNAVAILABLE"), Some(&2), "{stats:?}");
    assert_eq!(stats.total_failures(), 0);
}

#[test]
fn a_request_the_stream_rejects_is_asked_again_unary_and_the_connection_stays_unary() {
    // The first call (on the stream) and the second (its unary replay) fail: the replay's
    // status is what the retry policy sees, and the retry is unary too.
    let mut fake = scripted(vec![
        Status::unavailable("busy"),
        Status::unavailable("still busy"),
    ]);
    fake.stream_cut = Some(usize::MAX);
    let (unary, streamed) = (fake.unary_calls.clone(), fake.streamed.clone());
    let (rt, url) = serve(fake);
    let p = stream_pool(&rt, &url, 3);
    assert!(send_each(&rt, &p, 3).iter().all(Result::is_ok));
    assert_eq!(streamed.load(Ordering::SeqCst), 1);
    // The replay, its retry, and the two later requests.
    assert_eq!(unary.load(Ordering::SeqCst), 4);
    let stats = p.retry_stats();
    assert_eq!(stats.retries.get("UNAVAILABLE"), Some(&1), "{stats:?}");

    // A model error keeps its code through the replay, and is not retried.
    let mut fake = scripted(vec![Status::internal("boom"), Status::internal("boom")]);
    fake.stream_cut = Some(usize::MAX);
    let (rt, url) = serve(fake);
    let p = stream_pool(&rt, &url, 3);
    let e = send_each(&rt, &p, 1).remove(0).unwrap_err();
    assert!(
        e.to_string().contains("Internal for model \"m\": boom"),
        "{e}"
    );
}

#[test]
fn a_server_without_streams_is_asked_unary() {
    let fake = scripted(vec![]);
    let (unary, streamed) = (fake.unary_calls.clone(), fake.streamed.clone());
    let (rt, url) = serve(fake);
    let p = stream_pool(&rt, &url, 0);
    assert!(send_each(&rt, &p, 3).iter().all(Result::is_ok));
    assert_eq!(streamed.load(Ordering::SeqCst), 0);
    assert_eq!(unary.load(Ordering::SeqCst), 3);
    assert_eq!(p.retry_stats().total_failures(), 0);
}

/// A correct answer for one feature.
fn one_answer() -> ModelInferResponse {
    ModelInferResponse {
        model_name: "m".into(),
        outputs: vec![
            out("output__0", "FP32", vec![1, 384]),
            out("output__1", "FP32", vec![1, 384]),
        ],
        raw_output_contents: vec![vec![0u8; 384 * 4].into(), vec![0u8; 384 * 4].into()],
        ..Default::default()
    }
}

/// A fake that answers the statuses of `script` in turn (by call), then correctly.
fn scripted(script: Vec<Status>) -> Fake {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut fake = nvidia();
    fake.infer = Arc::new(
        move |_| match script.get(calls.fetch_add(1, Ordering::SeqCst)) {
            Some(s) => Err(s.clone()),
            None => Ok(one_answer()),
        },
    );
    fake
}

#[test]
fn resource_exhausted_and_deadline_exceeded_are_retried_then_counted_or_exhausted() {
    let script = || {
        vec![
            Status::resource_exhausted("queue full"),
            Status::deadline_exceeded("too slow"),
        ]
    };
    let (rt, url) = serve(scripted(script()));
    let p = pool(&rt, &[&url], 3);
    let b = bound(&rt, &p);
    let f = one_feature();
    let request = || one_request(&b, &f);
    rt.block_on(p.infer(request())).unwrap();
    let stats = p.retry_stats();
    assert_eq!(stats.retries.get("RESOURCE_EXHAUSTED"), Some(&1));
    assert_eq!(stats.retries.get("DEADLINE_EXCEEDED"), Some(&1));
    assert_eq!(stats.total_failures(), 0);
    let ep = &p.endpoint_reports()[0];
    assert_eq!((ep.requests, ep.features), (1, 1));
    assert_eq!(ep.errors.values().sum::<u64>(), 2);

    // One retry only: the budget is spent on the second failure.
    let (rt2, url) = serve(scripted(script()));
    let p = pool(&rt2, &[&url], 1);
    let e = rt2.block_on(p.infer(request())).unwrap_err();
    assert!(
        matches!(e, Error::RetriesExhausted { attempts: 2, .. }),
        "{e}"
    );
    assert!(
        e.to_string().starts_with(
            "a request failed 2 times (DEADLINE_EXCEEDED ×1, RESOURCE_EXHAUSTED ×1; \
             `retries` 1 spent); last error: request to "
        ),
        "{e}"
    );
    assert_eq!(p.retry_stats().failures.get("DEADLINE_EXCEEDED"), Some(&1));
    drop(rt);
}

#[test]
fn a_failing_endpoint_is_taken_out_its_requests_go_elsewhere_and_it_rejoins() {
    // Endpoint A refuses its first request (a restart, say), then recovers; B answers.
    let (rt_a, a) = serve(scripted(vec![Status::unavailable("restarting")]));
    let (rt_b, b_url) = serve(scripted(vec![]));
    let rt = rt();
    let p = pool(&rt, &[&a, &b_url], 1);
    let b = bound(&rt, &p);
    let f = one_feature();
    let request = || one_request(&b, &f);
    // The first pick is A; it fails, A is taken out, and B answers the retry at once.
    rt.block_on(p.infer(request())).unwrap();
    let eps = p.endpoint_reports();
    assert_eq!(eps[0].taken_out, 1, "{eps:?}");
    assert_eq!(eps[0].errors.get("UNAVAILABLE"), Some(&1), "{eps:?}");
    assert_eq!((eps[0].requests, eps[1].requests), (0, 1), "{eps:?}");
    assert_eq!(p.retry_stats().retries.get("UNAVAILABLE"), Some(&1));
    // The health check (ServerReady + ModelReady) lets A rejoin.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !p.endpoint_reports()[0].healthy {
        assert!(Instant::now() < deadline, "A never rejoined");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Back in the pool, it shares the work again.
    for _ in 0..6 {
        rt.block_on(p.infer(request())).unwrap();
    }
    let eps = p.endpoint_reports();
    assert!(eps[0].requests >= 1, "{eps:?}");
    assert_eq!(eps[0].requests + eps[1].requests, 7);
    assert_eq!(p.retry_stats().total_failures(), 0);
    drop((rt_a, rt_b));
}
