//! Client CPU of one inference request's wire work, per feature: writing the request
//! (`prepare_request`, building its prost message and encoding it with prost) and
//! reading the response (`check_batch` + conversion of every row).
//!
//! Usage: `bench_wire [BATCH] [ROUNDS]` (defaults 64 and 2000). NVIDIA's layout: three
//! INT64 `[batch, 384]` inputs, two FP32 `[batch, 384]` outputs. Prints one JSON line.

use std::sync::Arc;
use std::time::Instant;

use bertqa::proto::model_infer_response::InferOutputTensor;
use bertqa::proto::ModelInferResponse;
use bertqa::types::Feature;
use bertqa::{decode_response, prepare_request};
use bertqa::{
    Binding, FloatType, InputBinding, InputRole, IntType, OutputBinding, Outputs, SeqLen,
};
use prost::Message;

/// The allocator of the `bertqa` binary (cli/src/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SEQ: usize = 384;

fn main() {
    let mut args = std::env::args().skip(1);
    let batch: usize = args.next().map_or(64, |s| s.parse().expect("BATCH"));
    let rounds: usize = args.next().map_or(2000, |s| s.parse().expect("ROUNDS"));
    let input = |name: &str, role| InputBinding {
        name: name.into(),
        role,
        datatype: IntType::Int64,
        dims: vec![SEQ as i64],
    };
    let output = |name: &str| OutputBinding {
        name: name.into(),
        datatype: FloatType::Fp32,
        dims: vec![SEQ as i64],
    };
    let binding = Arc::new(Binding {
        model: "null".into(),
        version: String::new(),
        platform: "bench".into(),
        inputs: vec![
            input("input__0", InputRole::InputIds),
            input("input__1", InputRole::SegmentIds),
            input("input__2", InputRole::InputMask),
        ],
        outputs: Outputs::Split {
            start: output("output__0"),
            end: output("output__1"),
        },
        max_batch_size: 64,
        seq_len: SeqLen::Fixed(SEQ),
        dynamic_batching: true,
        batching: Default::default(),
    });
    // Windows of SQuAD-dev-like length: a 12-piece question, 150 to 370 tokens.
    let features: Vec<Arc<Feature>> = (0..batch)
        .map(|i| {
            let q: Vec<u32> = (0..12).map(|k| 2000 + k as u32).collect();
            let doc: Vec<u32> = (0..135 + (i * 37) % 220)
                .map(|k| 1000 + ((i + k) * 7 % 28000) as u32)
                .collect();
            Arc::new(Feature::from_pieces(1_000_000_000 + i as u64, i, &q, &doc))
        })
        .collect();
    let per_feature_us = |t: Instant| t.elapsed().as_secs_f64() * 1e6 / (rounds * batch) as f64;

    let mut bytes = 0;
    let t = Instant::now();
    for _ in 0..rounds {
        let r = prepare_request(&binding, features.clone(), SEQ).expect("batch");
        let m = r.to_proto();
        let mut buf = bytes::BytesMut::with_capacity(8 * 1024);
        m.encode(&mut buf).expect("room");
        bytes = std::hint::black_box(buf.freeze()).len();
    }
    let prost_us = per_feature_us(t);

    let request = prepare_request(&binding, features.clone(), SEQ).expect("batch");
    let tensor = |name: &str| InferOutputTensor {
        name: name.into(),
        datatype: "FP32".into(),
        shape: vec![batch as i64, SEQ as i64],
        ..Default::default()
    };
    let raw: bytes::Bytes = (0..batch * SEQ)
        .flat_map(|i| (i as f32 * 0.25).to_le_bytes())
        .collect::<Vec<u8>>()
        .into();
    let response = ModelInferResponse {
        outputs: vec![tensor("output__0"), tensor("output__1")],
        raw_output_contents: vec![raw.clone(), raw],
        ..Default::default()
    };
    let t = Instant::now();
    for _ in 0..rounds {
        let logits = decode_response(&request, &response).expect("fits");
        std::hint::black_box(logits);
    }
    let decode_us = per_feature_us(t);
    println!(
        "{{\"batch\": {batch}, \"request_bytes\": {bytes}, \
         \"prost_encode_us_per_feature\": {prost_us:.3}, \
         \"decode_us_per_feature\": {decode_us:.3}}}"
    );
}
