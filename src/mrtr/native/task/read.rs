//! `tasks/get` on a relayed task: the server's task as it reads, under the
//! wrapped id, its TTL no longer than the route allows, and its questions
//! guarded before the client sees any of them (policy, the client's
//! declared capabilities, declines on the user's behalf), each guarded
//! once; a question redmark asked again shows under its new key with its
//! red mark. A task redmark itself ended reads as it ended it.

use serde_json::{Map, Value, json};

use super::{Ended, EndedAt, Heard, Relay, Seen, error_value};
use crate::mrtr::ending::{Ending, model_owned_result};
use crate::mrtr::native::screen::{Screen, Screened};
use crate::mrtr::outgoing::Outgoing;
use crate::protocol::{Method, Reason, Reject};
use crate::telemetry::audit::Outcome;

/// What the guard made of the server's current questions.
pub(super) enum Guarded {
    /// The questions the client sees, by the key it sees.
    Ask(Map<String, Value>),
    /// The task ends here, as redmark says.
    End(Ended, &'static str),
}

impl Relay<'_> {
    pub(super) async fn read(&self) -> Outgoing {
        if let Some(ended) = self.ended() {
            return Outgoing::result(&self.req.id, self.ended_read(&ended));
        }
        let mut task = match self.upstream(Method::TasksGet, Map::new()).await {
            Heard::Result(Value::Object(task)) => task,
            Heard::Result(_) => {
                let r = Reject::new(
                    Reason::UpstreamInvalidResult,
                    "the server answered tasks/get with something other than a task",
                );
                return Outgoing::reject(Some(&self.req.id), &r);
            }
            other => return self.relay_failure(other),
        };
        let status = task
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        // A server's own state reaches a client only sealed in redmark's.
        task.remove("requestState");
        task.insert("resultType".into(), "complete".into());
        task.insert("taskId".into(), Value::String(self.task.id.clone()));
        task.insert("ttlMs".into(), json!(self.sealed.t));
        match status.as_str() {
            "completed" | "failed" | "cancelled" => {
                task.remove("inputRequests");
                self.finished(&status);
            }
            "input_required" => {
                let requests = match task.remove("inputRequests") {
                    Some(Value::Object(r)) => r,
                    _ => Map::new(),
                };
                match self.guard(&requests).await {
                    Guarded::Ask(shown) if shown.is_empty() => {
                        // Every question was answered on the user's behalf:
                        // the task works on.
                        task.insert("status".into(), "working".into());
                    }
                    Guarded::Ask(shown) => {
                        task.insert("inputRequests".into(), Value::Object(shown));
                    }
                    Guarded::End(ended, outcome) => {
                        self.end(ended, outcome).await;
                        if let Some(ended) = self.ended() {
                            return Outgoing::result(&self.req.id, self.ended_read(&ended));
                        }
                    }
                }
            }
            _ => {
                task.remove("inputRequests");
            }
        }
        Outgoing::result(&self.req.id, Value::Object(task))
    }

    pub(super) fn ended(&self) -> Option<EndedAt> {
        self.task.state().ended.clone()
    }

    /// How a task redmark ended reads.
    fn ended_read(&self, ended: &EndedAt) -> Value {
        let mut read = match &ended.ended {
            Ended::Failed { message, error } => {
                self.sealed
                    .failed_read(&self.task.id, message.clone(), error.clone())
            }
            Ended::Completed { result } => {
                let mut read = self
                    .sealed
                    .failed_read(&self.task.id, String::new(), Value::Null);
                if let Some(o) = read.as_object_mut() {
                    o.remove("error");
                    o.remove("statusMessage");
                    o.insert("status".into(), "completed".into());
                    o.insert("result".into(), result.clone());
                }
                read
            }
        };
        let at = humantime::format_rfc3339_millis(ended.at).to_string();
        read["lastUpdatedAt"] = Value::String(at);
        read
    }

