//! A call to a native 2026-07-28 server: relayed statelessly, and the
//! server's own `InputRequiredResult` held to the same policy as a converted
//! push. Each of its `inputRequests` is guarded before the client sees it
//! (under the server's own key), the server's `requestState` is wrapped in
//! redmark's sealed state together with the questions (so any replica can
//! validate the retry, with no shared store), and on the retry every answer
//! is checked (schema, field rules, CEL authz) before the server sees it. An
//! invalid answer is asked again by redmark itself, without the server.
//!
//! spec 2026-07-28 basic/patterns/mrtr.mdx "Server Requirements": "servers
//! MUST treat `requestState` as an attacker-controlled input": the server's
//! state rides sealed (AEAD) inside redmark's, bound to principal, request
//! and expiry, and each round's state is used once.

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::Engine;
use super::operation::spans::{record_error, root_span, round_trip_span};
use super::outgoing::Outgoing;
use crate::policy::Policy;
use crate::protocol::{ClientRequest, Principal};
use crate::route::Route;
use crate::telemetry::traces;

mod ask;
mod end;
mod forward;
mod params;
mod retry;
mod screen;
pub mod task;

pub use params::upstream_params;
use retry::open;

/// Notifications (and the final answer) queued for the client at most; one
/// slot stays free for the answer, so a client that does not read loses
/// notifications, never the answer, and never holds the call.
const QUEUE: usize = 64;

/// Starts one round of a call to a native server: what it sends the client
/// (the notifications the server streams, then the one answer) arrives on
/// the receiver. A client that goes away stops the round (dropping its
/// request to the server, as when the call ran in the client's own task).
pub fn start(
    engine: Arc<Engine>,
    route: Arc<Route>,
    principal: Principal,
    req: ClientRequest,
) -> mpsc::Receiver<Outgoing> {
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(async move {
        let to_client = tx.clone();
        tokio::select! {
            out = call(engine, route, principal, req, Some(to_client)) => {
                let _ = tx.send(out).await;
            }
            () = tx.closed() => {}
        }
    });
    rx
}

/// One round of a call to a native server, from the client's request to the
/// one answer it gets; request-scoped notifications the server streams go
/// to `to_client` as they arrive.
pub async fn call(
    engine: Arc<Engine>,
    route: Arc<Route>,
    principal: Principal,
    req: ClientRequest,
    to_client: Option<mpsc::Sender<Outgoing>>,
) -> Outgoing {
    let target = req.target().to_owned();
    let retry = req.is_retry();
    let opened = if retry {
        match open(&engine, &route, &principal, &req).await {
            Ok(c) => Some(c),
            Err(r) => return Outgoing::reject(Some(&req.id), &r),
        }
    } else {
        None
    };
    let op_id = opened
        .as_ref()
        .map_or_else(super::operation::operation_id, |c| c.op.clone());
    let round = opened.as_ref().map_or(0, |c| c.rd);
    let parent = opened.as_ref().and_then(|c| c.tc.clone());
    let root = root_span(&route.name, &req, &target, &op_id, parent.as_deref());
    let span = round_trip_span(
        &root,
        req.method,
        &target,
        &req.id,
        round + 1,
        &req.ctx.protocol_version,
    );
    req.ctx
        .access
        .note(&op_id, round + 1, traces::trace_id(&root).as_deref());
    let mut run = Run {
        trace_id: traces::trace_id(&root),
        tc: parent.or_else(|| traces::traceparent(&root)),
        engine,
        policy: route.policy.current(),
        arguments: req.arguments.value().clone(),
        route,
        principal,
        target,
        op_id,
        round,
        root,
        declined: false,
        cancelled: false,
        relayed: 0,
        to_client,
    };
    let out = match opened {
        Some(claims) => run.retry(&req, claims).await,
        None => run.forward(&req, None, Map::new(), 0).await,
    };
    if let Outgoing::Final {
        outcome: super::Outcome::Error(reason),
        ..
    } = &out
    {
        record_error(&span, reason.as_str());
    }
    out
}
struct Run {
    engine: Arc<Engine>,
    route: Arc<Route>,
    policy: Arc<Policy>,
    principal: Principal,
    target: String,
    arguments: Value,
    op_id: String,
    round: u32,
    root: tracing::Span,
    trace_id: Option<String>,
    /// The operation's trace context, sealed into every state.
    tc: Option<String>,
    declined: bool,
    cancelled: bool,
    /// Retries redmark sent the server itself (declines on the user's
    /// behalf), bounded with the client's rounds by `max_rounds`.
    relayed: u32,
    to_client: Option<mpsc::Sender<Outgoing>>,
}
/// Whether the route's server speaks 2026-07-28 natively (asking it once under `auto`).
pub async fn is_native(route: &Route) -> bool {
    route.native.is_native().await
}
