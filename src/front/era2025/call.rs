//! A 2025-era client's call: served by the same engine, policy and audit as
//! a 2026 client's (`front::dispatch`), with each `input_required` round
//! turned into questions pushed on the call's SSE stream.
//!
//! For a legacy server the round is its own pushes, converted and guarded
//! by the engine; for a native server it is the server's
//! `InputRequiredResult`, guarded and its state wrapped. Either way the
//! client answers each pushed request by POSTing a JSON-RPC response;
//! redmark gathers a round's answers and retries the call with them as
//! `inputResponses` and the round's `requestState`, byte for byte. The
//! engine validates the answers against the policy, and an invalid one
//! comes back as the next round (the red mark), pushed again. So
//! `input_required` never reaches a 2025-era client, and a call that asks
//! nothing is answered as plain JSON, as fast as a 2026 client's.
//!
//! Endings: the client leaving the stream, `notifications/cancelled`,
//! `DELETE` of the session or shutdown abandon the call, and the server
//! hears `cancel` for every question still open (the retry answers each
//! elicitation `cancel`); a round nobody answers within `[mrtr] ttl` ends
//! the call with `operation_expired` the same way.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::answers::Expected;
use super::session::{Session, Sessions};
use super::shape::{self, Round};
use crate::front::Gateway;
use crate::front::dispatch::{self, Reply};
use crate::jsonrpc::Id;
use crate::mrtr::outgoing::Body;
use crate::mrtr::start::STREAM_DEPTH;
use crate::mrtr::{Outcome, Outgoing};
use crate::protocol::{ClientRequest, Principal, Reason, Reject};
use crate::route::Route;

/// Everything a call's rounds share.
struct Call {
    gw: Arc<Gateway>,
    sessions: Arc<Sessions>,
    route: Arc<Route>,
    principal: Principal,
    session: Arc<Session>,
    /// The call as first sent: each retry is this plus a round's answers.
    template: ClientRequest,
}

/// How a round's wait ended without every answer.
enum Abandoned {
    /// The client left, cancelled the call, or its session ended.
    Gone,
    /// Nobody answered within the TTL.
    Expired(Duration),
    /// The client answered a question that has no `cancel` with an error.
    ClientError { method: String, message: String },
}

/// Serves a call: its answer, or an SSE stream of its pushes and its answer.
pub async fn serve(
    gw: Arc<Gateway>,
    route: Arc<Route>,
    principal: Principal,
    session: Arc<Session>,
    req: Box<ClientRequest>,
    verified: Option<Box<crate::mrtr::state::Claims>>,
) -> Reply {
    let guard = session.call(id_key(&req.id));
    let template = (*req).clone();
    let first = dispatch::dispatch(&gw, route.clone(), principal.clone(), req, verified).await;
    let next = match Next::of(first) {
        Ok(next) => next,
        Err(done) => return Reply::Json(done),
    };
    let id = template.id.clone();
    let (tx, mut out) = mpsc::channel(STREAM_DEPTH);
    let call = Call {
        sessions: gw.sessions.clone(),
        gw,
        route,
        principal,
        session,
        template,
    };
    tokio::spawn(Box::pin(async move {
        let _guard = guard;
        call.drive(next, tx, &_guard.token).await;
    }));
    match out.recv().await {
        Some(Outgoing::Notification(first)) => Reply::Stream { first, rx: out },
        Some(done) => Reply::Json(done),
        None => Reply::reject(
            &id,
            &Reject::new(Reason::InternalError, "the call ended without an answer"),
        ),
    }
}

/// What the call waits for next.
enum Next {
    Round(Round),
    /// The engine's stream: notifications, then the final answer.
    Stream(Option<Value>, mpsc::Receiver<Outgoing>),
}

