//! The library as a program outside the project holds it: the examples (examples/,
//! built from the library alone) ask a question and evaluate a dataset through
//! `bertqa::blocking::Client` (a token model and BERT's vocabulary), the async
//! `bertqa::Client` in a tokio program (a RoBERTa model by run_qa's rules, with its
//! tokenizer.json) and text models of both contracts (no tokenizer);
//! `evaluate_with` (eval's files and options) does the same. Each gives `bertqa eval`'s files byte for
//! byte, its exact match and its predictions, and `bertqa ask`'s answer and span.

use std::path::{Path, PathBuf};
use std::process::Command;

use bertqa::Model;
use serde_json::Value;

use super::common::{bertqa, root, server};

const DATA: &str = "data/sample-squad-v2.json";
const CONTEXT: &str = "The lighthouse at Varne Point was designed by Ada Byron in 1851.";
const QUESTION: &str = "Who designed the lighthouse?";

/// The files every way writes and the test compares.
const FILES: [&str; 4] = [
    "predictions.json",
    "nbest_predictions.json",
    "null_odds.json",
    "per_question.jsonl",
];

/// An example program of the library, as `cargo build --examples` (run by the test
/// command first) leaves it in the target directory.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --examples` first (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The flag that gives a model its fast tokenizer (run_qa's rules), if it has one.
fn tokenizer_flag(model: &str) -> Vec<&'static str> {
    match model {
        "tiny-roberta" => vec!["--tokenizer", "tests/fixtures/tokenizers/roberta"],
        _ => vec![],
    }
}

