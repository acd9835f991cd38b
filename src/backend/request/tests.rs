//! Unit tests of the request: its tensors, shapes and shared memory places.
use super::tokens::unique_width;
use super::*;
use crate::backend::binding::{
    FloatType, InputBinding, InputRole, IntType, OutputBinding, Outputs, SeqLen,
};
use proptest::prelude::*;
use prost::Message;

fn feature(unique_id: u64, q: &[u32], doc: &[u32]) -> Arc<Feature> {
    Arc::new(Feature::from_pieces(unique_id, 0, q, doc))
}

fn input(name: &str, role: InputRole, datatype: IntType, dims: Vec<i64>) -> InputBinding {
    InputBinding {
        name: name.into(),
        role,
        datatype,
        dims,
    }
}

fn binding(inputs: Vec<InputBinding>, max_batch_size: usize) -> Arc<Binding> {
    let out = |name: &str| OutputBinding {
        name: name.into(),
        datatype: FloatType::Fp32,
        dims: vec![-1],
    };
    Arc::new(Binding {
        model: "m".into(),
        version: String::new(),
        platform: "test".into(),
        inputs,
        outputs: Outputs::Split {
            start: out("start"),
            end: out("end"),
        },
        max_batch_size,
        seq_len: SeqLen::Dynamic,
        dynamic_batching: false,
        batching: Default::default(),
    })
}

/// A token input declared `[seq, 1]` is sent in that shape, with the same bytes.
#[test]
fn trailing_dims_of_size_1_are_sent_as_declared() {
    let b = binding(
        vec![
            input("ids", InputRole::InputIds, IntType::Int32, vec![-1, 1]),
            input("seg", InputRole::SegmentIds, IntType::Int32, vec![-1]),
            input("mask", InputRole::InputMask, IntType::Int32, vec![-1, 1, 1]),
        ],
        8,
    );
    let r = prepare_request(&b, vec![feature(1, &[5], &[6, 8])], 8).unwrap();
    let shapes: Vec<Vec<i64>> = r.input_tensors().into_iter().map(|t| t.shape).collect();
    assert_eq!(shapes, vec![vec![1, 8, 1], vec![1, 8], vec![1, 8, 1, 1]]);
    assert!(r.input_lens().into_iter().all(|n| n == 8 * 4));
}