impl Call {
    async fn drive(
        &self,
        mut next: Next,
        tx: mpsc::Sender<Outgoing>,
        ended: &tokio_util::sync::CancellationToken,
    ) {
        loop {
            let round = match next {
                Next::Round(round) => round,
                Next::Stream(first, mut rx) => {
                    if let Some(first) = first
                        && tx.send(Outgoing::Notification(first)).await.is_err()
                    {
                        return;
                    }
                    match self.relay(&mut rx, &tx, ended).await {
                        Some(round) => round,
                        // Answered, or abandoned: dropping `rx` tells the
                        // engine nobody listens, and it cancels upstream.
                        None => return,
                    }
                }
            };
            let answers = match self.gather(&round, &tx, ended).await {
                Ok(answers) => answers,
                Err(abandoned) => {
                    self.abandon(&round, abandoned, &tx).await;
                    return;
                }
            };
            let Some(state) = round.state else {
                self.fail(
                    &tx,
                    Reject::new(
                        Reason::UpstreamIncompatible,
                        "the server asked for input without a requestState to retry with",
                    ),
                )
                .await;
                return;
            };
            let retry = self.template.retried_with(answers, state);
            let reply = dispatch::dispatch(
                &self.gw,
                self.route.clone(),
                self.principal.clone(),
                Box::new(retry),
                None,
            )
            .await;
            next = match Next::of(reply) {
                Ok(next) => next,
                Err(done) => {
                    let _ = tx.send(done).await;
                    return;
                }
            };
        }
    }

    /// Relays the engine's notifications until its final answer: that answer
    /// sent on (`None`), or the round it asks.
    async fn relay(
        &self,
        rx: &mut mpsc::Receiver<Outgoing>,
        tx: &mpsc::Sender<Outgoing>,
        ended: &tokio_util::sync::CancellationToken,
    ) -> Option<Round> {
        loop {
            let out = tokio::select! {
                out = rx.recv() => out,
                () = tx.closed() => return None,
                () = ended.cancelled() => return None,
            };
            match out {
                Some(Outgoing::Notification(n)) => {
                    if tx.send(Outgoing::Notification(n)).await.is_err() {
                        return None;
                    }
                }
                Some(Outgoing::Final {
                    status,
                    body,
                    outcome,
                }) => match round_or_final(status, body, outcome) {
                    Ok(round) => return Some(round),
                    Err(done) => {
                        let _ = tx.send(done).await;
                        return None;
                    }
                },
                None => {
                    self.fail(
                        tx,
                        Reject::new(
                            Reason::InternalError,
                            "the operation ended without an answer",
                        ),
                    )
                    .await;
                    return None;
                }
            }
        }
    }

    /// Pushes a round's questions and waits for every answer.
    async fn gather(
        &self,
        round: &Round,
        tx: &mpsc::Sender<Outgoing>,
        ended: &tokio_util::sync::CancellationToken,
    ) -> Result<Map<String, Value>, Abandoned> {
        let mut waiting: Vec<(&str, &Value, Expected)> = Vec::with_capacity(round.requests.len());
        for (key, request) in &round.requests {
            let expected = self.sessions.expect(&self.session);
            let pushed = shape::push(&expected.id, request, &self.session.version);
            if tx.send(Outgoing::Notification(pushed)).await.is_err() {
                return Err(Abandoned::Gone);
            }
            waiting.push((key, request, expected));
        }
        let ttl = self.gw.engine.ttl;
        let deadline = tokio::time::sleep(ttl);
        tokio::pin!(deadline);
        let mut answers = Map::new();
        for (key, request, expected) in &mut waiting {
            let answer = tokio::select! {
                a = &mut expected.rx => a,
                () = &mut deadline => return Err(Abandoned::Expired(ttl)),
                () = tx.closed() => return Err(Abandoned::Gone),
                () = ended.cancelled() => return Err(Abandoned::Gone),
            };
            match answer {
                Ok(Ok(result)) => {
                    answers.insert((*key).to_owned(), result);
                }
                Ok(Err(error)) => match shape::answer_to_error(request) {
                    Some(cancel) => {
                        answers.insert((*key).to_owned(), cancel);
                    }
                    None => {
                        return Err(Abandoned::ClientError {
                            method: request
                                .get("method")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                            message: error.message,
                        });
                    }
                },
                // The registry dropped it: the session ended.
                Err(_) => return Err(Abandoned::Gone),
            }
        }
        Ok(answers)
    }

