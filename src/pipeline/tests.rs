//! Unit tests of the pipeline's stages against an in-process model.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::dispatch::{infer_events, RunEvent};
use super::padding::{
    max_ignoring_nan, padding_displaces, padding_displaces_ranked, shorter_padding_is_safe,
};
use super::rank::{read_rows, Rank};
use super::report::{compact, union_length};
use super::*;
use crate::backend::{tensor, Binding, Infer, SeqLen, SharedMemory};
use crate::decode::{Candidates, Scores};
use crate::error::Result;
use crate::types::{Feature, Logits};

/// An in-process model: start logit = token id, end logit = segment id, read back
/// from the request's prost form; records every request's row count and the most
/// requests it held at once.
#[derive(Clone, Default)]
struct Echo {
    rows: Arc<std::sync::Mutex<Vec<usize>>>,
    live: Arc<std::sync::atomic::AtomicUsize>,
    peak: Arc<std::sync::atomic::AtomicUsize>,
}

impl Infer for Echo {
    async fn infer_timed(
        &self,
        request: crate::backend::InferRequest,
    ) -> Result<(crate::backend::proto::ModelInferResponse, Instant)> {
        use crate::backend::proto::model_infer_response::InferOutputTensor;
        use std::sync::atomic::Ordering::SeqCst;
        let sent = Instant::now();
        self.rows.lock().unwrap().push(request.rows());
        let live = self.live.fetch_add(1, SeqCst) + 1;
        self.peak.fetch_max(live, SeqCst);
        let m = request.to_proto();
        let as_f32 = |raw: &[u8]| -> bytes::Bytes {
            raw.chunks_exact(8)
                .flat_map(|c| (i64::from_le_bytes(c.try_into().unwrap()) as f32).to_le_bytes())
                .collect::<Vec<u8>>()
                .into()
        };
        let shape = m.inputs[0].shape.clone();
        let tensor = |name: &str| InferOutputTensor {
            name: name.into(),
            datatype: "FP32".into(),
            shape: shape.clone(),
            ..Default::default()
        };
        tokio::task::yield_now().await;
        self.live.fetch_sub(1, SeqCst);
        Ok((
            crate::backend::proto::ModelInferResponse {
                outputs: vec![tensor("start"), tensor("end")],
                raw_output_contents: vec![
                    as_f32(&m.raw_input_contents[0]),
                    as_f32(&m.raw_input_contents[1]),
                ],
                ..Default::default()
            },
            sent,
        ))
    }
}

fn echo_binding() -> Binding {
    Binding::for_tests(
        "echo",
        ["ids", "seg", "mask"],
        ["start", "end"],
        &[-1],
        SeqLen::Dynamic,
    )
}

/// `n` short features: `[CLS]`, 1–3 question ids, `[SEP]`, 2–8 doc ids, `[SEP]`.
fn echo_features(n: usize) -> Vec<Arc<Feature>> {
    (0..n)
        .map(|i| {
            let q: Vec<u32> = (0..1 + i % 3).map(|k| 2000 + (i * 10 + k) as u32).collect();
            let doc: Vec<u32> = (0..2 + i % 7).map(|k| 5000 + (i * 10 + k) as u32).collect();
            Arc::new(Feature::from_pieces(1_000_000_000 + i as u64, i, &q, &doc))
        })
        .collect()
}

type Echoed = (InferReport, Vec<(Arc<Feature>, Logits)>, Vec<usize>, usize);

/// Runs the dispatch stage against [`Echo`] on `features` in batches of `batch_size`:
/// the report, the answers, each request's rows and the most requests in flight at
/// once.
fn run_echo(config: &InferConfig, features: &[Arc<Feature>]) -> Echoed {
    run_echo_events(config, features).0
}

