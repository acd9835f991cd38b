use super::*;
use crate::backend::binding::SeqLen;
use crate::backend::proto::model_config::SchedulingChoice;
use crate::backend::proto::{ModelDynamicBatching, ModelEnsembling, ModelInstanceGroup};
use crate::backend::Binding;
use crate::report::Format;

fn tensor(name: &str, datatype: &str, shape: &[i64]) -> TensorMetadata {
    TensorMetadata {
        name: name.into(),
        datatype: datatype.into(),
        shape: shape.to_vec(),
    }
}

fn metadata(name: &str, inputs: Vec<TensorMetadata>) -> ModelMetadataResponse {
    ModelMetadataResponse {
        name: name.into(),
        versions: vec!["1".into()],
        platform: "onnxruntime_onnx".into(),
        inputs,
        outputs: vec![tensor("output__0", "FP32", &[-1, 384])],
    }
}

fn report(model: Option<ModelJson>) -> ModelsJson {
    ModelsJson {
        schema: 1,
        server: ServerJson {
            url: "127.0.0.1:8001".into(),
            protocol: Protocol::Grpc,
            name: "triton".into(),
            version: "2.51.0".into(),
            live: true,
            ready: true,
            extensions: vec!["model_configuration".into()],
            lists_models: true,
            listing: Some(Listing::RepositoryIndex),
        },
        models: vec![ModelRow {
            name: "bert".into(),
            version: "1".into(),
            state: "READY".into(),
            reason: String::new(),
        }],
        model,
    }
}

fn token_model() -> ModelJson {
    let config = ModelConfig {
        backend: "python".into(),
        max_batch_size: 8,
        scheduling_choice: Some(SchedulingChoice::DynamicBatching(ModelDynamicBatching {
            preferred_batch_size: vec![4, 8],
            max_queue_delay_microseconds: 100,
            ..Default::default()
        })),
        instance_group: vec![ModelInstanceGroup {
            name: "bert_0".into(),
            kind: Kind::Cpu as i32,
            count: 2,
            ..Default::default()
        }],
        ..Default::default()
    };
    let binding = Binding::for_tests(
        "bert",
        ["input__0", "input__1", "input__2"],
        ["output__0", "output__1"],
        &[384],
        SeqLen::Fixed(384),
    );
    let inputs = vec![tensor("input__0", "INT64", &[-1, 384])];
    ModelJson::new(
        &metadata("bert", inputs),
        Some(&config),
        true,
        Ok(binding.into()),
    )
}

fn text_model() -> ModelJson {
    let config = ModelConfig {
        platform: "ensemble".into(),
        scheduling_choice: Some(SchedulingChoice::EnsembleScheduling(ModelEnsembling {
            step: ["tok", "bert"]
                .iter()
                .map(|m| crate::backend::proto::model_ensembling::Step {
                    model_name: (*m).into(),
                    model_version: -1,
                    ..Default::default()
                })
                .collect(),
        })),
        ..Default::default()
    };
    let binding = crate::backend::text::logits_binding_for_tests(0);
    let inputs = vec![tensor("question", "BYTES", &[1])];
    ModelJson::new(
        &metadata("qa", inputs),
        Some(&config),
        true,
        Ok(binding.into()),
    )
}

fn value(r: &ModelsJson) -> serde_json::Value {
    serde_json::from_str(&r.render(Format::Json)).unwrap()
}

#[test]
fn every_shape_follows_the_schema_with_the_keys_in_order() {
    let schema = include_str!("../../../schema/models.schema.json");
    let unbound = ModelJson::new(
        &metadata("odd", vec![]),
        None,
        true,
        Err("model \"odd\": cannot tell".into()),
    );
    let not_ready = ModelJson::not_ready("down", "model \"down\": not ready".into());
    for model in [
        None,
        Some(token_model()),
        Some(text_model()),
        Some(unbound),
        Some(not_ready),
    ] {
        let v = value(&report(model));
        super::super::assert_follows(schema, &v);
    }
    let v = value(&report(Some(text_model())));
    let keys: Vec<&str> = v["model"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "name",
            "ready",
            "versions",
            "platform",
            "configuration",
            "max_batch_size",
            "dynamic_batching",
            "ensemble_steps",
            "instance_groups",
            "inputs",
            "outputs",
            "binding",
            "contract",
            "binding_error"
        ]
    );
    assert_eq!(v["model"]["contract"], "logits");
    assert_eq!(v["model"]["ensemble_steps"][1]["model"], "bert");
    assert!(v["model"]["dynamic_batching"].is_null());
    let v = value(&report(Some(token_model())));
    assert!(v["model"]["contract"].is_null() && v["model"]["binding_error"].is_null());
    assert_eq!(v["model"]["instance_groups"][0]["kind"], "KIND_CPU");
    assert_eq!(v["model"]["platform"], "python", "the backend first");
}

#[test]
fn text_shows_configuration_tensors_and_binding() {
    let text = report(Some(token_model())).render(Format::Text { verbose: false });
    assert_eq!(
        text,
        "server   triton 2.51.0 at 127.0.0.1:8001 over gRPC\n\
             live     yes   ready yes\n\
             extensions model_configuration\n\
             \n\
             MODEL  VERSION  STATE        REASON\n\
             bert         1  READY        \n\
             \n\
             model    bert  (ready: yes)\n\
             versions 1\n\
             platform python\n\
             max batch size  8\n\
             dynamic batching  on (max queue delay 100 us, preferred sizes [4, 8])\n\
             instance group  KIND_CPU x2 bert_0\n\
             \n\
             input   input__0         INT64  [-1, 384]\n\
             output  output__0        FP32   [-1, 384]\n\
             \n\
             binding (sequence length fixed 384):\n\
             \x20 input_ids    <- input__0 (INT64)\n\
             \x20 segment_ids  <- input__1 (INT64)\n\
             \x20 input_mask   <- input__2 (INT64)\n\
             \x20 start_logits -> output__0 (FP32)\n\
             \x20 end_logits   -> output__1 (FP32)\n"
    );
    let text = report(Some(text_model())).render(Format::Text { verbose: false });
    assert!(
        text.contains("ensemble  steps tok -> bert\n\ninput   question         BYTES  [1]\n"),
        "{text}"
    );
    assert!(
        text.ends_with(
            "binding (text: the logits contract, one question per request):\n\
                 \x20 question     <- question (BYTES)\n\
                 \x20 context      <- context (BYTES)\n\
                 \x20 start_logits -> start_logits\n\
                 \x20 end_logits   -> end_logits\n\
                 \x20 offsets      -> offsets\n"
        ),
        "{text}"
    );
}

#[test]
fn a_model_not_ready_or_a_server_without_a_listing_is_said_so() {
    let mut r = report(Some(ModelJson::not_ready("down", "not ready".into())));
    let text = r.render(Format::Text { verbose: false });
    assert!(text.ends_with("\nmodel    down  (ready: no)\n"), "{text}");
    r.server.lists_models = false;
    r.server.listing = None;
    r.models.clear();
    r.model = None;
    let text = r.render(Format::Text { verbose: false });
    assert!(
        text.ends_with(
            "\nthe server does not list its models over gRPC (no repository index, the \
                 protocol's only listing); name one with `model`\n"
        ),
        "{text}"
    );
    super::super::assert_follows(
        include_str!("../../../schema/models.schema.json"),
        &value(&r),
    );
}
