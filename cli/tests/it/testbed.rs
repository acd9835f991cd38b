//! The test bed never uses a server it did not start: `scripts/triton.sh start`,
//! `scripts/run.sh` and the tests' own servers (`common::start_server_on`) refuse ports
//! in use, naming the process holding them, and report ready only the process they
//! started. A "stranger" here is a real listener of this test process that answers
//! every HTTP request, `/v2/health/ready` included, with 200.
//! Also: the demo's echoed commands paste back to the same words.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::{free_port, http_url, root, show, start_server_on, triton_env};

/// A listener on a loopback port answering 200 to every request, until dropped.
struct Stranger {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Stranger {
    fn on(port: u16) -> Stranger {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("bind 127.0.0.1:{port}: {e}"));
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        let stranger = Stranger {
            port,
            stop,
            thread: Some(thread),
        };
        assert!(stranger.answers_ready(), "the stranger does not answer");
        stranger
    }

    fn answers_ready(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.write_all(b"GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\n\r\n");
        let mut buf = String::new();
        let _ = s.read_to_string(&mut buf);
        buf.starts_with("HTTP/1.1 200")
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How the error messages name this test process as a port's holder.
fn me() -> String {
    format!("pid {} (", std::process::id())
}

/// A `scripts/triton.sh` server name of this test process.
fn name(tag: &str) -> String {
    format!("it-{}-{tag}", std::process::id())
}

fn triton_sh(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(root().join("scripts/triton.sh"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run scripts/triton.sh")
}

fn assert_stopped(name: &str) {
    let o = triton_sh(&["status", "--name", name]);
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
}

#[test]
fn triton_sh_start_refuses_ports_in_use_and_names_their_holder() {
    let http = Stranger::on(free_port());
    let metrics = TcpListener::bind("127.0.0.1:0").unwrap();
    let metrics_port = metrics.local_addr().unwrap().port();
    let grpc = free_port().to_string();
    let (h, m) = (http.port.to_string(), metrics_port.to_string());
    let name = name("refuse");
    let t = Instant::now();
    let o = triton_sh(&[
        "start",
        "--name",
        &name,
        "--grpc-port",
        &grpc,
        "--http-port",
        &h,
        "--metrics-port",
        &m,
    ]);
    assert!(t.elapsed() < Duration::from_secs(10), "{}", show(&o));
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(o.stdout.is_empty(), "an address was reported: {}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    for (port, label, flag) in [
        (&h, "HTTP", "--http-port"),
        (&m, "metrics", "--metrics-port"),
    ] {
        assert!(
            err.contains(&format!(
                "error: port {port} ({label}) is in use by {}",
                me()
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!("pick another port with {flag} PORT")),
            "{err}"
        );
    }
    assert!(!err.contains(&format!("port {grpc} ")), "{err}");
    assert!(
        err.contains(&format!("tritonserver ({name}) not started")),
        "{err}"
    );
    assert!(!err.contains("starting tritonserver"), "{err}");
    assert_stopped(&name);
}

#[test]
fn triton_sh_start_never_reports_a_server_it_did_not_start_as_ready() {
    // The port is taken after the check, as the server starts (it binds its ports a
    // second or more later): it cannot bind it and exits, and the stranger answering
    // ready meanwhile is never reported.
    let (grpc, http, metrics) = (free_port(), free_port(), free_port());
    let name = name("race");
    let mut child = Command::new("bash")
        .arg(root().join("scripts/triton.sh"))
        .args(["start", "--name", &name])
        .args(["--grpc-port", &grpc.to_string()])
        .args(["--http-port", &http.to_string()])
        .args(["--metrics-port", &metrics.to_string()])
        .args(["--", "--model-control-mode=explicit", "--load-model=null"])
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run scripts/triton.sh");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut err = String::new();
    while !err.contains("starting tritonserver") {
        let n = stderr.read_line(&mut err).unwrap();
        assert!(n > 0, "scripts/triton.sh ended before starting: {err}");
    }
    let stranger = Stranger::on(http);
    stderr.read_to_string(&mut err).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        o.stdout.is_empty(),
        "an address was reported: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        err.contains(&format!("tritonserver ({name}) exited during start-up")),
        "{err}"
    );
    assert!(err.contains("already in use"), "no log tail: {err}");
    assert!(
        err.contains(&format!("error: port {http} (HTTP) is in use by {}", me())),
        "{err}"
    );
    assert!(err.contains("--http-port PORT"), "{err}");
    assert!(stranger.answers_ready());
    assert_stopped(&name);
    // The server's log, named on the "starting" line, is this test's to remove.
    if let Some((_, log)) = err.lines().find_map(|l| l.split_once("; log ")) {
        let _ = std::fs::remove_file(log);
    }
}

#[test]
fn run_sh_refuses_ports_in_use_before_anything_else() {
    let grpc = Stranger::on(free_port());
    let tmp = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let o = Command::new("bash")
        .arg(root().join("scripts/run.sh"))
        .env("BERTQA_GRPC_PORT", grpc.port.to_string())
        .env("BERTQA_HTTP_PORT", free_port().to_string())
        .env("BERTQA_METRICS_PORT", free_port().to_string())
        .env("BERTQA_OUT", tmp.path())
        .current_dir(root())
        .output()
        .expect("run scripts/run.sh");
    assert!(t.elapsed() < Duration::from_secs(10), "{}", show(&o));
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(o.stdout.is_empty(), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "error: port {} (gRPC) is in use by {}",
            grpc.port,
            me()
        )),
        "{err}"
    );
    assert!(
        err.contains("pick another port with BERTQA_GRPC_PORT=PORT"),
        "{err}"
    );
    assert!(err.contains("tritonserver (demo) not started"), "{err}");
    assert!(!err.contains("building"), "{err}");
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());
}

fn start_panics(ports: (u16, u16, u16), extra: &[&str]) -> String {
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let repo = root().join("models/repo");
    let e = std::panic::catch_unwind(|| start_server_on(&repo, &extra, Some(ports)))
        .map(|s| format!("started: {s:?}"))
        .expect_err("a server was reported ready");
    e.downcast_ref::<String>().cloned().unwrap_or_default()
}

#[test]
fn a_test_server_on_a_port_in_use_fails_naming_its_holder() {
    let http = Stranger::on(free_port());
    let (grpc, metrics) = (free_port(), free_port());
    let msg = start_panics((grpc, http.port, metrics), &[]);
    assert!(
        msg.contains(&format!(
            "cannot start tritonserver: port {} (HTTP) is in use by {}",
            http.port,
            me()
        )),
        "{msg}"
    );
}

#[test]
fn a_test_server_whose_port_is_taken_before_it_binds_is_never_ready() {
    let (grpc, http, metrics) = (free_port(), free_port(), free_port());
    // The port is taken as the server starts (its log exists), before it binds its ports.
    let log =
        std::env::temp_dir().join(format!("bertqa-triton-{}-{grpc}-1.log", std::process::id()));
    let taker = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !Path::new(&log).exists() {
            assert!(Instant::now() < deadline, "no server started");
            std::thread::sleep(Duration::from_millis(10));
        }
        Stranger::on(http)
    });
    let msg = start_panics(
        (grpc, http, metrics),
        &["--model-control-mode=explicit", "--load-model=null"],
    );
    let stranger = taker.join().unwrap();
    assert!(msg.contains("tritonserver exited during start-up"), "{msg}");
    assert!(
        msg.contains(&format!("port {http} (HTTP) is in use by {}", me())),
        "{msg}"
    );
    assert!(stranger.answers_ready());
}