/// Runs `example` with `args`; returns its JSON line.
fn run_example(name: &str, args: &[&str]) -> Value {
    let o = Command::new(example(name))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{name} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `bertqa eval` of `model` into `dir`; returns its metrics.json.
fn eval_command(url: &str, model: &str, dir: &Path) -> Value {
    let dir_arg = dir.display().to_string();
    let mut args = vec![
        "eval",
        "--data",
        DATA,
        "--model",
        model,
        "--url",
        url,
        "--quiet",
        "--output-dir",
        &dir_arg,
    ];
    args.extend(tokenizer_flag(model));
    let o = bertqa(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&std::fs::read(dir.join("metrics.json")).unwrap()).unwrap()
}

/// `bertqa ask --json` of the example's question; returns its answer.
fn ask_command(url: &str, model: &str) -> Value {
    let mut args = vec![
        "ask",
        "--model",
        model,
        "--url",
        url,
        "--question",
        QUESTION,
        "--context",
        CONTEXT,
        "--json",
    ];
    args.extend(tokenizer_flag(model));
    let o = bertqa(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    report["answers"][0].clone()
}

/// Evaluates `model` through `blocking::Client::evaluate_with`, its files into `dir`.
fn evaluate_with_options(url: &str, model: &str, dir: &Path) -> Model {
    let root = root();
    let data = bertqa::EvalData::open(&[root.join(DATA)]).unwrap();
    let mut builder = bertqa::blocking::Client::builder(url)
        .model(model)
        .vocab(root.join("vocab/vocab.txt"));
    if let Some(t) = tokenizer_flag(model).get(1) {
        builder = builder.tokenizer(root.join(t));
    }
    let client = builder.build().unwrap();
    let evaluation = client
        .evaluate_with(&data, &bertqa::EvalOptions::new(dir))
        .unwrap();
    assert_eq!(
        evaluation.outcome.predictions.len(),
        data.dataset.examples.len()
    );
    assert!(evaluation.files.iter().any(|f| f == "per_question.jsonl"));
    assert!(dir.join("metrics.json").is_file());
    client.model().clone()
}

#[test]
fn the_library_answers_and_evaluates_as_the_command_does() {
    let url = server().url.clone();
    let tmp = tempfile::tempdir().unwrap();
    for (name, model) in [
        ("client_token", "tiny-bert"),
        ("client_family", "tiny-roberta"),
        ("client_text", "qa-text-logits"),
        ("client_text", "qa-text-answer"),
    ] {
        let dir = |way: &str| {
            let d = tmp.path().join(format!("{model}-{way}"));
            std::fs::create_dir_all(&d).unwrap();
            d
        };
        let (cli, client, options) = (dir("cli"), dir("client"), dir("options"));
        let out = client.display().to_string();
        let args: Vec<&str> = match name {
            "client_token" => vec![&url, model, "vocab/vocab.txt", DATA, &out],
            "client_family" => vec![&url, model, "tests/fixtures/tokenizers/roberta", DATA, &out],
            _ => vec![&url, model, DATA, &out],
        };
        let line = run_example(name, &args);
        let metrics = eval_command(&url, model, &cli);
        assert_eq!(evaluate_with_options(&url, model, &options).name(), model);
        for f in FILES {
            let read = |d: &Path| std::fs::read(d.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            assert!(
                read(&client) == read(&cli),
                "{model}: the client's {f} differs"
            );
            assert!(
                read(&options) == read(&cli),
                "{model}: evaluate_with's {f} differs"
            );
        }
        assert_eq!(line["exact"], metrics["metrics"]["exact"], "{model}");
        assert_eq!(line["f1"], metrics["metrics"]["f1"], "{model}");
        let predictions: Value =
            serde_json::from_slice(&std::fs::read(cli.join("predictions.json")).unwrap()).unwrap();
        assert_eq!(line["predictions"], predictions, "{model}");
        let asked = ask_command(&url, model);
        assert_eq!(line["answer"]["text"], asked["answer"], "{model}");
        assert_eq!(line["answer"]["start_char"], asked["start_char"], "{model}");
        assert_eq!(line["answer"]["end_char"], asked["end_char"], "{model}");
        assert_eq!(line["answer"]["no_answer"], asked["no_answer"], "{model}");
    }
}

/// This process's threads: (id, name).
fn threads() -> Vec<(String, String)> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| {
            let t = t.ok()?;
            let name = std::fs::read_to_string(t.path().join("comm")).ok()?;
            Some((
                t.file_name().to_string_lossy().into_owned(),
                name.trim().to_string(),
            ))
        })
        .collect()
}

/// The threads of this process named as a run names its stage threads.
fn run_threads() -> usize {
    threads()
        .iter()
        .filter(|(_, name)| ["bertqa-windows", "bertqa-decode"].contains(&name.as_str()))
        .count()
}

/// Set in the child process of [`an_awaited_ask_runs_on_the_callers_runtime`]: the
/// shared server's URL.
const ONE_THREAD_CHILD: &str = "BERTQA_TEST_ONE_THREAD_URL";

/// The async client in a program of one thread (`flavor = "current_thread"`): `ask` is
/// awaited there and gives `bertqa ask`'s answer, `evaluate` `bertqa eval`'s predictions,
/// and while the `ask` is awaited the process starts no thread (the names of its threads,
/// read from /proc, stay those it had before). Checked in a child process of this test
/// (the test binary run again for this test alone), where no other test starts threads.
#[test]
fn an_awaited_ask_runs_on_the_callers_runtime() {
    if let Ok(url) = std::env::var(ONE_THREAD_CHILD) {
        return one_thread_program(url);
    }
    let url = server().url.clone();
    let o = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "library::an_awaited_ask_runs_on_the_callers_runtime",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(ONE_THREAD_CHILD, &url)
        .current_dir(root())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("1 passed"),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = out
        .lines()
        .find_map(|l| l.split_once("one-thread: ").map(|(_, line)| line))
        .expect("the child's line");
    let line: Value = serde_json::from_str(line).unwrap();
    let asked = ask_command(&url, "tiny-bert");
    assert_eq!(line["answer"]["text"], asked["answer"]);
    assert_eq!(line["answer"]["start_char"], asked["start_char"]);
    let tmp = tempfile::tempdir().unwrap();
    eval_command(&url, "tiny-bert", tmp.path());
    let predictions: Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("predictions.json")).unwrap())
            .unwrap();
    assert_eq!(line["predictions"], predictions);
}

