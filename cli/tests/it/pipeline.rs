//! The inference pipeline against the real local Triton: batching, requests in flight,
//! results collected by unique id whatever the arrival order.

use std::collections::BTreeMap;
use std::sync::Arc;

use bertqa::types::Feature;
use bertqa::{bind, BindingOverrides, ClientConfig, SharedMemory, TritonClient};
use bertqa::{infer_all, InferConfig, InferReport, Padding};

use crate::common::{rt, server};

fn features(n: usize) -> Vec<Arc<Feature>> {
    (0..n)
        .map(|i| {
            let q: Vec<u32> = (0..1 + i % 5)
                .map(|k| 2000 + (i * 7 + k) as u32 % 5000)
                .collect();
            let doc: Vec<u32> = (0..3 + i % 40)
                .map(|k| 1000 + (i * 13 + k * 3) as u32 % 9000)
                .collect();
            Arc::new(Feature::from_pieces(1_000_000_000 + i as u64, i, &q, &doc))
        })
        .collect()
}

type ById = BTreeMap<u64, (Vec<f32>, Vec<f32>)>;

/// Runs the pipeline; returns logits by unique id, the arrival order and the report.
fn run(model: &str, feats: &[Arc<Feature>], config: InferConfig) -> (ById, Vec<u64>, InferReport) {
    let rt = rt();
    rt.block_on(async {
        let client = TritonClient::connect(&ClientConfig {
            url: server().url.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
        let binding = Arc::new(
            bind(&client, model, "", &BindingOverrides::default())
                .await
                .unwrap(),
        );
        let (ftx, frx) = tokio::sync::mpsc::channel(64);
        let (rtx, mut rrx) =
            tokio::sync::mpsc::channel::<(Arc<Feature>, bertqa::types::Logits)>(64);
        let batches: Vec<Vec<Arc<Feature>>> =
            feats.chunks(config.batch_size).map(<[_]>::to_vec).collect();
        tokio::spawn(async move {
            for b in batches {
                ftx.send(b).await.unwrap();
            }
        });
        let collector = tokio::spawn(async move {
            let mut got = BTreeMap::new();
            let mut order = Vec::new();
            while let Some((f, l)) = rrx.recv().await {
                let f: Arc<Feature> = f;
                assert_eq!(f.unique_id, l.unique_id);
                order.push(l.unique_id);
                let n = f.len();
                assert!(got
                    .insert(l.unique_id, (l.start[..n].to_vec(), l.end[..n].to_vec()))
                    .is_none());
            }
            (got, order)
        });
        let report = infer_all(&client, binding, &config, frx, rtx)
            .await
            .unwrap();
        let (got, order) = collector.await.unwrap();
        (got, order, report)
    })
}

#[test]
fn results_do_not_depend_on_concurrency_or_arrival_order() {
    let feats = features(120);
    let base = InferConfig {
        batch_size: 1,
        concurrency: 1,
        refill: 1,
        warmup: 0,
        padding: Padding::Fixed(64),
        guard: None,
        shared_memory: SharedMemory::None,
        max_seq_len: 384,
    };
    let (one, _, r1) = run("tiny-bert-jitter", &feats, base.clone());
    let (many, order, r16) = run(
        "tiny-bert-jitter",
        &feats,
        InferConfig {
            concurrency: 16,
            refill: 1,
            ..base.clone()
        },
    );
    let mut sorted = order.clone();
    sorted.sort();
    assert_ne!(order, sorted, "responses should have arrived out of order");
    assert_eq!(one.len(), 120);
    assert_eq!(r1.requests, 120);
    assert_eq!(r16.features, 120);
    assert_eq!(one, many);
    // A window of 16 refilled eight at a time (a model batch at a time, half the window).
    let (grouped, _, rg) = run(
        "tiny-bert-jitter",
        &feats,
        InferConfig {
            concurrency: 16,
            refill: 8,
            ..base.clone()
        },
    );
    assert_eq!(rg.requests, 120);
    assert_eq!(one, grouped);
    // Dynamic padding to the longest feature (multiple of 8) gives the same logits
    // within float noise at real positions.
    let (dynamic, _, _) = run(
        "tiny-bert-hf",
        &feats,
        InferConfig {
            batch_size: 8,
            concurrency: 4,
            refill: 1,
            warmup: 2,
            padding: Padding::Longest { multiple: 8 },
            guard: None,
            shared_memory: SharedMemory::None,
            max_seq_len: 384,
        },
    );
    let (fixed, _, rf) = run(
        "tiny-bert-hf",
        &feats,
        InferConfig {
            batch_size: 8,
            concurrency: 4,
            refill: 1,
            warmup: 0,
            padding: Padding::Fixed(384),
            guard: None,
            shared_memory: SharedMemory::None,
            max_seq_len: 384,
        },
    );
    assert_eq!(rf.requests, 15);
    assert_eq!(rf.latency_count(), 15);
    for (id, (s, e)) in &fixed {
        let (ds, de) = &dynamic[id];
        for i in 0..s.len() {
            assert!(
                (s[i] - ds[i]).abs() < 1e-4 && (e[i] - de[i]).abs() < 1e-4,
                "{id} pos {i}"
            );
        }
    }
    assert!(rf.busy <= rf.wall && rf.wall.as_nanos() > 0);
}

#[test]
fn inputs_through_shared_memory_give_the_logits_of_inputs_in_the_message() {
    let feats = features(100);
    let config = |shared_memory| InferConfig {
        batch_size: 8,
        concurrency: 4,
        refill: 1,
        warmup: 1,
        padding: Padding::Longest { multiple: 8 },
        guard: None,
        shared_memory,
        max_seq_len: 384,
    };
    let (wire, _, r_wire) = run("tiny-bert-hf", &feats, config(SharedMemory::None));
    let (shm, _, r_shm) = run("tiny-bert-hf", &feats, config(SharedMemory::System));
    let (auto, _, r_auto) = run("tiny-bert-hf", &feats, config(SharedMemory::Auto));
    assert_eq!(wire.len(), 100);
    assert!(!r_wire.shared_memory.used);
    assert!(!r_wire.shared_memory.outputs);
    assert_eq!(r_wire.shared_memory.note, None);
    // The local server is on a loopback address: auto uses shared memory too, for the
    // outputs as well.
    for r in [&r_shm, &r_auto] {
        assert!(r.shared_memory.used, "{:?}", r.shared_memory);
        assert!(r.shared_memory.outputs, "{:?}", r.shared_memory);
        assert_eq!(r.shared_memory.note, None);
        assert_eq!(r.features, 100);
    }
    assert_eq!(wire, shm);
    assert_eq!(wire, auto);
    // One stacked [batch, seq, 2] FP16 output read from the region: the same values.
    let (wire, _, _) = run("tiny-bert-stacked-fp16", &feats, config(SharedMemory::None));
    let (shm, _, r_shm) = run(
        "tiny-bert-stacked-fp16",
        &feats,
        config(SharedMemory::System),
    );
    assert!(r_shm.shared_memory.outputs, "{:?}", r_shm.shared_memory);
    assert_eq!(wire.len(), 100);
    assert_eq!(wire, shm);
}