    /// Guards the server's current questions and says how the client sees
    /// them (by the key it sees): each new question guarded once (and
    /// audited if refused), a red-marked one under its new key, the ones
    /// answered through redmark hidden while the server catches up. Used by
    /// `tasks/get` and, before judging answers, by `tasks/update`: no answer
    /// is taken for a question the guard has not passed.
    pub(super) async fn guard(&self, requests: &Map<String, Value>) -> Guarded {
        let policy = self.route.policy.current();
        let now = self.engine.clock.unix_now_ms();
        let screen = Screen {
            policy: &policy,
            target: &self.task.target,
            profile: &self.req.ctx.profile,
            on_missing_capability: self.route.on_missing_capability,
            operation: &self.task.operation,
            trace_id: None,
        };
        // The client sees each form narrowed by the policy (`shape_questions`).
        let rules = self
            .route
            .shape_questions
            .then(|| policy.shaping(&self.task.target))
            .flatten();
        let mut shown = Map::new();
        // Declined on the user's behalf (`on_missing_capability = "decline"`).
        let mut declined = Map::new();
        let mut verdict = None;
        {
            let mut state = self.task.state();
            for (key, request) in requests {
                // ext-tasks "Task Update Requests": a server "MUST NOT use the
                // same key to refer to two distinct requests over a task's
                // lifetime". A question changed under a key the guard passed
                // would reach the client unguarded: the task ends instead.
                // So does a key of the server's that is one redmark gave a
                // red-marked question: answers to it would be ambiguous.
                let reused = state.seen.get(key).is_some_and(|s| s.request != *request);
                let taken = state.marks.values().any(|m| m.key == *key);
                if reused || taken {
                    let r = Reject::new(
                        Reason::UpstreamInvalidResult,
                        format!(
                            "the server used inputRequests key `{}` for a second request; keys are unique over a task's life",
                            key.chars().take(64).collect::<String>()
                        ),
                    )
                    .with("key", key.clone());
                    verdict = Some(failed(&r, "failed"));
                    break;
                }
                if let Some(mark) = state.marks.get(key) {
                    shown.insert(mark.key.clone(), mark.request.clone());
                    continue;
                }
                if !state.seen.contains_key(key) {
                    state.asked += 1;
                    let seen = Seen {
                        at: now,
                        request: request.clone(),
                    };
                    match screen.screen(key, request, state.asked) {
                        Screened::Ask(_) => {
                            state.seen.insert(key.clone(), seen);
                        }
                        Screened::Decline(q) => {
                            let why = Reason::MissingCapability.as_str();
                            self.audit(&q, Outcome::Refused, why, None, None, None);
                            state.seen.insert(key.clone(), seen);
                            state.answered.insert(key.clone());
                            declined.insert(key.clone(), json!({"action": "decline"}));
                            continue;
                        }
                        Screened::Refused {
                            question,
                            verdict: why,
                            ending,
                        } => {
                            self.audit(&question, Outcome::Refused, why, None, None, None);
                            verdict = match ending {
                                Ending::ModelOwned { guidance, .. } => {
                                    let result = model_owned_result(&guidance);
                                    Some((Ended::Completed { result }, "completed"))
                                }
                                other => other.reject().map(|r| failed(&r, "failed")),
                            };
                            break;
                        }
                        Screened::NotRelayed(r) => {
                            verdict = Some(failed(&r, "failed"));
                            break;
                        }
                    }
                }
                if declined.contains_key(key) || state.answered.contains(key) {
                    continue;
                }
                state.used.insert(key.clone());
                shown.insert(key.clone(), crate::policy::shape::request(request, rules));
            }
        }
        if let Some((ended, outcome)) = verdict {
            return Guarded::End(ended, outcome);
        }
        if !declined.is_empty() {
            let keys: Vec<String> = declined.keys().cloned().collect();
            let mut extra = Map::new();
            extra.insert("inputResponses".into(), Value::Object(declined));
            if let failure @ (Heard::Error(_) | Heard::Unreached(_)) =
                self.upstream(Method::TasksUpdate, extra).await
            {
                tracing::warn!(operation = %self.task.operation, "the server did not take redmark's declines, which are sent again at the next read: {}", describe(&failure));
                // Not taken: the next read declines them again.
                let mut state = self.task.state();
                for key in keys {
                    state.seen.remove(&key);
                    state.answered.remove(&key);
                    state.asked = state.asked.saturating_sub(1);
                }
            }
        }
        Guarded::Ask(shown)
    }
}

/// A task failed with redmark's error `r`.
fn failed(r: &Reject, outcome: &'static str) -> (Ended, &'static str) {
    (
        Ended::Failed {
            message: r.message.clone(),
            error: error_value(r),
        },
        outcome,
    )
}

fn describe(heard: &Heard) -> String {
    match heard {
        Heard::Error(e) => format!("{} ({})", e.message, e.code),
        Heard::Unreached(r) => r.message.clone(),
        Heard::Result(_) => "ok".into(),
    }
}
