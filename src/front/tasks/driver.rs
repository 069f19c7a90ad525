//! A task's driver: the call made through the same engine, policy and
//! audit as any call (`front::dispatch`), each `input_required` round
//! turned into the task's `inputRequests`, and each complete set of
//! `tasks/update` answers sent back as the call's retry. The engine judges
//! those answers exactly as it judges an MRTR retry's (schema, field rules,
//! CEL authz, model-owned fields): an invalid one comes back as the next
//! round, with its red mark, and never reaches the server.
//!
//! Endings: the server's final result makes the task `completed` (an
//! `isError: true` result too), a JSON-RPC error `failed`; `tasks/cancel`
//! and the task's TTL end the call, and the server hears `cancel` for every
//! question still open (and `notifications/cancelled` for a call still
//! running, as the engine says it when nobody listens any more).
//!
//! This mirrors the 2025-era driver (`era2025::call`), whose answers come
//! from a session's stream instead.

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::task::{Status, Task};
use crate::front::Gateway;
use crate::front::dispatch::{self, Reply};
use crate::front::era2025::shape::{self, Round};
use crate::mrtr::Outgoing;
use crate::protocol::{ClientRequest, Principal, Reason, Reject};
use crate::route::Route;

/// How long a server told `cancel` has to end the call itself before it is
/// cancelled (`notifications/cancelled`): the task is over either way.
const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// What the driver tells the request that started the task, until it was
/// handed out: a question came (make it a task now), or the call's answer.
pub enum Early {
    Asked,
    Done(Outgoing),
}

pub struct Driver {
    pub gw: Arc<Gateway>,
    pub route: Arc<Route>,
    pub principal: Principal,
    /// The call as first sent: each retry is this plus a round's answers.
    pub template: ClientRequest,
    pub task: Arc<Task>,
    pub deadline: Instant,
    pub early: mpsc::Sender<Early>,
}

/// What the call waits for next.
enum Next {
    Round(Round),
    Stream(mpsc::Receiver<Outgoing>),
    Done(Outgoing),
}

/// Why the driver stopped waiting.
enum Stop {
    Cancelled,
    /// The task's TTL ran out.
    Expired,
    /// A round was not answered within `[mrtr] ttl`: the engine holds the
    /// server's call no longer than that.
    RoundExpired,
}

impl Driver {
    pub async fn run(self, first: Box<ClientRequest>) {
        let mut next = match self.call(first).await {
            Ok(reply) => Next::of(reply),
            Err(stop) => return self.stopped(stop, None),
        };
        loop {
            let round = match next {
                Next::Done(out) => return self.end(out).await,
                Next::Round(round) => round,
                Next::Stream(rx) => match self.relay(rx).await {
                    Ok(Next::Round(round)) => round,
                    Ok(Next::Done(out)) => return self.end(out).await,
                    Ok(Next::Stream(_)) => return,
                    Err(stop) => return self.stopped(stop, None),
                },
            };
            self.task.ask(&round.requests);
            if !self.task.handed_out() {
                let _ = self.early.send(Early::Asked).await;
            }
            let answers = match self.gather().await {
                Ok(answers) => answers,
                Err(stop) => return self.stopped(stop, Some(&round)),
            };
            let Some(state) = round.state else {
                if self.task.finish(
                    Status::Failed,
                    Some(error_of(&Reject::new(
                        Reason::UpstreamIncompatible,
                        "the server asked for input without a requestState to retry with",
                    ))),
                    None,
                ) {
                    super::account(&self.gw, &self.task, "failed");
                }
                return;
            };
            let retry = self.template.retried_with(answers, state);
            next = match self.call(Box::new(retry)).await {
                Ok(reply) => Next::of(reply),
                Err(stop) => return self.stopped(stop, None),
            };
        }
    }

    /// The call (or a retry) until its first output, unless the task is
    /// cancelled or its TTL runs out first: then the call is dropped, and
    /// the engine, hearing nobody listens, cancels the server's call
    /// (`notifications/cancelled`).
    async fn call(&self, req: Box<ClientRequest>) -> Result<Reply, Stop> {
        let call = dispatch::dispatch(
            &self.gw,
            self.route.clone(),
            self.principal.clone(),
            req,
            None,
        );
        tokio::select! {
            reply = call => Ok(reply),
            () = self.task.cancel.cancelled() => Err(Stop::Cancelled),
            () = tokio::time::sleep_until(self.deadline) => Err(Stop::Expired),
        }
    }

    /// The engine's stream until its final answer; its notifications are
    /// not for a task (ext-tasks: "`notifications/progress` and
    /// `notifications/message` ... are not supported on tasks").
    async fn relay(&self, mut rx: mpsc::Receiver<Outgoing>) -> Result<Next, Stop> {
        loop {
            let out = tokio::select! {
                out = rx.recv() => out,
                () = self.task.cancel.cancelled() => return Err(Stop::Cancelled),
                () = tokio::time::sleep_until(self.deadline) => return Err(Stop::Expired),
            };
            match out {
                Some(Outgoing::Notification(_)) => {}
                Some(done @ Outgoing::Final { .. }) => return Ok(Next::of(Reply::Json(done))),
                None => {
                    return Ok(Next::Done(Outgoing::reject(
                        Some(&self.template.id),
                        &Reject::new(
                            Reason::InternalError,
                            "the operation ended without an answer",
                        ),
                    )));
                }
            }
        }
    }

