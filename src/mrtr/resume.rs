//! A client's retry: `requestState` opened and checked in the order the
//! design fixes (malformed, unknown key, bad signature, expired, other
//! principal, other request, replayed round, unknown operation), each failure
//! a `-32602` with its own `data.reason`, then handed to its operation.

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::Engine;
use super::outgoing::Outgoing;
use super::state::{StateError, principal_digest, request_digest};
use super::table::Resume;
use crate::protocol::{ClientRequest, IntoReject, Principal, Reason, Reject};
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

async fn hand_over(
    engine: &Engine,
    route: &Route,
    principal: &Principal,
    req: ClientRequest,
    tx: mpsc::Sender<Outgoing>,
) -> Result<(), Reject> {
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
    let responses = input_responses(&req.params)?;
    let unknown = || {
        Reject::new(Reason::OperationUnknown, "no operation for this requestState: this node restarted or the operation ended; call again without requestState")
            .with("operation", claims.op.clone())
            .with("node", claims.node.clone())
    };
    if claims.node != engine.node {
        // Forwarding to the owning replica plugs in here.
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
    let Some(ended) = engine.table.tombstone(&claims.op) else {
        return Err(unknown());
    };
    // Each round's state is used once, here too: checked and marked at once.
    if !engine.table.consume(&claims.op, claims.rd) {
        return Err(replayed());
    }
    // The operation ended between rounds (the server answered or went away,
    // or nobody answered in time): this retry hears how, as the request that
    // was attached would have.
    let stamp = route.stamp(&ended.server_info);
    let reply = ended
        .ending
        .reply(req.method, &req.id, &stamp)
        .ok_or_else(unknown)?;
    let _ = tx.send(reply).await;
    Ok(())
}
