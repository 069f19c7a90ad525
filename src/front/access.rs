//! What one request's access-log line says ([`crate::telemetry::access`]):
//! gathered from the request context once the pipeline has run, completed
//! with the response's status and outcome, and written when the response is
//! final: at once for JSON, when the final message is sent for an SSE stream
//! (`client_disconnected` when the client leaves first).

use std::sync::Arc;

use http::StatusCode;
use tokio::time::Instant;

use super::pipeline::RequestCx;
use super::response::EndHook;
use crate::mrtr::Outcome;
use crate::mrtr::outgoing::Body;
use crate::protocol::request::AccessNote;
use crate::telemetry::access::{AccessLog, Entry};

/// A request whose line is not written yet.
pub struct Pending {
    route: Arc<str>,
    method: String,
    name: Option<String>,
    principal: Arc<str>,
    note: Option<AccessNote>,
    started: Instant,
}

impl Pending {
    /// What the pipeline learnt about the request (before it is dispatched).
    pub fn new(cx: &RequestCx, started: Instant) -> Self {
        let request = cx.request.as_ref();
        Self {
            route: cx.route.name.clone(),
            method: cx.method_label.clone().unwrap_or_else(|| "-".into()),
            name: request
                .map(|r| r.target().to_owned())
                .filter(|t| !t.is_empty()),
            principal: cx.principal.name.clone(),
            note: request.map(|r| r.ctx.access.clone()),
            started,
        }
    }

    /// Writes the line: `outcome` is the error's reason, else the result's
    /// `resultType` (`complete`, `input_required`), else `ok`.
    pub fn write(
        &self,
        log: &AccessLog,
        status: StatusCode,
        outcome: Outcome,
        body: Option<&Body>,
    ) {
        if !log.writes() {
            return;
        }
        let outcome = match outcome {
            Outcome::Error(reason) => reason.as_str(),
            Outcome::Ok => match body.and_then(Body::result_type) {
                Some("complete") => "complete",
                Some("input_required") => "input_required",
                _ => "ok",
            },
        };
        self.write_outcome(log, status, outcome);
    }

    /// Writes the line with `outcome` as it is.
    pub fn write_outcome(&self, log: &AccessLog, status: StatusCode, outcome: &str) {
        if !log.writes() {
            return;
        }
        let noted = self.note.as_ref().map(AccessNote::get).unwrap_or_default();
        log.record(&Entry {
            route: &self.route,
            method: &self.method,
            name: self.name.as_deref(),
            principal: &self.principal,
            status: status.as_u16(),
            outcome,
            duration_ms: crate::telemetry::access::millis(self.started.elapsed()),
            operation: noted.operation.as_deref(),
            round: noted.round,
            trace_id: noted.trace_id.as_deref(),
        });
    }
}

/// The hook of an SSE response that writes the line when the stream ends:
/// its final message's outcome, or `client_disconnected`.
pub fn on_stream_end(pending: Pending, log: Arc<AccessLog>) -> EndHook {
    Box::new(move |end| match end {
        Some((outcome, body)) => pending.write(&log, StatusCode::OK, outcome, Some(body)),
        None => pending.write_outcome(&log, StatusCode::OK, "client_disconnected"),
    })
}