#[test]
fn known_batch_has_the_padded_tensors_of_the_spec() {
    let b = binding(
        vec![
            input("ids", InputRole::InputIds, IntType::Int64, vec![-1]),
            input("seg", InputRole::SegmentIds, IntType::Int32, vec![-1]),
            input("mask", InputRole::InputMask, IntType::Int32, vec![-1]),
            input("uid", InputRole::UniqueIds, IntType::Int64, vec![1]),
        ],
        8,
    );
    let f = feature(7, &[5], &[6, 8]);
    let r = prepare_request(&b, vec![f], 8).unwrap();
    let m = r.to_proto();
    assert_eq!(m.model_name, "m");
    assert_eq!(
        m.inputs.iter().map(|t| t.shape.clone()).collect::<Vec<_>>(),
        vec![vec![1, 8], vec![1, 8], vec![1, 8], vec![1, 1]]
    );
    let i64s = |b: &[u8]| -> Vec<i64> {
        b.chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let i32s = |b: &[u8]| -> Vec<i32> {
        b.chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let raw = &m.raw_input_contents;
    assert_eq!(i64s(&raw[0]), [101, 5, 102, 6, 8, 102, 0, 0]);
    assert_eq!(i32s(&raw[1]), [0, 0, 0, 1, 1, 1, 0, 0]);
    assert_eq!(i32s(&raw[2]), [1, 1, 1, 1, 1, 1, 0, 0]);
    assert_eq!(i64s(&raw[3]), [7]);
    assert_eq!(
        m.outputs
            .iter()
            .map(|o| o.name.as_str())
            .collect::<Vec<_>>(),
        ["start", "end"]
    );
}

#[test]
fn batches_that_cannot_be_sent_are_refused() {
    let b = binding(
        vec![input("ids", InputRole::InputIds, IntType::Int64, vec![-1])],
        2,
    );
    let f = || feature(1, &[1], &[2, 3]);
    assert!(prepare_request(&b, vec![], 8).is_err());
    assert!(prepare_request(&b, vec![f(), f(), f()], 8).is_err());
    assert!(prepare_request(&b, vec![f()], 5).is_err());
    assert!(prepare_request(&b, vec![f()], 6).is_ok());
}

#[test]
fn into_features_gives_the_batch_back_shared_or_not() {
    let b = binding(
        vec![input("ids", InputRole::InputIds, IntType::Int64, vec![-1])],
        2,
    );
    let r = prepare_request(&b, vec![feature(1, &[1], &[2]), feature(2, &[1], &[2])], 8).unwrap();
    let clone = r.clone();
    let ids = |v: Vec<Arc<Feature>>| v.iter().map(|f| f.unique_id).collect::<Vec<_>>();
    assert_eq!(ids(r.into_features()), [1, 2]);
    assert_eq!(ids(clone.into_features()), [1, 2]);
}

fn arb_input() -> impl Strategy<Value = (String, IntType, Vec<i64>)> {
    (
        "[a-z_]{0,12}",
        prop_oneof![Just(IntType::Int32), Just(IntType::Int64)],
        proptest::collection::vec(-2i64..300, 0..3),
    )
}

/// A feature of `q` question pieces and `d` doc pieces, ids from `seed`.
fn arb_feature() -> impl Strategy<Value = Arc<Feature>> {
    (
        any::<u64>(),
        proptest::collection::vec(any::<u32>(), 0..6),
        proptest::collection::vec(any::<u32>(), 0..150),
    )
        .prop_map(|(uid, q, doc)| feature(uid, &q, &doc))
}

/// One input's raw contents, value by value: the reference of the writer.
fn reference_contents(r: &InferRequest, input: &InputBinding) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut push = |v: i64| match input.datatype {
        IntType::Int32 => bytes.extend_from_slice(&(v as i32).to_le_bytes()),
        IntType::Int64 => bytes.extend_from_slice(&v.to_le_bytes()),
    };
    for f in r.features() {
        match input.role {
            InputRole::UniqueIds => {
                for _ in 0..unique_width(input) {
                    push(f.unique_id as i64);
                }
            }
            role => {
                for pos in 0..r.seq_len() {
                    push(i64::from(match role {
                        InputRole::InputIds => f.input_ids.get(pos).copied().unwrap_or(f.pad_id()),
                        InputRole::SegmentIds => f.segment_id(pos),
                        _ => f.input_mask(pos),
                    }));
                }
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The message's raw contents are the tensors built position by position from
    /// the features (ids, segment ids, mask, padding), for any binding and batch.
    #[test]
    fn raw_contents_are_the_padded_tensors_position_by_position(
        inputs in proptest::collection::vec(arb_input(), 3..=4),
        unique_first in any::<bool>(),
        batched in any::<bool>(),
        features in proptest::collection::vec(arb_feature(), 1..5),
        extra in 0usize..200,
    ) {
        let roles = [InputRole::InputIds, InputRole::SegmentIds, InputRole::InputMask];
        let mut bound: Vec<InputBinding> = inputs
            .iter()
            .zip(roles.iter().chain([&InputRole::UniqueIds]))
            .map(|((name, t, dims), &role)| input(name, role, *t, dims.clone()))
            .collect();
        if unique_first {
            bound.rotate_right(1);
        }
        let max_batch = if batched { 8 } else { 0 };
        let features = if batched { features } else { features[..1].to_vec() };
        let b = binding(bound, max_batch);
        let seq = features.iter().map(|f| f.len()).max().unwrap() + extra;
        let r = prepare_request(&b, features, seq).unwrap();
        let m = r.to_proto();
        prop_assert_eq!(m.raw_input_contents.len(), b.inputs.len());
        let mut all = Vec::new();
        for (input, raw) in b.inputs.iter().zip(&m.raw_input_contents) {
            let want = reference_contents(&r, input);
            prop_assert!(raw[..] == want[..], "{:?} differs", input.role);
            all.extend_from_slice(&want);
        }
        let mut contents = Vec::new();
        r.write_contents(&mut contents);
        prop_assert_eq!(contents.len(), r.contents_len());
        prop_assert!(contents == all);
        // The message survives prost's encoding unchanged.
        let back = ModelInferRequest::decode(m.encode_to_vec().as_slice()).unwrap();
        prop_assert_eq!(back, m);
    }

    /// With the inputs in shared memory the message is prost's (read back: the
    /// tensors' parameter maps have no fixed order) and carries no tensor bytes; the
    /// contents written to the region are the bytes the message would have carried,
    /// at the offsets its parameters give.
    #[test]
    fn shared_memory_requests_name_where_their_contents_lie(
        inputs in proptest::collection::vec(arb_input(), 3..=4),
        region in "[a-z0-9_-]{1,20}",
        offset in 0u64..1_000_000,
        features in proptest::collection::vec(arb_feature(), 1..5),
    ) {
        let roles = [InputRole::InputIds, InputRole::SegmentIds, InputRole::InputMask];
        let bound: Vec<InputBinding> = inputs
            .iter()
            .zip(roles.iter().chain([&InputRole::UniqueIds]))
            .map(|((name, t, dims), &role)| input(name, role, *t, dims.clone()))
            .collect();
        let b = binding(bound, 8);
        let seq = features.iter().map(|f| f.len()).max().unwrap();
        let plain = prepare_request(&b, features, seq).unwrap();
        let outputs_at = offset + plain.contents_len() as u64 + 64;
        let r = plain.clone().with_shm_inputs(ShmInputs {
            region: region.as_str().into(),
            offset,
        }).with_shm_outputs(ShmOutputs {
            region: region.as_str().into(),
            offset: outputs_at,
        });
        let m = r.to_proto();
        prop_assert!(m.raw_input_contents.is_empty());
        let mut contents = Vec::new();
        r.write_contents(&mut contents);
        prop_assert_eq!(contents.len(), r.contents_len());
        let raw = plain.to_proto().raw_input_contents;
        for (t, bytes) in m.inputs.iter().zip(&raw) {
            let int = |key: &str| match t.parameters[key].parameter_choice {
                Some(ParameterChoice::Int64Param(v)) => v as usize,
                _ => panic!("{key} is not an int64"),
            };
            prop_assert_eq!(
                &t.parameters["shared_memory_region"].parameter_choice,
                &Some(ParameterChoice::StringParam(region.clone()))
            );
            let at = int("shared_memory_offset") - offset as usize;
            let size = int("shared_memory_byte_size");
            prop_assert_eq!(&contents[at..at + size], &bytes[..]);
        }
        // Each output asks for its whole tensor, one after another from the offset.
        let mut next = outputs_at as usize;
        for (o, want) in m.outputs.iter().zip(b.output_bindings()) {
            let int = |key: &str| match o.parameters[key].parameter_choice {
                Some(ParameterChoice::Int64Param(v)) => v as usize,
                _ => panic!("{key} is not an int64"),
            };
            prop_assert_eq!(&o.name, &want.name);
            prop_assert_eq!(int("shared_memory_offset"), next);
            let size = int("shared_memory_byte_size");
            prop_assert_eq!(size, r.rows() * seq * want.datatype.size());
            next += size;
        }
        prop_assert_eq!(next - outputs_at as usize, r.outputs_len().unwrap());
        // Without them, the outputs come back in the message again.
        let back = r.without_shm_outputs();
        prop_assert!(back.to_proto().outputs.iter().all(|o| o.parameters.is_empty()));
    }
}