/// [`run_echo`], and the padding decisions handed on.
fn run_echo_events(config: &InferConfig, features: &[Arc<Feature>]) -> (Echoed, Vec<bool>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let echo = Echo::default();
    let (report, (answers, decisions)) = rt.block_on(async {
        let (ftx, frx) = mpsc::channel(16);
        // An events channel smaller than a batch: answers go out in several rounds.
        let (etx, mut erx) = mpsc::channel(5);
        let batches: Vec<Vec<Arc<Feature>>> = features
            .chunks(config.batch_size)
            .map(<[_]>::to_vec)
            .collect();
        tokio::spawn(async move {
            for b in batches {
                ftx.send(super::dispatch::Batch::Features(b)).await.unwrap();
            }
        });
        let collect = tokio::spawn(async move {
            let (mut got, mut decisions) = (Vec::new(), Vec::new());
            while let Some(event) = erx.recv().await {
                match event {
                    RunEvent::Answer(a) => {
                        let logits = a.scores.into_logits().expect("unranked: logits");
                        got.push((a.feature, logits))
                    }
                    RunEvent::PaddingDecided { dynamic } => decisions.push(dynamic),
                    RunEvent::Replies(_) => unreachable!("a token model's run"),
                }
            }
            (got, decisions)
        });
        let model = crate::backend::Model::from(echo_binding());
        let report = infer_events(&echo, &model, config, None, 0, frx, etx)
            .await
            .unwrap();
        (report, collect.await.unwrap())
    });
    // Batch sizes, largest first: requests in flight together reach the echo in any
    // order.
    let mut rows = echo.rows.lock().unwrap().clone();
    rows.sort_unstable_by(|a, b| b.cmp(a));
    let peak = echo.peak.load(std::sync::atomic::Ordering::SeqCst);
    ((report, answers, rows, peak), decisions)
}

/// Every feature answered once, with logits echoing its own ids (start) and segment
/// ids (end), padding included.
fn check_echoed(answers: &[(Arc<Feature>, Logits)], n: usize) {
    assert_eq!(answers.len(), n);
    let mut seen = std::collections::BTreeSet::new();
    for (f, l) in answers {
        assert_eq!(f.unique_id, l.unique_id);
        assert!(seen.insert(f.unique_id));
        assert_eq!(l.start.len() % 8, 0);
        for (p, (&s, &e)) in l.start.iter().zip(&l.end).enumerate() {
            assert_eq!(s, f.input_ids.get(p).map_or(0.0, |&id| id as f32));
            assert_eq!(e, f.segment_id(p) as f32);
        }
    }
}

/// Batches of 8, 3 in flight, dynamic padding.
fn echo_config(warmup: usize, guard: Option<PaddingGuard>) -> InferConfig {
    InferConfig {
        batch_size: 8,
        concurrency: 3,
        refill: 1,
        warmup,
        padding: Padding::Longest { multiple: 8 },
        guard,
        shared_memory: SharedMemory::Auto,
        max_seq_len: 64,
    }
}

#[test]
fn windows_are_refilled_a_model_batch_at_a_time_at_most_half_at_once() {
    let mut b = echo_binding();
    b.max_batch_size = 64;
    // At the model's batch size: each sent as one is answered.
    assert_eq!(refill_group(4, 64, &b), 1);
    // Batch 8 of 64: eight fill a model batch; half the window at most.
    assert_eq!(refill_group(16, 8, &b), 8);
    assert_eq!(refill_group(32, 8, &b), 8);
    assert_eq!(refill_group(4, 8, &b), 2);
    assert_eq!(refill_group(6, 30, &b), 3);
    assert_eq!(refill_group(3, 8, &b), 1);
    assert_eq!(refill_group(1, 8, &b), 1);
    // A model without batching: one feature per request, one at a time.
    b.max_batch_size = 0;
    assert_eq!(refill_group(4, 1, &b), 1);
}

#[test]
fn refilling_in_groups_answers_the_same_within_the_window() {
    let features = echo_features(61);
    let one_by_one = InferConfig {
        batch_size: 2,
        concurrency: 6,
        ..echo_config(1, None)
    };
    let (_, mut want, rows, peak) = run_echo(&one_by_one, &features);
    assert!(peak <= 6 + 1, "window of 6 (+1 warm-up) exceeded: {peak}");
    assert_eq!(rows.len(), 31 + 1);
    for refill in [2, 3, 6, 9] {
        let config = InferConfig {
            refill,
            ..one_by_one.clone()
        };
        let (report, mut got, rows, peak) = run_echo(&config, &features);
        check_echoed(&got, 61);
        assert!(
            peak <= 6 + 1,
            "refill {refill}: window of 6 exceeded: {peak}"
        );
        assert_eq!(rows.len(), 31 + 1, "refill {refill}");
        assert_eq!(report.requests, 31);
        got.sort_by_key(|(f, _)| f.unique_id);
        want.sort_by_key(|(f, _)| f.unique_id);
        assert_eq!(
            got.iter().map(|(_, l)| l).collect::<Vec<_>>(),
            want.iter().map(|(_, l)| l).collect::<Vec<_>>()
        );
    }
}

