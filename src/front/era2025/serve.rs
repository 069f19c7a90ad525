//! Every 2025-era message the pipeline admitted: `initialize` (the
//! handshake and a new session), what the session answers itself (`ping`,
//! `logging/setLevel`), notifications, the client's answers to pushed
//! questions, `DELETE` and `GET`, and calls ([`super::call`]).

use std::sync::Arc;

use http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Map, Value, json};

use super::session::{Opening, Session, kept_capabilities, negotiate};
use super::{Era2025, Message2025, SESSION_HEADER, call, standalone};
use crate::front::Gateway;
use crate::front::access::Pending;
use crate::front::dispatch::{self, Reply};
use crate::front::http::{RequestOutcome, halted, respond};
use crate::front::pipeline::{Envelope, Halt, RequestCx};
use crate::front::response::{self, Body};
use crate::jsonrpc::Id;
use crate::mrtr::{Outcome, Outgoing};
use crate::protocol::params::ClientParams;
use crate::protocol::{IntoReject, LOG_LEVELS, Method, Reason, Reject, log_level_rank, meta};
use crate::upstream::subscriptions::SubscribeError;

/// Answers one 2025-era message.
pub async fn serve(
    gw: &Arc<Gateway>,
    cx: &mut RequestCx,
    pending: Pending,
) -> (Response<Body>, RequestOutcome) {
    let Some(era) = cx.era2025.take() else {
        return refused(Reject::new(
            Reason::InternalError,
            "a 2025-era message lost its classification",
        ));
    };
    let Era2025 {
        message, session, ..
    } = *era;
    if let Message2025::Request(envelope) = message {
        if envelope.method == "initialize" {
            let (route, principal) = (cx.route.clone(), cx.principal.clone());
            let (resp, outcome) = initialize(gw, route, principal, envelope).await;
            write(&pending, gw, &resp, outcome);
            return (resp, RequestOutcome::Done(outcome));
        }
        let Some(session) = session else {
            return missing_session();
        };
        let subscription = matches!(
            envelope.method.as_str(),
            "resources/subscribe" | "resources/unsubscribe"
        );
        let (resp, outcome) = if envelope.method == "logging/setLevel" {
            set_level_everywhere(gw, &session, envelope).await
        } else if subscription && session.can_subscribe {
            let Envelope { id, method, params } = envelope;
            let (route, principal) = (cx.route.clone(), cx.principal.name.clone());
            let outcome = subscribe(&route, &principal, &session, &method, params.as_deref()).await;
            answer(&id, outcome)
        } else {
            answer_locally(&session, envelope)
        };
        write(&pending, gw, &resp, outcome);
        return (resp, RequestOutcome::Done(outcome));
    }
    let Some(session) = session else {
        return missing_session();
    };
    let (resp, outcome) = match message {
        Message2025::Call => {
            let Some(req) = cx.request.take() else {
                return refused(Reject::new(
                    Reason::InternalError,
                    "the pipeline admitted a call it did not read",
                ));
            };
            let reply = call::serve(
                gw.clone(),
                cx.route.clone(),
                cx.principal.clone(),
                session,
                req,
                cx.verified.take(),
            )
            .await;
            return respond(gw, reply, pending);
        }
        Message2025::Notification { method, params } => notification(&session, &method, params),
        Message2025::Response { id, outcome } => {
            if gw.sessions.deliver(&session, &id, outcome) {
                accepted()
            } else {
                // spec 2025-11-25 basic/transports.mdx "Sending Messages to
                // the Server": "If the server cannot accept the input, it MUST
                // return an HTTP error status code (e.g., 400 Bad Request)".
                let reject = Reject::new(
                    Reason::AnswerUnexpected,
                    "no question of this session waits for an answer under this id (answered already, or its call ended)",
                );
                (
                    response::json(StatusCode::BAD_REQUEST, &reject.response(None)),
                    Outcome::Error(reject.reason),
                )
            }
        }
        Message2025::Delete => {
            // spec 2025-11-25 basic/transports.mdx "Session Management": the
            // session ends; afterwards its id gets 404, on every replica
            // where a `[state] store` tells them (a store that does not
            // answer leaves the session as it was: 503, try again). Calls in
            // flight end with it (the server hears `cancel` for their open
            // questions).
            let shared = match gw.sessions.shared() {
                Some(store) => store
                    .end_session(&session.name, session.lifetime_left())
                    .await
                    .map_err(crate::protocol::IntoReject::into_reject),
                None => Ok(()),
            };
            match shared {
                Ok(()) => {
                    gw.sessions.end(&session);
                    tracing::debug!(session = %session.name, "2025-era session ended by DELETE");
                    (response::empty(StatusCode::OK), Outcome::Ok)
                }
                Err(reject) => (
                    response::json(reject.status(), &reject.response(None)),
                    Outcome::Error(reject.reason),
                ),
            }
        }
        Message2025::Get => {
            // spec 2025-11-25 basic/transports.mdx "Listening for Messages
            // from the Server": "The client MUST include an Accept header,
            // listing text/event-stream"; "The server MUST either return
            // Content-Type: text/event-stream in response to this HTTP GET,
            // or else return HTTP 405 Method Not Allowed".
            if !accepts_sse(&cx.head.headers) {
                let reject = Reject::new(
                    Reason::NotAcceptable,
                    "a GET opens an SSE stream: Accept must list text/event-stream",
                );
                (
                    response::json(reject.status(), &reject.response(None)),
                    Outcome::Error(reject.reason),
                )
            } else {
                match standalone::open(gw.clone(), cx.route.clone(), cx.principal.clone(), session)
                    .await
                {
                    Ok(rx) => {
                        write(&pending, gw, &response::empty(StatusCode::OK), Outcome::Ok);
                        return (
                            response::sse_waiting(rx, gw.sse_keepalive),
                            RequestOutcome::Stream,
                        );
                    }
                    Err(standalone::Refused::AlreadyOpen) => {
                        let reject = Reject::new(
                            Reason::StreamAlreadyOpen,
                            "this session has its standalone stream open already",
                        );
                        (
                            response::json(reject.status(), &reject.response(None)),
                            Outcome::Error(reject.reason),
                        )
                    }
                }
            }
        }
        Message2025::Request(_) => return missing_session(),
    };
    write(&pending, gw, &resp, outcome);
    (resp, RequestOutcome::Done(outcome))
}

