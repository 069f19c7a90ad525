//! A client's retry: `requestState` opened and checked in the order the
//! design fixes (malformed, unknown key, bad signature, expired, other
//! principal, other request, replayed round, unknown operation), each failure
//! a `-32602` with its own `data.reason`, then handed to its operation.

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::Engine;
use super::outgoing::Outgoing;
use super::state::{Claims, StateError, principal_digest, request_digest};
use super::table::Resume;
use crate::jsonrpc::Id;
use crate::protocol::{ClientRequest, IntoReject, Method, Principal, Reason, Reject};
use crate::route::Route;

/// `inputResponses` as sent: absent or an object keyed by input request key
/// (spec mrtr.mdx "Error Handling": malformed inputResponses SHOULD get a JSON-RPC error).
pub fn input_responses(params: &Map<String, Value>) -> Result<Map<String, Value>, Reject> {
    match params.get("inputResponses") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(_) => Err(Reject::new(
            Reason::MalformedInputResponse,
            "`inputResponses` must be an object keyed by input request key",
        )),
    }
}

/// A round's state presented again, or out of turn.
pub fn replayed() -> Reject {
    Reject::new(
        Reason::StateReplayed,
        "this requestState was already used; retry with the latest one",
    )
}

/// Resumes the operation a retry belongs to, or tells the client precisely why not.
pub async fn resume(
    engine: Arc<Engine>,
    route: Arc<Route>,
    principal: Principal,
    req: ClientRequest,
    tx: mpsc::Sender<Outgoing>,
) {
    let id = req.id.clone();
    if let Err(reject) = hand_over(&engine, &route, &principal, req, tx.clone()).await {
        let _ = tx.send(Outgoing::reject(Some(&id), &reject)).await;
    }
}

/// Opens a retry's `requestState` and checks that it is this principal's
/// state for this request: the checks any replica can make, so a retry
/// forwarded to its owner has passed them where it landed.
pub fn verify(
    engine: &Engine,
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
) -> Result<Claims, Reject> {
    let token = req
        .params
        .get("requestState")
        .and_then(Value::as_str)
        .ok_or_else(|| StateError::Malformed.into_reject())?;
    let claims = engine
        .keys
        .open(token, engine.clock.system_time())
        .map_err(IntoReject::into_reject)?;
    if claims.pr != principal_digest(&route.name, &principal.name) {
        return Err(StateError::WrongPrincipal.into_reject());
    }
    if claims.rq != request_digest(&route.name, req.method.as_str(), &req.params) {
        return Err(StateError::WrongRequest.into_reject());
    }
    Ok(claims)
}

async fn hand_over(
    engine: &Engine,
    route: &Route,
    principal: &Principal,
    req: ClientRequest,
    tx: mpsc::Sender<Outgoing>,
) -> Result<(), Reject> {
    let claims = verify(engine, route, principal, &req)?;
    // For the access log: the round this request is (its state answers round `rd`).
    let trace = claims.tc.as_deref().and_then(|tc| tc.split('-').nth(1));
    req.ctx.access.note(&claims.op, claims.rd + 1, trace);
    let responses = input_responses(&req.params)?;
    let unknown = || {
        Reject::new(Reason::OperationUnknown, "no operation for this requestState: this node restarted or the operation ended; call again without requestState")
            .with("operation", claims.op.clone())
            .with("node", claims.node.clone())
    };
    if claims.node != engine.node {
        // A retry for another replica is forwarded by the front before it
        // gets here; one that still names another node (a forward that
        // reached the wrong replica, or no `[cluster]`) is never forwarded again.
        return Err(unknown());
    }
    if let Some(entry) = engine.table.get(&claims.op) {
        let resume = Resume {
            round: claims.rd,
            responses,
            ctx: req.ctx.clone(),
            id: req.id.clone(),
            client: tx.clone(),
        };
        if entry.resume.send(resume).await.is_ok() {
            return Ok(());
        }
        // It ended while we were looking: its tombstone says how.
    }
    match late(engine, route, &claims.op, claims.rd, req.method, &req.id) {
        Late::Reply(reply) => {
            let _ = tx.send(reply).await;
            Ok(())
        }
        Late::Replayed => Err(replayed()),
        Late::Unknown => Err(unknown()),
    }
}

/// What a retry of an operation that has ended gets.
pub enum Late {
    /// How the operation ended, as the request that was attached would have heard it.
    Reply(Outgoing),
    /// This round's state was used already.
    Replayed,
    /// Nothing is remembered of the operation (or nobody was left to answer).
    Unknown,
}

/// The answer to a retry of round `round` of operation `op`, which has ended.
pub fn late(engine: &Engine, route: &Route, op: &str, round: u32, method: Method, id: &Id) -> Late {
    let Some(ended) = engine.table.tombstone(op) else {
        return Late::Unknown;
    };
    // Each round's state is used once, here too: checked and marked at once.
    if !engine.table.consume(op, round) {
        return Late::Replayed;
    }
    // The operation ended between rounds (the server answered or went away,
    // or nobody answered in time): this retry hears how, as the request that
    // was attached would have.
    match ended.reply(method, id, |info| route.stamp(info)) {
        Some(reply) => Late::Reply(reply),
        None => Late::Unknown,
    }
}

/// [`late`] as the one answer a retry gets, for a retry that reached its
/// operation's queue just as the operation ended.
pub fn late_answer(
    engine: &Engine,
    route: &Route,
    op: &str,
    round: u32,
    method: Method,
    id: &Id,
) -> Outgoing {
    match late(engine, route, op, round, method, id) {
        Late::Reply(reply) => reply,
        Late::Replayed => Outgoing::reject(Some(id), &replayed()),
        Late::Unknown => Outgoing::reject(
            Some(id),
            &Reject::new(
                Reason::OperationUnknown,
                "the operation ended; call again without requestState",
            )
            .with("operation", op.to_owned()),
        ),
    }
}