#[test]
fn shared_memory_needs_one_server_auto_falls_back_system_fails() {
    // The echo backend is no single server: auto sends tensors in the message and
    // says why; system refuses to run.
    let (report, answers, _, _) = run_echo(&echo_config(0, None), &echo_features(10));
    assert_eq!(answers.len(), 10);
    assert!(!report.shared_memory.used);
    let note = report.shared_memory.note.unwrap();
    assert!(note.contains("not one server"), "{note}");
    let config = InferConfig {
        shared_memory: SharedMemory::System,
        ..echo_config(0, None)
    };
    let err = echo_error(&config, Vec::new());
    assert!(err.to_string().contains("`SharedMemory::System`"), "{err}");
}

/// The error [`infer_all`] ends with against [`Echo`] on `batches`.
fn echo_error(config: &InferConfig, batches: Vec<Vec<Arc<Feature>>>) -> crate::Error {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (ftx, frx) = mpsc::channel(batches.len().max(1));
    let (rtx, _rrx) = mpsc::channel(16);
    for b in batches {
        ftx.try_send(b).unwrap();
    }
    drop(ftx);
    rt.block_on(infer_all(
        &Echo::default(),
        Arc::new(echo_binding()),
        config,
        frx,
        rtx,
    ))
    .unwrap_err()
}

#[test]
fn infer_all_sends_each_batch_and_answers_every_feature_with_its_own_logits() {
    let n = 45;
    let config = echo_config(1, None);
    let (report, answers, rows, _) = run_echo(&config, &echo_features(n));
    assert_eq!((report.requests, report.features), (6, n as u64));
    // One warm-up copy of the first batch, then full batches and the remainder.
    assert_eq!(rows, [8, 8, 8, 8, 8, 8, 5]);
    check_echoed(&answers, n);
    assert_eq!(report.padding.mode(), "dynamic");
    assert_eq!(report.padding.probe_features, 0);
}

#[test]
fn a_batch_over_the_batch_size_is_refused() {
    let config = InferConfig {
        shared_memory: SharedMemory::None,
        ..echo_config(0, None)
    };
    let err = echo_error(&config, vec![echo_features(9)]);
    assert!(err.to_string().contains("over `batch_size` 8"), "{err}");
}

#[test]
fn the_padding_probe_pads_its_first_features_fully_then_keeps_dynamic_length() {
    // Echoed logits rank padding (id 0, segment 0) below every real position, so
    // the probe finds shorter padding safe.
    let n = 45;
    let guard = PaddingGuard {
        n_best: 3,
        full_len: 64,
        probe: true,
        decided: None,
    };
    let config = echo_config(0, Some(guard));
    let ((report, answers, rows, _), decisions) = run_echo_events(&config, &echo_features(n));
    assert_eq!(rows, [8, 8, 8, 8, 8, 5]);
    // The decision is handed on once, for the journal: dynamic.
    assert_eq!(decisions, [true]);
    check_echoed(&answers, n);
    let p = report.padding;
    assert_eq!(
        (p.mode(), p.probe_features, p.probe_unsafe),
        ("dynamic", 16, 0)
    );
    assert_eq!(p.displaced, 0);
    // The two probe requests were padded to 64, the rest to their longest (16).
    for (f, l) in &answers {
        let want = if f.unique_id < 1_000_000_016 { 64 } else { 16 };
        assert_eq!(l.start.len(), want, "{}", f.unique_id);
    }
}

#[test]
fn dynamic_padding_never_exceeds_the_full_length() {
    // A full length of 13 (not a multiple of 8): batches whose longest feature has
    // 9 to 13 tokens round up to 16 but are padded to 13, as the reference pads.
    let features: Vec<Arc<Feature>> = echo_features(45)
        .into_iter()
        .filter(|f| f.len() <= 13)
        .collect();
    let guard = PaddingGuard {
        n_best: 3,
        full_len: 13,
        probe: false,
        decided: None,
    };
    let (report, answers, _, _) = run_echo(&echo_config(0, Some(guard)), &features);
    assert_eq!(report.features, features.len() as u64);
    assert!(answers.iter().any(|(_, l)| l.start.len() == 13));
    assert!(answers
        .iter()
        .all(|(_, l)| l.start.len() == 8 || l.start.len() == 13));
}

