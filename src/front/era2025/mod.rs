//! The 2025-era side of the endpoint: clients that open with `initialize`
//! (2024-11-05 to 2025-11-25), keep an `Mcp-Session-Id`, and answer the
//! questions a server pushes on the call's SSE stream.
//!
//! spec 2026-07-28 basic/versioning.mdx "Backward Compatibility with
//! Initialization-Based Versions": "A dual-era server selects its behavior
//! from how the client opens" and "MAY serve both eras concurrently on the
//! same endpoint". `front::pipeline::parse` classifies each message; a
//! 2025-era one goes through the same origin, authentication, media, body
//! and (for calls) rate-limit and policy steps as a 2026 request, then here:
//!
//! - [`answers`]: the ids questions are pushed with, and where their answers go.
//! - [`session`]: the session ids redmark mints, sealed so any replica serves
//!   any request of a session; bounds; idle ends.
//! - [`SessionStep`]: the pipeline step after `parse`: the session a message
//!   names (400 without one, 404 for one that is not this principal's), and a
//!   call made into the typed request every later step checks.
//! - [`serve`]: `initialize`, `ping`, `logging/setLevel`, notifications, the
//!   client's answers, `DELETE`, `GET`.
//! - [`call`]: a call, served by the same engine as a 2026 client's; each
//!   `input_required` round becomes pushed requests on the call's stream,
//!   whose answers redmark gathers and sends back as the retry.
//! - [`standalone`]: the stream a `GET` opens: list-changed notices and the
//!   updates of subscribed resources.
//! - [`shape`]: 2026-07-28 results and questions as a 2025-era client reads them.

pub mod answers;
pub mod call;
pub mod serve;
pub mod session;
pub mod shape;
pub mod standalone;

use std::sync::Arc;

use http::{HeaderValue, Method as HttpMethod, StatusCode, header};
use serde_json::{Map, Value};

use crate::front::pipeline::{Envelope, Halt, RequestCx, Step};
use crate::jsonrpc::{ErrorObject, Id};
use crate::mrtr::Outcome;
use crate::protocol::{ClientRequest, Method, Reason, Reject, RequestContext};

pub use session::{Session, SessionError, Sessions};

/// `Retry-After` for a session refused for want of room.
fn retry_after() -> HeaderValue {
    HeaderValue::from(session::RETRY_AFTER_SECS)
}

/// The session header (spec 2025-11-25 basic/transports.mdx "Session
/// Management"); header names are case-insensitive, `http` keeps them lower.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// One 2025-era message, as `parse` read it.
#[derive(Debug, Clone, PartialEq)]
pub enum Message2025 {
    Request(Envelope),
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// The client's answer to a question redmark pushed.
    Response {
        id: Id,
        outcome: Result<Value, ErrorObject>,
    },
    /// `GET`: the standalone stream.
    Get,
    /// `DELETE`: the end of the session.
    Delete,
    /// A call, moved into the typed request (`RequestCx::request`).
    Call,
}

impl Message2025 {
    pub fn of_http(method: &HttpMethod) -> Message2025 {
        if method == HttpMethod::DELETE {
            Message2025::Delete
        } else {
            Message2025::Get
        }
    }
}

/// A 2025-era message and, after [`SessionStep`], its session.
#[derive(Debug)]
pub struct Era2025 {
    pub message: Message2025,
    pub session: Option<Arc<Session>>,
}

impl Era2025 {
    pub fn new(message: Message2025) -> Self {
        Self {
            message,
            session: None,
        }
    }
}

/// Whether a request is 2025-era: `initialize`, or a request in a session,
/// either without the modern `_meta` (which always wins: a 2026 request is
/// served statelessly whatever headers it carries).
pub fn is_2025_request(envelope: &Envelope, in_session: bool) -> bool {
    let modern = envelope
        .params
        .as_ref()
        .and_then(|p| p.meta.as_ref())
        .is_some_and(|m| m.protocol_version.is_some());
    !modern && (in_session || envelope.method == "initialize")
}

/// Methods a 2025-era client calls that the engine serves as it serves a
/// 2026 client's (the rest are answered in [`serve`]).
fn engine_method(method: &str) -> Option<Method> {
    Method::parse(method)
        .filter(|m| !matches!(m, Method::Discover | Method::SubscriptionsListen) && !m.is_task())
}

/// Step 6b: the session a 2025-era message belongs to.
pub struct SessionStep {
    sessions: Arc<Sessions>,
    /// On the client listener: an answer to a question another replica
    /// pushed is forwarded there. Never on the internal endpoint (a
    /// forwarded request is never forwarded again).
    forwards: bool,
}

