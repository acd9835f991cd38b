//! Unit tests of perf's warnings and batches.

use super::*;

#[test]
fn warnings_name_the_limit() {
    let mut l = export::sample::level(Level::Concurrency(4), 100.0, 5.0, 9.0);
    assert!(warnings(&l, 10.0, 2).is_empty());
    l.stable = false;
    l.trials = 10;
    l.client_cpu_fraction = 0.85;
    let w = warnings(&l, 10.0, 2);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].starts_with("concurrency 4: not stable after 10 windows"),
        "{w:?}"
    );
    assert!(w[1].contains("bertqa used 85% of the 2 CPUs"), "{w:?}");

    let mut r = export::sample::level(Level::RequestRate(200.0), 100.0, 5.0, 9.0);
    r.sent_per_s = 120.0;
    r.requests_per_s = 120.0;
    let w = warnings(&r, 10.0, 2);
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains("sent only 120.0 requests/s of the 200 requested"),
        "{w:?}"
    );
    assert!(w[0].contains("could not keep the rate"));
    r.sent_per_s = 199.0;
    let w = warnings(&r, 10.0, 2);
    assert!(
        w[0].contains("the server answered 120.0 requests/s of the 200 sent"),
        "{w:?}"
    );
    r.requests_per_s = 198.0;
    assert!(warnings(&r, 10.0, 2).is_empty());
}

#[test]
fn batches_are_full_and_padded_like_the_pipeline() {
    let feature = |id: u64, len: usize| Feature {
        unique_id: id,
        example_index: 0,
        doc_span_index: 0,
        input_ids: vec![101; len],
        query_len: 2,
        token_to_orig: Vec::new(),
        token_is_max_context: Vec::new(),
        template: None,
    };
    let features: Vec<Feature> = (0..5).map(|i| feature(i, 10 + 10 * i as usize)).collect();
    let b = make_batches(&features, 2, Padding::Longest { multiple: 8 });
    let ids: Vec<Vec<u64>> = b
        .iter()
        .map(|b| b.features.iter().map(|f| f.unique_id).collect())
        .collect();
    // The last batch wraps around to the first feature.
    assert_eq!(ids, [vec![0, 1], vec![2, 3], vec![4, 0]]);
    assert_eq!(
        b.iter().map(|b| b.seq_len).collect::<Vec<_>>(),
        [24, 40, 56]
    );
    let b = make_batches(&features, 8, Padding::Fixed(384));
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].features.len(), 8);
    assert_eq!(b[0].seq_len, 384);
    assert!(make_batches(&[], 8, Padding::Fixed(384)).is_empty());
}
