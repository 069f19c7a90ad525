//! Setting an operation up, before anything waits: its mode and id, the
//! root span and the first client's round trip, the lease on a session, the
//! upstream call, and the [`Operation`] that then runs. Boxed and gone once
//! done, so a question that waits for minutes holds only the run.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::replay::Replay;
use super::spans::{root_span, round_trip_span, upstream_span};
use super::{Client, Operation, operation_id};
use crate::mrtr::Engine;
use crate::mrtr::convert::KeyNamer;
use crate::mrtr::outgoing::Outgoing;
use crate::mrtr::resume::input_responses;
use crate::mrtr::state::Claims;
use crate::policy::{Mode, Policy};
use crate::protocol::shape;
use crate::protocol::{ClientRequest, IntoReject, Method, Principal};
use crate::route::Route;
use crate::telemetry::traces;
use crate::upstream::pool::PoolKey;

/// A replay-mode retry: its operation, round and state, already checked and consumed.
pub struct ReplayRun {
    pub claims: Claims,
    /// The retry's `inputResponses`.
    pub responses: Map<String, Value>,
}

/// Starts an operation for a fresh request and drives it to its end (or,
/// in replay mode, to its first round).
pub fn begin(
    engine: Arc<Engine>,
    route: Arc<Route>,
    principal: Principal,
    req: Box<ClientRequest>,
    tx: mpsc::Sender<Outgoing>,
) -> impl Future<Output = ()> + Send {
    start(Start::boxed(engine, route, principal, req, tx, None))
}

/// Runs a replay-mode operation again for a retry whose state was checked
/// and consumed; any replica, any session.
pub fn replay(
    engine: Arc<Engine>,
    route: Arc<Route>,
    principal: Principal,
    req: Box<ClientRequest>,
    run: ReplayRun,
    tx: mpsc::Sender<Outgoing>,
) -> impl Future<Output = ()> + Send {
    start(Start::boxed(engine, route, principal, req, tx, Some(run)))
}

/// What an operation starts from, in one box: an async fn keeps its
/// arguments apart from its locals for its whole life (rust-lang/rust#62958),
/// and an operation's future lives as long as its questions wait.
struct Start {
    engine: Arc<Engine>,
    route: Arc<Route>,
    principal: Principal,
    /// Boxed since the front parsed it: moved here as a pointer.
    req: Box<ClientRequest>,
    tx: mpsc::Sender<Outgoing>,
    resumed: Option<ReplayRun>,
}

impl Start {
    fn boxed(
        engine: Arc<Engine>,
        route: Arc<Route>,
        principal: Principal,
        req: Box<ClientRequest>,
        tx: mpsc::Sender<Outgoing>,
        resumed: Option<ReplayRun>,
    ) -> Box<Start> {
        Box::new(Start {
            engine,
            route,
            principal,
            req,
            tx,
            resumed,
        })
    }
}

/// The mode a fresh call runs in: its policy's, with the tool's annotations
/// as the server lists them (the known-tool step has just found the tool).
fn mode_of(route: &Route, policy: &Policy, principal: &Principal, req: &ClientRequest) -> Mode {
    if let Some(tool) = &req.tool {
        return policy.mode(req.target(), Some(&tool.definition));
    }
    let tools = (req.method == Method::ToolsCall)
        .then(|| {
            route.catalog.tools(&PoolKey {
                principal: principal.name.clone(),
                profile: req.ctx.profile,
            })
        })
        .flatten();
    let tool = tools.as_ref().and_then(|t| t.get(req.target()));
    policy.mode(req.target(), tool.map(|t| &t.definition))
}

async fn start(args: Box<Start>) {
    // The setup is boxed and gone once it is done: what stays allocated while
    // the operation waits (for a person, maybe for minutes) is only the run.
    let prepared = Box::pin(prepare(args)).await;
    if let Some((op, client)) = prepared {
        op.run(client).await;
    }
}

