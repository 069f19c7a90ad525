//! A client's retry: `requestState` opened and checked in the order the
//! design fixes (malformed, unknown key, bad signature, expired, other
//! principal, other request, replayed round, unknown operation), each failure
//! a `-32602` with its own `data.reason`, then handed to its operation. A
//! replay-mode state has no operation to hand to: its round is consumed
//! through [`Engine::single_use`] and the call runs again, here.

use std::sync::Arc;

use futures::SinkExt;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::Engine;
use super::operation::{self, ReplayRun};
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
    req: Box<ClientRequest>,
    verified: Option<Box<Claims>>,
    tx: mpsc::Sender<Outgoing>,
) {
    let id = req.id.clone();
    match hand_over(&engine, &route, &principal, &req, verified, tx.clone()).await {
        Ok(None) => {}
        Ok(Some(run)) => operation::replay(engine, route, principal, req, run, tx).await,
        Err(reject) => {
            let _ = tx.send(Outgoing::reject(Some(&id), &reject)).await;
        }
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
    if claims.rq
        != request_digest(
            &route.name,
            req.method.as_str(),
            &req.params,
            req.arguments.value(),
        )
    {
        return Err(StateError::WrongRequest.into_reject());
    }
    Ok(claims)
}

/// Hands a hold-mode retry to its operation (`Ok(None)`), or returns the
/// checked and consumed replay-mode run to start.
async fn hand_over(
    engine: &Engine,
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
    verified: Option<Box<Claims>>,
    tx: mpsc::Sender<Outgoing>,
) -> Result<Option<ReplayRun>, Reject> {
    let claims = match verified {
        Some(claims) => *claims,
        None => verify(engine, route, principal, req)?,
    };
    // For the access log: the round this request is (its state answers round `rd`).
    let trace = claims.tc.as_deref().and_then(|tc| tc.split('-').nth(1));
    req.ctx.access.note(&claims.op, claims.rd + 1, trace);
    let responses = input_responses(&req.params)?;
    if claims.is_replay() {
        // Answers of the wrong shape are refused before the round is used,
        // so a corrected retry with the same state still works.
        operation::check_shapes(&claims, &responses)?;
        consume(engine, &claims).await?;
        return Ok(Some(ReplayRun { claims, responses }));
    }
    let unknown = || {
        Reject::new(Reason::OperationUnknown, "no operation for this requestState: this node restarted or the operation ended; call again without requestState")
            .with("operation", claims.op.clone())
            .with("node", claims.node.clone())
    };
    if claims.node != engine.node {
        // A hold-mode retry for another replica is forwarded by the front
        // (`front::pipeline::owner`) before it gets here; one that still
        // names another node (a forward that reached the wrong replica, or no
        // `[cluster]`) is never forwarded again.
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
        // `entry` is the table's copy: its sender is ours to use.
        let mut to_operation = entry.resume;
        if to_operation.send(Box::new(resume)).await.is_ok() {
            return Ok(None);
        }
        // It ended while we were looking: its tombstone says how.
    }
    match late(engine, route, &claims.op, claims.rd, req.method, &req.id) {
        Late::Reply(reply) => {
            let _ = tx.send(reply).await;
            Ok(None)
        }
        Late::Replayed => Err(replayed()),
        Late::Unknown => Err(unknown()),
    }
}

/// Marks a replay-mode round used, once on any replica sharing the store:
/// a second presentation is `state_replayed`, a store that cannot say is
/// `state_store_unavailable` (never an unchecked acceptance).
pub(crate) async fn consume(engine: &Engine, claims: &super::state::Claims) -> Result<(), Reject> {
    let now = engine.clock.unix_now().as_secs();
    // Remembered as long as the state could still open.
    let ttl = std::time::Duration::from_secs(claims.exp.saturating_sub(now).max(1));
    match engine.single_use.first_use(&claims.round_id(), ttl).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(replayed()),
        Err(e) => {
            tracing::warn!(operation = %claims.op, round = claims.rd, error = %e, "cannot mark a replay-mode round used; refusing the retry");
            Err(Reject::new(Reason::StateStoreUnavailable, e.to_string()))
        }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use async_trait::async_trait;

    use super::*;
    use crate::config::MrtrConfig;
    use crate::mrtr::clock::Clock;
    use crate::mrtr::single_use::{SingleUse, StoreError};
    use crate::mrtr::state::{CLAIMS_VERSION, Claims, Keyring, REPLAY};
    use crate::telemetry::audit::AuditSink;
    use crate::telemetry::metrics::Metrics;

    /// A shared store that cannot be reached.
    struct Down;

    #[async_trait]
    impl SingleUse for Down {
        async fn first_use(&self, _: &str, _: Duration) -> Result<bool, StoreError> {
            Err(StoreError::Unavailable("connection refused".into()))
        }
    }

    fn engine(store: Option<Arc<dyn SingleUse>>) -> Engine {
        let (_down, shutdown) = tokio::sync::watch::channel(false);
        let mut engine = Engine::new(
            &MrtrConfig::default(),
            Keyring::ephemeral(),
            "n1".into(),
            Arc::new(Metrics::new()),
            AuditSink::disabled(),
            shutdown,
            Clock::following_tokio(),
        );
        if let Some(store) = store {
            engine.single_use = store;
        }
        engine
    }

    fn claims(rd: u32) -> Claims {
        Claims {
            v: CLAIMS_VERSION,
            op: "00".repeat(16),
            node: "n0".into(),
            addr: None,
            pr: String::new(),
            exp: 4_000_000_000,
            rq: String::new(),
            rd,
            m: REPLAY.into(),
            tc: None,
            ans: Vec::new(),
            ask: Vec::new(),
            nat: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_replay_round_is_consumed_once_and_a_store_that_cannot_say_refuses() {
        let local = engine(None);
        assert!(consume(&local, &claims(1)).await.is_ok());
        let again = consume(&local, &claims(1)).await.unwrap_err();
        assert_eq!(again.reason, Reason::StateReplayed);
        assert!(
            consume(&local, &claims(2)).await.is_ok(),
            "the next round is its own"
        );

        let down = engine(Some(Arc::new(Down)));
        let refused = consume(&down, &claims(1)).await.unwrap_err();
        assert_eq!(refused.reason, Reason::StateStoreUnavailable);
        assert_eq!(refused.status(), http::StatusCode::SERVICE_UNAVAILABLE);
    }
}
