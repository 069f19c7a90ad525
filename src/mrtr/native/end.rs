//! How a native operation ends and is accounted for: the client's final
//! reply with the operation's metrics, span and log line, and one audit line
//! per question, as for converted questions.

use serde_json::Value;

use super::Run;
use crate::mrtr::account::{Answered, Asker};
use crate::mrtr::convert::Question;
use crate::mrtr::ending::Ending;
use crate::mrtr::operation::spans::record_error;
use crate::mrtr::outgoing::Outgoing;
use crate::protocol::shape::Stamp;
use crate::protocol::{ClientRequest, Reason, Reject};
use crate::telemetry::audit::{Origin, Outcome};

impl Run {
    fn stamp(&self) -> Stamp {
        self.route.stamp(&self.route.native.server_info())
    }

    /// Ends the operation: metrics, span, log, and the client's reply.
    pub(super) fn end(&self, req: &ClientRequest, ending: &Ending) -> Outgoing {
        let outcome = ending.outcome();
        self.root.record("redmark.outcome", outcome);
        self.root.record("redmark.rounds", i64::from(self.round));
        if ending.is_failure() {
            record_error(&self.root, outcome);
        }
        if let Some(reason) = ending.policy_reason() {
            self.engine.metrics.record_policy_rejection(
                &self.route.name,
                &self.target,
                reason.as_str(),
            );
        }
        self.engine
            .metrics
            .record_rounds(&self.route.name, &self.target, self.round);
        self.engine
            .metrics
            .record_operation(&self.route.name, &self.target, outcome);
        // At INFO only when a question was asked (see `Operation::finish`).
        macro_rules! ended {
            ($level:expr) => {
                tracing::event!($level, operation = %self.op_id, trace_id = self.trace_id.as_deref(), route = %self.route.name, tool = %self.target, outcome, rounds = self.round, mode = "native", "operation ended")
            };
        }
        if self.round > 0 {
            ended!(tracing::Level::INFO);
        } else {
            ended!(tracing::Level::DEBUG);
        }
        match ending {
            // The server's own result, with its own caching hints.
            Ending::Completed { result, .. } => {
                let mut result = result.clone().into_value();
                if let Some(o) = result.as_object_mut() {
                    o.entry("resultType").or_insert_with(|| "complete".into());
                    // A server's own state reaches a client only sealed in
                    // redmark's (issue 42); a complete result has none.
                    if o.get("resultType").and_then(serde_json::Value::as_str) == Some("complete") {
                        o.remove("requestState");
                        o.remove("inputRequests");
                    }
                }
                Outgoing::result(&req.id, result)
            }
            other => other
                .reply(req.method, &req.id, &self.stamp())
                .unwrap_or_else(|| {
                    Outgoing::reject(
                        Some(&req.id),
                        &Reject::new(
                            Reason::InternalError,
                            "the operation ended without an answer",
                        ),
                    )
                }),
        }
    }
    pub(super) fn note(&mut self, answer: &Value) {
        match answer.get("action").and_then(Value::as_str) {
            Some("decline") => self.declined = true,
            Some("cancel") => self.cancelled = true,
            _ => {}
        }
    }

    /// One audit line per question's ending (and per re-asked attempt), as for
    /// converted questions, with `origin: native`.
    pub(super) fn audit(
        &self,
        q: &Question,
        outcome: Outcome,
        verdict: &str,
        asked_at_ms: Option<u64>,
        answer: Option<&Value>,
        reask_rule: Option<&str>,
    ) {
        let asker = Asker {
            route: &self.route.name,
            tool: &self.target,
            principal: &self.principal.name,
            operation: &self.op_id,
            arguments: &self.arguments,
            trace_id: self.trace_id.as_deref(),
        };
        let answered = Answered {
            outcome,
            verdict,
            answer_ms: None,
            answer,
            reask_rule,
        };
        account_native(&self.engine, &asker, q, answered, asked_at_ms);
    }
}

/// One audit line for a native server's question (`origin: native`), a
/// call's or a relayed task's: `answered`, timed from `asked_at_ms` when a
/// person answered (or an attempt was re-asked).
pub(super) fn account_native(
    engine: &crate::mrtr::Engine,
    asker: &Asker<'_>,
    q: &Question,
    mut answered: Answered<'_>,
    asked_at_ms: Option<u64>,
) {
    answered.answer_ms = asked_at_ms
        .filter(|_| answered.answer.is_some() || answered.reask_rule.is_some())
        .map(|at| engine.clock.unix_now_ms().saturating_sub(at));
    engine.account(asker, q, &answered, Some(Origin::Native));
}
