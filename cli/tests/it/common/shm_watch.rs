//! Watching a run's system shared memory regions from the server's side: its region
//! status, polled while the run goes on and read after it. Only the names of the run's
//! own process count (`bertqa-PID-…`): other tests' regions may be registered at the
//! same time.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{show, spawn_bertqa};

/// The names of the regions the server has registered (HTTP
/// `GET /v2/systemsharedmemory/status`).
fn registered(http_port: u16) -> Vec<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", http_port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = "GET /v2/systemsharedmemory/status HTTP/1.1\r\nHost: localhost\r\n\
               Connection: close\r\n\r\n";
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    let (head, body) = buf.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{buf}");
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

/// What a run showed of its regions.
pub struct Watched {
    pub output: Output,
    /// Regions of its process seen registered while it ran.
    pub during: BTreeSet<String>,
    /// Regions of its process still registered after it ended.
    pub after: Vec<String>,
}

/// Runs `bertqa args` to its end, polling the regions of the server at `port` (its
/// HTTP port) meanwhile.
pub fn run_watching(port: u16, args: &[&str]) -> Watched {
    let mut child = spawn_bertqa(args);
    let prefix = format!("bertqa-{}-", child.id());
    // Read on threads of their own: a full pipe would stall the run.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            pipe.read_to_end(&mut bytes).unwrap();
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let ours = |names: Vec<String>| names.into_iter().filter(|n| n.starts_with(&prefix));
    let mut during = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("bertqa {args:?} did not finish");
        }
        during.extend(ours(registered(port)));
        std::thread::sleep(Duration::from_millis(5));
    };
    let output = Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    let after = ours(registered(port)).collect();
    Watched {
        output,
        during,
        after,
    }
}

/// One region registered while the run went on, none left after it.
pub fn assert_one_region_registered_then_unregistered(w: &Watched) {
    assert_eq!(w.output.status.code(), Some(0), "{}", show(&w.output));
    assert_eq!(
        w.during.len(),
        1,
        "one region registered during the run: {:?}\n{}",
        w.during,
        show(&w.output)
    );
    assert!(w.after.is_empty(), "left registered: {:?}", w.after);
}
