//! How an operation ends: the server's open questions hear `cancel` (or an
//! error) when the operation is abandoned, each question is closed in the
//! audit log, the ending is recorded in spans, metrics and the log, the
//! tombstone that answers late retries is left, the attached client gets the
//! reply, and last an abandoned call is ended as a good client ends it
//! ([`Call::end`](crate::upstream::session::Call::end)) before the session
//! goes back.

use tokio::time::Instant;

use super::client::Client;
use super::{LATE_RETRY_GRACE, Operation, spans};
use crate::jsonrpc::{ErrorObject, code};
use crate::mrtr::convert;
use crate::mrtr::ending::Ending;
use crate::mrtr::table::Tombstone;

impl Operation {
    pub(super) async fn finish(
        mut self: Box<Self>,
        mut ending: Ending,
        client: Option<Box<Client>>,
    ) {
        let abandon = !matches!(
            ending,
            Ending::Completed { .. } | Ending::UpstreamError(_) | Ending::UpstreamLost(_)
        );
        // Only an abandoned call says why it ends: formatted for it alone
        // (a completed call's was about 220 instructions of a passthrough).
        let why = if abandon {
            format!("redmark: {}", ending.outcome())
        } else {
            String::new()
        };
        if abandon {
            // The server is never left waiting: its open questions hear `cancel`
            // (or an error) and the call itself is ended (below, once the client has its reply).
            // Expired or never picked up: nobody answered. Anything else: the operation went away.
            let unanswered = if matches!(ending, Ending::Expired(_) | Ending::ClientDisconnected) {
                crate::telemetry::audit::Outcome::Unanswered
            } else {
                crate::telemetry::audit::Outcome::Abandoned
            };
            for q in std::mem::take(&mut self.pending) {
                self.close_question(&q, unanswered, "ok", None);
                let _ = self
                    .session
                    .respond(q.upstream_id.clone(), convert::abandon(&q, &why))
                    .await;
            }
            // Pushed between rounds and not yet asked: they hear the same.
            for (id, method, params) in std::mem::take(&mut self.deferred) {
                let answer = match convert::question(id.clone(), &method, params) {
                    Ok(q) => convert::abandon(&q, &why),
                    Err(e) => Err(ErrorObject::new(code::METHOD_NOT_FOUND, e.to_string())),
                };
                let _ = self.session.respond(id, answer).await;
            }
        } else {
            // The server is done or gone: nobody to answer, but each question
            // still open ends in the audit log.
            for q in std::mem::take(&mut self.pending) {
                self.close_question(&q, crate::telemetry::audit::Outcome::Abandoned, "ok", None);
            }
        }
        // The reply is made now and sent last: once the client has it, the
        // operation's metrics and its tombstone must already be there for
        // whatever the client does next (a scrape, a late retry of its
        // state), whichever thread serves that.
        let reply = client.as_ref().and_then(|client| {
            let stamp = self.route.stamp(&self.session.init.server_info);
            if self.registered {
                // The tombstone answers late retries with the same ending.
                ending.reply(self.method, &client.id, &stamp)
            } else {
                ending.take_reply(self.method, &client.id, &stamp)
            }
        });
        if let Some(reason) = ending.policy_reason() {
            self.engine.metrics.record_policy_rejection(
                &self.route.name,
                &self.target,
                reason.as_str(),
            );
        }
        let outcome = ending.outcome();
        self.root.record("redmark.outcome", outcome);
        // As i64: tracing-opentelemetry exports unsigned integers as strings.
        self.root.record("redmark.rounds", i64::from(self.round));
        // Span status is an error for every ending but completed, declined and cancelled.
        if ending.is_failure() {
            spans::record_error(&self.root, outcome);
        }
        if let Ending::UpstreamError(e) = &ending {
            spans::record_error(&self.upstream_span, &e.code.to_string());
        } else if matches!(ending, Ending::UpstreamLost(_) | Ending::UpstreamTimeout(_)) {
            spans::record_error(&self.upstream_span, outcome);
        }
        self.engine
            .metrics
            .record_rounds(&self.route.name, &self.target, self.round);
        // Dropped here (the client did not read) and in the session's queue.
        let dropped = self.dropped + self.call.dropped();
        if dropped > 0 {
            self.engine
                .metrics
                .record_notifications_dropped(&self.route.name, dropped);
        }
        // At INFO only when it says more than the call's access line: a
        // question was asked, or notifications were dropped. A plain call's
        // second line per request was a third of its cost at the default level.
        macro_rules! ended {
            ($level:expr) => {
                tracing::event!(
                    $level,
                    operation = %self.id, trace_id = self.trace_id.as_deref(),
                    route = %self.route.name,
                    tool = %self.target,
                    outcome,
                    rounds = self.round,
                    dropped_notifications = dropped,
                    elapsed_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    "operation ended"
                )
            };
        }
        if self.round > 0 || dropped > 0 {
            ended!(tracing::Level::INFO);
        } else {
            ended!(tracing::Level::DEBUG);
        }
        self.engine
            .metrics
            .record_operation(&self.route.name, &self.target, outcome);
        if self.registered {
            self.engine.table.end(
                &self.id,
                Tombstone {
                    ending,
                    consumed_round: self.consumed,
                    until: Instant::now() + self.engine.ttl + LATE_RETRY_GRACE,
                    server_info: self.session.init.server_info.clone(),
                },
            );
        }
        if let (Some(client), Some(reply)) = (&client, reply) {
            client.send(reply).await;
        }
        if abandon {
            // After the reply: the client does not wait for the server to
            // wind the call down, but the session (the lease, dropped with
            // `self`) does.
            let (id, trace_id) = (self.id.clone(), self.trace_id.clone());
            if !self.call.end(&why, self.route.pool.end_grace()).await {
                tracing::debug!(operation = %id, trace_id = trace_id.as_deref(),
                    "the server did not end the abandoned call");
            }
        }
    }
}
