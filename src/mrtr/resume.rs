//! A client's retry: `requestState` opened and checked in the order the
//! design fixes (malformed, unknown key, bad signature, expired, other
//! principal, other request, replayed round, unknown operation), each failure
//! a `-32602` with its own `data.reason`, then handed to its operation.

use std::sync::Arc;
use std::time::SystemTime;

use http::StatusCode;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::Engine;
use super::ending::Ending;
use super::state::{StateError, principal_digest, request_digest};
use super::table::Resume;
use crate::auth::Principal;
use crate::error::Reject;
use crate::front::Route;
use crate::front::body::Outgoing;
use crate::front::dispatch::upstream_error_reply;
use crate::front::request::ClientRequest;
use crate::front::shape;
use crate::jsonrpc::{code, error_response, result_response};

fn refusal(reason: &'static str, message: impl Into<String>) -> Reject {
    Reject::new(StatusCode::OK, code::INVALID_PARAMS, reason, message)
}

fn state_refusal(e: StateError) -> Reject {
    refusal(e.reason(), e.to_string())
}

/// Resumes the operation a retry belongs to, or tells the client precisely why not.
pub async fn resume(
    engine: Arc<Engine>,
    route: Arc<Route>,
    principal: Principal,
    req: ClientRequest,
    tx: mpsc::Sender<Outgoing>,
) {
    if let Err(reject) = hand_over(&engine, &route, &principal, req.clone(), tx.clone()).await {
        let _ = tx
            .send(Outgoing::Final {
                status: reject.status,
                body: error_response(Some(&req.id), &reject.error_object()),
            })
            .await;
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
        .ok_or_else(|| state_refusal(StateError::Malformed))?;
    let claims = engine
        .keys
        .open(token, SystemTime::now())
        .map_err(state_refusal)?;
    if claims.pr != principal_digest(&route.name, &principal.name) {
        return Err(state_refusal(StateError::WrongPrincipal));
    }
    if claims.rq != request_digest(&route.name, &req.method, &req.params) {
        return Err(state_refusal(StateError::WrongRequest));
    }
    let responses = match req.params.get("inputResponses") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            return Err(refusal(
                "malformed_input_response",
                "`inputResponses` must be an object keyed by input request key",
            ));
        }
    };
    let unknown = || {
        refusal("operation_unknown", "no operation for this requestState: this node restarted or the operation ended; call again without requestState")
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
        return Err(refusal(
            "state_replayed",
            "this requestState was already used",
        ));
    }
    // The operation ended between rounds (the server answered or went away,
    // or nobody answered in time): this retry hears how.
    let (status, body) = match &ended.ending {
        Ending::Completed { result, .. } => {
            let stamp = route.stamp(&ended.server_info);
            (
                StatusCode::OK,
                result_response(
                    &req.id,
                    shape::complete(&req.method, result.clone(), &stamp),
                ),
            )
        }
        Ending::UpstreamError(e) => upstream_error_reply(&req.id, e.clone()),
        other => match other.reject() {
            Some(r) => (r.status, error_response(Some(&req.id), &r.error_object())),
            None => return Err(unknown()),
        },
    };
    let _ = tx.send(Outgoing::Final { status, body }).await;
    Ok(())
}