impl SessionStep {
    pub fn new(sessions: Arc<Sessions>) -> Self {
        Self {
            sessions,
            forwards: true,
        }
    }

    /// The step on the internal endpoint (`front::cluster`).
    pub fn internal(sessions: Arc<Sessions>) -> Self {
        Self {
            sessions,
            forwards: false,
        }
    }
}

#[async_trait::async_trait]
impl Step for SessionStep {
    /// Without a shared store the step never waits; with one, a 2025-era
    /// message reads its session's shared state first ([`Self::refresh`]).
    fn now(&self, cx: &mut RequestCx) -> Option<Result<(), Halt>> {
        if cx.era2025.is_some() && self.sessions.shared().is_some() {
            return None;
        }
        Some(self.check(cx))
    }

    async fn on_request(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        self.check(cx)?;
        self.refresh(cx).await
    }
}

impl SessionStep {
    /// What every replica must know of the session beyond its sealed id
    /// (`[state] store`): whether `DELETE` ended it on another replica (then
    /// 404 here too), and the log level `logging/setLevel` set anywhere. A
    /// store that does not answer refuses the request (fail closed).
    async fn refresh(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        let (Some(store), Some(session)) = (
            self.sessions.shared(),
            cx.era2025.as_ref().and_then(|e| e.session.clone()),
        ) else {
            return Ok(());
        };
        let id = cx.request.as_ref().map(|r| r.id.clone()).or_else(|| {
            match cx.era2025.as_ref().map(|e| &e.message) {
                Some(Message2025::Request(e)) => Some(e.id.clone()),
                _ => None,
            }
        });
        let state = store
            .session(&session.name)
            .await
            .map_err(|e| Halt::refuse(id.as_ref(), crate::protocol::IntoReject::into_reject(e)))?;
        if state.ended {
            self.sessions.end(&session);
            cx.request = None;
            cx.forward = None;
            return Err(Halt::refuse(
                id.as_ref(),
                session::SessionError::Unknown.reject(),
            ));
        }
        if let Some(level) = state.log_level {
            session.set_log_level(level);
            if let Some(req) = cx.request.as_mut() {
                req.ctx.log_level = session.log_level();
            }
        }
        Ok(())
    }

    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        let Some(era) = cx.era2025.as_deref_mut() else {
            return Ok(());
        };
        let request_id = match &era.message {
            Message2025::Request(e) => Some(e.id.clone()),
            _ => None,
        };
        let header_version = header_text(&cx.head.headers, "mcp-protocol-version");
        if let Message2025::Request(e) = &era.message
            && e.method == "initialize"
        {
            cx.settled = true;
            return Ok(());
        }
        let Some(sid) = header_text(&cx.head.headers, SESSION_HEADER) else {
            if matches!(era.message, Message2025::Get | Message2025::Delete) {
                // No session: this is neither era's GET or DELETE (spec
                // 2026-07-28 streamable-http.mdx: 405; 2025-11-25 allows 405 too).
                return Err(Halt::Respond {
                    status: StatusCode::METHOD_NOT_ALLOWED,
                    headers: vec![(header::ALLOW, HeaderValue::from_static("POST"))],
                    outcome: Outcome::Error(Reason::MethodNotAllowed),
                });
            }
            // spec 2025-11-25 basic/transports.mdx "Session Management":
            // "Servers that require a session ID SHOULD respond to requests
            // without an Mcp-Session-Id header (other than initialization)
            // with HTTP 400 Bad Request".
            return Err(Halt::refuse(
                request_id.as_ref(),
                Reject::new(
                    Reason::SessionRequired,
                    "this request needs the Mcp-Session-Id header that `initialize` answered with",
                ),
            ));
        };
        let session = self
            .sessions
            .find(&sid, &cx.route.name, &cx.principal.name)
            .map_err(|e| {
                let halt = Halt::refuse(request_id.as_ref(), e.reject());
                match e {
                    SessionError::Unknown => halt,
                    SessionError::TooManyForPrincipal(_) | SessionError::Full(_) => {
                        halt.with_header(header::RETRY_AFTER, retry_after())
                    }
                }
            })?;
        // spec 2025-11-25 basic/transports.mdx "Protocol Version Header": "If
        // the server receives a request with an invalid or unsupported
        // MCP-Protocol-Version, it MUST respond with 400 Bad Request".
        if let Some(v) = &header_version
            && !session::LEGACY_VERSIONS.contains(&v.as_str())
        {
            return Err(Halt::refuse(
                request_id.as_ref(),
                Reject::new(
                    Reason::UnsupportedProtocolVersion,
                    format!(
                        "MCP-Protocol-Version {v} is not one this session can speak (it negotiated {})",
                        session.version
                    ),
                )
                .with("supported", serde_json::json!(session::LEGACY_VERSIONS))
                .with("requested", v.as_str()),
            ));
        }
        era.session = Some(session.clone());
        // The call this answer belongs to waits on another replica: it is
        // forwarded there, as a hold-mode retry is (`pipeline::owner`).
        if self.forwards
            && let Message2025::Response { id, .. } = &era.message
            && let Some((node, addr)) = self.sessions.owner_elsewhere(id)
        {
            cx.forward = Some(crate::front::pipeline::owner::ForwardTo {
                node,
                addr,
                operation: format!("answer {}", call::id_key(id)),
                tc: None,
                task: None,
            });
            cx.settled = true;
            return Ok(());
        }
        let call = match &era.message {
            Message2025::Request(e) => engine_method(&e.method).is_some(),
            _ => false,
        };
        if !call {
            cx.settled = true;
            return Ok(());
        }
        let Message2025::Request(envelope) = std::mem::replace(&mut era.message, Message2025::Call)
        else {
            return Ok(());
        };
        let traceparent = header_text(&cx.head.headers, "traceparent");
        let tracestate = header_text(&cx.head.headers, "tracestate");
        cx.request = Some(Box::new(typed(
            envelope,
            &session,
            traceparent,
            tracestate,
        )?));
        Ok(())
    }
}

