//! The real local Triton of this test binary (and servers of a test's own), and the
//! numpy twin of `tiny-bert`.
//!
//! The server is installed by `scripts/testbed/setup_triton.sh` (idempotent; cached outside the
//! clone) and started once per test binary on free loopback ports, from a thread that
//! lives as long as the process so that `PR_SET_PDEATHSIG` ends the server with the tests.
//! A server that cannot start fails the tests with its log tail: nothing skips.

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use super::root;

/// A running tritonserver.
#[derive(Debug, Clone)]
pub struct Server {
    /// `127.0.0.1:PORT` (gRPC).
    pub url: String,
    pub http_port: u16,
    /// Triton's Prometheus endpoint.
    pub metrics_port: u16,
    pub log: PathBuf,
    pub pid: u32,
}

/// The installed Triton's paths (`$BERTQA_CACHE/triton.env`).
pub fn triton_env() -> &'static HashMap<String, String> {
    static ENV: OnceLock<HashMap<String, String>> = OnceLock::new();
    ENV.get_or_init(|| installed("scripts/testbed/setup_triton.sh"))
}

/// Runs a set-up script of `scripts/testbed/` (idempotent) and returns the one line it prints
/// (the path of what it installed).
pub(super) fn set_up(script: &str) -> String {
    let out = Command::new("bash")
        .arg(root().join(script))
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    assert!(out.status.success(), "{script} failed");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Runs a set-up script (idempotent; it prints the path of the KEY=VALUE file it
/// wrote) and reads what it installed.
pub(super) fn installed(script: &str) -> HashMap<String, String> {
    let path = set_up(script);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A free loopback TCP port (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The shared server of this test binary on the project's model repository.
pub fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| start_server(&root().join("models/repo"), &[]))
}

/// The shared server's HTTP address, `127.0.0.1:PORT`.
pub fn http_url() -> String {
    format!("127.0.0.1:{}", server().http_port)
}

/// A server of a test's own on the project's model repository that loads only `models`,
/// with `extra` flags, on the given (gRPC, HTTP, metrics) ports or free ones.
pub fn start_server_with(
    models: &[&str],
    extra: &[String],
    ports: Option<(u16, u16, u16)>,
) -> Server {
    let mut args = vec!["--model-control-mode=explicit".to_string()];
    args.extend(models.iter().map(|m| format!("--load-model={m}")));
    args.extend_from_slice(extra);
    start_server_on(&root().join("models/repo"), &args, ports)
}

/// The models of `tune`'s tests (`models/tune`), each used by one test only.
pub const TUNE_MODELS: [&str; 7] = [
    "tune-fixed-cost",
    "tune-fixed-cost-sigint",
    "tune-fixed-cost-sigkill",
    "tune-fixed-cost-panic",
    "tune-refuses-16",
    "tune-tiny-bert",
    // With its steps tune-text-tokenizer and tune-text-null.
    "tune-text-ensemble",
];

/// The server of `tune`'s tests: `models/tune` in explicit model-control mode, every
/// model of [`TUNE_MODELS`] loaded (tune reloads them; no other test uses them).
pub fn tune_server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let mut args = vec!["--model-control-mode=explicit".to_string()];
        args.extend(TUNE_MODELS.iter().map(|m| format!("--load-model={m}")));
        start_server_on(&root().join("models/tune"), &args, None)
    })
}

/// A server of a test's own with only `oracle-slow` (the oracle sleeping 40 ms per
/// execution) loaded, on the given (gRPC, HTTP, metrics) ports or free ones.
pub fn slow_server(ports: Option<(u16, u16, u16)>) -> Server {
    start_server_with(&["oracle-slow"], &[], ports)
}

/// Starts a tritonserver on `repo` with `extra` flags and waits until it is ready.
/// The server lives until the test process exits.
pub fn start_server(repo: &Path, extra: &[String]) -> Server {
    start_server_on(repo, extra, None)
}

