//! The questions of an operation: each push is guarded by the policy before
//! any client sees it, and each answer is checked (shape, then policy)
//! before the server sees it; invalid answers go back with a red mark.

use serde_json::{Map, Value, json};

use super::replay::Replayed;
use super::{Client, Operation};
use crate::config::MissingCapability;
use crate::jsonrpc::{ErrorObject, Id, code};
use crate::mrtr::account::{Answered, Asker};
use crate::mrtr::convert::{self, Kind, Question};
use crate::mrtr::ending::Ending;
use crate::mrtr::outgoing::Outgoing;
use crate::mrtr::resume::{late_answer, replayed};
use crate::mrtr::table::Resume;
use crate::policy::answer::{Judgement, Subject, judge};
use crate::policy::guard::{self, Verdict};
use crate::policy::{OnInvalid, OnRefused};
use crate::protocol::{Reason, Reject, RequestContext};
use crate::telemetry::audit::Outcome;

/// What a retry did to the operation.
pub(super) enum Resumed {
    /// Refused with an error; the operation is untouched.
    Refused,
    /// Its answers were delivered; the operation goes on with this client attached.
    Continue(Box<Client>),
    /// Its answers end the operation (a policy said no for good).
    End(Ending, Box<Client>),
}

/// A policy's view of one answer.
pub(crate) enum Checked {
    Deliver(Value),
    /// Ask again with this red mark.
    Reask {
        field: String,
        rule: String,
        mark: String,
    },
    End(Ending),
}

