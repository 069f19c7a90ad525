//! The request pipeline: every check a client POST goes through before its
//! operation starts, one small step per file, run in this order:
//!
//! | # | step | what it refuses |
//! |---|---|---|
//! | 1 | [`origin`] | an `Origin` that is not allowed (403) |
//! | 2 | [`post_only`] | anything but POST (405, `Allow: POST`) |
//! | 3 | [`authenticate`] | missing or invalid credentials (401); sets the principal |
//! | 4 | [`media`] | a `Content-Type` that is not JSON, an `Accept` without JSON and SSE |
//! | 5 | [`body`] | a body over `max_body_bytes`, refused before it is buffered whole; one not in within `body_read_timeout` (408) |
//! | 6 | [`parse`] | from the bytes to the typed [`ClientRequest`], in this order: not JSON, not one JSON-RPC request (a notification is answered 202 here); then [`protocol`]: missing, mismatched or conflicting duplicate `MCP-Protocol-Version`/`Mcp-Method`, versions and methods 2026-07-28 does not have; then [`meta`]: a missing `_meta`; then [`name`]: an `Mcp-Name` that does not mirror `params.name`/`params.uri` (or is repeated with another value) |
//! | 6b | `front::era2025::SessionStep` | a 2025-era message (`initialize`, or one in a session) without `Mcp-Session-Id` (400), with one that is not this principal's or has ended (404), or with an `MCP-Protocol-Version` its session cannot speak (400); the session's own messages (`initialize`, `ping`, answers, notifications, `GET`, `DELETE`) go on to step 7 and skip steps 8-11 |
//! | 7 | [`rate_limit`] | a request over the route's rate limits (429, `Retry-After`); retries (and a 2025-era client's answers) counted apart |
//! | 8 | [`tool_scopes`] | a `tools/call` whose credential lacks the tool's policy `scopes` (403 `insufficient_scope`) |
//! | 9 | [`known_tool`] | a tool the server does not have, `Mcp-Param-*` headers that do not mirror the arguments |
//! | 10 | [`call_policy`] | a call the route's policy does not allow (the policy's `on_call` hook) |
//! | 11 | [`owner`] | a new operation while the replica drains (503); a retry whose state fails its checks; marks a hold-mode retry owned by another replica for forwarding |
//!
//! Then the request is dispatched (`front::dispatch`): discovery and lists,
//! or an operation (`mrtr::start`).
//!
//! **Adding a step**: write a type that implements [`Check`] (a step that
//! never waits) or [`Step`] (one that may) in a file of its own here, say
//! in its doc what it refuses and why, and put it at its place in
//! [`Pipeline::standard`] (and in the table above). A step reads and
//! writes the [`RequestCx`]; it either lets the request go on (`Ok(())`) or
//! ends it with a [`Halt`]. Steps before [`parse`] see only the HTTP head;
//! after it, [`RequestCx::request`] is the typed request.
//!
//! Step 6 sees only the headers and the body's bytes: its checks are one pure
//! function, [`parse_request`], which the fuzz target `request` drives too.

pub mod authenticate;
pub mod body;
pub mod call_policy;
pub mod known_tool;
pub mod media;
pub mod meta;
pub mod name;
pub mod origin;
pub mod owner;
pub mod params;
pub mod parse;
pub mod post_only;
pub mod protocol;
pub mod rate_limit;
pub mod tool_scopes;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;

use crate::jsonrpc::Id;
use crate::mrtr::Outcome;
use crate::protocol::{ClientRequest, Principal, Reason, Reject};
use crate::route::Route;

/// Any request body: hyper's on the network, in-memory bodies in tests.
pub type RequestBody = UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// One step of the pipeline.
#[async_trait::async_trait]
pub trait Step: Send + Sync {
    /// Checks (and may enrich) the request; `Err` answers it now.
    async fn on_request(&self, cx: &mut RequestCx) -> Result<(), Halt>;

    /// The verdict of a step that never waits ([`Check`]), given without a
    /// future; `None` for a step that may wait. The pipeline asks this
    /// first: a boxed future per step per request was about 1k
    /// instructions of a call for the eight steps that never wait.
    fn now(&self, cx: &mut RequestCx) -> Option<Result<(), Halt>> {
        let _ = cx;
        None
    }
}

/// A step that decides from what the request carries, without waiting for
/// anything (no I/O, no timer): every such type is a [`Step`].
pub trait Check: Send + Sync {
    /// Checks (and may enrich) the request; `Err` answers it now.
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt>;
}

#[async_trait::async_trait]
impl<T: Check> Step for T {
    async fn on_request(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        self.check(cx)
    }

    fn now(&self, cx: &mut RequestCx) -> Option<Result<(), Halt>> {
        Some(self.check(cx))
    }
}

/// The JSON-RPC envelope of a request, before its params are checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub id: Id,
    pub method: String,
    pub params: Option<Box<crate::protocol::ClientParams>>,
}

