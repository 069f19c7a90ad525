//! A task's driver: the call driven by `front::rounds` (the loop it shares
//! with a 2025-era client's call), with each `input_required` round turned
//! into the task's `inputRequests`, and each complete set of `tasks/update`
//! answers sent back as the call's retry. The engine judges those answers
//! exactly as it judges an MRTR retry's (schema, field rules, CEL authz,
//! model-owned fields): an invalid one comes back as the next round, with
//! its red mark, and never reaches the server.
//!
//! Endings: the server's final result makes the task `completed` (an
//! `isError: true` result too), a JSON-RPC error `failed`; `tasks/cancel`
//! and the task's TTL end the call, and the server hears `cancel` for every
//! question still open (and `notifications/cancelled` for a call still
//! running, as the engine says it when nobody listens any more).

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::task::{Status, Task};
use crate::front::Gateway;
use crate::front::rounds::{Answers, Call, Grace, Round};
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

/// A task's side of the call: its questions and `tasks/update` answers.
struct TaskAnswers {
    task: Arc<Task>,
    deadline: Instant,
    early: mpsc::Sender<Early>,
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
        let call = Call {
            gw: self.gw,
            route: self.route,
            principal: self.principal,
            template: self.template,
        };
        let answers = TaskAnswers {
            task: self.task,
            deadline: self.deadline,
            early: self.early,
        };
        call.run(&answers, first).await;
    }
}

impl Answers for TaskAnswers {
    type Stop = Stop;

    async fn interrupted(&self) -> Stop {
        tokio::select! {
            () = self.task.cancel.cancelled() => Stop::Cancelled,
            () = tokio::time::sleep_until(self.deadline) => Stop::Expired,
        }
    }

    /// ext-tasks: "`notifications/progress` and `notifications/message`
    /// ... are not supported on tasks": the engine's are dropped.
    async fn notify(&self, _notification: Value) -> Result<(), Stop> {
        Ok(())
    }

    /// Makes the round the task's questions, and waits until `tasks/update`
    /// has answered every one.
    async fn gather(&self, call: &Call, round: &Round) -> Result<Map<String, Value>, Stop> {
        self.task.ask(&round.requests);
        if !self.task.handed_out() {
            let _ = self.early.send(Early::Asked).await;
        }
        let round_deadline = Instant::now() + call.gw.engine.ttl;
        loop {
            let answered = self.task.answered.notified();
            if let Some(answers) = self.task.answers() {
                return Ok(answers);
            }
            tokio::select! {
                () = answered => {}
                why = self.interrupted() => return Err(why),
                () = tokio::time::sleep_until(round_deadline) => return Err(Stop::RoundExpired),
            }
        }
    }

    /// The call's final answer: the task's result or error, or, when the
    /// task was never handed out, the answer itself for the request.
    async fn answer(&self, call: &Call, out: Outgoing) {
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
                super::account(&call.gw, &self.task, status.as_str());
            }
            return;
        }
        // Never handed out: the request that started it answers plainly.
        call.gw.tasks.remove(&self.task.id);
        let _ = self.early.send(Early::Done(out)).await;
    }

    /// The task fails with the refusal as its error.
    async fn fail(&self, call: &Call, reject: Reject) {
        self.answer(call, Outgoing::reject(Some(&call.template.id), &reject))
            .await;
    }

    /// Ends a task the client cancelled or nobody finished in time (the
    /// driver then tells the server `cancel` for every question still open).
    async fn stop(&self, call: &Call, why: Stop) {
        let (ended, outcome) = match why {
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
                let ttl = call.gw.engine.ttl.as_secs();
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
            super::account(&call.gw, &self.task, outcome);
        }
    }

    /// The task is over either way; a server that goes on past the grace
    /// is cancelled.
    fn grace(&self, _call: &Call) -> Grace {
        Grace::Final(CANCEL_GRACE)
    }
}

/// A refusal as the JSON-RPC error object a failed task carries.
pub fn error_of(reject: &Reject) -> Value {
    serde_json::to_value(reject.error_object()).unwrap_or(Value::Null)
}
