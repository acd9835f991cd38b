//! Models that take text (a question and a context as BYTES, tokenized on the server):
//! the ensembles and fault models of the test bed (docs/testbed.md), over gRPC and HTTP.
//! `models` names the contract and the ensemble's steps; `ask` asks the answer contract
//! in one request; a broken answer is exit 2 naming the tensor and the problem; the
//! commands that drive token models say what a text model takes.

use std::sync::OnceLock;

use crate::common::{
    assert_fails_with, bertqa, json_of, ok, start_server_with, Server, CONTEXT, SAMPLE,
};

/// A server of these tests' own: the text models and their composing models.
fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        start_server_with(
            &[
                "qa-text-tokenizer",
                "qa-text-postprocess",
                "tiny-bert-nobatch",
                "oracle-nobatch",
                "qa-text-answer",
                "qa-text-logits",
                "oracle-text-answer",
                "fault-text-non-utf8-answer",
                "fault-text-missing-output",
                "fault-text-wrong-count",
            ],
            &[],
            None,
        )
    })
}

/// `(protocol, url)` of the server for each protocol.
fn endpoints() -> [(&'static str, String); 2] {
    let s = server();
    [
        ("grpc", s.url.clone()),
        ("http", format!("127.0.0.1:{}", s.http_port)),
    ]
}

#[test]
fn models_names_the_contract_and_the_ensembles_steps() {
    for (protocol, url) in endpoints() {
        let m = |model: &str| {
            let v = json_of(&bertqa(&[
                "models",
                "--url",
                &url,
                "--protocol",
                protocol,
                "--model",
                model,
                "--json",
            ]));
            v["model"].clone()
        };
        let answer = m("qa-text-answer");
        assert_eq!(answer["contract"], "answer", "{protocol}: {answer:#}");
        assert_eq!(answer["binding"]["question"], "question");
        assert_eq!(answer["binding"]["contract"]["answer"], "answer");
        assert_eq!(answer["binding"]["contract"]["score"], "score");
        assert_eq!(answer["binding"]["contract"]["start"], "answer_start");
        let steps: Vec<&str> = answer["ensemble_steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["model"].as_str().unwrap())
            .collect();
        assert_eq!(
            steps,
            [
                "qa-text-tokenizer",
                "tiny-bert-nobatch",
                "qa-text-postprocess"
            ]
        );
        let logits = m("qa-text-logits");
        assert_eq!(logits["contract"], "logits", "{protocol}: {logits:#}");
        assert_eq!(logits["binding"]["contract"]["offsets"], "offsets");
    }
    let o = bertqa(&[
        "models",
        "--url",
        &server().url,
        "--model",
        "qa-text-answer",
    ]);
    ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(
            "ensemble  steps qa-text-tokenizer -> tiny-bert-nobatch -> qa-text-postprocess"
        ),
        "{text}"
    );
    assert!(
        text.contains("binding (text: the answer contract, one question per request):"),
        "{text}"
    );
}

#[test]
fn ask_asks_the_answer_contract_and_reads_its_answer() {
    for (protocol, url) in endpoints() {
        let v = json_of(&bertqa(&[
            "ask",
            "--url",
            &url,
            "--protocol",
            protocol,
            "--model",
            "oracle-text-answer",
            "--json",
            "--question",
            "Who designed the lighthouse at Varne Point?",
            "--context",
            CONTEXT,
        ]));
        assert_eq!(v["contract"], "answer");
        let a = &v["answers"][0];
        assert_eq!(a["answer"], "Miriam Holt", "{protocol}: {v:#}");
        // The character span is the answer's place in the context (code points).
        let (s, e) = (
            a["start_char"].as_u64().unwrap() as usize,
            a["end_char"].as_u64().unwrap() as usize,
        );
        let span: String = CONTEXT.chars().skip(s).take(e - s).collect();
        assert_eq!(span, "Miriam Holt");
        assert!(a["score"].as_f64().unwrap() > a["no_answer_score"].as_f64().unwrap());
    }
}

#[test]
fn a_broken_answer_is_exit_2_naming_the_tensor_and_the_problem() {
    for (protocol, url) in endpoints() {
        for (model, want) in [
            (
                "fault-text-non-utf8-answer",
                "tensor \"answer\": expected UTF-8 text, got element 0: invalid UTF-8",
            ),
            (
                "fault-text-missing-output",
                "tensor \"answer\": expected an output of that name, got missing",
            ),
            (
                "fault-text-wrong-count",
                "tensor \"answer\": expected 1 element, got 2",
            ),
        ] {
            let o = bertqa(&[
                "ask",
                "--url",
                &url,
                "--protocol",
                protocol,
                "--model",
                model,
                "--question",
                "Who designed the lighthouse at Varne Point?",
                "--context",
                CONTEXT,
            ]);
            assert_fails_with(&o, &[&format!("model \"{model}\""), want]);
            assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
        }
    }
}

#[test]
fn commands_for_token_models_say_what_a_text_model_takes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = bertqa(&[
        "eval",
        "--url",
        &server().url,
        "--model",
        "qa-text-logits",
        "--data",
        SAMPLE,
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    assert_fails_with(
        &o,
        &[
            "model \"qa-text-logits\": takes text (BYTES question and context; the logits contract)",
            "`bertqa models --model qa-text-logits` shows its binding",
        ],
    );
    // ask reads the answer contract only, and says so.
    let o = bertqa(&[
        "ask",
        "--url",
        &server().url,
        "--model",
        "qa-text-logits",
        "--question",
        "q",
        "--context",
        CONTEXT,
    ]);
    assert_fails_with(
        &o,
        &[
            "follows the logits contract",
            "`ask` reads the answer contract",
        ],
    );
}

/// A model of the repository that the server has not loaded is said to be so.
#[test]
fn a_model_the_server_has_not_loaded_is_named_as_not_loaded() {
    let o = bertqa(&[
        "ask",
        "--url",
        &server().url,
        "--model",
        "tiny-bert",
        "--question",
        "q",
        "--context",
        CONTEXT,
    ]);
    assert_fails_with(&o, &["model \"tiny-bert\" is not ready on", "(state "]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("(state )"), "{err}");
}
