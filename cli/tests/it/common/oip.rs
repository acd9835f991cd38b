//! The Open Inference Protocol servers other than Triton that bertqa is tested against:
//! MLServer and KServe's Python model server, installed by `scripts/testbed/setup_oip.sh`
//! (cached outside the clone) and started once per test binary on free loopback ports,
//! each serving `models/oip`'s oracle and tiny-bert (the same answers as the Triton
//! models of those names). As with Triton, a server that cannot start fails the tests
//! with its log tail, and `PR_SET_PDEATHSIG` ends it with the tests.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::owned::start_owned;
use super::root;
use super::triton::{free_port, http_ready, installed, listens};

/// A running server of the protocol.
#[derive(Debug, Clone)]
pub struct OipServer {
    /// `mlserver` or `kserve`, as its metadata names it.
    pub name: &'static str,
    /// `127.0.0.1:PORT` of each protocol.
    pub grpc: String,
    pub http: String,
    pub log: PathBuf,
}

impl OipServer {
    /// The address for `protocol` (`grpc` or `http`).
    pub fn url(&self, protocol: &str) -> &str {
        if protocol == "http" {
            &self.http
        } else {
            &self.grpc
        }
    }
}

/// MLServer 1.7.1 with `models/oip/mlserver`'s models.
pub fn mlserver() -> &'static OipServer {
    static SERVER: OnceLock<OipServer> = OnceLock::new();
    SERVER.get_or_init(|| start("mlserver"))
}

/// KServe 0.21.0's model server with `models/oip/kserve_server.py`'s predictors.
pub fn kserve() -> &'static OipServer {
    static SERVER: OnceLock<OipServer> = OnceLock::new();
    SERVER.get_or_init(|| start("kserve"))
}

fn oip_env() -> &'static HashMap<String, String> {
    static ENV: OnceLock<HashMap<String, String>> = OnceLock::new();
    ENV.get_or_init(|| installed("scripts/testbed/setup_oip.sh"))
}

fn start(name: &'static str) -> OipServer {
    let env = oip_env();
    let (http, grpc) = (free_port(), free_port());
    let oip = root().join("models/oip");
    let log = std::env::temp_dir().join(format!("bertqa-{name}-{}-{grpc}.log", std::process::id()));
    let log_file = std::fs::File::create(&log).unwrap();
    let mut cmd = if name == "mlserver" {
        let mut c = Command::new(&env["MLSERVER"]);
        c.arg("start")
            .arg(oip.join("mlserver"))
            .env("MLSERVER_HTTP_PORT", http.to_string())
            .env("MLSERVER_GRPC_PORT", grpc.to_string());
        c
    } else {
        let mut c = Command::new(&env["KSERVE_PYTHON"]);
        c.arg(oip.join("kserve_server.py"))
            .args(["--http_port", &http.to_string()])
            .args(["--grpc_port", &grpc.to_string()]);
        c
    };
    cmd.env("PYTHONPATH", &oip)
        .current_dir(&oip)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file);
    let ready = move |pid| listens(pid, grpc) && http_ready(http);
    start_owned(
        name,
        cmd,
        vec![log.clone()],
        Duration::from_secs(180),
        ready,
    );
    OipServer {
        name,
        grpc: format!("127.0.0.1:{grpc}"),
        http: format!("127.0.0.1:{http}"),
        log,
    }
}
