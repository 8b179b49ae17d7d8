//! A request answered before its body was read ends its connection; a body that stops
//! arriving for the idle limit fails (answered RequestTimeout by the server).
//!
//! A client that sends `Expect: 100-continue` (botocore does on every PutObject) and is
//! answered at once, say 412 from a failed `If-Match`, never sends its body. hyper cannot
//! know that: after the answer it reads the declared length as body, and so swallows the
//! first bytes of the next request on the connection (seen as `UT` for `PUT`, then
//! SignatureDoesNotMatch). RFC 9110 section 10.1.1 leaves the server two ways, read the body
//! or close; an unread body cannot be read safely, so its answer says `Connection: close`.

use crate::client_limits::StallTimer;
use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body that records whether it was read to its end, and fails if the client
/// sends nothing of it for the idle limit.
pub struct Watched {
    inner: Incoming,
    ended: Arc<AtomicBool>,
    idle: StallTimer,
    timed_out: Arc<AtomicBool>,
}

/// What the server learns of a body once its request is answered.
pub struct BodyState {
    /// Read to its end (true from the start for an empty body).
    pub ended: Arc<AtomicBool>,
    /// Failed because the client stopped sending it.
    pub timed_out: Arc<AtomicBool>,
}

impl Watched {
    pub fn new(inner: Incoming, idle: Duration) -> (Self, BodyState) {
        let ended = Arc::new(AtomicBool::new(inner.is_end_stream()));
        let timed_out = Arc::new(AtomicBool::new(false));
        let state = BodyState { ended: ended.clone(), timed_out: timed_out.clone() };
        (Watched { inner, ended, idle: StallTimer::new(idle), timed_out }, state)
    }
}

impl Body for Watched {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(r, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.ended.store(true, Ordering::Relaxed);
        }
        if self.idle.stalled(cx, r.is_pending()) {
            self.timed_out.store(true, Ordering::Relaxed);
            let secs = self.idle.limit().as_secs();
            return Poll::Ready(Some(Err(format!("the client sent nothing of the body for {secs} s").into())));
        }
        r.map(|f| f.map(|f| f.map_err(BoxError::from)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether a request expects `100 Continue` and has no body: hyper answers it without the
/// `100` (RFC 9110 allows that), and botocore, which sends the expectation on an empty
/// PutObject too, then reads the next response on that connection against the stale status
/// line and loses its headers (boto/botocore#3755: an empty PUT, then a PUT whose ETag comes
/// back missing). Its answer closes the connection, as botocore's own state does not survive it.
pub fn continue_withheld(head: &http::request::Parts, body: &Incoming) -> bool {
    let expects = head.headers.get(http::header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    expects && body.is_end_stream()
}

/// Marks `resp` (HTTP/1) to close its connection.
pub fn close(resp: &mut http::Response<impl Sized>) {
    resp.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
}

/// Marks `resp` (HTTP/1) to close its connection when the request's body was not read to
/// its end (HTTP/2 ends a stream's body on its own).
pub fn close_if_unread<B>(resp: &mut http::Response<B>, ended: &AtomicBool) {
    if !ended.load(Ordering::Relaxed) {
        resp.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    }
}
