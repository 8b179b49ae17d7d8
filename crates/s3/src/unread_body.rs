//! A request answered before its body was read ends its connection.
//!
//! A client that sends `Expect: 100-continue` (botocore does on every PutObject) and is
//! answered at once, say 412 from a failed `If-Match`, never sends its body. hyper cannot
//! know that: after the answer it reads the declared length as body, and so swallows the
//! first bytes of the next request on the connection (seen as `UT` for `PUT`, then
//! SignatureDoesNotMatch). RFC 9110 section 10.1.1 leaves the server two ways, read the body
//! or close; an unread body cannot be read safely, so its answer says `Connection: close`.

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// A request body that records whether it was read to its end.
pub struct Watched {
    inner: Incoming,
    ended: Arc<AtomicBool>,
}

impl Watched {
    /// The body, and the flag that says it was read to its end (true from the start for an
    /// empty body).
    pub fn new(inner: Incoming) -> (Self, Arc<AtomicBool>) {
        let ended = Arc::new(AtomicBool::new(inner.is_end_stream()));
        (Watched { inner, ended: ended.clone() }, ended)
    }
}

impl Body for Watched {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(r, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.ended.store(true, Ordering::Relaxed);
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Marks `resp` (HTTP/1) to close its connection when the request's body was not read to
/// its end (HTTP/2 ends a stream's body on its own).
pub fn close_if_unread<B>(resp: &mut http::Response<B>, ended: &AtomicBool) {
    if !ended.load(Ordering::Relaxed) {
        resp.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    }
}
