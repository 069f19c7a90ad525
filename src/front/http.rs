//! The HTTP handling of one POST to a route: transport-level checks (path,
//! method, Origin, credentials, media types, size), then parsing and dispatch.

use std::sync::Arc;
use std::time::Instant;

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::Value;

use super::body::{self, Body};
use super::dispatch::{self, Reply};
use super::request::{self, Parsed};
use super::{Gateway, Route, origin};
use crate::auth::CHALLENGE;
use crate::error::{Fault, IntoReject, Reject};
use crate::jsonrpc::{Id, code, error_response};

/// Answers one HTTP request on the client listener.
pub async fn handle(gw: Arc<Gateway>, req: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    let Some(route) = gw.routes.get(req.uri().path()).cloned() else {
        return body::text(StatusCode::NOT_FOUND, "no MCP endpoint at this path\n");
    };
    let (response, method, outcome) = serve(&gw, &route, req).await;
    gw.metrics.record_request(
        &route.name,
        &method,
        &outcome,
        started.elapsed().as_secs_f64(),
    );
    response
}

fn refusal(id: Option<&Id>, reject: &Reject) -> Response<Body> {
    if reject.fault != Fault::Client {
        tracing::warn!(reason = reject.reason, message = %reject.message, "request failed");
    }
    body::json(reject.status, &error_response(id, &reject.error_object()))
}

fn media_type(headers: &http::HeaderMap) -> Option<String> {
    let ct = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(
        ct.split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase(),
    )
}

/// spec 2026-07-28 streamable-http.mdx "Sending Messages": the client MUST
/// list both `application/json` and `text/event-stream` in `Accept`.
fn accepts_both(headers: &http::HeaderMap) -> bool {
    let accept: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|m| {
            m.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .collect();
    let has = |want: &str, family: &str| {
        accept
            .iter()
            .any(|a| a == want || a == family || a == "*/*")
    };
    has("application/json", "application/*") && has("text/event-stream", "text/*")
}

async fn serve(
    gw: &Arc<Gateway>,
    route: &Arc<Route>,
    req: Request<Incoming>,
) -> (Response<Body>, String, String) {
    let refused = |reject: Reject| {
        let reason = reject.reason.to_owned();
        (refusal(None, &reject), "-".to_owned(), reason)
    };
    let origin_header = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok());
    if !origin::allowed(origin_header, gw.allowed_origins.as_deref()) {
        return refused(Reject::new(
            StatusCode::FORBIDDEN,
            code::INVALID_REQUEST,
            "origin_not_allowed",
            "the Origin of this request is not allowed",
        ));
    }
    if req.method() != Method::POST {
        // spec streamable-http.mdx "Earlier Streamable HTTP Revisions": GET or DELETE SHOULD get 405.
        let mut resp = body::empty(StatusCode::METHOD_NOT_ALLOWED);
        resp.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return (resp, "-".into(), "method_not_allowed".into());
    }
    let principal = match gw.auth.authenticate(req.headers()) {
        Ok(p) => p,
        Err(e) => {
            let reject = e.into_reject();
            let reason = reject.reason.to_owned();
            let mut resp = refusal(None, &reject);
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(CHALLENGE),
            );
            return (resp, "-".into(), reason);
        }
    };
    if media_type(req.headers()).as_deref() != Some("application/json") {
        return refused(Reject::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code::INVALID_REQUEST,
            "unsupported_media_type",
            "Content-Type must be application/json",
        ));
    }
    if !accepts_both(req.headers()) {
        return refused(Reject::new(
            StatusCode::NOT_ACCEPTABLE,
            code::INVALID_REQUEST,
            "not_acceptable",
            "Accept must list both application/json and text/event-stream",
        ));
    }
    let too_large = || {
        Reject::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            code::INVALID_REQUEST,
            "body_too_large",
            format!(
                "the request body is larger than {} bytes",
                gw.max_body_bytes
            ),
        )
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > gw.max_body_bytes) {
        return refused(too_large());
    }
    let (parts, incoming) = req.into_parts();
    let bytes = match Limited::new(incoming, gw.max_body_bytes).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return refused(too_large());
        }
        Err(e) => {
            return refused(Reject::new(
                StatusCode::BAD_REQUEST,
                code::INVALID_REQUEST,
                "body_unreadable",
                format!("could not read the request body: {e}"),
            ));
        }
    };
    let parsed = match request::parse(&parts.headers, &bytes) {
        Ok(p) => p,
        Err(r) => {
            let reason = r.reject.reason.to_owned();
            return (refusal(r.id.as_ref(), &r.reject), "-".into(), reason);
        }
    };
    let req = match parsed {
        // spec streamable-http.mdx "Sending Messages": an accepted notification gets 202, no body.
        Parsed::Notification { method } => {
            return (body::empty(StatusCode::ACCEPTED), method, "ok".into());
        }
        Parsed::Request(r) => r,
    };
    let method = req.method.clone();
    tracing::debug!(route = %route.name, %method, id = %req.id, principal = %principal.name, "request");
    match dispatch::dispatch(gw, route, principal, *req).await {
        Reply::Json { status, body } => {
            let outcome = body
                .pointer("/error/data/reason")
                .and_then(Value::as_str)
                .map_or_else(
                    || {
                        if body.get("error").is_some() {
                            "error".to_owned()
                        } else {
                            "ok".to_owned()
                        }
                    },
                    str::to_owned,
                );
            (body::json(status, &body), method, outcome)
        }
        Reply::Stream { first, rx } => (
            body::sse(first, rx, gw.sse_keepalive),
            method,
            "stream".into(),
        ),
    }
}
