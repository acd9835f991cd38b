//! The Triton client, binding and `bertqa models` against the real local Triton.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bertqa::types::Feature;
use bertqa::Error;
use bertqa::{
    bind, decode_response, prepare_request, BindingOverrides, ClientConfig, GrpcCall, Protocol,
    SeqLen, TritonClient,
};
use bertqa::{FloatType, InputRole, IntType, Outputs};

use crate::common::{bertqa, client, numpy_tiny_bert, rt, server, show};

/// A hand-made feature: `[CLS] q [SEP] doc [SEP]` with `q` and `doc` ids.
fn feature(unique_id: u64, q: &[u32], doc: &[u32]) -> Feature {
    Feature::from_pieces(unique_id, 0, q, doc)
}

#[test]
fn health_and_server_metadata() {
    let rt = rt();
    let c = client(&rt, Protocol::Grpc, server().url.clone());
    assert!(rt.block_on(c.server_live()).unwrap());
    assert!(rt.block_on(c.server_ready()).unwrap());
    let meta = rt.block_on(c.server_metadata()).unwrap();
    assert_eq!(meta.name, "triton");
    assert_eq!(meta.version, "2.51.0");
    assert!(meta.extensions.iter().any(|e| e == "statistics"));
    let index = rt.block_on(c.repository_index()).unwrap();
    for m in [
        "null",
        "tiny-bert",
        "tiny-bert-hf",
        "tiny-bert-stacked-fp16",
    ] {
        assert!(
            index.iter().any(|i| i.name == m && i.state == "READY"),
            "{m} in {index:?}"
        );
    }
    assert!(rt.block_on(c.model_ready("tiny-bert", "")).unwrap());
}

/// (name, role, dtype) of each bound input, in the model's order.
fn input_roles(b: &bertqa::Binding) -> Vec<(&str, InputRole, IntType)> {
    b.inputs
        .iter()
        .map(|i| (i.name.as_str(), i.role, i.datatype))
        .collect()
}