#[test]
fn shell_quote_pastes_back_to_the_same_words() {
    let words = [
        "ask",
        "--url",
        "127.0.0.1:18001",
        "--question",
        "Who designed the lighthouse at Varne Point?",
        "--context",
        "It's \"quoted\", $HOME, `date`, a\ttab,\na newline; and * globs",
        "",
        "ünïcödé",
    ];
    let o = Command::new("bash")
        .arg("-c")
        .arg(". scripts/common.sh; shell_quote \"$@\"")
        .arg("shell_quote")
        .args(words)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let line = String::from_utf8(o.stdout).unwrap();
    assert_eq!(line.matches('\n').count(), 1, "{line}"); // one line
    assert!(
        line.starts_with("ask --url 127.0.0.1:18001 --question 'Who designed"),
        "{line}"
    );
    // Pasted into a shell, the line gives back the words.
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!("set -- {line}\nprintf '%s\\0' \"$@\""))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let back: Vec<String> = String::from_utf8(o.stdout)
        .unwrap()
        .split_terminator('\0')
        .map(String::from)
        .collect();
    assert_eq!(back, words, "{line}");
}

/// The text models (`qa-text-*`, `oracle-text-*`, `fault-text-*`) pass
/// `scripts/testbed/check_text_models.py` on the suite's shared server: the
/// tokenizer's windows are `bertqa features`' (strides 128 and 64, the sample file, the
/// fixtures and a context of more than 8 windows), the offsets spell the pieces, the
/// ensembles' logits are tiny-bert's and the oracle's, the answers are cut from the
/// context at their positions (the same without a no-answer output), the oracle's are
/// the gold ones, and each fault shows.
/// Any mismatch fails the script, and this test with its report.
#[test]
fn the_text_models_match_bertqa_features_and_their_model_steps() {
    let o = Command::new(&triton_env()["TRITON_PYTHON"])
        .arg(root().join("scripts/testbed/check_text_models.py"))
        .args(["--url", &format!("http://{}", http_url())])
        .args(["--bertqa", env!("CARGO_BIN_EXE_bertqa")])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("0 failure(s)"), "{out}");
}

/// The models of the BERT family's other QA models pass
/// `scripts/testbed/check_family_models.py` on the suite's shared server, with run_qa's
/// windows made by transformers from `tests/fixtures/tokenizers/`: `tiny-distilbert`,
/// `tiny-roberta`, `tiny-deberta-v3`, `tiny-bert-2in` and `tiny-bert-3in` answer their
/// numpy twins, padding leaves real positions' logits alone, RoBERTa's position ids
/// start at 2, `tiny-bert-2in` and `tiny-bert-3in` agree bit for bit, and
/// `oracle-wordpiece`, `oracle-bpe` and `oracle-unigram` peak on the gold answers of the
/// sample file (a SentencePiece answer with the space before its word).
#[test]
fn the_family_models_answer_as_their_twins_and_the_oracles_peak_on_gold() {
    let o = Command::new(&triton_env()["TRITON_PYTHON"])
        .arg(root().join("scripts/testbed/check_family_models.py"))
        .args(["--url", &format!("http://{}", http_url())])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("0 failure(s)"), "{out}");
}
