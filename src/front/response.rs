//! HTTP responses: one JSON object, or an SSE stream that relays
//! request-scoped notifications and ends with the final response.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::mrtr::outgoing::Body as FinalBody;
use crate::mrtr::{Outcome, Outgoing};
use crate::sse;

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

pub fn json(status: StatusCode, body: &(impl Serialize + ?Sized)) -> Response<Body> {
    // `to_vec`, not `to_string`: Display writes through `fmt` a token at a
    // time. A `Value` and redmark's bodies always serialise (their keys are strings).
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = Response::new(Full::new(Bytes::from(bytes)).boxed_unsync());
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

pub fn empty(status: StatusCode) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::new()).boxed_unsync());
    *resp.status_mut() = status;
    resp
}

pub fn text(status: StatusCode, text: &str) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(text.to_owned())).boxed_unsync());
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

struct SseState {
    first: Option<Value>,
    rx: mpsc::Receiver<Outgoing>,
    tick: tokio::time::Interval,
    done: bool,
    on_end: OnEnd,
}

/// Told how a stream ended: its final message's outcome and body, or `None`
/// when it ended without one (the client went away, the sender dropped).
pub type EndHook = Box<dyn FnOnce(Option<(Outcome, &FinalBody)>) + Send>;

/// Calls its hook once: at the final message, or on drop.
struct OnEnd(Option<EndHook>);

impl OnEnd {
    fn fire(&mut self, end: Option<(Outcome, &FinalBody)>) {
        if let Some(hook) = self.0.take() {
            hook(end);
        }
    }
}

impl Drop for OnEnd {
    fn drop(&mut self) {
        self.fire(None);
    }
}

/// An SSE response: `first`, then everything from `rx` until a final response,
/// with keep-alive comments in between so a dead client is noticed.
pub fn sse(first: Value, rx: mpsc::Receiver<Outgoing>, keepalive: Duration) -> Response<Body> {
    sse_with_end(first, rx, keepalive, None)
}

/// [`sse`], telling `on_end` how the stream ended (the access log).
pub fn sse_with_end(
    first: Value,
    rx: mpsc::Receiver<Outgoing>,
    keepalive: Duration,
    on_end: Option<EndHook>,
) -> Response<Body> {
    sse_from(Some(first), rx, keepalive, on_end)
}

/// An SSE response with nothing to say yet: a 2025-era client's standalone
/// stream, whose first message is the first notice that comes.
pub fn sse_waiting(rx: mpsc::Receiver<Outgoing>, keepalive: Duration) -> Response<Body> {
    sse_from(None, rx, keepalive, None)
}

fn sse_from(
    first: Option<Value>,
    rx: mpsc::Receiver<Outgoing>,
    keepalive: Duration,
    on_end: Option<EndHook>,
) -> Response<Body> {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + keepalive, keepalive);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let state = SseState {
        first,
        rx,
        tick,
        done: false,
        on_end: OnEnd(on_end),
    };
    let stream = futures::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        if let Some(first) = st.first.take() {
            return Some((
                Ok::<_, Infallible>(Frame::data(sse::encode_event(&first.to_string()))),
                st,
            ));
        }
        let bytes = tokio::select! {
            item = st.rx.recv() => match item {
                Some(Outgoing::Notification(n)) => sse::encode_event(&n.to_string()),
                Some(Outgoing::Final { body, outcome, .. }) => {
                    st.done = true;
                    st.on_end.fire(Some((outcome, &body)));
                    sse::encode_event(&serde_json::to_string(&body).unwrap_or_default())
                }
                None => return None,
            },
            _ = st.tick.tick() => sse::keepalive(),
        };
        Some((Ok(Frame::data(bytes)), st))
    });
    let mut resp = Response::new(BodyExt::boxed_unsync(StreamBody::new(stream)));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // spec 2026-07-28 streamable-http.mdx "Receiving Messages": servers SHOULD
    // send `X-Accel-Buffering: no` so proxies do not hold events back.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}
