//! A plain HTTP/1.1 server on a free loopback port, for pages a test writes itself (a
//! metrics page, a web server that is not of the protocol). It reads each request's
//! head in full before answering and closes every connection after its answer
//! (`Connection: close`), so a client never sends into a connection the server has
//! dropped (which the kernel answers with a reset).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

/// One answer: status line text (e.g. "404 Not Found"), content type, body.
pub struct Answer {
    pub status: &'static str,
    pub content_type: &'static str,
    pub body: String,
}

/// Serves `answer(request head, lower-cased)` for the process's lifetime; `host:port`.
pub fn serve(answer: impl Fn(&str) -> Answer + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                let a = answer(&head);
                let _ = write!(
                    stream,
                    "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{}",
                    a.status,
                    a.content_type,
                    a.body.len(),
                    a.body
                );
                let _ = stream.flush();
                // Read what the client may still send (a body) until it closes, so
                // that closing does not reset the connection under the answer.
                let _ = stream.shutdown(std::net::Shutdown::Write);
                while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    addr.to_string()
}