fn accepts_sse(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|r| r.split(';').next().unwrap_or_default().trim())
        .any(|r| {
            r.eq_ignore_ascii_case("text/event-stream")
                || r.eq_ignore_ascii_case("text/*")
                || r == "*/*"
        })
}

fn write(pending: &Pending, gw: &Gateway, resp: &Response<Body>, outcome: Outcome) {
    pending.write(&gw.access, resp.status(), outcome, None);
}

fn refused(reject: Reject) -> (Response<Body>, RequestOutcome) {
    halted(Halt::refuse(None, reject))
}

fn missing_session() -> (Response<Body>, RequestOutcome) {
    refused(Reject::new(
        Reason::SessionRequired,
        "this request needs the Mcp-Session-Id header that `initialize` answered with",
    ))
}

fn accepted() -> (Response<Body>, Outcome) {
    (response::empty(StatusCode::ACCEPTED), Outcome::Ok)
}

/// A JSON-RPC answer to a 2025-era request: errors ride in a 200, as the
/// session's other answers do (`call::final_for_2025`).
fn answer(id: &Id, outcome: Result<Value, Reject>) -> (Response<Body>, Outcome) {
    match outcome {
        Ok(result) => (
            response::json(StatusCode::OK, &crate::jsonrpc::result_response(id, result)),
            Outcome::Ok,
        ),
        Err(reject) => (
            response::json(StatusCode::OK, &reject.response(Some(id))),
            Outcome::Error(reject.reason),
        ),
    }
}