#[test]
fn a_journaled_padding_decision_is_applied_without_probing() {
    let n = 20;
    for (decided, len) in [(false, 64), (true, 16)] {
        let guard = PaddingGuard {
            n_best: 3,
            full_len: 64,
            probe: true,
            decided: Some(decided),
        };
        let ((report, answers, rows, _), decisions) =
            run_echo_events(&echo_config(0, Some(guard)), &echo_features(n));
        assert_eq!(rows, [8, 8, 4], "no probe requests one at a time");
        // No decision handed on again, and every request padded as decided.
        assert!(decisions.is_empty());
        assert_eq!(answers.len(), n);
        assert!(answers.iter().all(|(_, l)| l.start.len() <= len));
        assert!(answers.iter().any(|(_, l)| l.start.len() == len));
        let p = report.padding;
        assert_eq!((p.dynamic, p.probe_features), (decided, 0));
    }
}

#[test]
fn compacting_intervals_keeps_their_union() {
    let t0 = Instant::now();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    // Overlapping, nested, touching and disjoint intervals, out of order.
    let raw = [
        (5, 9),
        (0, 3),
        (2, 4),
        (20, 25),
        (9, 10),
        (6, 7),
        (30, 31),
        (21, 22),
    ];
    let mut intervals: Vec<_> = raw.iter().map(|&(s, e)| (ms(s), ms(e))).collect();
    let expected = union_length(&mut intervals.clone());
    assert_eq!(expected, Duration::from_millis(4 + 5 + 5 + 1));
    compact(&mut intervals);
    assert_eq!(intervals.len(), 4);
    assert_eq!(union_length(&mut intervals), expected);
    // Compacting in pieces, as infer_all does, gives the same.
    let mut pieces: Vec<_> = raw[..4].iter().map(|&(s, e)| (ms(s), ms(e))).collect();
    compact(&mut pieces);
    pieces.extend(raw[4..].iter().map(|&(s, e)| (ms(s), ms(e))));
    assert_eq!(union_length(&mut pieces), expected);
}

fn report(wall_ms: u64, starved_ms: u64, lag_ms: u64) -> InferReport {
    let mut r = InferReport::empty();
    r.wall = Duration::from_millis(wall_ms);
    r.starved = Duration::from_millis(starved_ms);
    r.decode_lag = Duration::from_millis(lag_ms);
    r
}

fn logits(start: Vec<f32>, end: Vec<f32>) -> Logits {
    Logits {
        unique_id: 1,
        start,
        end,
    }
}

#[test]
fn shorter_padding_is_safe_only_when_no_padding_enters_the_top_n() {
    // 5 real positions, padded to 16; top 3.
    let real = [5.0, 4.0, 3.0, 2.0, 1.0];
    let mut low = real.to_vec();
    low.resize(16, -9.0);
    let l = logits(low.clone(), low.clone());
    assert!(shorter_padding_is_safe(&l, 5, 8, 3));
    assert!(!padding_displaces(&l, 5, 3));
    // A high padding logit beyond the shortest padding (8) pushes a real position
    // out of the top 3 at full length only.
    let mut high = low.clone();
    high[12] = 3.5;
    let l = logits(low.clone(), high.clone());
    assert!(!shorter_padding_is_safe(&l, 5, 8, 3));
    assert!(padding_displaces(&l, 5, 3));
    // Inside the shortest padding it is there either way: safe, but seen.
    let mut near = low.clone();
    near[6] = 3.5;
    let l = logits(near.clone(), low.clone());
    assert!(shorter_padding_is_safe(&l, 5, 8, 3));
    assert!(padding_displaces(&l, 5, 3));
    // Ties go to the lower position, so padding tied with a real value never wins.
    let mut tied = low.clone();
    tied[12] = 3.0;
    let l = logits(tied, low.clone());
    assert!(shorter_padding_is_safe(&l, 5, 8, 3));
    assert!(!padding_displaces(&l, 5, 3));
    // High padding everywhere: the shortest padding already pushes both real
    // positions out, so longer padding changes nothing, but it is seen.
    let mut all = vec![1.0, 2.0];
    all.resize(16, 9.0);
    let l = logits(all.clone(), all);
    assert!(shorter_padding_is_safe(&l, 2, 8, 3));
    assert!(padding_displaces(&l, 2, 3));
    // No more positions than n: all are in the top n however high padding is.
    let l = logits(vec![1.0, 2.0, 9.0], vec![1.0, 2.0, 9.0]);
    assert!(shorter_padding_is_safe(&l, 2, 8, 3));
    assert!(!padding_displaces(&l, 2, 3));
    // Unpadded logits have nothing to displace.
    let l = logits(real.to_vec(), real.to_vec());
    assert!(shorter_padding_is_safe(&l, 5, 8, 3));
    assert!(!padding_displaces(&l, 5, 3));
}

