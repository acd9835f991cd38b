//! A real reverse proxy in front of the shared Triton, as a cluster puts an ingress or a
//! gateway there: nginx (Debian's package, `scripts/testbed/setup_nginx.sh`), started once per
//! test binary on free loopback ports with a configuration of its own, ended with the
//! tests (`PR_SET_PDEATHSIG`).
//!
//! Routes (anything else: nginx's 404, "no route matched"):
//! - HTTP, any Host: the prefix `/seldon/ns/bert/` → Triton's HTTP port (Seldon Core's
//!   and API gateways' path routing); `/dead/` → a closed port (a 502);
//! - HTTP, Host [`HTTP_HOST`]: everything → Triton's HTTP port (KServe behind Istio);
//! - HTTP, Host [`PREFIX_HOST`]: the prefix `/seldon/prod/bert/` → Triton (both);
//! - gRPC (h2c), `:authority` [`GRPC_AUTHORITY`]: everything → Triton's gRPC port.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::owned::start_owned;
use super::triton::{free_port, listens, server};

/// The Host routed to Triton's HTTP port.
pub const HTTP_HOST: &str = "bert.default.example.com";
/// The Host whose prefix `/seldon/prod/bert/` is routed to Triton's HTTP port.
pub const PREFIX_HOST: &str = "gateway.example.com";
/// The `:authority` routed to Triton's gRPC port.
pub const GRPC_AUTHORITY: &str = "bert-grpc.default.example.com";

/// The running proxy.
#[derive(Debug, Clone)]
pub struct Proxy {
    /// `127.0.0.1:PORT` of the HTTP listener.
    pub http: String,
    /// `127.0.0.1:PORT` of the gRPC (HTTP/2 cleartext) listener.
    pub grpc: String,
    pub log: PathBuf,
}

/// The proxy of this test binary, in front of [`server`].
pub fn proxy() -> &'static Proxy {
    static PROXY: OnceLock<Proxy> = OnceLock::new();
    PROXY.get_or_init(start)
}

fn config(dir: &std::path::Path, http: u16, grpc: u16) -> String {
    let triton = server();
    let up_http = triton.http_port;
    let up_grpc = triton.url.rsplit(':').next().unwrap();
    let dead = free_port();
    let d = dir.display();
    format!(
        r#"worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 512; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  client_max_body_size 0;
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  server {{
    listen 127.0.0.1:{http} default_server;
    location /seldon/ns/bert/ {{ proxy_pass http://127.0.0.1:{up_http}/; }}
    location /dead/ {{ proxy_pass http://127.0.0.1:{dead}/; }}
    location / {{ return 404; }}
  }}
  server {{
    listen 127.0.0.1:{http};
    server_name {HTTP_HOST};
    location / {{ proxy_pass http://127.0.0.1:{up_http}; }}
  }}
  server {{
    listen 127.0.0.1:{http};
    server_name {PREFIX_HOST};
    location /seldon/prod/bert/ {{ proxy_pass http://127.0.0.1:{up_http}/; }}
    location / {{ return 404; }}
  }}
  server {{
    listen 127.0.0.1:{grpc} http2 default_server;
    location / {{ return 404; }}
  }}
  server {{
    listen 127.0.0.1:{grpc} http2;
    server_name {GRPC_AUTHORITY};
    location / {{ grpc_pass grpc://127.0.0.1:{up_grpc}; }}
  }}
}}
"#
    )
}

fn start() -> Proxy {
    let nginx = super::triton::set_up("scripts/testbed/setup_nginx.sh");
    let dir = std::env::temp_dir().join(format!("bertqa-nginx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (http, grpc) = (free_port(), free_port());
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, config(&dir, http, grpc)).unwrap();
    let log = dir.join("error.log");
    let mut cmd = Command::new(&nginx);
    cmd.arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap());
    let ready = move |pid| listens(pid, http) && listens(pid, grpc);
    let logs = vec![dir.join("stderr.log"), log.clone()];
    start_owned("nginx", cmd, logs, Duration::from_secs(30), ready);
    Proxy {
        http: format!("127.0.0.1:{http}"),
        grpc: format!("127.0.0.1:{grpc}"),
        log,
    }
}