/// `logging/setLevel`, kept where every replica finds it when there is a
/// `[state] store` (a store that does not answer refuses it: the level
/// would otherwise hold on this replica only).
async fn set_level_everywhere(
    gw: &Gateway,
    session: &Session,
    envelope: Envelope,
) -> (Response<Body>, Outcome) {
    let Envelope { id, params, .. } = envelope;
    let outcome = match set_level(session, params.as_deref()) {
        Ok(done) => match (gw.sessions.shared(), session.log_level()) {
            (Some(store), Some(level)) => store
                .set_session_level(&session.name, &level, session.lifetime_left())
                .await
                .map(|()| done)
                .map_err(crate::protocol::IntoReject::into_reject),
            _ => Ok(done),
        },
        Err(reject) => Err(reject),
    };
    answer(&id, outcome)
}

/// Requests the session answers without the server.
fn answer_locally(session: &Session, envelope: Envelope) -> (Response<Body>, Outcome) {
    let Envelope { id, method, params } = envelope;
    let outcome = match method.as_str() {
        // spec 2025-11-25 basic/utilities/ping.mdx: "The receiver MUST
        // respond promptly with an empty response".
        "ping" => Ok(json!({})),
        "logging/setLevel" => set_level(session, params.as_deref()),
        _ => Err(Reject::new(
            Reason::MethodNotFound,
            format!("Method not found: `{method}`"),
        )),
    };
    answer(&id, outcome)
}

/// spec 2025-11-25 server/utilities/logging.mdx: the level the client wants
/// from now on; every later call of the session carries it, and the engine
/// relays only messages at or above it.
fn set_level(session: &Session, params: Option<&ClientParams>) -> Result<Value, Reject> {
    let level = params
        .and_then(|p| p.members.get("level"))
        .and_then(Value::as_str)
        .filter(|l| log_level_rank(l).is_some())
        .ok_or_else(|| {
            Reject::new(
                Reason::InvalidLogLevel,
                format!("`level` must be one of {}", LOG_LEVELS.join(", ")),
            )
        })?;
    session.set_log_level(level.to_owned());
    Ok(json!({}))
}

/// spec 2025-11-25 server/resources.mdx "Subscriptions": the updates of
/// `uri` reach the session's standalone stream (`GET`) from now on, or no
/// longer. Offered only where the server itself can subscribe. On a legacy
/// server the change, and only it, reaches the server at once through the
/// route's shared subscriptions (the first subscriber of a URI subscribes
/// it, the last to leave unsubscribes it); a native server hears the URIs
/// in the listen behind the stream.
async fn subscribe(
    route: &crate::route::Route,
    principal: &Arc<str>,
    session: &Arc<Session>,
    method: &str,
    params: Option<&ClientParams>,
) -> Result<Value, Reject> {
    let uri = params
        .and_then(|p| p.members.get("uri"))
        .and_then(Value::as_str)
        .ok_or_else(|| Reject::new(Reason::InvalidParams, "`uri` (a string) is required"))?;
    if method != "resources/subscribe" {
        // Answered once the server has heard the change (if it hears one:
        // only the last subscriber of a URI unsubscribes it upstream).
        if let Some(held) = session.unsubscribe(uri) {
            held.release().await;
        }
        return Ok(json!({}));
    }
    if !session.reserve_subscription(uri)? || route.native.is_native().await {
        return Ok(json!({}));
    }
    match route.pool.subscribe(principal, session.profile, uri).await {
        Ok(held) => {
            session.hold(held);
            Ok(json!({}))
        }
        Err(e) => {
            drop(session.unsubscribe(uri));
            Err(match e {
                SubscribeError::Upstream(e) => e.into_reject(),
                SubscribeError::Refused(e) => Reject::new(
                    Reason::UpstreamError,
                    format!("the server refused the subscription: {}", e.message),
                ),
            })
        }
    }
}

