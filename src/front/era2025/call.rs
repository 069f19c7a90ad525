//! A 2025-era client's call: served by the same engine, policy and audit as
//! a 2026 client's (`front::dispatch`), with each `input_required` round
//! turned into questions pushed on the call's SSE stream.
//!
//! For a legacy server the round is its own pushes, converted and guarded
//! by the engine; for a native server it is the server's
//! `InputRequiredResult`, guarded and its state wrapped. Either way the
//! client answers each pushed request by POSTing a JSON-RPC response;
//! redmark gathers a round's answers and retries the call with them
//! (`front::rounds`, the loop this shares with gateway-made tasks). The
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
use tokio_util::sync::CancellationToken;

use super::answers::Expected;
use super::session::{Session, Sessions};
use super::shape;
use crate::front::Gateway;
use crate::front::dispatch::Reply;
use crate::front::rounds::{self, Answers, Call, Grace, Next, Round};

use crate::jsonrpc::Id;
use crate::mrtr::Outgoing;
use crate::mrtr::start::STREAM_DEPTH;
use crate::protocol::{ClientRequest, Principal, Reason, Reject};
use crate::route::Route;

/// A call's questions pushed on its stream, and their answers POSTed back.
struct Pushes {
    sessions: Arc<Sessions>,
    session: Arc<Session>,
    /// The call's stream: its notifications, questions and final answer.
    tx: mpsc::Sender<Outgoing>,
    /// Cancelled by `notifications/cancelled`, `DELETE` or shutdown.
    ended: CancellationToken,
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
    let call = Call {
        gw,
        route,
        principal,
        template: (*req).clone(),
    };
    let next = match Next::of(call.dispatch(req, verified).await) {
        Next::Done(done) => return Reply::Json(final_for_2025(done)),
        next => next,
    };
    let id = call.template.id.clone();
    let (tx, mut out) = mpsc::channel(STREAM_DEPTH);
    tokio::spawn(Box::pin(async move {
        let _guard = guard;
        let pushes = Pushes {
            sessions: call.gw.sessions.clone(),
            session,
            tx,
            ended: _guard.token.clone(),
        };
        call.drive(&pushes, next).await;
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

impl Answers for Pushes {
    type Stop = Abandoned;

    async fn interrupted(&self) -> Abandoned {
        tokio::select! {
            () = self.tx.closed() => {}
            () = self.ended.cancelled() => {}
        }
        Abandoned::Gone
    }

    async fn notify(&self, notification: Value) -> Result<(), Abandoned> {
        self.tx
            .send(Outgoing::Notification(notification))
            .await
            .map_err(|_| Abandoned::Gone)
    }

    /// Pushes a round's questions and waits for every answer.
    async fn gather(&self, call: &Call, round: &Round) -> Result<Map<String, Value>, Abandoned> {
        let mut waiting: Vec<(&str, &Value, Expected)> = Vec::with_capacity(round.requests.len());
        for (key, request) in &round.requests {
            let expected = self.sessions.expect(&self.session);
            let pushed = shape::push(&expected.id, request, &self.session.version);
            self.notify(pushed).await?;
            waiting.push((key, request, expected));
        }
        let ttl = call.gw.engine.ttl;
        let deadline = tokio::time::sleep(ttl);
        tokio::pin!(deadline);
        let mut answers = Map::new();
        for (key, request, expected) in &mut waiting {
            let answer = tokio::select! {
                a = &mut expected.rx => a,
                () = &mut deadline => return Err(Abandoned::Expired(ttl)),
                why = self.interrupted() => return Err(why),
            };
            match answer {
                Ok(Ok(result)) => {
                    answers.insert((*key).to_owned(), result);
                }
                Ok(Err(error)) => match rounds::answer_to_error(request) {
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

    async fn answer(&self, _call: &Call, out: Outgoing) {
        let _ = self.tx.send(final_for_2025(out)).await;
    }

    async fn fail(&self, call: &Call, reject: Reject) {
        let out = Outgoing::reject(Some(&call.template.id), &reject);
        let _ = self.tx.send(out).await;
    }

    /// The client hears why the call ends, if it still listens (the driver
    /// then tells the server `cancel`).
    async fn stop(&self, call: &Call, why: Abandoned) {
        let reject = match why {
            Abandoned::Gone => return,
            Abandoned::Expired(ttl) => Reject::new(
                Reason::OperationExpired,
                format!(
                    "nobody answered the question within {}s ([mrtr] ttl); the server was told `cancel`",
                    ttl.as_secs()
                ),
            ),
            Abandoned::ClientError { method, message } => Reject::new(
                Reason::MalformedInputResponse,
                format!("the client answered `{method}` with an error ({message}); the call ends"),
            ),
        };
        self.fail(call, reject).await;
    }

    /// Bounded: the server's answer to a cancelled call is nobody's, and
    /// the engine's own TTL ends whatever is still waiting then.
    fn grace(&self, call: &Call) -> Grace {
        Grace::FirstOutput(call.gw.engine.ttl)
    }
}

/// A final answer for a 2025-era client: without what 2026-07-28 adds
/// (`shape::final_body`), and its HTTP status: a JSON-RPC error is a 200
/// with the error in the body, as 2025-era servers answer (a client that
/// meets a 4xx reports the HTTP status and loses the error), except where
/// the status tells the client when to come back (429, 503).
fn final_for_2025(out: Outgoing) -> Outgoing {
    let Outgoing::Final {
        status,
        body,
        outcome,
    } = out
    else {
        return out;
    };
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::mrtr::outgoing::{Body, Outcome};

    fn answered(status: StatusCode) -> StatusCode {
        let reject = Reject::new(Reason::RateLimited, "slow down");
        let out = Outgoing::Final {
            status,
            body: Body::Json(reject.response(Some(&Id::Number(1)))),
            outcome: Outcome::Error(reject.reason),
        };
        match final_for_2025(out) {
            Outgoing::Final { status, .. } => status,
            Outgoing::Notification(_) => panic!("a final answer stays final"),
        }
    }

    #[test]
    fn an_error_is_a_200_unless_its_status_says_when_to_come_back() {
        assert_eq!(answered(StatusCode::BAD_REQUEST), StatusCode::OK);
        assert_eq!(answered(StatusCode::FORBIDDEN), StatusCode::OK);
        assert_eq!(
            answered(StatusCode::TOO_MANY_REQUESTS),
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(
            answered(StatusCode::SERVICE_UNAVAILABLE),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }

    #[test]
    fn a_final_result_loses_what_2026_adds() {
        let out = Outgoing::Final {
            status: StatusCode::OK,
            body: Body::Json(
                json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "content": []}}),
            ),
            outcome: Outcome::Ok,
        };
        let Outgoing::Final {
            body: Body::Json(v),
            ..
        } = final_for_2025(out)
        else {
            panic!("a JSON answer stays JSON");
        };
        assert_eq!(v["result"], json!({"content": []}));
    }

    #[test]
    fn a_call_is_known_by_its_id_as_cancelled_names_it() {
        assert_eq!(id_key(&Id::Number(7)), "7");
        assert_eq!(id_key(&Id::String("7".into())), "\"7\"");
    }
}
