//! The library does what the command line does: a token
//! model (BERT's tokenizer and run_squad's rules, and a RoBERTa model by run_qa's rules
//! with its tokenizer.json) and a text model of each contract evaluated through `bertqa::evaluation`, on a
//! real Triton of this test's own, write the files `bertqa eval` writes, byte for byte.
//! It uses the library alone; it lives in the command's package because it compares with
//! the command's binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use bertqa::evaluation::Evaluate;
use bertqa::tokenize::PretrainedTokenizer;
use bertqa::{BertTokenizer, ClientConfig, Model, RunConfig, TritonClient};

/// The integration tests' Triton helpers (they name the checkout's root as `super::root`).
#[path = "it/common/triton.rs"]
#[allow(dead_code)]
mod triton;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

const DATA: &str = "data/sample-squad-v2.json";

/// The files both write and compare.
const FILES: [&str; 4] = [
    "predictions.json",
    "nbest_predictions.json",
    "null_odds.json",
    "per_question.jsonl",
];

/// A model's fast tokenizer (run_qa's rules), `None` for BERT's vocabulary.
fn fast_tokenizer(model: &str) -> Option<&'static str> {
    (model == "tiny-roberta").then_some("tests/fixtures/tokenizers/roberta")
}

/// Evaluates `model` through the library into `dir`; returns the model as bound.
fn evaluate(url: &str, model: &str, dir: &Path) -> Model {
    let root = root();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dataset = bertqa::squad::read(&root.join(DATA)).unwrap();
    let tokenizer = BertTokenizer::from_vocab_file(&root.join("vocab/vocab.txt"), true).unwrap();
    let config = ClientConfig {
        url: url.into(),
        ..ClientConfig::default()
    };
    let client = rt.block_on(TritonClient::connect(&config)).unwrap();
    let bound = rt
        .block_on(bertqa::look(
            &client,
            model,
            "",
            &Default::default(),
            &Default::default(),
        ))
        .unwrap();
    let fast =
        fast_tokenizer(model).map(|t| PretrainedTokenizer::from_path(&root.join(t)).unwrap());
    let mut run = RunConfig::for_model(&bound);
    run.decode.version_2_with_negative = dataset.looks_like_v2();
    if fast.is_some() {
        run.decode.postprocess = bertqa::decode::Postprocess::RunQa;
    }
    let evaluation = Evaluate {
        runtime: &rt,
        model: bound.clone(),
        // An answer-contract model needs no vocabulary: none is given.
        tokenizer: match &bound {
            Model::Text(b) if matches!(b.contract, bertqa::Contract::Answer { .. }) => None,
            _ => match &fast {
                Some(t) => Some(t.into()),
                None => Some((&tokenizer).into()),
            },
        },
        config: &run,
        na_prob_thresh: 1.0,
        output_dir: dir,
    }
    .run(&client, &dataset)
    .unwrap();
    assert_eq!(evaluation.outcome.predictions.len(), dataset.examples.len());
    assert!(evaluation.files.iter().any(|f| f == "per_question.jsonl"));
    bound
}

/// `bertqa eval` of `model` into `dir`.
fn eval_command(url: &str, model: &str, dir: &Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_bertqa"))
        .args([
            "eval", "--data", DATA, "--model", model, "--url", url, "--quiet",
        ])
        .arg("--output-dir")
        .arg(dir)
        .args(
            fast_tokenizer(model)
                .map(|t| ["--tokenizer", t])
                .into_iter()
                .flatten(),
        )
        .current_dir(root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn the_library_evaluates_token_and_text_models_to_the_commands_files() {
    let server = triton::start_server_with(
        &[
            "tiny-bert",
            "tiny-bert-nobatch",
            "qa-text-tokenizer",
            "qa-text-postprocess",
            "qa-text-logits",
            "qa-text-answer",
            "tiny-roberta",
        ],
        &[],
        None,
    );
    let tmp = tempfile::tempdir().unwrap();
    for model in [
        "tiny-bert",
        "tiny-roberta",
        "qa-text-logits",
        "qa-text-answer",
    ] {
        let (lib, cli): (PathBuf, PathBuf) = (
            tmp.path().join(format!("{model}-lib")),
            tmp.path().join(format!("{model}-cli")),
        );
        std::fs::create_dir_all(&lib).unwrap();
        let bound = evaluate(&server.url, model, &lib);
        assert_eq!(bound.name(), model);
        eval_command(&server.url, model, &cli);
        for f in FILES {
            let read = |d: &Path| std::fs::read(d.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            assert!(read(&lib) == read(&cli), "{model}: {f} differs");
        }
    }
    triton::kill_server(&server);
}