fn notification(
    session: &Session,
    method: &str,
    params: Option<Value>,
) -> (Response<Body>, Outcome) {
    if method == "notifications/cancelled" {
        // spec 2025-11-25 basic/utilities/cancellation.mdx: the receiver
        // SHOULD stop processing the request and MUST NOT answer it; an
        // unknown or finished request is ignored.
        let request_id = params
            .as_ref()
            .and_then(|p| p.get("requestId"))
            .and_then(Id::from_value);
        if let Some(id) = request_id
            && session.cancel_call(&call::id_key(&id))
        {
            tracing::debug!(session = %session.name, request = %call::id_key(&id), "2025-era call cancelled by the client");
        }
    }
    // `notifications/initialized`, progress, `roots/list_changed` (roots are
    // asked afresh with each question): nothing to do but accept them.
    accepted()
}

/// `initialize`: the version negotiated, the server's own description
/// (its `initialize` answer, or a native server's `server/discover`), and a
/// new session whose id rides in the response's `Mcp-Session-Id`.
async fn initialize(
    gw: &Arc<Gateway>,
    route: Arc<crate::route::Route>,
    principal: crate::protocol::Principal,
    envelope: Envelope,
) -> (Response<Body>, Outcome) {
    let Envelope { id, params, .. } = envelope;
    let params = params.map(|p| *p).unwrap_or_default();
    let requested = params
        .members
        .get("protocolVersion")
        .and_then(Value::as_str);
    // spec 2025-11-25 basic/lifecycle.mdx "Version Negotiation": the
    // client's version when redmark speaks it, else the latest it speaks;
    // never 2026-07-28, which has no `initialize`.
    let version = negotiate(requested);
    let capabilities = match params.members.get("capabilities") {
        None => json!({}),
        Some(Value::Object(caps)) => match kept_capabilities(caps) {
            Ok(kept) => kept,
            // spec 2025-11-25 basic/transports.mdx "Sending Messages to the
            // Server": "If the server cannot accept the input, it MUST
            // return an HTTP error status code (e.g., 400 Bad Request)".
            Err(reject) => {
                return (
                    response::json(reject.status(), &reject.response(Some(&id))),
                    Outcome::Error(reject.reason),
                );
            }
        },
        Some(_) => {
            return answer(
                &id,
                Err(Reject::new(
                    Reason::InvalidParams,
                    "`capabilities` must be an object",
                )),
            );
        }
    };
    let client_info = params.members.get("clientInfo").cloned();
    let server = match describe(
        gw,
        &route,
        &principal,
        &id,
        &capabilities,
        client_info.as_ref(),
    )
    .await
    {
        Ok(server) => server,
        Err(out) => return out,
    };
    let can_subscribe = server
        .capabilities
        .pointer("/resources/subscribe")
        .and_then(Value::as_bool)
        == Some(true);
    let opened = gw.sessions.open(Opening {
        route: &route.name,
        principal: &principal.name,
        version,
        capabilities,
        client_info,
        can_subscribe,
    });
    let (sid, session) = match opened {
        Ok(opened) => opened,
        Err(e) => {
            let reject = e.reject();
            let mut resp = response::json(reject.status(), &reject.response(Some(&id)));
            // Refused only while every session in the way has a call in flight.
            resp.headers_mut()
                .insert(http::header::RETRY_AFTER, super::retry_after());
            return (resp, Outcome::Error(reject.reason));
        }
    };
    tracing::info!(route = %route.name, session = %session.name, version, profile = %session.profile.label(), "2025-era session opened");
    let mut result = Map::new();
    result.insert("protocolVersion".into(), version.into());
    result.insert("capabilities".into(), server.capabilities);
    result.insert("serverInfo".into(), server.info);
    if let Some(text) = server.instructions {
        result.insert("instructions".into(), text);
    }
    let (mut resp, outcome) = answer(&id, Ok(Value::Object(result)));
    match HeaderValue::from_str(&sid) {
        Ok(v) => {
            resp.headers_mut().insert(SESSION_HEADER, v);
        }
        Err(_) => {
            gw.sessions.end(&session);
            return answer(
                &id,
                Err(Reject::new(
                    Reason::InternalError,
                    "the session id is not a valid header value",
                )),
            );
        }
    }
    (resp, outcome)
}

