//! Request bodies handed to HTTP/2 whole, so that a unary call leaves in one write.
//!
//! tonic streams even a unary request's body: HTTP/2 sees a DATA frame whose body does
//! not yet know it has ended, then an empty DATA frame that ends the stream, and the
//! connection writes the HEADERS, the message and that empty frame to the socket in
//! three system calls (strace: three `writev` per `ModelInfer`). On a loopback each
//! write also runs the server's receive path and wakes its thread, which then often
//! preempts the client's. [`WholeBody`] gathers a body that is already complete (a
//! unary message always is) before the request goes on: a body that knows its end, so
//! that the message frame ends the stream and the connection writes the whole request
//! at once. A body that is not ready (a stream still producing) goes on as it is, after
//! the frames already gathered.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body as _, Frame, SizeHint};
use tonic::body::Body;
use tonic::codegen::http;
use tonic::codegen::{Bytes, Service};
use tonic::Status;

/// Frames taken from a body up front; more than a unary message ever has.
const MAX_GATHERED: usize = 8;

/// A service that hands `S` each request with its body gathered ([`gather`]).
#[derive(Debug, Clone)]
pub struct WholeBody<S>(pub S);

impl<S> Service<http::Request<Body>> for WholeBody<S>
where
    S: Service<http::Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        self.0.call(request.map(gather))
    }
}

/// `body` with the frames it has ready taken out now: a body that yields them and
/// then ends (or goes on with the rest of `body`, when it was not done). Polled without
/// a waker that anyone keeps: a body that is not ready is polled again, with the
/// request's own context, when the connection reads it.
pub fn gather(mut body: Body) -> Body {
    if http_body::Body::is_end_stream(&body) {
        return body;
    }
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut gathered = Gathered::default();
    loop {
        if gathered.frames.len() >= MAX_GATHERED {
            gathered.rest = Some(body);
            break;
        }
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => gathered.frames.push_back(frame),
            Poll::Ready(Some(Err(e))) => {
                gathered.error = Some(e);
                break;
            }
            Poll::Ready(None) => break,
            Poll::Pending => {
                gathered.rest = Some(body);
                break;
            }
        }
    }
    Body::new(gathered)
}

/// The frames [`gather`] took, then its error or the rest of the body.
#[derive(Debug, Default)]
struct Gathered {
    frames: VecDeque<Frame<Bytes>>,
    error: Option<Status>,
    rest: Option<Body>,
}