/// -3..=3 as floats, with 3 → NaN, 2 → +∞ and -3 → −∞: ties and non-finite values
/// common.
fn small_floats(values: &[i8]) -> Vec<f32> {
    values
        .iter()
        .map(|&v| match v {
            3 => f32::NAN,
            2 => f32::INFINITY,
            -3 => f32::NEG_INFINITY,
            v => f32::from(v),
        })
        .collect()
}

proptest::proptest! {
    /// The lanes' maximum is one pass's, with NaN, ±∞ and any length.
    #[test]
    fn max_ignoring_nan_is_a_plain_fold(
        values in proptest::collection::vec(-3i8..4, 0..70),
    ) {
        let x = small_floats(&values);
        let plain = x
            .iter()
            .filter(|v| !v.is_nan())
            .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
        proptest::prop_assert_eq!(max_ignoring_nan(&x), plain);
    }

    /// The quick test never claims "undisplaced" where the full ranking finds real
    /// positions pushed out: small integer values make ties, NaN and ±∞ common.
    #[test]
    fn padding_displaces_equals_the_full_ranking(
        values in proptest::collection::vec(-3i8..4, 1..48),
        real in 0usize..48,
        n in 0usize..24,
    ) {
        let x = small_floats(&values);
        let real = real.min(x.len());
        let want = n.min(real);
        let exact = x.len() > real && crate::decode::real_in_top(&x, real, n) < want;
        let l = logits(x.clone(), x);
        proptest::prop_assert_eq!(padding_displaces(&l, real, n), exact);
    }

    /// From candidates ranked for the same n-best size (logits dropped), the count is
    /// the logits'; candidates of another size leave it to the logits.
    #[test]
    fn padding_displaces_from_candidates_equals_from_logits(
        start in proptest::collection::vec(-3i8..4, 1..48),
        end in proptest::collection::vec(-3i8..4, 1..48),
        real in 0usize..48,
        n in 0usize..24,
    ) {
        let l = logits(small_floats(&start), small_floats(&end));
        let real = real.min(l.start.len()).min(l.end.len());
        let want = padding_displaces(&l, real, n);
        let mut scratch = Vec::new();
        let c = Candidates::of(&l, n, &mut scratch);
        let dropped = Scores::Candidates { unique_id: l.unique_id, candidates: c };
        proptest::prop_assert_eq!(padding_displaces_ranked(&dropped, real, n), want);
        let other = Scores::Logits {
            logits: l.clone(),
            candidates: Some(Candidates::of(&l, n + 1, &mut scratch)),
        };
        proptest::prop_assert_eq!(padding_displaces_ranked(&other, real, n), want);
    }
}