impl Operation {
    /// A request the server pushed. Returns an ending when the operation cannot go on.
    pub(super) async fn on_push(
        &mut self,
        ctx: &RequestContext,
        id: Id,
        method: &str,
        params: Option<Value>,
    ) -> Option<Ending> {
        // Only replay mode compares fingerprints (a collected answer is given
        // again only to the question it was given for), from the params as
        // the server sent them.
        let fingerprint = self.replay.is_some().then(|| match &params {
            Some(p) => crate::mrtr::state::fingerprint(method, p),
            None => crate::mrtr::state::fingerprint(method, &Value::Object(Map::new())),
        });
        let (mut q, params) = match convert::question_and_params(id.clone(), method, params) {
            Ok((mut q, params)) => {
                if let Some(f) = fingerprint {
                    q.fingerprint = f;
                }
                (q, params)
            }
            Err(e) => {
                tracing::info!(operation = %self.id, trace_id = self.trace_id.as_deref(), %method, "upstream pushed a request that is not a question; refused");
                let err = ErrorObject::new(Reason::NotRelayed.code(), e.to_string())
                    .with_data(json!({"reason": Reason::NotRelayed}));
                let _ = self.session.respond(id, Err(err)).await;
                return None;
            }
        };
        q.key = self.namer.next(q.kind);
        self.asked += 1;
        if let Replayed::Again(answer) = self.replayed(&q) {
            tracing::debug!(operation = %self.id, trace_id = self.trace_id.as_deref(), key = %q.key, "answered again from the requestState (replay mode)");
            self.note_outcome(&answer);
            let _ = self.session.respond(q.upstream_id, Ok(answer)).await;
            return None;
        }
        match guard::check(&self.policy, &self.target, method, &params, self.asked) {
            Verdict::Ask => {}
            Verdict::Refuse(r) => {
                tracing::warn!(operation = %self.id, trace_id = self.trace_id.as_deref(), tool = %self.target, key = %q.key, reason = %r.reason, field = r.field.as_deref(), "question refused by policy");
                // A refused question never reaches the client, and the server is not left waiting.
                let answer = match (self.policy.defaults.on_refused, q.kind) {
                    (OnRefused::Decline, Kind::Elicitation) => Ok(json!({"action": "decline"})),
                    _ => Err(ErrorObject::new(
                        code::INVALID_REQUEST,
                        format!("redmark refused this request: {}", r.message),
                    )
                    .with_data(json!({"reason": r.reason}))),
                };
                self.audit(&q, Outcome::Refused, r.reason.as_str(), None, None, None);
                let _ = self.session.respond(q.upstream_id, answer).await;
                return Some(Ending::PolicyRefused {
                    reason: r.reason,
                    field: r.field,
                    message: r.message,
                });
            }
            Verdict::ModelOwned { field, guidance } => {
                tracing::info!(operation = %self.id, trace_id = self.trace_id.as_deref(), tool = %self.target, field = %field, "question for a model-owned value turned into a tool error");
                // Never put to a person: `refused`, so it costs no attention.
                self.audit(
                    &q,
                    Outcome::Refused,
                    Reason::PolicyModelOwned.as_str(),
                    None,
                    None,
                    None,
                );
                let _ = self
                    .session
                    .respond(q.upstream_id, Ok(json!({"action": "cancel"})))
                    .await;
                return Some(Ending::ModelOwned { field, guidance });
            }
        }
        if !convert::covered(&ctx.profile, &q) {
            // spec 2026-07-28 mrtr.mdx "Server Requirements": never send an input
            // request the client has not declared support for.
            if q.kind == Kind::Elicitation
                && self.route.on_missing_capability == MissingCapability::Decline
            {
                tracing::info!(operation = %self.id, trace_id = self.trace_id.as_deref(), key = %q.key, "client lacks the capability; declined on the user's behalf as configured");
                self.declined = true;
                // Never put to a person, so `refused` (no attention in the
                // report), with the reason the server heard a decline.
                let verdict = Reason::MissingCapability.as_str();
                self.audit(&q, Outcome::Refused, verdict, None, None, None);
                let _ = self
                    .session
                    .respond(q.upstream_id, Ok(json!({"action": "decline"})))
                    .await;
                return None;
            }
            let err = ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!("the client did not declare the capability `{method}` needs"),
            )
            .with_data(
                json!({"reason": Reason::MissingCapability, "requiredCapabilities": q.needs.to_value()}),
            );
            let _ = self.session.respond(q.upstream_id.clone(), Err(err)).await;
            let verdict = Reason::MissingCapability.as_str();
            self.audit(&q, Outcome::Refused, verdict, None, None, None);
            return Some(Ending::MissingCapability(q.needs.to_value()));
        }
        if q.kind == Kind::Elicitation && !q.url_mode {
            // Narrowed first: a remembered default is offered only where the
            // narrowed field accepts it.
            q.shape(self.shaping());
            self.offer_remembered(&mut q).await;
        }
        q.span = tracing::info_span!(
            parent: &self.root,
            "question",
            otel.name = %format!("{method} {}", q.key),
            redmark.input.key = %q.key,
            redmark.input.method = %method,
            redmark.answer_ms = tracing::field::Empty,
            redmark.policy.verdict = tracing::field::Empty,
            redmark.outcome = tracing::field::Empty,
        );
        // Replay mode: the retry's answer to the question the last round asked
        // goes through exactly the checks a hold-mode retry's does.
        let retried = self.take_retry_answer(&mut q);
        if let Some(given) = retried.clone().or_else(|| self.advance.remove(&q.key)) {
            match convert::answer(&q, &given).map(|a| self.check(&q, a)) {
                Ok(Checked::Deliver(answer)) => {
                    tracing::info!(operation = %self.id, trace_id = self.trace_id.as_deref(), key = %q.key, retry = retried.is_some(), "answered from inputResponses");
                    self.note_outcome(&answer);
                    self.collect(&q, &answer);
                    self.keep_remembered(&q, &answer).await;
                    self.close_question(&q, outcome_of(&answer), "ok", Some(&answer));
                    let _ = self.session.respond(q.upstream_id, Ok(answer)).await;
                    return None;
                }
                Ok(Checked::Reask { field, rule, mark }) => {
                    self.engine.metrics.record_policy_rejection(
                        &self.route.name,
                        &self.target,
                        "policy_invalid_answer",
                    );
                    tracing::info!(operation = %self.id, trace_id = self.trace_id.as_deref(), key = %q.key, field = %field, rule = %rule, "an answer given in advance broke a rule; asking with a red mark");
                    q.mark(&mark);
                }
                Ok(Checked::End(ending)) if retried.is_some() => {
                    // As a hold-mode retry's: the question ends as invalid or
                    // denied, and the server hears `cancel`.
                    let (outcome, verdict) = ending.question_verdict();
                    self.close_question(&q, outcome, verdict, None);
                    let _ = self
                        .session
                        .respond(q.upstream_id.clone(), convert::abandon(&q, verdict))
                        .await;
                    return Some(ending);
                }
                Ok(Checked::End(ending)) => {
                    self.pending.reserve_exact(1);
                    self.pending.push(q);
                    return Some(ending);
                }
                Err(e) => {
                    tracing::info!(operation = %self.id, trace_id = self.trace_id.as_deref(), error = %e, "an answer given in advance is malformed; asking instead");
                }
            }
        }
        // Exactly: a first push would otherwise reserve four questions'
        // room (over a kilobyte) in every waiting operation.
        self.pending.reserve_exact(1);
        self.pending.push(q);
        None
    }

    /// The field rules that narrow this operation's forms, unless the route
    /// or the tool turned `shape_questions` off.
    fn shaping(&self) -> Option<&foldhash::HashMap<String, crate::policy::FieldRules>> {
        self.route
            .shape_questions
            .then(|| self.policy.shaping(&self.target))
            .flatten()
    }

    /// Holds a well-formed answer to the policy.
    fn check(&self, q: &Question, answer: Value) -> Checked {
        let subject = Subject {
            principal: &self.principal,
            tool: &self.target,
            arguments: self.arguments.value(),
        };
        check_answer(&self.policy, &subject, q, answer)
    }

    /// Ends a question: its span gets the outcome, the answer time is counted,
    /// and the audit log gets one line (field names and outcome, never values).
    pub(super) fn close_question(
        &self,
        q: &Question,
        outcome: Outcome,
        verdict: &str,
        answer: Option<&Value>,
    ) {
        let label = serde_json::to_value(outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        q.span.record("redmark.outcome", label.as_str());
        q.span.record("redmark.policy.verdict", verdict);
        let answer_ms = answer.map(|_| {
            let elapsed = q.asked_at.elapsed();
            q.span.record(
                "redmark.answer_ms",
                i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
            );
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        });
        self.audit(q, outcome, verdict, answer_ms, answer, None);
        self.log_values(q, answer);
    }

    /// Values are user data: only fields a policy marks `log_value = true` are
    /// recorded, as events on the question's span (and so in the log).
    fn log_values(&self, q: &Question, answer: Option<&Value>) {
        let Some(rules) = self.policy.tool(&self.target).map(|t| &t.fields) else {
            return;
        };
        let Some(content) = answer
            .and_then(|a| a.get("content"))
            .and_then(Value::as_object)
        else {
            return;
        };
        for (field, value) in content {
            if rules.get(field).is_some_and(|r| r.log_value) {
                tracing::info!(parent: &q.span, operation = %self.id, trace_id = self.trace_id.as_deref(), key = %q.key, field = %field, value = %value, "answer value (policy log_value)");
            }
        }
    }

    /// Accounts for one ending of `q` ([`Engine::account`]): its audit
    /// line, its count, and its answer time when a person answered.
    ///
    /// [`Engine::account`]: crate::mrtr::Engine::account
    pub(super) fn audit(
        &self,
        q: &Question,
        outcome: Outcome,
        verdict: &str,
        answer_ms: Option<u64>,
        answer: Option<&Value>,
        reask_rule: Option<&str>,
    ) {
        let asker = Asker {
            route: &self.route.name,
            tool: &self.target,
            principal: &self.principal.name,
            operation: &self.id,
            arguments: self.arguments.value(),
            trace_id: self.trace_id.as_deref(),
        };
        self.engine.account(
            &asker,
            q,
            &Answered {
                outcome,
                verdict,
                answer_ms,
                answer,
                reask_rule,
            },
            None,
        );
    }

    /// A person's answer broke `rule` and the question is asked again: the
    /// attempt is an audit record of its own (`reask: true`, outcome
    /// `invalid`, the time the person spent on it), and the next attempt is
    /// timed from now, so no second of attention is counted twice.
    fn audit_reask(&self, q: &mut Question, rule: &str) {
        let spent = q.asked_at.elapsed();
        q.asked_at = tokio::time::Instant::now();
        let answer_ms = u64::try_from(spent.as_millis()).unwrap_or(u64::MAX);
        self.audit(
            q,
            Outcome::Invalid,
            "policy_invalid_answer",
            Some(answer_ms),
            None,
            Some(rule),
        );
    }

    pub(super) fn note_outcome(&mut self, answer: &Value) {
        match answer.get("action").and_then(Value::as_str) {
            Some("decline") => self.declined = true,
            Some("cancel") => self.cancelled = true,
            _ => {}
        }
    }

    /// The client of a retry, with its round trip's span under the root.
    fn attach(
        &self,
        id: Id,
        ctx: RequestContext,
        tx: tokio::sync::mpsc::Sender<Outgoing>,
        round: u32,
    ) -> Box<Client> {
        ctx.access
            .note(&self.id, round + 1, self.trace_id.as_deref());
        let span = super::round_trip_span(
            &self.root,
            self.method,
            &self.target,
            &id,
            round + 1,
            &ctx.protocol_version,
        );
        Box::new(Client { id, ctx, tx, span })
    }

    /// A retry arriving while no state is outstanding: its round was consumed.
    pub(super) async fn refuse_stale(&self, resume: Resume) {
        let client = self.attach(resume.id, resume.ctx, resume.client, resume.round);
        client.reject(&replayed()).await;
    }

    /// Answers the retries still queued when the operation is gone: each
    /// hears how it ended, or `state_replayed` (its round was used already),
    /// never nothing. Run on drop, after [`Table::end`] remembered the ending:
    /// the queue is closed first, so a retry handed over later finds the
    /// ending in the table instead.
    ///
    /// [`Table::end`]: crate::mrtr::table::Table::end
    fn answer_queued_retries(&mut self) {
        let Some((_, resumes)) = &mut self.resumes else {
            return;
        };
        resumes.close();
        while let Ok(resume) = resumes.try_recv() {
            let reply = late_answer(
                &self.engine,
                &self.route,
                &self.id,
                resume.round,
                self.method,
                &resume.id,
            );
            // A fresh retry's stream is empty: there is room for its one answer.
            let _ = resume.client.try_send(reply);
        }
    }

    /// Checks a retry against the waiting questions; applies its answers or
    /// refuses it, leaving the operation untouched.
    pub(super) async fn try_resume(&mut self, resume: Resume) -> Resumed {
        let client = self.attach(resume.id, resume.ctx, resume.client, resume.round);
        if self.awaiting != Some(resume.round) {
            client.reject(&replayed()).await;
            return Resumed::Refused;
        }
        // Input requests are bound to the capabilities of the request that carries them.
        if let Some(q) = self
            .pending
            .iter()
            .find(|q| !convert::covered(&client.ctx.profile, q))
            && let Some(r) = Ending::MissingCapability(q.needs.to_value()).reject()
        {
            client.reject(&r).await;
            return Resumed::Refused;
        }
        let mut verdicts = Vec::new();
        for q in &self.pending {
            let Some(given) = resume.responses.get(&q.key) else {
                continue;
            };
            match convert::answer(q, given) {
                Ok(a) => verdicts.push((q.key.clone(), self.check(q, a))),
                Err(e) => {
                    let r = Reject::new(Reason::MalformedInputResponse, e.to_string())
                        .with("key", e.key.clone());
                    client.reject(&r).await;
                    return Resumed::Refused;
                }
            }
        }
        // Every check passed: this round's state is consumed now, once.
        self.awaiting = None;
        self.consumed = resume.round;
        let mut ending = None;
        for (key, verdict) in verdicts {
            let Some(pos) = self.pending.iter().position(|q| q.key == key) else {
                continue;
            };
            match verdict {
                Checked::Deliver(answer) => {
                    let q = self.pending.remove(pos);
                    self.note_outcome(&answer);
                    self.keep_remembered(&q, &answer).await;
                    self.close_question(&q, outcome_of(&answer), "ok", Some(&answer));
                    let action = answer
                        .get("action")
                        .and_then(Value::as_str)
                        .unwrap_or("answer");
                    tracing::info!(operation = %self.id, trace_id = self.trace_id.as_deref(), key = %key, kind = ?q.kind, action, "answer delivered to the server");
                    let _ = self.session.respond(q.upstream_id, Ok(answer)).await;
                }
                Checked::Reask { field, rule, mark } => {
                    self.engine.metrics.record_policy_rejection(
                        &self.route.name,
                        &self.target,
                        "policy_invalid_answer",
                    );
                    tracing::info!(operation = %self.id, trace_id = self.trace_id.as_deref(), key = %key, field = %field, rule = %rule, "answer broke a rule; asking again with a red mark");
                    let mut q = self.pending.remove(pos);
                    self.audit_reask(&mut q, &rule);
                    q.mark(&mark);
                    self.pending.insert(pos, q);
                }
                Checked::End(e) => {
                    let q = self.pending.remove(pos);
                    let (outcome, verdict) = e.question_verdict();
                    self.close_question(&q, outcome, verdict, None);
                    // The server's question is answered `cancel`: it is never left waiting.
                    let _ = self
                        .session
                        .respond(q.upstream_id.clone(), convert::abandon(&q, verdict))
                        .await;
                    ending.get_or_insert(e);
                }
            }
        }
        match ending {
            Some(e) => Resumed::End(e, client),
            None => Resumed::Continue(client),
        }
    }
}