/// A request redmark makes on a 2025-era client's behalf (the
/// `server/discover` behind its `initialize`, the listen behind its
/// standalone stream), as a 2026-07-28 client declaring the same
/// capabilities and client info would send it.
fn on_behalf(
    id: Id,
    method: Method,
    members: Map<String, Value>,
    capabilities: Value,
    client_info: Option<Value>,
) -> ClientRequest {
    let ctx = RequestContext {
        protocol_version: crate::protocol::SUPPORTED_VERSIONS[0].to_owned(),
        profile: crate::protocol::profile::Profile::from_client_capabilities(&capabilities),
        capabilities,
        client_info,
        log_level: None,
        progress_token: None,
        traceparent: None,
        tracestate: None,
        access: Default::default(),
    };
    let params = crate::protocol::params::ClientParams {
        members,
        ..Default::default()
    };
    ClientRequest::new(id, method, params, ctx, Vec::new())
}

/// A header sent once as visible ASCII, trimmed.
fn header_text(headers: &http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
}

/// A 2025-era call as the typed request the engine serves: the session
/// supplies what a 2026 client puts in every request's `_meta`.
fn typed(
    envelope: Envelope,
    session: &Session,
    traceparent: Option<String>,
    tracestate: Option<String>,
) -> Result<ClientRequest, Halt> {
    let Envelope { id, method, params } = envelope;
    let Some(method) = engine_method(&method) else {
        return Err(Halt::refuse(
            Some(&id),
            Reject::new(
                Reason::MethodNotFound,
                format!("Method not found: `{method}`"),
            ),
        ));
    };
    let mut params = params.map(|p| *p).unwrap_or_default();
    // 2025-era requests have no retries: redmark retries for the client
    // (`call`). A `requestState` here would be a way around the rate limits
    // and into the state checks that no 2025-era client needs.
    if params.members.contains_key("requestState") || params.members.contains_key("inputResponses")
    {
        return Err(Halt::refuse(
            Some(&id),
            Reject::new(
                Reason::StateNotAllowed,
                "a 2025-era request carries no `requestState` or `inputResponses`: answer pushed questions instead",
            ),
        ));
    }
    // A 2025-era `_meta` has no protocol members; a client that put some
    // there anyway does not get to speak for its session.
    let other = params.meta.take().map(|m| m.other).unwrap_or_else(Map::new);
    let pick = |key: &str| other.get(key).and_then(Value::as_str).map(str::to_owned);
    let ctx = RequestContext {
        protocol_version: session.version.clone(),
        capabilities: session.capabilities.clone(),
        client_info: session.client_info.clone(),
        log_level: session.log_level(),
        progress_token: other.get("progressToken").cloned(),
        profile: session.profile,
        traceparent: pick("traceparent").or(traceparent),
        tracestate: pick("tracestate").or(tracestate),
        access: Default::default(),
    };
    params.meta = Some(crate::protocol::ClientMeta {
        other,
        ..Default::default()
    });
    Ok(ClientRequest::new(id, method, params, ctx, Vec::new()))
}
