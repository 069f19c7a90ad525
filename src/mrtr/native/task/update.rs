//! `tasks/update` and `tasks/cancel` on a relayed task. Answers are judged
//! against the server's questions as it has them now (read with a
//! `tasks/get` first, so any replica judges them alike): each held to the
//! policy as a native call's MRTR answers are (shape, field rules, CEL
//! authz, model-owned fields); the valid ones reach the server under its
//! own keys, an invalid one never does: it is asked again with a red mark
//! under a new key. Keys that are not outstanding are ignored (ext-tasks
//! "Task Update Requests": a server "SHOULD ignore any `inputResponses`
//! responses mapped to a key that is not currently outstanding").

use serde_json::{Map, Value, json};

use super::read::Guarded;
use super::{Ended, Heard, Mark, Relay, error_value, fresh_key};
use crate::mrtr::convert::{self, Question};
use crate::mrtr::operation::questions::{Checked, check_answer};
use crate::mrtr::outgoing::Outgoing;
use crate::policy::answer::Subject;
use crate::protocol::{Method, Reason, Reject};
use crate::telemetry::audit::Outcome;

/// One answer, judged.
enum Judged {
    Deliver(String, Value),
    Reask(String, Mark),
    /// The task ends; the server's key of the question that ended it.
    End(String, Ended, &'static str),
}

impl Relay<'_> {
    pub(super) async fn update(&self) -> Outgoing {
        let responses = match self.req.params.get("inputResponses") {
            Some(Value::Object(r)) => r.clone(),
            _ => {
                return Outgoing::reject(
                    Some(&self.req.id),
                    &Reject::new(
                        Reason::MalformedInputResponse,
                        "`params.inputResponses` must be an object of answers by inputRequests key",
                    ),
                );
            }
        };
        // ext-tasks "Task Update Requests": "On success, the server MUST
        // acknowledge the request with an empty result"; on a task that
        // ended no key is outstanding.
        if self.ended().is_some() {
            return self.ack();
        }
        let outstanding = match self.upstream(Method::TasksGet, Map::new()).await {
            Heard::Result(task) => match task.get("inputRequests") {
                Some(Value::Object(r))
                    if task.get("status").and_then(Value::as_str) == Some("input_required") =>
                {
                    r.clone()
                }
                _ => return self.ack(),
            },
            other => return self.relay_failure(other),
        };
        // Only questions the guard passed take answers: one the client
        // answers before any read (or that appeared since its last read)
        // is guarded here first.
        let shown = match self.guard(&outstanding).await {
            Guarded::Ask(shown) => shown,
            Guarded::End(ended, outcome) => {
                self.end(ended, outcome).await;
                return self.ack();
            }
        };
        // Every answer well-formed before any is judged (and audited): a
        // malformed one refuses the whole update, and nothing of it counts.
        let mut answers = Vec::new();
        for (key, given) in &responses {
            if !shown.contains_key(key) {
                continue;
            }
            let Some((server_key, q)) = self.question(key, &outstanding) else {
                continue;
            };
            match convert::answer(&q, given) {
                Ok(answer) => answers.push((server_key, q, answer)),
                Err(e) => {
                    let r = Reject::new(Reason::MalformedInputResponse, e.to_string())
                        .with("key", key.clone());
                    return Outgoing::reject(Some(&self.req.id), &r);
                }
            }
        }
        let mut deliver = Map::new();
        for (server_key, q, answer) in answers {
            match self.judge(server_key, q, answer, &outstanding) {
                Judged::Deliver(key, answer) => {
                    deliver.insert(key, answer);
                }
                Judged::Reask(key, mark) => {
                    let mut state = self.task.state();
                    state.used.insert(mark.key.clone());
                    state.marks.insert(key, mark);
                }
                Judged::End(key, ended, outcome) => {
                    // Audited with its verdict already: not again as
                    // unanswered when the task ends. Nothing of this update
                    // reaches the server.
                    self.task.state().answered.insert(key);
                    self.end(ended, outcome).await;
                    return self.ack();
                }
            }
        }
        if !deliver.is_empty() {
            let superseded: Vec<(String, Mark)> = {
                let mut state = self.task.state();
                deliver
                    .keys()
                    .filter_map(|key| {
                        state.answered.insert(key.clone());
                        state.marks.remove(key).map(|m| (key.clone(), m))
                    })
                    .collect()
            };
            let keys: Vec<String> = deliver.keys().cloned().collect();
            let mut extra = Map::new();
            extra.insert("inputResponses".into(), Value::Object(deliver));
            if let failure @ (Heard::Error(_) | Heard::Unreached(_)) =
                self.upstream(Method::TasksUpdate, extra).await
            {
                // Not delivered: the questions stay open as they were, so
                // the client can answer them again.
                let mut state = self.task.state();
                for key in keys {
                    state.answered.remove(&key);
                }
                state.marks.extend(superseded);
                return self.relay_failure(failure);
            }
        }
        self.ack()
    }

