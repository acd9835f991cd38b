//! The gRPC stream transport: `ModelInfer` requests multiplexed on one
//! `ModelStreamInfer` call per connection.
//!
//! A unary call costs a new HTTP/2 stream each time: a HEADERS frame (and its own
//! socket write) out, HEADERS, DATA and trailers back, and the stream's set-up and
//! teardown on both sides. On a stream that stays open a request is one DATA frame and
//! its response another; requests that are ready together leave in one write.
//!
//! Contract:
//! - One stream per connection ([`InferStream`]), opened on first use on the caller's
//!   runtime, opened again after it ended. A current-thread runtime drives its tasks
//!   only inside `block_on`: send a connection's requests from one runtime.
//! - Each request gets a decimal `id` that its response carries back (docs/design.md,
//!   protocol item 5); responses are matched by id, in whatever order they come.
//! - A response with an `error_message` is [`StreamError::Rejected`]: on a stream the
//!   server sends the message without a status code, so [`StreamTransport`] asks again
//!   with `ModelInfer`, whose status the retry policy can read, and sends every later
//!   request of the connection unary. A response without a known id rejects every
//!   waiting request the same way (Triton 2.51 always sends the id).
//! - The end of the stream (the connection lost, the server closing it, the runtime
//!   that drove it shutting down) fails every request still waiting with
//!   [`StreamError::Closed`] and its status; a server without `ModelStreamInfer`
//!   answers UNIMPLEMENTED, which sends the connection unary too.
//! - Each request has its own deadline ([`InferStream::infer`]); a response that comes
//!   after it, or after its caller stopped waiting, is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::metadata::MetadataMap;
use tonic::{Code, Status};

use super::peer::Peer;
use super::proto::{ModelInferRequest, ModelInferResponse, ModelStreamInferResponse};
use super::request::InferRequest;
use super::transport::ServiceClient;
use super::unary::UnaryTransport;
use crate::error::Result;

/// Why a request sent on the stream has no response.
#[derive(Debug, Clone)]
pub(crate) enum StreamError {
    /// The server answered it with this error message (no status code on a stream).
    /// (The message is for tests to check: the request is asked again unary, and that
    /// answer is what a caller sees.)
    Rejected(#[cfg_attr(not(test), allow(dead_code))] String),
    /// The stream ended before its response, with this status.
    Closed(Status),
    /// No response within the deadline.
    TimedOut,
}

type Reply = std::result::Result<ModelInferResponse, StreamError>;

/// What the sending side and the task reading responses share.
#[derive(Debug, Default)]
struct Shared {
    /// Requests sent and not answered yet, by id.
    waiting: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    /// Set once the stream has ended (with the status every later request gets).
    closed: Mutex<Option<Status>>,
    ended: AtomicBool,
    next_id: AtomicU64,
}

impl Shared {
    /// Hands a response to its request. A response nobody waits for any more (its
    /// deadline passed) is dropped. One without a known id could be anyone's: every
    /// waiting request is rejected with its message (or with the fact), so that each is
    /// asked again with `ModelInfer` rather than left to its deadline.
    fn deliver(&self, message: ModelStreamInferResponse) {
        let ModelStreamInferResponse {
            error_message,
            infer_response,
        } = message;
        let Some(id) = infer_response
            .as_ref()
            .and_then(|r| r.id.parse::<u64>().ok())
        else {
            let message = match error_message.is_empty() {
                true => "the server answered on the stream without a request id".to_string(),
                false => error_message,
            };
            for w in self.take_waiting() {
                let _ = w.send(Err(StreamError::Rejected(message.clone())));
            }
            return;
        };
        let waiter = self.waiting.lock().expect("waiting lock").remove(&id);
        let Some(waiter) = waiter else { return };
        let reply = match infer_response {
            Some(r) if error_message.is_empty() => Ok(r),
            _ => Err(StreamError::Rejected(error_message)),
        };
        // The request may have stopped waiting in between: nothing to do then.
        let _ = waiter.send(reply);
    }

    /// Ends the stream: every waiting request, and every later one, gets `status`.
    fn close(&self, status: Status) {
        let mut closed = self.closed.lock().expect("closed lock");
        if closed.is_none() {
            *closed = Some(status.clone());
        }
        self.ended.store(true, Ordering::Release);
        drop(closed);
        for w in self.take_waiting() {
            let _ = w.send(Err(StreamError::Closed(status.clone())));
        }
    }

    /// Every waiting request's sender, taken out of the map.
    fn take_waiting(&self) -> Vec<oneshot::Sender<Reply>> {
        self.waiting
            .lock()
            .expect("waiting lock")
            .drain()
            .map(|(_, w)| w)
            .collect()
    }