/// The server behind the route, as an `InitializeResult` describes it.
struct Described {
    capabilities: Value,
    info: Value,
    instructions: Option<Value>,
}

/// Asks the route's server to describe itself with `server/discover`, as
/// a 2026 client would (answered from a legacy server's `initialize`, or by
/// a native server), then keeps what a 2025-era session can be served.
async fn describe(
    gw: &Arc<Gateway>,
    route: &Arc<crate::route::Route>,
    principal: &crate::protocol::Principal,
    id: &Id,
    capabilities: &Value,
    client_info: Option<&Value>,
) -> Result<Described, (Response<Body>, Outcome)> {
    let discover = super::on_behalf(
        id.clone(),
        Method::Discover,
        Map::new(),
        capabilities.clone(),
        client_info.cloned(),
    );
    let reply = dispatch::dispatch(
        gw,
        route.clone(),
        principal.clone(),
        Box::new(discover),
        None,
    )
    .await;
    let body = match reply {
        Reply::Json(Outgoing::Final { body, .. }) => body.to_value(),
        _ => Value::Null,
    };
    if let Some(error) = body.get("error") {
        // The server could not be reached or refused: the client hears why.
        let mut out = Map::new();
        out.insert("jsonrpc".into(), "2.0".into());
        out.insert("id".into(), serde_json::to_value(id).unwrap_or(Value::Null));
        out.insert("error".into(), error.clone());
        let reason = error
            .pointer("/data/reason")
            .and_then(Value::as_str)
            .and_then(|r| Reason::ALL.iter().find(|x| x.as_str() == r).copied())
            .unwrap_or(Reason::UpstreamError);
        return Err((
            response::json(StatusCode::OK, &Value::Object(out)),
            Outcome::Error(reason),
        ));
    }
    let Some(result) = body.get("result") else {
        return Err(answer(
            id,
            Err(Reject::new(
                Reason::InternalError,
                "the server's description came back empty",
            )),
        ));
    };
    let info = result
        .pointer(&format!("/_meta/{}", meta::SERVER_INFO.replace('/', "~1")))
        .cloned()
        .unwrap_or_else(|| json!({"name": "redmark", "version": env!("CARGO_PKG_VERSION")}));
    Ok(Described {
        capabilities: server_capabilities(result.get("capabilities")),
        info,
        instructions: result.get("instructions").cloned(),
    })
}

/// The server's capabilities as a 2025-era session is served: no 2026
/// `extensions` or tasks. List-changed notices and resource updates reach
/// the session on its standalone stream (`GET`), as the server promises them.
fn server_capabilities(caps: Option<&Value>) -> Value {
    let mut caps = caps.and_then(Value::as_object).cloned().unwrap_or_default();
    caps.shift_remove("extensions");
    caps.shift_remove("tasks");
    Value::Object(caps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_capabilities_lose_2026s_extensions_and_tasks() {
        let caps = json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "logging": {},
            "extensions": {"io.modelcontextprotocol/tasks": {}},
            "tasks": {}
        });
        assert_eq!(
            server_capabilities(Some(&caps)),
            json!({"tools": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": true}, "logging": {}})
        );
    }

    #[test]
    fn a_session_keeps_only_the_capabilities_redmark_acts_on() {
        let caps = json!({"elicitation": {"form": {}}, "tasks": {"requests": {}}, "sampling": {},
            "experimental": {"x": "y".repeat(3 << 20)}, "roots": {"listChanged": true}});
        let kept = kept_capabilities(caps.as_object().unwrap()).unwrap();
        assert_eq!(
            kept,
            json!({"elicitation": {"form": {}}, "sampling": {}, "roots": {"listChanged": true}})
        );
        let huge = json!({"sampling": {"x": "y".repeat(300)}});
        let refused = kept_capabilities(huge.as_object().unwrap()).unwrap_err();
        assert_eq!(refused.reason, Reason::CapabilitiesTooLarge);
        assert!(
            refused.message.contains("`capabilities.sampling`"),
            "{}",
            refused.message
        );
        assert!(refused.message.contains("256 bytes"), "{}", refused.message);
    }
}