impl http_body::Body for Gathered {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let me = self.get_mut();
        if let Some(frame) = me.frames.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        if let Some(e) = me.error.take() {
            return Poll::Ready(Some(Err(e)));
        }
        match me.rest.as_mut() {
            Some(rest) => Pin::new(rest).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty()
            && self.error.is_none()
            && self
                .rest
                .as_ref()
                .is_none_or(http_body::Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let data: u64 = self
            .frames
            .iter()
            .filter_map(|f| f.data_ref())
            .map(|d| d.len() as u64)
            .sum();
        match &self.rest {
            None if self.error.is_none() => SizeHint::with_exact(data),
            None => SizeHint::default(),
            Some(rest) => {
                let r = http_body::Body::size_hint(rest);
                let mut hint = SizeHint::new();
                hint.set_lower(data + r.lower());
                if let Some(upper) = r.upper() {
                    hint.set_upper(data + upper);
                }
                hint
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polls `body` to its end: its frames' data and trailers, and whether it said it
    /// had ended right after each data frame.
    fn drain(mut body: Body) -> (Vec<(Bytes, bool)>, Option<http::HeaderMap>, Option<Status>) {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let (mut data, mut trailers, mut error) = (Vec::new(), None, None);
        loop {
            match Pin::new(&mut body).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(d) => data.push((d, body.is_end_stream())),
                    Err(frame) => trailers = frame.into_trailers().ok(),
                },
                Poll::Ready(Some(Err(e))) => error = Some(e),
                Poll::Ready(None) => break,
                Poll::Pending => panic!("a gathered body is ready"),
            }
        }
        (data, trailers, error)
    }

    /// A body of `chunks`, then `end`: the stream ends only once polled past the last
    /// chunk (as tonic's encoder does), or it first returns `Pending` `pending` times.
    struct Chunks {
        chunks: VecDeque<Bytes>,
        pending: usize,
        trailers: Option<http::HeaderMap>,
        fail: bool,
    }

    impl http_body::Body for Chunks {
        type Data = Bytes;
        type Error = Status;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
            if self.pending > 0 {
                self.pending -= 1;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            if let Some(c) = self.chunks.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(c))));
            }
            if self.fail {
                self.fail = false;
                return Poll::Ready(Some(Err(Status::internal("encoding failed"))));
            }
            Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
        }
    }

    fn chunks(parts: &[&'static str]) -> Chunks {
        Chunks {
            chunks: parts
                .iter()
                .map(|p| Bytes::from_static(p.as_bytes()))
                .collect(),
            pending: 0,
            trailers: None,
            fail: false,
        }
    }

    #[test]
    fn a_ready_message_ends_the_stream_with_its_own_frame() {
        let plain = Body::new(chunks(&["message"]));
        assert!(!plain.is_end_stream());
        let body = gather(plain);
        assert_eq!(body.size_hint().exact(), Some(7));
        let (data, trailers, error) = drain(body);
        assert_eq!(data, vec![(Bytes::from_static(b"message"), true)]);
        assert!(trailers.is_none() && error.is_none());
    }

    #[test]
    fn every_frame_is_kept_in_order() {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-end", http::HeaderValue::from_static("1"));
        let body = gather(Body::new(Chunks {
            trailers: Some(trailers.clone()),
            ..chunks(&["a", "bc", "def"])
        }));
        let (data, got, error) = drain(body);
        let texts: Vec<&[u8]> = data.iter().map(|(d, _)| d.as_ref()).collect();
        assert_eq!(texts, [&b"a"[..], b"bc", b"def"]);
        assert_eq!(got, Some(trailers));
        assert!(error.is_none());
    }

    #[test]
    fn a_body_that_is_not_ready_goes_on_after_what_was_gathered() {
        let body = gather(Body::new(Chunks {
            pending: 2,
            ..chunks(&["late"])
        }));
        assert!(!body.is_end_stream());
        let mut body = body;
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut pendings = 0;
        let got = loop {
            match Pin::new(&mut body).poll_frame(&mut cx) {
                Poll::Pending => pendings += 1,
                Poll::Ready(f) => break f,
            }
        };
        // One `Pending` went to the gathering, the other reaches the connection.
        assert_eq!(pendings, 1);
        let frame = got.expect("a frame").expect("data");
        assert_eq!(frame.into_data().ok(), Some(Bytes::from_static(b"late")));
    }

    #[test]
    fn an_encoding_error_comes_after_the_frames_before_it() {
        let body = gather(Body::new(Chunks {
            fail: true,
            ..chunks(&["ok"])
        }));
        let (data, _, error) = drain(body);
        assert_eq!(data.len(), 1);
        assert_eq!(error.map(|e| e.code()), Some(tonic::Code::Internal));
    }

    #[test]
    fn a_long_body_is_gathered_in_part() {
        let parts: Vec<&'static str> = vec!["x"; MAX_GATHERED + 3];
        let body = gather(Body::new(chunks(&parts)));
        // What is gathered, and nothing known of the rest.
        assert_eq!(body.size_hint().lower(), MAX_GATHERED as u64);
        assert!(!body.is_end_stream());
        let (data, _, _) = drain(body);
        assert_eq!(data.len(), MAX_GATHERED + 3);
    }

    #[test]
    fn an_empty_body_stays_empty() {
        let body = gather(Body::empty());
        assert!(body.is_end_stream());
    }
}