    fn closed_status(&self) -> Status {
        self.closed
            .lock()
            .expect("closed lock")
            .clone()
            .unwrap_or_else(|| Status::unavailable("the inference stream ended"))
    }
}

/// Closes the stream when the task driving it ends in any way, a runtime shutting
/// down included (the task is then dropped, not finished).
struct CloseOnDrop(Arc<Shared>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close(Status::unavailable(
            "the inference stream was dropped (its runtime shut down)",
        ));
    }
}

/// One open `ModelStreamInfer` call (see the module header).
#[derive(Debug)]
pub(crate) struct InferStream {
    requests: mpsc::UnboundedSender<ModelInferRequest>,
    shared: Arc<Shared>,
}

impl InferStream {
    /// Opens a stream with the connection's service client `grpc`, with `metadata`
    /// (the headers of every call). The task that drives it is spawned on the current
    /// runtime.
    pub(crate) fn open(grpc: ServiceClient, metadata: MetadataMap) -> InferStream {
        let (requests, queued) = mpsc::unbounded_channel::<ModelInferRequest>();
        let shared = Arc::new(Shared::default());
        tokio::spawn(drive(grpc, metadata, queued, shared.clone()));
        InferStream { requests, shared }
    }

    /// Whether the stream has ended (a new one is needed).
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.ended.load(Ordering::Acquire) || self.requests.is_closed()
    }

    /// Sends `message` (its `id` set here) and waits up to `timeout` for its response.
    pub(crate) async fn infer(&self, mut message: ModelInferRequest, timeout: Duration) -> Reply {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.shared
            .waiting
            .lock()
            .expect("waiting lock")
            .insert(id, tx);
        // However this ends (answered, timed out, the caller gone), the id is no longer
        // waited for.
        let _pending = Pending {
            shared: &self.shared,
            id,
        };
        // Closed after the insertion: `close` drained the map already, or drains it now.
        message.id = id.to_string();
        if self.shared.ended.load(Ordering::Acquire) || self.requests.send(message).is_err() {
            return Err(StreamError::Closed(self.shared.closed_status()));
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(StreamError::Closed(self.shared.closed_status())),
            Err(_) => Err(StreamError::TimedOut),
        }
    }
}

/// A request's place among the waiting, given up when it is dropped.
struct Pending<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.shared
            .waiting
            .lock()
            .expect("waiting lock")
            .remove(&self.id);
    }
}

/// Runs the call: sends what `queued` yields, hands each response to its request, and
/// closes the stream with the status it ended with.
async fn drive(
    mut grpc: ServiceClient,
    metadata: MetadataMap,
    queued: mpsc::UnboundedReceiver<ModelInferRequest>,
    shared: Arc<Shared>,
) {
    let closer = CloseOnDrop(shared);
    let shared = &closer.0;
    let request = tonic::Request::from_parts(
        metadata,
        Default::default(),
        UnboundedReceiverStream::new(queued),
    );
    let status = match grpc.model_stream_infer(request).await {
        Err(status) => status,
        Ok(response) => {
            let mut responses = response.into_inner();
            loop {
                match responses.message().await {
                    Ok(Some(message)) => shared.deliver(message),
                    Ok(None) => break Status::unavailable("the server ended the inference stream"),
                    Err(status) => break status,
                }
            }
        }
    };
    shared.close(status);
}

/// The stream transport of one connection (see the module header), with the unary
/// transport it falls back to.
#[derive(Debug)]
pub(crate) struct StreamTransport {
    grpc: ServiceClient,
    peer: Arc<Peer>,
    current: Mutex<Option<Arc<InferStream>>>,
    /// Set for good once the stream answered with an error or is not offered: the
    /// connection's requests then go unary.
    unary: AtomicBool,
    fallback: UnaryTransport,
}

impl StreamTransport {
    /// The transport of `grpc`, the service client of a connection to `peer`; the
    /// stream opens on the first request.
    pub(crate) fn new(grpc: ServiceClient, peer: Arc<Peer>) -> StreamTransport {
        StreamTransport {
            fallback: UnaryTransport::new(grpc.clone(), peer.clone()),
            grpc,
            peer,
            current: Mutex::new(None),
            unary: AtomicBool::new(false),
        }
    }

    /// Whether a stream error sent this connection's requests unary for good.
    pub(crate) fn went_unary(&self) -> bool {
        self.unary.load(Ordering::Relaxed)
    }

    /// The connection's open stream, or a new one (on the current runtime).
    fn open_stream(&self) -> Arc<InferStream> {
        let mut current = self.current.lock().expect("stream lock");
        match current.as_ref() {
            Some(s) if !s.is_closed() => s.clone(),
            _ => {
                let s = Arc::new(InferStream::open(self.grpc.clone(), self.peer.metadata()));
                *current = Some(s.clone());
                s
            }
        }
    }