/// [`start_server`] on the given (gRPC, HTTP, metrics) ports, or free ones: a test can
/// start a server again where a killed one was. The server is ready when the process
/// started here holds the gRPC and HTTP ports and answers ready: a server it did not
/// start is never used. A port in use (before the start, or taken before the server
/// could bind it) fails the start naming its holder; free ports picked here are picked
/// again instead.
pub fn start_server_on(repo: &Path, extra: &[String], ports: Option<(u16, u16, u16)>) -> Server {
    let env = triton_env().clone();
    let repo = repo.to_path_buf();
    let extra = extra.to_vec();
    let (tx, rx) = mpsc::channel();
    // The spawning thread must outlive the server: PR_SET_PDEATHSIG fires when the
    // thread that forked the child exits.
    std::thread::spawn(move || {
        let mut picked = ports.unwrap_or_else(free_ports);
        // The python backend now and then fails to start (a boost::interprocess lock
        // exception in its shared-memory set-up, independent of the models); such a
        // start is retried on the same ports, anything else fails the tests at once.
        let mut attempt = 0;
        let mut child = 'attempts: loop {
            attempt += 1;
            // A port given by the test may still be held by a server it just killed.
            let grace = Duration::from_secs(if ports.is_some() { 5 } else { 0 });
            if let Some(taken) = ports_in_use(picked, grace) {
                if ports.is_none() && attempt < 3 {
                    picked = free_ports();
                    continue 'attempts;
                }
                tx.send(Err(format!(
                    "cannot start tritonserver: {taken} (a test never uses a server it did not start)"
                )))
                .unwrap();
                return;
            }
            let (grpc, http, metrics) = picked;
            let log = std::env::temp_dir().join(format!(
                "bertqa-triton-{}-{grpc}-{attempt}.log",
                std::process::id()
            ));
            let log_file = std::fs::File::create(&log).unwrap();
            let mut cmd = Command::new(&env["TRITONSERVER"]);
            cmd.arg(format!("--model-repository={}", repo.display()))
                .arg(format!("--backend-directory={}", env["TRITON_BACKEND_DIR"]))
                .arg(format!("--cache-directory={}", env["TRITON_CACHE_DIR"]))
                .args(["--grpc-port", &grpc.to_string()])
                .args(["--http-port", &http.to_string()])
                .args(["--metrics-port", &metrics.to_string()])
                .arg("--exit-on-error=true")
                .args(&extra)
                .env(
                    "PATH",
                    format!(
                        "{}:{}",
                        env["TRITON_VENV_BIN"],
                        std::env::var("PATH").unwrap_or_default()
                    ),
                )
                .env("LD_LIBRARY_PATH", &env["TRITON_LD_LIBRARY_PATH"])
                .stdin(Stdio::null())
                .stdout(log_file.try_clone().unwrap())
                .stderr(log_file);
            // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    Ok(())
                });
            }
            let mut child = cmd.spawn().expect("spawn tritonserver");
            let server = Server {
                url: format!("127.0.0.1:{grpc}"),
                http_port: http,
                metrics_port: metrics,
                log: log.clone(),
                pid: child.id(),
            };
            let deadline = Instant::now() + Duration::from_secs(180);
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    if attempt < 3 && transient_start_failure(&log) {
                        eprintln!(
                            "tritonserver start-up failed transiently; retrying ({attempt}/3)"
                        );
                        continue 'attempts;
                    }
                    // Taken between the check above and the server's bind.
                    let taken = ports_in_use(picked, Duration::ZERO);
                    if let Some(taken) = &taken {
                        if ports.is_none() && attempt < 3 {
                            eprintln!("tritonserver could not bind: {taken}; retrying on other ports ({attempt}/3)");
                            picked = free_ports();
                            continue 'attempts;
                        }
                    }
                    tx.send(Err(format!(
                        "tritonserver exited during start-up ({status}){}:\n{}",
                        taken.map(|t| format!(": {t}")).unwrap_or_default(),
                        log_tail(&log, 40)
                    )))
                    .unwrap();
                    return;
                }
                if listens(server.pid, grpc) && listens(server.pid, http) && http_ready(http) {
                    tx.send(Ok(server)).unwrap();
                    break 'attempts child;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    tx.send(Err(format!(
                        "tritonserver not ready after 180 s:\n{}",
                        log_tail(&log, 40)
                    )))
                    .unwrap();
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        };
        let _ = child.wait();
        // Keep this thread alive until the process ends (see above).
        loop {
            std::thread::park();
        }
    });
    match rx.recv().expect("server thread") {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

/// SIGKILLs a server this test started, and its python backend stubs with it: a killed
/// tritonserver cannot stop them, and orphaned stubs would outlive the tests.
pub fn kill_server(server: &Server) {
    let mut stubs = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", server.pid)) {
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            stubs.extend(
                children
                    .split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    // SAFETY: kill(2) of processes this test started (the server and its children).
    unsafe {
        libc::kill(server.pid as i32, libc::SIGKILL);
        for pid in stubs {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// A start-up failure of the python backend that another start does not repeat.
fn transient_start_failure(log: &Path) -> bool {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.contains("lock_exception") || text.contains("boost::interprocess")
}

pub(super) fn http_ready(port: u16) -> bool {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = "GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.starts_with("HTTP/1.1 200")
}

/// `GET /v2/models/MODEL/config` of the server on `http_port`: the configuration as
/// the server reports it. Triton answers it only between repository calls, and a load
/// on a busy machine can take many seconds: a read that times out is asked again
/// until a minute has passed.
pub fn model_config(http_port: u16, model: &str) -> serde_json::Value {
    use std::io::Read;
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", http_port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let req = format!("GET /v2/models/{model}/config HTTP/1.0\r\nHost: localhost\r\n\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut answer = String::new();
        match s.read_to_string(&mut answer) {
            Ok(_) => break answer,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) && Instant::now() < deadline => {}
            Err(e) => panic!("GET /v2/models/{model}/config on port {http_port}: {e}"),
        }
    };
    assert!(
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
        "{answer}"
    );
    let body = &answer[answer.find("\r\n\r\n").expect("a body") + 4..];
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// Three distinct free loopback ports (held together while picked).
fn free_ports() -> (u16, u16, u16) {
    let held: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let port = |i: usize| held[i].local_addr().unwrap().port();
    (port(0), port(1), port(2))
}

/// The ports of `(gRPC, HTTP, metrics)` that something listens on, with who holds
/// them, waiting up to `grace` for them to be released; `None` when all are free.
fn ports_in_use((grpc, http, metrics): (u16, u16, u16), grace: Duration) -> Option<String> {
    let deadline = Instant::now() + grace;
    loop {
        let taken: Vec<String> = [("gRPC", grpc), ("HTTP", http), ("metrics", metrics)]
            .into_iter()
            .filter(|&(_, port)| !listen_inodes(port).is_empty())
            .map(|(name, port)| format!("port {port} ({name}) is in use by {}", port_holder(port)))
            .collect();
        if taken.is_empty() {
            return None;
        }
        if Instant::now() >= deadline {
            return Some(taken.join("; "));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The inodes of the TCP sockets listening on `port` at any address (Linux's
/// /proc/net/tcp and tcp6).
fn listen_inodes(port: u16) -> Vec<String> {
    let suffix = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|line| {
                    let f: Vec<&str> = line.split_whitespace().collect();
                    // Fields: sl, local address, remote address, state (0A: listening),
                    // ..., inode (the tenth).
                    (f.len() > 9 && f[3] == "0A" && f[1].ends_with(&suffix))
                        .then(|| f[9].to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The pids among `pids` holding a socket listening on `port`.
fn listening_pids(port: u16, pids: impl Iterator<Item = u32>) -> Vec<u32> {
    let sockets: Vec<String> = listen_inodes(port)
        .iter()
        .map(|i| format!("socket:[{i}]"))
        .collect();
    if sockets.is_empty() {
        return Vec::new();
    }
    pids.filter(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|link| sockets.iter().any(|s| link.as_os_str() == s.as_str()))
    })
    .collect()
}

/// Whether process `pid` holds a socket listening on `port`.
pub(super) fn listens(pid: u32, port: u16) -> bool {
    !listening_pids(port, std::iter::once(pid)).is_empty()
}

/// Who listens on `port`, in words: pid and command line when this user may see them.
fn port_holder(port: u16) -> String {
    let pids = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    match listening_pids(port, pids).first() {
        Some(pid) => {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            format!("pid {pid} ({})", cmd.trim_end())
        }
        None => "a process this user cannot see".to_string(),
    }
}

/// The last `n` lines of a log file.
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Logits of `tiny-bert` recomputed by its numpy twin (models/lib/tinybert.py) for
/// padded `[batch, seq]` inputs.
pub fn numpy_tiny_bert(
    ids: &[Vec<i64>],
    seg: &[Vec<i64>],
    mask: &[Vec<i64>],
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let env = triton_env();
    let input = serde_json::json!({"input_ids": ids, "segment_ids": seg, "input_mask": mask});
    let mut child = Command::new(&env["TRITON_PYTHON"])
        .arg(root().join("models/lib/tinybert.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run models/lib/tinybert.py");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "tinybert.py failed");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = |k: &str| -> Vec<Vec<f32>> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap() as f32)
                    .collect()
            })
            .collect()
    };
    (rows("start"), rows("end"))
}
