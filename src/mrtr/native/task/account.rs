//! How a relayed task is accounted for: its end counted once
//! (`redmark_tasks_total`, `redmark_tasks_live`), and one audit line per
//! question (`origin: native`), as a native call's questions are.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{Relay, Relayed, Seen};
use crate::mrtr::Engine;
use crate::mrtr::account::{Answered, Asker};
use crate::mrtr::native::end::account_native;

/// Counts a relayed task's end once (`redmark_tasks_total`), and takes it
/// out of `redmark_tasks_live` when this replica counted it in. Once on
/// this replica (the first caller claims it: true), and once across
/// replicas where the single-use store is shared (`[state] store`): a
/// replica that adopted the task after its relaying one was lost may see
/// the same end.
pub(super) fn count_end(engine: &Arc<Engine>, task: &Relayed, outcome: &str) -> bool {
    {
        let mut state = task.state();
        if state.counted {
            return false;
        }
        state.counted = true;
    }
    if task.live {
        engine.metrics.add_live_tasks(-1);
    }
    let (engine, route, target) = (engine.clone(), task.route.clone(), task.target.clone());
    let (outcome, mark) = (outcome.to_owned(), format!("task-end.{}", task.mark));
    tokio::spawn(async move {
        let ttl = Duration::from_secs(3600);
        if !matches!(engine.single_use.first_use(&mark, ttl).await, Ok(false)) {
            engine.metrics.record_task(&route, &target, &outcome);
        }
    });
    true
}

impl Relay<'_> {
    /// The task ended (`outcome`): counted once, and each question it
    /// showed that was never answered audited `cancelled`, as a call's
    /// abandoned questions are.
    pub(super) fn finished(&self, outcome: &str) {
        // Whoever claims the count audits the unanswered questions, once.
        if !count_end(self.engine, self.task, outcome) {
            return;
        }
        let unanswered: Vec<(String, Seen)> = {
            let state = self.task.state();
            state
                .seen
                .iter()
                .filter(|(k, _)| !state.answered.contains(*k))
                .map(|(k, s)| (k.clone(), s.clone()))
                .collect()
        };
        for (key, seen) in unanswered {
            let method = seen
                .request
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let params = seen.request.get("params").cloned();
            if let Ok(mut q) =
                crate::mrtr::convert::question(crate::jsonrpc::Id::Number(0), method, params)
            {
                q.key = key;
                self.audit(
                    &q,
                    crate::telemetry::audit::Outcome::Cancelled,
                    outcome,
                    Some(seen.at),
                    None,
                    None,
                );
            }
        }
    }

    /// One audit line for a question of the task, as for a native call's.
    pub(super) fn audit(
        &self,
        q: &crate::mrtr::convert::Question,
        outcome: crate::telemetry::audit::Outcome,
        verdict: &str,
        asked_at_ms: Option<u64>,
        answer: Option<&Value>,
        reask_rule: Option<&str>,
    ) {
        let asker = Asker {
            route: &self.route.name,
            tool: &self.task.target,
            principal: &self.principal.name,
            operation: &self.task.operation,
            arguments: &self.task.arguments,
            // `00-{trace id}-{span id}-{flags}`.
            trace_id: self.task.traceparent.as_deref().and_then(|t| t.get(3..35)),
        };
        let answered = Answered {
            outcome,
            verdict,
            answer_ms: None,
            answer,
            reask_rule,
        };
        account_native(self.engine, &asker, q, answered, asked_at_ms);
    }
}