/// The child's side: asks and evaluates on a one-thread runtime, watching the threads
/// while the `ask` is awaited; prints `one-thread: ` and its JSON line.
fn one_thread_program(url: String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = bertqa::Client::builder(url)
            .model("tiny-bert")
            .vocab(root().join("vocab/vocab.txt"))
            .build()
            .await
            .unwrap();
        let before = threads();
        let asking = std::sync::atomic::AtomicBool::new(true);
        let watch = async {
            // Polled whenever the ask waits for the server, until it is answered.
            let mut seen = Vec::new();
            let mut looks = 0;
            while asking.load(std::sync::atomic::Ordering::SeqCst) {
                seen.extend(threads());
                looks += 1;
                tokio::task::yield_now().await;
            }
            (seen, looks)
        };
        let ask = async {
            let answer = client.ask(QUESTION, CONTEXT).await;
            asking.store(false, std::sync::atomic::Ordering::SeqCst);
            answer
        };
        let (answer, (seen, looks)) = tokio::join!(ask, watch);
        let answer = answer.unwrap();
        assert!(looks > 0, "the ask never waited");
        let new: Vec<_> = seen.iter().filter(|t| !before.contains(t)).collect();
        assert!(new.is_empty(), "threads started while asking: {new:?}");
        assert!(
            !before.iter().any(|(_, name)| name.starts_with("bertqa")),
            "the client keeps threads of its own: {before:?}"
        );
        let data = bertqa::Dataset::open(root().join(DATA)).unwrap();
        let evaluation = client.evaluate(&data).await.unwrap();
        let predictions: serde_json::Map<String, Value> = (&evaluation.predictions)
            .into_iter()
            .map(|(id, text)| (id.to_string(), text.as_str().into()))
            .collect();
        let line = serde_json::json!({ "answer": answer, "predictions": predictions });
        // libtest may have begun the line with the test's name.
        println!("\none-thread: {line}");
    });
}

/// An async call whose future is dropped (here by a timeout) stops its run: 400
/// questions to `oracle-slow`, one a request and one in flight, take far longer than
/// the timeout; the run's thread is gone within a few seconds of it.
#[test]
fn dropping_an_async_call_stops_its_run() {
    let url = server().url.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = bertqa::Client::builder(url)
            .model("oracle-slow")
            .vocab(root().join("vocab/vocab.txt"))
            .batch_size(1)
            .concurrency(1)
            .build()
            .await
            .unwrap();
        let questions = vec![(QUESTION, CONTEXT); 400];
        let asked = tokio::time::timeout(
            std::time::Duration::from_millis(500),
            client.ask_many(questions),
        )
        .await;
        assert!(asked.is_err(), "400 slow questions answered in 0.5 s");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while run_threads() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the run goes on after its call was dropped"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // The client still answers.
        let answer = client.ask(QUESTION, CONTEXT).await.unwrap();
        assert!(!answer.text.is_empty());
    });
}

/// `bertqa::compare` over two clients' evaluations: two deployments of the oracle answer
/// alike, the null model does not; a client keeps no windows, so no logits are compared.
#[test]
fn compare_takes_two_clients_evaluations() {
    let url = server().url.clone();
    let data = bertqa::Dataset::open(root().join(DATA)).unwrap();
    let evaluate = |model: &str| {
        bertqa::blocking::Client::builder(url.clone())
            .model(model)
            .vocab(root().join("vocab/vocab.txt"))
            .build()
            .unwrap()
            .evaluate(&data)
            .unwrap()
    };
    let (oracle, again, null) = (
        evaluate("oracle"),
        evaluate("oracle-nobatch"),
        evaluate("null"),
    );
    let same = bertqa::compare(&(&oracle).into(), &(&again).into());
    assert_eq!(same.agreement, 1.0);
    assert!(same.disagreements.is_empty());
    assert_eq!(same.f1_drop, 0.0);
    assert!(same.start_logits.linf.is_nan() && same.windows_compared == 0);
    let worse = bertqa::compare(&(&oracle).into(), &(&null).into());
    assert!(worse.agreement < 1.0, "{}", worse.agreement);
    assert!(worse.f1_drop > 0.0);
    let questions = data.examples.len() as f64;
    assert_eq!(
        worse.disagreements.len() as f64,
        ((1.0 - worse.agreement) * questions).round()
    );
    let first = &worse.disagreements[0];
    let (_, answer) = oracle
        .predictions
        .iter()
        .find(|(id, _)| *id == first.id)
        .unwrap();
    assert_eq!(&first.answers[0], answer);
}