    /// Waits until `tasks/update` has answered every question of the round.
    async fn gather(&self) -> Result<Map<String, Value>, Stop> {
        let round_deadline = Instant::now() + self.gw.engine.ttl;
        loop {
            let answered = self.task.answered.notified();
            if let Some(answers) = self.task.answers() {
                return Ok(answers);
            }
            tokio::select! {
                () = answered => {}
                () = self.task.cancel.cancelled() => return Err(Stop::Cancelled),
                () = tokio::time::sleep_until(self.deadline) => return Err(Stop::Expired),
                () = tokio::time::sleep_until(round_deadline) => return Err(Stop::RoundExpired),
            }
        }
    }

    /// The call's final answer: the task's result or error, or, when the
    /// task was never handed out, the answer itself for the request.
    async fn end(&self, out: Outgoing) {
        let Outgoing::Final { ref body, .. } = out else {
            return;
        };
        let response = serde_json::to_value(body).unwrap_or(Value::Null);
        let (status, payload) = match (response.get("result"), response.get("error")) {
            (Some(result), _) => (Status::Completed, result.clone()),
            (None, Some(error)) => (Status::Failed, error.clone()),
            (None, None) => (
                Status::Failed,
                error_of(&Reject::new(
                    Reason::InternalError,
                    "the call ended without an answer",
                )),
            ),
        };
        let settled = self.task.settle(status, payload);
        if settled.handed_out {
            if settled.ended {
                super::account(&self.gw, &self.task, status.as_str());
            }
            return;
        }
        // Never handed out: the request that started it answers plainly.
        self.gw.tasks.remove(&self.task.id);
        let _ = self.early.send(Early::Done(out)).await;
    }

    /// Ends a task the client cancelled or nobody finished in time: the
    /// server hears `cancel` for every question still open.
    fn stopped(&self, stop: Stop, round: Option<&Round>) {
        let (ended, outcome) = match stop {
            // `tasks/cancel` already marked it cancelled (and accounted it).
            Stop::Cancelled => (self.task.finish(Status::Cancelled, None, None), "cancelled"),
            Stop::Expired => {
                let ttl = self.task.ttl.as_secs();
                let ended = self.task.finish(
                    Status::Failed,
                    Some(error_of(&Reject::new(
                        Reason::OperationExpired,
                        format!(
                            "the task did not finish within its ttl ({ttl}s, [route.tasks] ttl); the server was told `cancel`"
                        ),
                    ))),
                    Some(format!("expired after {ttl}s")),
                );
                (ended, "expired")
            }
            Stop::RoundExpired => {
                let ttl = self.gw.engine.ttl.as_secs();
                let ended = self.task.finish(
                    Status::Failed,
                    Some(error_of(&Reject::new(
                        Reason::OperationExpired,
                        format!(
                            "nobody answered the task's inputRequests within {ttl}s ([mrtr] ttl, how long the server's call is held for an answer); the server was told `cancel`"
                        ),
                    ))),
                    Some(format!("unanswered for {ttl}s")),
                );
                (ended, "expired")
            }
        };
        if ended {
            super::account(&self.gw, &self.task, outcome);
        }
        let Some(round) = round else {
            // The call's stream is dropped with the driver: the engine
            // hears nobody listens and cancels the server's call.
            return;
        };
        let Some(retry) = round.cancel_retry(&self.template) else {
            return;
        };
        let (gw, route, principal) = (self.gw.clone(), self.route.clone(), self.principal.clone());
        // What the server answers a cancelled call is nobody's. A server
        // that goes on past the grace is cancelled: dropping the retry's
        // answer tells the engine nobody listens, and it sends
        // `notifications/cancelled`.
        tokio::spawn(async move {
            let reply = tokio::time::timeout(
                CANCEL_GRACE,
                dispatch::dispatch(&gw, route, principal, Box::new(retry), None),
            )
            .await;
            if let Ok(Reply::Stream { mut rx, .. }) = reply {
                let _ = tokio::time::timeout(CANCEL_GRACE, async {
                    while let Some(out) = rx.recv().await {
                        if matches!(out, Outgoing::Final { .. }) {
                            break;
                        }
                    }
                })
                .await;
            }
        });
    }
}

impl Next {
    fn of(reply: Reply) -> Next {
        match reply {
            Reply::Json(Outgoing::Final {
                status,
                body,
                outcome,
            }) => match shape::round(&body) {
                Some(round) => Next::Round(round),
                None => Next::Done(Outgoing::Final {
                    status,
                    body,
                    outcome,
                }),
            },
            Reply::Json(Outgoing::Notification(_)) => Next::Stream(mpsc::channel(1).1),
            Reply::Stream { rx, .. } => Next::Stream(rx),
        }
    }
}

/// A refusal as the JSON-RPC error object a failed task carries.
pub fn error_of(reject: &Reject) -> Value {
    serde_json::to_value(reject.error_object()).unwrap_or(Value::Null)
}
