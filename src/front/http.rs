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
    /// Forwarded to the replica that owns the operation, which answered.
    Forwarded,
}

impl RequestOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestOutcome::Done(o) => o.as_str(),
            RequestOutcome::Stream => "stream",
            RequestOutcome::Forwarded => "forwarded",
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
    run(gw, false, req).await
}

/// Answers one request forwarded by another replica (the internal endpoint,
/// `front::cluster`): its own pipeline, the same dispatch.
pub async fn handle_internal<B>(gw: Arc<Gateway>, req: Request<B>) -> Response<Body>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    run(gw, true, req).await
}

async fn run<B>(gw: Arc<Gateway>, internal: bool, req: Request<B>) -> Response<Body>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let started = Instant::now();
    if req
        .uri()
        .path()
        .starts_with(crate::front::oauth::WELL_KNOWN)
    {
        return resource_metadata(&gw, &req);
    }
    let Some(route) = gw.routes().get(req.uri().path()).cloned() else {
        return response::text(StatusCode::NOT_FOUND, "no MCP endpoint at this path\n");
    };
    let client_pipeline;
    let pipeline = match (&gw.cluster, internal) {
        (_, false) => {
            client_pipeline = gw.pipeline();
            &*client_pipeline
        }
        (Some(cluster), true) => &cluster.pipeline,
        (None, true) => {
            return response::text(StatusCode::NOT_FOUND, "no cluster configured\n");
        }
    };
    let (head, body) = req.into_parts();
    let body: RequestBody = body.map_err(Into::into).boxed_unsync();
    let mut cx = RequestCx::new(route, head, body);
    let verdict = pipeline.run(&mut cx).await;
    // Read before `era2025::serve` takes the message.
    let era = if cx.era2025.is_some() { "2025" } else { "2026" };
    let (resp, outcome) = match verdict {
        Ok(()) => {
            let pending = access::Pending::new(&cx, started);
            match cx.forward.take() {
                None if cx.era2025.is_some() => {
                    if internal {
                        gw.metrics.record_forward_received(&cx.route.name);
                    }
                    Box::pin(super::era2025::serve::serve(&gw, &mut cx, pending)).await
                }
                None if internal => {
                    gw.metrics.record_forward_received(&cx.route.name);
                    serve(&gw, &mut cx, pending).await
                }
                Some(to) => {
                    // Boxed, as the rare branches of `dispatch` are.
                    let forwarded = Box::pin(super::forward::forward(
                        &gw,
                        super::forward::Forwarding::of(&cx),
                        to,
                    ))
                    .await;
                    match forwarded {
                        Some((resp, outcome)) => {
                            if let RequestOutcome::Done(o) = outcome {
                                pending.write(&gw.access, resp.status(), o, None);
                            }
                            (resp, outcome)
                        }
                        // A relayed task whose relaying replica is gone.
                        None => serve(&gw, &mut cx, pending).await,
                    }
                }
                None => serve(&gw, &mut cx, pending).await,
            }
        }
        Err(halt) => {
            let pending = access::Pending::new(&cx, started);
            let (mut resp, outcome) = halted(halt);
            close_if_body_unread(&cx, &mut resp);
            if let RequestOutcome::Done(o) = outcome {
                pending.write(&gw.access, resp.status(), o, None);
            }
            (resp, outcome)
        }
    };
    let method = crate::telemetry::metrics::method_label(cx.method_label.as_deref());
    gw.metrics.record_request(
        &cx.route.name,
        method,
        outcome.as_str(),
        era,
        started.elapsed().as_secs_f64(),
    );
    resp
}

/// `GET /.well-known/oauth-protected-resource{route path}` (and the root
/// form): the RFC 9728 document (spec 2026-07-28 basic/authorization/
/// authorization-server-discovery.mdx: MCP servers MUST implement it).
fn resource_metadata<B>(gw: &Gateway, req: &Request<B>) -> Response<Body> {
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        let mut resp = response::empty(StatusCode::METHOD_NOT_ALLOWED);
        resp.headers_mut()
            .insert(http::header::ALLOW, http::HeaderValue::from_static("GET"));
        return resp;
    }
    match gw.authenticator().resource_metadata(req.uri().path()) {
        Some(doc) => {
            let mut resp = response::json(StatusCode::OK, &doc);
            // Public metadata: browser-based clients read it cross-origin.
            resp.headers_mut().insert(
                http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
                http::HeaderValue::from_static("*"),
            );
            resp
        }
        None => response::text(
            StatusCode::NOT_FOUND,
            "no protected resource metadata here\n",
        ),
    }
}

async fn serve(
    gw: &Arc<Gateway>,
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
    let verified = cx.verified.take();
    let route = cx.route.clone();
    // Only a route with `[route.tasks]` goes through the tasks step: boxed,
    // as the rare branches of `dispatch` are, so a plain call neither pays
    // for its checks nor carries its future.
    let reply = if route.tasks.is_some() {
        Box::pin(super::tasks::dispatch(gw, route, principal, req, verified)).await
    } else {
        dispatch::dispatch(gw, route, principal, req, verified).await
    };
    respond(gw, reply, pending)
}

/// The response to a dispatched request, its access-log line written when
/// its final answer is (a stream's, when the stream ends).
pub(super) fn respond(
    gw: &Gateway,
    reply: Reply,
    pending: access::Pending,
) -> (Response<Body>, RequestOutcome) {
    match reply {
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

/// A refusal before the body was read (a 401, a wrong header) leaves the
/// body on the connection, and hyper closes the connection after the
/// response. A client that keeps it for its next request (the metadata
/// fetch that follows a 401) then meets a closed socket mid-request. So the
/// response says it: RFC 9112 section 9.6, "A server that does not support
/// persistent connections MUST send the "close" connection option in every
/// response message that does not have a 1xx (Informational) status code".
/// HTTP/2 has no connection header; a stream's unread body costs it nothing.
fn close_if_body_unread(cx: &RequestCx, resp: &mut Response<Body>) {
    use hyper::body::Body as _;
    if cx.head.version <= http::Version::HTTP_11
        && cx.body.as_ref().is_some_and(|b| !b.is_end_stream())
    {
        resp.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
}

pub(super) fn halted(halt: Halt) -> (Response<Body>, RequestOutcome) {
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