/// Everything before the upstream call is under way: the lease, the call,
/// the operation's state; `None` if the client has been answered already.
async fn prepare(args: Box<Start>) -> Option<(Box<Operation>, Box<Client>)> {
    let Start {
        engine,
        route,
        principal,
        req,
        tx,
        resumed,
    } = *args;
    let target = req.target().to_owned();
    let access = req.ctx.access.clone();
    let policy = route.policy.current();
    let responses = input_responses(&req.params);
    let (id, round, replay, advance) = match resumed {
        // The retry's answers go to the questions its state says were asked, nothing else.
        Some(run) => (
            run.claims.op.clone(),
            run.claims.rd,
            Some(Replay::resumed(run.claims, run.responses)),
            Map::new(),
        ),
        None => {
            let replay =
                (mode_of(&route, &policy, &principal, &req) == Mode::Replay).then(Replay::default);
            let advance = responses.as_ref().ok().cloned().unwrap_or_default();
            (operation_id(), 0, replay, advance)
        }
    };
    // A replayed run joins the trace of the operation's first run.
    let parent = replay.as_ref().and_then(|r| r.tc.as_deref());
    let root = root_span(&route.name, &req, &target, &id, parent);
    let span = round_trip_span(
        &root,
        req.method,
        &target,
        &req.id,
        round + 1,
        &req.ctx.protocol_version,
    );
    if let Err(r) = responses {
        Client {
            id: req.id,
            ctx: req.ctx,
            tx,
            span,
        }
        .reject(&r)
        .await;
        return None;
    }
    // Moved, not copied: the request ends here. Its params become the
    // upstream's, its context the client's.
    let ClientRequest {
        id: request_id,
        method,
        params,
        meta,
        arguments,
        ctx,
        ..
    } = *req;
    // Boxed here, where it is made: the operation hands its client from
    // round to round, and a 400-byte value was copied at every hand-over.
    let client = Box::new(Client {
        id: request_id,
        ctx,
        tx,
        span,
    });
    // Failing before the operation exists still counts as one, under its reason.
    let refuse = |e: crate::upstream::UpstreamError| {
        let reject = e.into_reject();
        engine
            .metrics
            .record_operation(&route.name, &target, reject.reason.as_str());
        reject
    };
    let lease = match route.lease(&principal, client.ctx.profile).await {
        Ok(l) => l,
        Err(e) => {
            client.reject(&refuse(e)).await;
            return None;
        }
    };
    let session = lease.session().clone();
    if let Some(level) = &client.ctx.log_level
        && session.init.capabilities.get("logging").is_some()
    {
        // Legacy servers take a session-wide level; this session serves only this operation.
        let _ = session
            .request(
                "logging/setLevel",
                Some(json!({"level": level})),
                route.pool.request_timeout(),
            )
            .await;
    }
    let upstream_span = upstream_span(&root, method, &target, &session, &route);
    // The server's own spans join the operation's trace.
    let traceparent = traces::traceparent(&upstream_span);
    let upstream_params = shape::call_params(&params, &meta, traceparent.as_deref(), &arguments);
    let call = match session.call(method.as_str(), Some(upstream_params)).await {
        Ok(c) => c,
        Err(e) => {
            client.reject(&refuse(e)).await;
            return None;
        }
    };
    let op = Box::new(Operation {
        trace_id: traces::trace_id(&root),
        id,
        root,
        upstream_span,
        digests: std::sync::OnceLock::new(),
        namer: KeyNamer::new(policy.keys(&target)),
        deferred: Vec::new(),
        asked: 0,
        arguments,
        policy,
        principal,
        method,
        target,
        _lease: Some(lease),
        session,
        call,
        pending: Vec::new(),
        advance,
        round,
        awaiting: None,
        consumed: 0,
        registered: false,
        declined: false,
        cancelled: false,
        resumes: None,
        upstream_progress: client.ctx.progress_token.clone(),
        started: Instant::now(),
        dropped: 0,
        replay,
        sent_again: false,
        engine,
        route,
    });
    access.note(&op.id, 1, op.trace_id.as_deref());
    Some((op, client))
}