/// Rows are ranked where they lie; the logits are copied out only where the
/// candidates cannot stand for them (non-finite values, the k-th candidate at
/// `f32::MIN`, a window too short for a compact record) or when asked to keep them.
/// Non-finite values are replaced and counted, and the candidates are those of the
/// replaced values, as ranking the kept logits gives.
#[test]
fn rows_keep_their_logits_only_where_the_candidates_cannot_stand_for_them() {
    use crate::backend::proto::model_infer_response::InferOutputTensor;
    let binding = echo_binding();
    let seq = 8;
    let rows: [Vec<f32>; 4] = [
        vec![0.5, 3.0, 1.0, 2.0, -1.0, 0.0, 2.5, 1.5],
        vec![
            0.5,
            f32::INFINITY,
            1.0,
            2.0,
            f32::NAN,
            f32::NEG_INFINITY,
            2.5,
            1.5,
        ],
        vec![f32::MIN; 8],
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
    ];
    let end: Vec<f32> = (0..seq).map(|i| (i % 3) as f32).collect();
    let le = |v: &[f32]| -> bytes::Bytes {
        v.iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>()
            .into()
    };
    let starts: Vec<f32> = rows.concat();
    let ends: Vec<f32> = (0..rows.len()).flat_map(|_| end.clone()).collect();
    let tensor = |name: &str| InferOutputTensor {
        name: name.into(),
        datatype: "FP32".into(),
        shape: vec![rows.len() as i64, seq as i64],
        ..Default::default()
    };
    let response = crate::backend::proto::ModelInferResponse {
        outputs: vec![tensor("start"), tensor("end")],
        raw_output_contents: vec![le(&starts), le(&ends)],
        ..Default::default()
    };
    let checked = tensor::check_batch(&binding, rows.len(), seq, &response).unwrap();
    assert!(checked.row_f32(0).is_some(), "the in-place path is tested");
    let features = echo_features(rows.len());
    let mut scratch = Vec::new();
    for (k, keep_logits) in [(3, false), (3, true), (4, false)] {
        let rank = Rank { k, keep_logits };
        let (read, non_finite) = read_rows(&checked, &features, Some(rank), &mut scratch);
        assert_eq!((non_finite.values, non_finite.features), (3, 1));
        for (row, s) in read.iter().enumerate() {
            assert_eq!(s.unique_id(), features[row].unique_id);
            let c = s.candidates().expect("ranked");
            // 2k < 8 only for k = 3; row 1 is not finite; row 2's candidates sit
            // at f32::MIN.
            let dropped = k == 3 && !keep_logits && (row == 0 || row == 3);
            assert_eq!(s.logits().is_none(), dropped, "k {k} row {row}");
            let mut full = Logits {
                unique_id: s.unique_id(),
                start: rows[row].clone(),
                end: end.clone(),
            };
            crate::decode::non_finite::sanitize(&mut full);
            if let Some(l) = s.logits() {
                assert_eq!(l, &full);
            }
            assert_eq!(
                c,
                &Candidates::of(&full, k, &mut scratch),
                "k {k} row {row}"
            );
        }
    }
    // Unranked: every row's logits, replaced where not finite.
    let (read, _) = read_rows(&checked, &features, None, &mut scratch);
    assert!(read
        .iter()
        .all(|s| s.logits().is_some_and(|l| l.start.len() == seq) && s.candidates().is_none()));
    assert_eq!(read[1].logits().unwrap().start[1], f32::NEG_INFINITY);
}

#[test]
fn padding_report_modes_and_notes() {
    let fixed = PaddingReport {
        fixed_len: Some(384),
        ..Default::default()
    };
    assert_eq!(fixed.mode(), "fixed");
    assert_eq!(fixed.note("m"), None);
    let fell_back = PaddingReport {
        probe_features: 16,
        probe_unsafe: 3,
        ..fixed
    };
    assert_eq!(fell_back.mode(), "fixed_after_probe");
    let note = fell_back.note("m").unwrap();
    assert!(note.contains("(3 of the 16 probe features)") && note.contains("padded to 384"));
    let dynamic = PaddingReport {
        dynamic: true,
        probe_features: 16,
        ..Default::default()
    };
    assert_eq!(dynamic.mode(), "dynamic");
    assert_eq!(dynamic.note("m"), None);
    let risky = PaddingReport {
        displaced: 7,
        ..dynamic
    };
    assert!(risky
        .note("m")
        .unwrap()
        .starts_with("warning: in 7 features"));
}

#[test]
fn client_bound_warning_names_both_parts() {
    let w = report(2000, 400, 300)
        .client_bound_warning()
        .expect("35% is over a quarter");
    assert!(w.contains("35%"), "{w}");
    assert!(w.contains("0.40 s for features"), "{w}");
    assert!(w.contains("0.30 s"), "{w}");
    assert_eq!(
        report(2000, 400, 300).client_limited(),
        Duration::from_millis(700)
    );
}

#[test]
fn no_client_bound_warning_when_the_server_is_the_limit_or_the_run_is_short() {
    assert!(report(2000, 250, 200).client_bound_warning().is_none());
    assert!(report(400, 400, 0).client_bound_warning().is_none());
    assert!(report(0, 0, 0).client_bound_warning().is_none());
}