    /// Sends `request` and waits for its answer (the contract of `transport.rs`).
    pub(crate) async fn send(&self, request: InferRequest) -> Result<ModelInferResponse> {
        match self.send_on_stream(request.to_proto()).await {
            Some(answer) => answer,
            None => self.fallback.send(request).await,
        }
    }

    /// Sends `message` on the stream and waits for its answer; `None` when it is to go
    /// unary instead: the stream rejected it (no status code on a stream) or is not
    /// offered, which sends every later request of the connection unary too.
    pub(crate) async fn send_on_stream(
        &self,
        message: ModelInferRequest,
    ) -> Option<Result<ModelInferResponse>> {
        if self.went_unary() {
            return None;
        }
        let stream = self.open_stream();
        let timeout = self.peer.request_timeout;
        let model = message.model_name.clone();
        match stream.infer(message, timeout).await {
            Ok(response) => Some(Ok(response)),
            Err(StreamError::TimedOut) => Some(Err(self.peer.timeout())),
            Err(StreamError::Closed(status)) if status.code() != Code::Unimplemented => {
                Some(Err(self.peer.error(status, Some(&model))))
            }
            Err(_) => {
                self.unary.store(true, Ordering::Relaxed);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(id: &str, error: &str) -> ModelStreamInferResponse {
        ModelStreamInferResponse {
            error_message: error.into(),
            infer_response: Some(ModelInferResponse {
                id: id.into(),
                model_name: "m".into(),
                ..Default::default()
            }),
        }
    }

    fn waiting(shared: &Shared, id: u64) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        shared.waiting.lock().unwrap().insert(id, tx);
        rx
    }

    #[test]
    fn responses_find_their_requests_in_any_order() {
        let shared = Shared::default();
        let mut one = waiting(&shared, 1);
        let mut two = waiting(&shared, 2);
        shared.deliver(response("2", ""));
        assert!(one.try_recv().is_err(), "not answered yet");
        assert_eq!(two.try_recv().unwrap().unwrap().id, "2");
        shared.deliver(response("1", ""));
        assert_eq!(one.try_recv().unwrap().unwrap().id, "1");
        assert!(shared.waiting.lock().unwrap().is_empty());
    }

    #[test]
    fn an_error_message_rejects_its_request_only() {
        let shared = Shared::default();
        let mut one = waiting(&shared, 1);
        let mut two = waiting(&shared, 2);
        shared.deliver(response("1", "injected fault: model exploded"));
        match one.try_recv().unwrap() {
            Err(StreamError::Rejected(m)) => assert_eq!(m, "injected fault: model exploded"),
            other => panic!("{other:?}"),
        }
        assert!(two.try_recv().is_err(), "still waiting");
        // An answer for nobody waiting (its deadline passed) is dropped.
        shared.deliver(response("7", ""));
        assert!(two.try_recv().is_err());
        // One that names no request could be anyone's: every waiting one is rejected,
        // to be asked again unary.
        shared.deliver(ModelStreamInferResponse {
            error_message: "lost".into(),
            infer_response: None,
        });
        match two.try_recv().unwrap() {
            Err(StreamError::Rejected(m)) => assert_eq!(m, "lost"),
            other => panic!("{other:?}"),
        }
        let mut three = waiting(&shared, 3);
        shared.deliver(response("not a number", ""));
        match three.try_recv().unwrap() {
            Err(StreamError::Rejected(m)) => assert!(m.contains("without a request id"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(shared.waiting.lock().unwrap().is_empty());
    }

    #[test]
    fn closing_fails_the_waiting_and_names_the_status() {
        let shared = Shared::default();
        let mut one = waiting(&shared, 1);
        shared.close(Status::unimplemented("no streams here"));
        match one.try_recv().unwrap() {
            Err(StreamError::Closed(s)) => assert_eq!(s.code(), Code::Unimplemented),
            other => panic!("{other:?}"),
        }
        assert!(shared.ended.load(Ordering::Acquire));
        // The first status is kept.
        shared.close(Status::unavailable("later"));
        assert_eq!(shared.closed_status().code(), Code::Unimplemented);
    }

    #[test]
    fn a_dropped_driver_closes_the_stream() {
        let shared = Arc::new(Shared::default());
        let mut one = waiting(&shared, 1);
        drop(CloseOnDrop(shared.clone()));
        match one.try_recv().unwrap() {
            Err(StreamError::Closed(s)) => assert_eq!(s.code(), Code::Unavailable),
            other => panic!("{other:?}"),
        }
    }
}