#[test]
fn binding_nvidia_convention() {
    let rt = rt();
    let c = client(&rt, Protocol::Grpc, server().url.clone());
    let b = rt
        .block_on(bind(&c, "tiny-bert", "", &BindingOverrides::default()))
        .unwrap();
    let roles = input_roles(&b);
    assert_eq!(
        roles,
        vec![
            ("input__0", InputRole::InputIds, IntType::Int64),
            ("input__1", InputRole::SegmentIds, IntType::Int64),
            ("input__2", InputRole::InputMask, IntType::Int64),
        ]
    );
    match &b.outputs {
        Outputs::Split { start, end } => {
            assert_eq!(
                (start.name.as_str(), start.datatype),
                ("output__0", FloatType::Fp32)
            );
            assert_eq!(
                (end.name.as_str(), end.datatype),
                ("output__1", FloatType::Fp32)
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(b.max_batch_size, 8);
    assert_eq!(b.seq_len, SeqLen::Fixed(384));
    assert!(b.dynamic_batching);
}

#[test]
fn binding_hugging_face_convention_binds_by_name_not_position() {
    let rt = rt();
    let c = client(&rt, Protocol::Grpc, server().url.clone());
    let b = rt
        .block_on(bind(&c, "tiny-bert-hf", "", &BindingOverrides::default()))
        .unwrap();
    let roles = input_roles(&b);
    // Declared order ids, mask, type: the mask is the second input.
    assert_eq!(
        roles,
        vec![
            ("input_ids", InputRole::InputIds, IntType::Int32),
            ("attention_mask", InputRole::InputMask, IntType::Int32),
            ("token_type_ids", InputRole::SegmentIds, IntType::Int32),
        ]
    );
    assert_eq!(b.seq_len, SeqLen::Dynamic);
    assert!(matches!(&b.outputs, Outputs::Split { start, .. } if start.name == "start_logits"));
}

#[test]
fn binding_stacked_fp16_output_and_overrides() {
    let rt = rt();
    let c = client(&rt, Protocol::Grpc, server().url.clone());
    let b = rt
        .block_on(bind(
            &c,
            "tiny-bert-stacked-fp16",
            "",
            &BindingOverrides::default(),
        ))
        .unwrap();
    assert!(
        matches!(&b.outputs, Outputs::Stacked { logits } if logits.name == "logits" && logits.datatype == FloatType::Fp16)
    );
    // Overrides win over names: swapping mask and segments is the user's explicit choice.
    let o = BindingOverrides {
        segment_ids: Some("input__2".into()),
        input_mask: Some("input__1".into()),
        ..Default::default()
    };
    let b = rt.block_on(bind(&c, "tiny-bert", "", &o)).unwrap();
    assert_eq!(b.inputs[1].role, InputRole::InputMask);
    assert_eq!(b.inputs[2].role, InputRole::SegmentIds);
    let bad = BindingOverrides {
        start_logits: Some("nope".into()),
        ..Default::default()
    };
    let e = rt.block_on(bind(&c, "tiny-bert", "", &bad)).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("`start_logits` names output \"nope\""),
        "{msg}"
    );
    // One line; the model's tensors are kept for `-v`.
    assert!(!msg.contains('\n'), "{msg}");
    match &e {
        bertqa::Error::Binding { tensors, .. } => assert!(
            tensors
                .iter()
                .any(|t| t == "output output__0 FP32 [-1, 384]"),
            "{tensors:?}"
        ),
        other => panic!("{other:?}"),
    }
}

type Rows = Vec<Vec<i64>>;

/// The batch as the pipeline holds it.
fn shared(features: &[&Feature]) -> Vec<Arc<Feature>> {
    features.iter().map(|&f| Arc::new(f.clone())).collect()
}

/// Padded ids, segments and mask rows, as the model sees them.
fn padded(features: &[&Feature], seq: usize) -> (Rows, Rows, Rows) {
    let row = |_f: &Feature, g: &dyn Fn(usize) -> i64| (0..seq).map(g).collect::<Vec<_>>();
    let ids = features
        .iter()
        .map(|f| row(f, &|p| f.input_ids.get(p).map_or(0, |&v| i64::from(v))))
        .collect();
    let seg = features
        .iter()
        .map(|f| row(f, &|p| i64::from(f.segment_id(p))))
        .collect();
    let mask = features
        .iter()
        .map(|f| row(f, &|p| i64::from(f.input_mask(p))))
        .collect();
    (ids, seg, mask)
}

fn round_trip(model: &str, seq: usize, tolerance: f32) {
    let rt = rt();
    let c = client(&rt, Protocol::Grpc, server().url.clone());
    let b = rt
        .block_on(bind(&c, model, "", &BindingOverrides::default()))
        .unwrap();
    let f1 = feature(
        1_000_000_000,
        &[2054, 2003, 1996],
        &[1996, 4937, 2938, 2006, 1996, 13523, 1012],
    );
    let f2 = feature(
        1_000_000_001,
        &[2040],
        &[7592, 2088, 999, 2023, 2003, 1037, 3231, 1012, 2009, 2573],
    );
    let batch = [&f1, &f2];
    let req = prepare_request(&Arc::new(b), shared(&batch), seq).unwrap();
    let resp = rt.block_on(c.infer(req.clone())).unwrap();
    let logits = decode_response(&req, &resp).unwrap();
    let (ids, seg, mask) = padded(&batch, seq);
    let (want_s, want_e) = numpy_tiny_bert(&ids, &seg, &mask);
    for (row, l) in logits.iter().enumerate() {
        assert_eq!(l.unique_id, batch[row].unique_id);
        assert_eq!(l.start.len(), seq);
        for p in 0..batch[row].len() {
            let (ds, de) = (
                (l.start[p] - want_s[row][p]).abs(),
                (l.end[p] - want_e[row][p]).abs(),
            );
            assert!(
                ds <= tolerance * want_s[row][p].abs().max(1.0)
                    && de <= tolerance * want_e[row][p].abs().max(1.0),
                "{model} row {row} pos {p}: got ({}, {}), numpy ({}, {})",
                l.start[p],
                l.end[p],
                want_s[row][p],
                want_e[row][p]
            );
        }
    }
    // The logits are not trivially constant.
    let first = logits[0].start[0];
    assert!(logits[0].start[..f1.len()].iter().any(|&x| x != first));
}

#[test]
fn inference_round_trip_matches_numpy_twin_nvidia_int64() {
    round_trip("tiny-bert", 384, 1e-5);
}

#[test]
fn inference_round_trip_matches_numpy_twin_hf_int32_dynamic_length() {
    round_trip("tiny-bert-hf", 24, 1e-5);
}

#[test]
fn inference_round_trip_onnx_runtime_matches_numpy_twin() {
    // A different implementation (onnxruntime) of the same weights: float noise only.
    round_trip("bert-onnx", 40, 1e-4);
    round_trip("bert-onnx-fp16", 40, 1.0 / 1024.0);
}

#[test]
fn inference_round_trip_fp16_stacked() {
    // FP16 keeps 11 significant bits: relative error below 2^-11.
    round_trip("tiny-bert-stacked-fp16", 32, 1.0 / 1024.0);
}

#[test]
fn null_model_takes_a_batch_of_64() {
    let rt = rt();
    let c = client(&rt, Protocol::Grpc, server().url.clone());
    let b = rt
        .block_on(bind(&c, "null", "", &BindingOverrides::default()))
        .unwrap();
    assert_eq!(b.max_batch_size, 64);
    let feats: Vec<Feature> = (0..64)
        .map(|i| feature(1_000_000_000 + i, &[2054], &[1996, 4937]))
        .collect();
    let batch: Vec<&Feature> = feats.iter().collect();
    let b = Arc::new(b);
    let req = prepare_request(&b, shared(&batch), 384).unwrap();
    let resp = rt.block_on(c.infer(req.clone())).unwrap();
    let logits = decode_response(&req, &resp).unwrap();
    assert_eq!(logits.len(), 64);
    assert!(logits
        .iter()
        .all(|l| l.start.iter().chain(&l.end).all(|&x| x == 0.0)));
    // Above the max batch size is refused before anything is sent.
    let many: Vec<Feature> = (0..65).map(|i| feature(i, &[1], &[2])).collect();
    let refs: Vec<&Feature> = many.iter().collect();
    assert!(prepare_request(&b, shared(&refs), 384).is_err());
}

#[test]
fn the_stream_transport_carries_requests_and_a_rejected_one_goes_unary() {
    let rt = rt();
    let connect = |transport| {
        rt.block_on(TritonClient::connect(&ClientConfig {
            url: server().url.clone(),
            transport,
            ..Default::default()
        }))
        .expect("connect")
    };
    let f = feature(1_000_000_000, &[2054, 2003], &[1996, 4937, 2938]);
    let request = |c: &TritonClient, model: &str| {
        let b = rt
            .block_on(bind(c, model, "", &BindingOverrides::default()))
            .unwrap();
        prepare_request(&Arc::new(b), shared(&[&f]), 384).unwrap()
    };
    // On the stream every request carries the id its response is matched by; unary
    // requests carry none.
    let streamed = connect(GrpcCall::Stream);
    let unary = connect(GrpcCall::Unary);
    let mut ids = Vec::new();
    for _ in 0..3 {
        let req = request(&streamed, "tiny-bert");
        let resp = rt.block_on(streamed.infer(req.clone())).unwrap();
        let via_unary = rt.block_on(unary.infer(req.clone())).unwrap();
        assert_eq!(via_unary.id, "");
        assert_eq!(
            decode_response(&req, &resp).unwrap(),
            decode_response(&req, &via_unary).unwrap(),
            "the same logits either way"
        );
        ids.push(resp.id.parse::<u64>().expect("a numeric id"));
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");

    // A model error comes back on the stream as a message without a code: the request
    // is asked again unary, whose status names it, and the connection stays unary.
    let e = rt
        .block_on(streamed.infer(request(&streamed, "fault-internal")))
        .unwrap_err();
    match &e {
        Error::Server { code, message, .. } => {
            assert_eq!(*code, bertqa::error::Code::Internal, "{e}");
            assert_eq!(message, "injected fault: model exploded");
        }
        other => panic!("{other}"),
    }
    let resp = rt
        .block_on(streamed.infer(request(&streamed, "tiny-bert")))
        .unwrap();
    assert_eq!(resp.id, "", "unary after the error");
}

#[test]
fn unknown_model_lists_ready_models() {
    let rt = rt();
    let c = client(&rt, Protocol::Grpc, server().url.clone());
    let e = rt
        .block_on(c.model_metadata("no-such-model", ""))
        .unwrap_err();
    match &e {
        Error::ModelNotFound {
            model, available, ..
        } => {
            assert_eq!(model, "no-such-model");
            assert!(
                available.iter().flatten().any(|m| m == "tiny-bert"),
                "{available:?}"
            );
        }
        other => panic!("{other}"),
    }
    let o = bertqa(&["models", "--url", &server().url, "--model", "no-such-model"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: model \"no-such-model\" not found"),
        "{err}"
    );
    assert!(err.contains("tiny-bert-hf"), "{err}");
}

#[test]
fn models_command_json_shows_the_binding_of_all_five_tensors() {
    let o = bertqa(&[
        "models",
        "--url",
        &server().url,
        "--model",
        "tiny-bert-hf",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], 1);
    assert_eq!(v["server"]["version"], "2.51.0");
    let b = &v["model"]["binding"];
    let inputs: Vec<(String, String, String)> = b["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap().into(),
                i["role"].as_str().unwrap().into(),
                i["datatype"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        inputs,
        vec![
            ("input_ids".into(), "input_ids".into(), "INT32".into()),
            ("attention_mask".into(), "input_mask".into(), "INT32".into()),
            (
                "token_type_ids".into(),
                "segment_ids".into(),
                "INT32".into()
            ),
        ]
    );
    assert_eq!(b["outputs"]["layout"], "split");
    assert_eq!(b["outputs"]["start"]["name"], "start_logits");
    assert_eq!(b["outputs"]["start"]["datatype"], "FP32");
    assert_eq!(b["outputs"]["end"]["name"], "end_logits");
    assert_eq!(b["outputs"]["end"]["datatype"], "FP32");
    assert_eq!(b["max_batch_size"], 8);
    assert_eq!(b["seq_len"], "dynamic");
    assert_eq!(v["model"]["dynamic_batching"]["max_queue_delay_us"], 100);
    assert_eq!(v["model"]["instance_groups"][0]["kind"], "KIND_CPU");

    let o = bertqa(&[
        "models",
        "--url",
        &server().url,
        "--model",
        "tiny-bert",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let b = &v["model"]["binding"];
    assert_eq!(b["inputs"][0]["datatype"], "INT64");
    assert_eq!(b["inputs"][2]["role"], "input_mask");
    assert_eq!(b["outputs"]["end"]["name"], "output__1");
    assert_eq!(b["seq_len"]["fixed"], 384);
}

#[test]
fn models_command_text_lists_the_repository() {
    let o = bertqa(&["models", "--url", &server().url]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("triton 2.51.0"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("tiny-bert-hf") && l.contains("READY")),
        "{out}"
    );
}

#[test]
fn server_that_is_not_there_fails_fast_with_one_line() {
    let port = crate::common::free_port();
    let url = format!("127.0.0.1:{port}");
    let t = Instant::now();
    let o = bertqa(&["models", "--url", &url, "--connect-timeout-ms", "2000"]);
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("cannot reach Triton at {url}")),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

/// Models served without Triton's batching (`max_batch_size: 0`, the batch dimension in
/// the dims: `[-1, 384]`, and `[-1, -1]` for a dynamic sequence length) bind by the
/// rule for batching nobody declares and answer as their batched twins, byte for byte,
/// over gRPC and HTTP.
#[test]
fn models_served_without_triton_batching_answer_as_their_batched_twins() {
    use crate::common::{assert_same_outputs, http_url, json_of, sample_eval};
    let tmp = tempfile::tempdir().unwrap();
    let grpc = server().url.clone();
    let http = http_url();
    for (protocol, url) in [("grpc", grpc.as_str()), ("http", http.as_str())] {
        for (batched, unbatched) in [
            ("tiny-bert", "tiny-bert-nobatch"),
            ("bert-onnx", "bert-onnx-nobatch"),
        ] {
            let run = |model: &str| {
                let dir = tmp.path().join(format!("{protocol}-{model}"));
                let v = json_of(&bertqa(&sample_eval(
                    model,
                    &dir,
                    &["--protocol", protocol, "--url", url],
                )));
                (dir, v)
            };
            let (a, _) = run(batched);
            let (b, v) = run(unbatched);
            assert_same_outputs(&a, &b);
            assert_eq!(v["batch_size"], 8, "{unbatched}: bertqa's default batch");
            assert_eq!(
                v["model"]["binding"]["batching"], "undeclared",
                "{}",
                v["model"]
            );
        }
    }
}

/// TensorRT's BERT demo layout (INT32 `input_ids`, `segment_ids`, `input_mask`; one
/// output `cls_squad_logits` `[batch, seq, 2, 1, 1]`) binds without flags and answers as
/// the same logits in two outputs, byte for byte, over gRPC and HTTP.
#[test]
fn the_tensorrt_demo_layout_binds_by_itself_and_answers_as_two_outputs() {
    use crate::common::{assert_same_outputs, http_url, json_of, sample_eval};
    let rt = rt();
    let c = client(&rt, Protocol::Grpc, server().url.clone());
    let b = rt
        .block_on(bind(
            &c,
            "tiny-bert-trt-layout",
            "",
            &BindingOverrides::default(),
        ))
        .unwrap();
    assert!(
        matches!(&b.outputs, Outputs::Stacked { logits } if logits.name == "cls_squad_logits" && logits.dims == vec![384, 2, 1, 1]),
        "{:?}",
        b.outputs
    );
    assert_eq!(b.seq_len, SeqLen::Fixed(384));
    let tmp = tempfile::tempdir().unwrap();
    let grpc = server().url.clone();
    let http = http_url();
    for (protocol, url) in [("grpc", grpc.as_str()), ("http", http.as_str())] {
        let run = |model: &str| {
            let dir = tmp.path().join(format!("{protocol}-{model}"));
            json_of(&bertqa(&sample_eval(
                model,
                &dir,
                &["--protocol", protocol, "--url", url],
            )));
            dir
        };
        assert_same_outputs(&run("tiny-bert"), &run("tiny-bert-trt-layout"));
    }
}

/// `models --json` follows schema/models.schema.json for every kind of model the test
/// server has (token models of each layout, text models of each contract), a binding
/// that fails, and the repository alone, over gRPC and HTTP.
#[test]
fn models_json_follows_its_schema() {
    use crate::common::{http_url, json_following};
    let grpc = server().url.clone();
    let http = http_url();
    for (protocol, url) in [("grpc", grpc.as_str()), ("http", http.as_str())] {
        let at = ["models", "--json", "--protocol", protocol, "--url", url];
        let v = json_following("models", &at);
        assert!(v["model"].is_null());
        assert!(v["models"].as_array().unwrap().len() > 10, "{v}");
        for (model, contract) in [
            ("tiny-bert", None),
            ("tiny-bert-stacked-fp16", None),
            ("tiny-bert-nobatch", None),
            ("qa-text-answer", Some("answer")),
            ("qa-text-logits", Some("logits")),
        ] {
            let v = json_following("models", &[&at[..], &["--model", model]].concat());
            assert_eq!(v["model"]["name"], model);
            assert_eq!(v["model"]["contract"].as_str(), contract, "{model}");
            assert!(v["model"]["binding_error"].is_null(), "{model}");
        }
    }
    let v = json_following(
        "models",
        &[
            "models",
            "--json",
            "--url",
            &grpc,
            "--model",
            "tiny-bert",
            "--start-logits",
            "nope",
        ],
    );
    assert!(v["model"]["binding"].is_null());
    let error = v["model"]["binding_error"].as_str().unwrap();
    assert!(error.contains("--start-logits"), "{error}");
}