    /// The server's key and question a key the client answered stands for,
    /// when it is outstanding: a red-marked question answers under its new
    /// key only (the key it replaced is superseded).
    fn question(
        &self,
        shown: &str,
        outstanding: &Map<String, Value>,
    ) -> Option<(String, Question)> {
        let state = self.task.state();
        let (server_key, reasks) = match state.marks.iter().find(|(_, m)| m.key == shown) {
            Some((server_key, mark)) => (server_key.clone(), mark.reasks),
            None if state.marks.contains_key(shown) || state.answered.contains(shown) => {
                return None;
            }
            None => (shown.to_owned(), 0),
        };
        let original = outstanding.get(&server_key)?;
        // Judged against the server's question; the red mark only changes
        // its message.
        let mut q = convert::input_request(&server_key, original)?;
        // As the client was shown it (`guard`): narrowed, so a red-marked
        // question is asked again in the same narrowed form.
        let policy = self.route.policy.current();
        if q.kind == convert::Kind::Elicitation && !q.url_mode {
            q.shape(
                self.route
                    .shape_questions
                    .then(|| policy.shaping(&self.task.target))
                    .flatten(),
            );
        }
        q.reasks = reasks;
        q.base_message = original
            .pointer("/params/message")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Some((server_key, q))
    }

    fn judge(
        &self,
        server_key: String,
        q: Question,
        answer: Value,
        outstanding: &Map<String, Value>,
    ) -> Judged {
        let policy = self.route.policy.current();
        let subject = Subject {
            principal: self.principal,
            tool: &self.task.target,
            arguments: &self.task.arguments,
        };
        let asked_at = self.task.state().seen.get(&server_key).map(|s| s.at);
        match check_answer(&policy, &subject, &q, answer) {
            Checked::Deliver(answer) => {
                let outcome = match answer.get("action").and_then(Value::as_str) {
                    Some("decline") => Outcome::Declined,
                    Some("cancel") => Outcome::Cancelled,
                    _ => Outcome::Accepted,
                };
                self.audit(&q, outcome, "ok", asked_at, Some(&answer), None);
                Judged::Deliver(server_key, answer)
            }
            Checked::Reask { field, rule, mark } => {
                self.engine.metrics.record_policy_rejection(
                    &self.route.name,
                    &self.task.target,
                    "policy_invalid_answer",
                );
                tracing::info!(operation = %self.task.operation, key = %server_key, field = %field, rule = %rule, "a task answer broke a rule; asking again with a red mark");
                self.audit(
                    &q,
                    Outcome::Invalid,
                    "policy_invalid_answer",
                    asked_at,
                    None,
                    Some(&rule),
                );
                let mut marked = q;
                marked.mark(&mark);
                let key = {
                    let state = self.task.state();
                    fresh_key(&server_key, &state.used, outstanding)
                };
                Judged::Reask(
                    server_key,
                    Mark {
                        key,
                        reasks: marked.reasks,
                        request: marked.request(),
                    },
                )
            }
            Checked::End(ending) => {
                let (outcome, verdict) = ending.question_verdict();
                self.audit(&q, outcome, verdict, asked_at, None, None);
                let r = ending.reject().unwrap_or_else(|| {
                    Reject::new(Reason::PolicyInvalidAnswer, "the answer was refused")
                });
                Judged::End(
                    server_key,
                    Ended::Failed {
                        message: r.message.clone(),
                        error: error_value(&r),
                    },
                    "failed",
                )
            }
        }
    }

    pub(super) async fn cancel(&self) -> Outgoing {
        // ext-tasks "Task Cancellation": "the server MUST acknowledge the
        // request with an empty result"; a task redmark already ended was
        // cancelled at the server then.
        if self.ended().is_some() {
            return self.ack();
        }
        match self.upstream(Method::TasksCancel, Map::new()).await {
            Heard::Result(_) => {
                // Counted as the client ended it (as a gateway-made task
                // is), though the server may still finish it: a client
                // need not poll a task it cancelled.
                self.finished("cancelled");
                Outgoing::result(&self.req.id, json!({"resultType": "complete"}))
            }
            other => self.relay_failure(other),
        }
    }
}
