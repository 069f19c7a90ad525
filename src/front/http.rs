//! The handling of one HTTP request on the client listener: find the route,
//! run the [`pipeline`](super::pipeline), dispatch, write the response, and
//! count it under its typed outcome.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use tokio::time::Instant;

use super::Gateway;
use super::access;
use super::dispatch::{self, Reply};
use super::pipeline::{Halt, RequestBody, RequestCx};
use super::response::{self, Body};
use crate::mrtr::{Outcome, Outgoing};
use crate::protocol::Fault;

/// What a request ended as, for `redmark_requests_total{outcome}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestOutcome {
    Done(Outcome),
    /// Answered with an SSE stream (counted when the stream opens).
    Stream,
}

impl RequestOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestOutcome::Done(o) => o.as_str(),
            RequestOutcome::Stream => "stream",
        }
    }
}

/// Answers one HTTP request. Generic over the body so tests can call it
/// in-process with an in-memory body.
pub async fn handle<B>(gw: Arc<Gateway>, req: Request<B>) -> Response<Body>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let started = Instant::now();
    let Some(route) = gw.routes().get(req.uri().path()).cloned() else {
        return response::text(StatusCode::NOT_FOUND, "no MCP endpoint at this path\n");
    };
    let (head, body) = req.into_parts();
    let body: RequestBody = body.map_err(Into::into).boxed_unsync();
    let mut cx = RequestCx::new(route, head, body);
    let (resp, outcome) = match gw.pipeline().run(&mut cx).await {
        Ok(()) => {
            let pending = access::Pending::new(&cx, started);
            serve(&gw, &mut cx, pending).await
        }
        Err(halt) => {
            let pending = access::Pending::new(&cx, started);
            let (resp, outcome) = halted(halt);
            if let RequestOutcome::Done(o) = outcome {
                pending.write(&gw.access, resp.status(), o, None);
            }
            (resp, outcome)
        }
    };
    let method = cx.method_label.as_deref().unwrap_or("-");
    gw.metrics.record_request(
        &cx.route.name,
        method,
        outcome.as_str(),
        started.elapsed().as_secs_f64(),
    );
    resp
}

async fn serve(
    gw: &Gateway,
    cx: &mut RequestCx,
    pending: access::Pending,
) -> (Response<Body>, RequestOutcome) {
    let Some(req) = cx.request.take() else {
        return halted(Halt::refuse(
            None,
            crate::protocol::Reject::new(
                crate::protocol::Reason::InternalError,
                "the pipeline admitted a request it did not read",
            ),
        ));
    };
    let principal = cx.principal.clone();
    match dispatch::dispatch(gw, cx.route.clone(), principal, req).await {
        Reply::Json(out) => {
            if let Outgoing::Final {
                status,
                body,
                outcome,
            } = &out
            {
                pending.write(&gw.access, *status, *outcome, Some(body));
            }
            final_response(out)
        }
        Reply::Stream { first, rx } => (
            response::sse_with_end(
                first,
                rx,
                gw.sse_keepalive,
                Some(access::on_stream_end(pending, gw.access.clone())),
            ),
            RequestOutcome::Stream,
        ),
    }
}

fn final_response(out: Outgoing) -> (Response<Body>, RequestOutcome) {
    match out {
        Outgoing::Final {
            status,
            body,
            outcome,
        } => (response::json(status, &body), RequestOutcome::Done(outcome)),
        // A stream's first message is handled by `dispatch`; never here.
        Outgoing::Notification(n) => (response::json(StatusCode::OK, &n), RequestOutcome::Stream),
    }
}

fn halted(halt: Halt) -> (Response<Body>, RequestOutcome) {
    match halt {
        Halt::Refuse(refusal) => {
            let reject = &refusal.reject;
            if reject.fault() != Fault::Client {
                tracing::warn!(reason = %reject.reason, message = %reject.message, "request failed");
            }
            let mut resp = response::json(reject.status(), &reject.response(refusal.id.as_ref()));
            for (name, value) in refusal.headers {
                resp.headers_mut().append(name, value);
            }
            (resp, RequestOutcome::Done(Outcome::Error(reject.reason)))
        }
        Halt::Respond {
            status,
            headers,
            outcome,
        } => {
            let mut resp = response::empty(status);
            for (name, value) in headers {
                resp.headers_mut().append(name, value);
            }
            (resp, RequestOutcome::Done(outcome))
        }
    }
}