/// Holds a well-formed answer to `q` to the policy: shape, field rules, CEL
/// authorization; an invalid one is asked again while `max_reasks` allows.
/// The same for converted questions and a native server's own.
pub(crate) fn check_answer(
    policy: &crate::policy::Policy,
    subject: &Subject,
    q: &Question,
    answer: Value,
) -> Checked {
    let Some(schema) = q.schema() else {
        return Checked::Deliver(answer);
    };
    if answer.get("action").and_then(Value::as_str) != Some("accept") {
        // Decline and cancel carry no content and pass unvalidated.
        return Checked::Deliver(answer);
    }
    let empty = serde_json::Map::new();
    let content = answer
        .get("content")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    match judge(policy, subject, &schema, content) {
        Judgement::Valid(content) => {
            Checked::Deliver(json!({"action": "accept", "content": content}))
        }
        Judgement::Invalid { field, rule, mark } => {
            let (on_invalid, max_reasks) = policy.on_invalid(subject.tool);
            if on_invalid == OnInvalid::Reask && q.reasks < max_reasks {
                Checked::Reask { field, rule, mark }
            } else {
                Checked::End(Ending::PolicyInvalid {
                    field,
                    rule,
                    message: mark,
                })
            }
        }
        // Never asked again: another try would only probe what is allowed.
        Judgement::Denied { field, message } => {
            Checked::End(Ending::PolicyDenied { field, message })
        }
        Judgement::Error {
            field,
            rule,
            at,
            error,
        } => {
            tracing::error!(tool = %subject.tool, field = %field, rule = %rule, at = %at, error = %error, "the authz rule failed at run time; the answer is refused");
            Checked::End(Ending::PolicyError {
                message: format!(
                    "the policy's authz rule for {field} could not be evaluated; the answer is refused"
                ),
                field,
            })
        }
    }
}

// Every retry gets exactly one answer: those still queued when the operation
// ends would otherwise be dropped unanswered (an `internal_error`).
impl Drop for Operation {
    fn drop(&mut self) {
        self.answer_queued_retries();
    }
}

/// How a person answered, as the audit and span call it.
fn outcome_of(answer: &Value) -> Outcome {
    match answer.get("action").and_then(Value::as_str) {
        Some("decline") => Outcome::Declined,
        Some("cancel") => Outcome::Cancelled,
        // Accepted forms and URLs; sampling and roots answers.
        _ => Outcome::Accepted,
    }
}