/// What the pipeline knows about one request so far.
pub struct RequestCx {
    pub route: Arc<Route>,
    pub head: http::request::Parts,
    /// The body, until the [`body`] step reads it into `bytes`.
    pub body: Option<RequestBody>,
    pub bytes: Bytes,
    /// Set by [`parse`].
    /// Boxed, and moved as a box down to the operation: a request is about
    /// 500 bytes, and each layer that took it by value copied it.
    pub request: Option<Box<ClientRequest>>,
    /// Set by [`authenticate`]; anonymous before.
    pub principal: Principal,
    /// The JSON-RPC method as sent (requests and notifications), for metrics.
    pub method_label: Option<String>,
    /// Set by [`owner`]: the replica this retry is forwarded to.
    pub forward: Option<owner::ForwardTo>,
    /// Set by [`owner`]: the retry's `requestState`, opened and checked, so
    /// the engine does not open it again.
    pub verified: Option<Box<crate::mrtr::state::Claims>>,
    /// Set by [`parse`] for a 2025-era message; its session by the step
    /// after it (`front::era2025::SessionStep`).
    pub era2025: Option<Box<crate::front::era2025::Era2025>>,
    /// Set by a step for a message that is no call (a 2025-era `ping`,
    /// `initialize`, a POSTed answer): it still goes through the checks
    /// every message does (up to the rate limits), not the steps that check
    /// calls.
    pub settled: bool,
    /// Set by [`body`]: the body memory the request holds, given back when
    /// the context is dropped.
    pub body_lease: Option<crate::front::body_budget::Lease>,
}

impl RequestCx {
    pub fn new(route: Arc<Route>, head: http::request::Parts, body: RequestBody) -> Self {
        Self {
            route,
            head,
            body: Some(body),
            bytes: Bytes::new(),
            request: None,
            principal: Principal::anonymous(),
            method_label: None,
            forward: None,
            verified: None,
            era2025: None,
            settled: false,
            body_lease: None,
        }
    }

    /// The typed request; a step that needs it before [`parse`] ran is a bug.
    pub fn request(&self) -> Result<&ClientRequest, Halt> {
        self.request.as_deref().ok_or_else(|| {
            Halt::refuse(
                None,
                Reject::new(Reason::InternalError, "a pipeline step ran before `parse`"),
            )
        })
    }
}

/// A refusal: the JSON-RPC error, the id to echo, and headers that go with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub id: Option<Id>,
    pub reject: Reject,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// How a step ends a request early.
#[derive(Debug, Clone, PartialEq)]
pub enum Halt {
    /// A JSON-RPC error response.
    Refuse(Box<Refusal>),
    /// A response without a JSON-RPC body (202 for a notification, 405).
    Respond {
        status: StatusCode,
        headers: Vec<(HeaderName, HeaderValue)>,
        outcome: Outcome,
    },
}

impl Halt {
    pub fn refuse(id: Option<&Id>, reject: Reject) -> Halt {
        Halt::Refuse(Box::new(Refusal {
            id: id.cloned(),
            reject,
            headers: Vec::new(),
        }))
    }

    /// Adds a response header (a refusal's `WWW-Authenticate`, say).
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Halt {
        match &mut self {
            Halt::Refuse(r) => r.headers.push((name, value)),
            Halt::Respond { headers, .. } => headers.push((name, value)),
        }
        self
    }

    /// The reason, for a refusal.
    pub fn reason(&self) -> Option<Reason> {
        match self {
            Halt::Refuse(r) => Some(r.reject.reason),
            Halt::Respond { .. } => None,
        }
    }
}

/// The steps, in order.
pub struct Pipeline {
    steps: Vec<Box<dyn Step>>,
    /// The first step that checks only calls: a settled message
    /// ([`RequestCx::settled`]) stops before it.
    calls_from: usize,
}

impl Pipeline {
    /// Steps a settled message stops after.
    pub fn new(steps: Vec<Box<dyn Step>>) -> Self {
        Self {
            steps,
            calls_from: 0,
        }
    }

    /// The documented order (see the table at the top of this module).
    pub fn standard(
        allowed_origins: Option<Vec<String>>,
        authenticator: Arc<dyn crate::front::auth::Authenticator>,
        max_body_bytes: usize,
        body_read_timeout: std::time::Duration,
        sessions: Arc<crate::front::era2025::Sessions>,
    ) -> Self {
        let mut steps: Vec<Box<dyn Step>> = vec![
            Box::new(origin::Origin::new(allowed_origins)),
            Box::new(post_only::PostOnly),
            Box::new(authenticate::Authenticate::new(authenticator.clone())),
            Box::new(media::MediaTypes),
            Box::new(body::ReadBody::new(max_body_bytes, body_read_timeout)),
        ];
        steps.push(Box::new(parse::Parse));
        steps.push(Box::new(crate::front::era2025::SessionStep::new(sessions)));
        steps.push(Box::new(rate_limit::RateLimit));
        let calls_from = steps.len();
        steps.push(Box::new(tool_scopes::ToolScopes::new(authenticator)));
        steps.push(Box::new(known_tool::KnownTool));
        steps.push(Box::new(call_policy::CallPolicy));
        Self { steps, calls_from }
    }

    /// Adds `step` after the others (the composition step adds [`owner`],
    /// which needs the engine).
    #[must_use]
    pub fn then(mut self, step: Box<dyn Step>) -> Self {
        self.steps.push(step);
        self
    }

    pub async fn run(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        for (i, step) in self.steps.iter().enumerate() {
            if cx.settled && i >= self.calls_from {
                break;
            }
            match step.now(cx) {
                Some(verdict) => verdict?,
                None => step.on_request(cx).await?,
            }
        }
        Ok(())
    }
}

/// What step 6 makes of a request's headers and body.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request(Box<ClientRequest>),
    /// A notification, which [`parse`] answers with 202.
    Notification(String),
    /// A 2025-era message (`initialize`, or anything in a session), which
    /// `front::era2025` serves.
    Era2025(Box<crate::front::era2025::Message2025>),
}

/// The checks of step 6, in order, as one pure function of the headers and
/// the body's bytes: no route, no runtime, nothing upstream.
pub fn parse_request(headers: &HeaderMap, bytes: &[u8]) -> Result<Incoming, Halt> {
    parse::incoming(headers, bytes, &mut None)
}