    /// Ends a call whose round will not be answered: the client hears why
    /// (if it still listens), and the server hears `cancel` for every
    /// elicitation still open, as a good client would say it. What the
    /// server answers then goes nowhere.
    async fn abandon(&self, round: &Round, why: Abandoned, tx: &mpsc::Sender<Outgoing>) {
        let reject = match &why {
            Abandoned::Gone => None,
            Abandoned::Expired(ttl) => Some(Reject::new(
                Reason::OperationExpired,
                format!(
                    "nobody answered the question within {}s ([mrtr] ttl); the server was told `cancel`",
                    ttl.as_secs()
                ),
            )),
            Abandoned::ClientError { method, message } => Some(Reject::new(
                Reason::MalformedInputResponse,
                format!("the client answered `{method}` with an error ({message}); the call ends"),
            )),
        };
        if let Some(reject) = reject {
            self.fail(tx, reject).await;
        }
        let Some(retry) = round.cancel_retry(&self.template) else {
            return;
        };
        let (gw, route, principal) = (self.gw.clone(), self.route.clone(), self.principal.clone());
        // Bounded: the server's answer to a cancelled call is nobody's, and
        // the engine's own TTL ends whatever is still waiting then.
        tokio::spawn(async move {
            let _ = tokio::time::timeout(
                gw.engine.ttl,
                dispatch::dispatch(&gw, route, principal, Box::new(retry), None),
            )
            .await;
        });
    }

    async fn fail(&self, tx: &mpsc::Sender<Outgoing>, reject: Reject) {
        let out = Outgoing::reject(Some(&self.template.id), &reject);
        let _ = tx.send(out).await;
    }
}

impl Next {
    /// What a dispatched call or retry leads to next, or the final answer
    /// it already is, written for the 2025-era client. (The answer is not
    /// boxed: every plain 2025-era call takes this path.)
    #[allow(clippy::result_large_err)]
    fn of(reply: Reply) -> Result<Next, Outgoing> {
        match reply {
            Reply::Json(Outgoing::Final {
                status,
                body,
                outcome,
            }) => round_or_final(status, body, outcome).map(Next::Round),
            // `dispatch` answers a notification with a stream; a lone one
            // ends as a stream that ends without an answer would.
            Reply::Json(Outgoing::Notification(n)) => Ok(Next::Stream(Some(n), mpsc::channel(1).1)),
            Reply::Stream { first, rx } => Ok(Next::Stream(Some(first), rx)),
        }
    }
}

/// The round an engine's final answer asks, or that answer for a 2025-era client.
#[allow(clippy::result_large_err)]
fn round_or_final(status: StatusCode, body: Body, outcome: Outcome) -> Result<Round, Outgoing> {
    shape::round(&body).ok_or_else(|| final_for_2025(status, body, outcome))
}

/// A final answer for a 2025-era client. Its HTTP status: a JSON-RPC error
/// is a 200 with the error in the body, as 2025-era servers answer (a
/// client that meets a 4xx reports the HTTP status and loses the error),
/// except where the status tells the client when to come back (429, 503).
fn final_for_2025(status: StatusCode, body: Body, outcome: Outcome) -> Outgoing {
    let status = match status {
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => status,
        _ => StatusCode::OK,
    };
    Outgoing::Final {
        status,
        body: shape::final_body(body),
        outcome,
    }
}

/// A JSON-RPC id as the key of the session's calls (what
/// `notifications/cancelled` names in `requestId`).
pub fn id_key(id: &Id) -> String {
    match id {
        Id::Number(n) => n.to_string(),
        Id::String(s) => format!("\"{s}\""),
    }
}
