//! The call sent to the native server (on a retry with the checked answers
//! and the server's own state), the notifications it streams on the way
//! relayed to the client, and its answer turned into the client's reply or
//! another round of questions.

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::params::{declare_elicitation, upstream_params};
use super::{QUEUE, Run};
use crate::config::MissingCapability;
use crate::jsonrpc::code;
use crate::mrtr::ending::Ending;
use crate::mrtr::operation::relayable;
use crate::mrtr::operation::spans::record_error;
use crate::mrtr::outgoing::Outgoing;
use crate::protocol::{ClientRequest, IntoReject, tasks};
use crate::upstream::native::{NativeRequest, headers};
use crate::upstream::pool::PoolKey;

impl Run {
    /// Sends the call (with validated answers and the server's own state on a
    /// retry) and handles what the server answers.
    pub(super) async fn forward(
        &mut self,
        req: &ClientRequest,
        server_state: Option<String>,
        answers: Map<String, Value>,
        asked: u32,
    ) -> Outgoing {
        let mut params = upstream_params(req, Some(&self.root));
        if self.route.tasks.is_some() {
            // This route relays the server's tasks (`task`).
            super::task::declare_tasks(&mut params, req);
        }
        if self.route.on_missing_capability == MissingCapability::Decline {
            declare_elicitation(&mut params);
        }
        if !answers.is_empty() {
            params.insert("inputResponses".into(), Value::Object(answers));
        }
        if let Some(s) = server_state {
            params.insert("requestState".into(), Value::String(s));
        }
        let tool = self
            .route
            .catalog
            .tools(&PoolKey {
                principal: self.principal.name.clone(),
                profile: req.ctx.profile,
            })
            .and_then(|t| t.get(&self.target).cloned());
        let param_headers = tool
            .as_ref()
            .and_then(|t| t.definition.get("inputSchema"))
            .map(|schema| headers::mirrored(schema, req.arguments()))
            .unwrap_or_default();
        let (ntx, mut nrx) = mpsc::channel(QUEUE);
        let (route, target) = (self.route.clone(), self.target.clone());
        let sent = {
            let request = route.native.request(NativeRequest {
                method: req.method.as_str(),
                params: Value::Object(params),
                name: Some(&target),
                param_headers,
                timeout: route.pool.call_timeout(),
                notify: self.to_client.as_ref().map(|_| ntx),
            });
            tokio::pin!(request);
            loop {
                tokio::select! {
                    sent = &mut request => break sent,
                    Some(n) = nrx.recv() => self.relay(req, n),
                }
            }
        };
        // What the server sent before its answer goes first.
        while let Ok(n) = nrx.try_recv() {
            self.relay(req, n);
        }
        match sent {
            Err(e) => {
                let reject = e.into_reject();
                self.engine.metrics.record_operation(
                    &self.route.name,
                    &self.target,
                    reject.reason.as_str(),
                );
                record_error(&self.root, reject.reason.as_str());
                Outgoing::reject(Some(&req.id), &reject)
            }
            // The server checked the capability itself (spec basic/index.mdx
            // "_meta"): the client hears redmark's own -32021, with what is needed.
            Ok(Err(e)) if e.code == code::MISSING_REQUIRED_CLIENT_CAPABILITY => {
                let needs = e
                    .data
                    .as_ref()
                    .and_then(|d| d.get("requiredCapabilities"))
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                if self.route.tasks.is_some() && tasks::declared(&needs) {
                    // The route relays tasks: the client can declare it.
                    let r = tasks::extension_required(&format!(
                        "`{}` runs only as a task: declare the {} extension in the request's client capabilities",
                        self.target,
                        tasks::EXTENSION
                    ));
                    return self.reject_call(req, &r);
                }
                self.end(req, &Ending::MissingCapability(needs))
            }
            Ok(Err(e)) => self.end(req, &Ending::UpstreamError(e)),
            Ok(Ok(result)) => match result.get("resultType") {
                Some(Value::String(t)) if t == "input_required" => {
                    Box::pin(self.questions(req, result, asked)).await
                }
                None => self.completed(req, result),
                Some(Value::String(t)) if t == "complete" => self.completed(req, result),
                Some(Value::String(t)) if t == tasks::RESULT_TYPE && self.relays_task(req) => {
                    Box::pin(self.task_created(req, result)).await
                }
                Some(other) => self.end(req, &Ending::UpstreamInvalid(unasked(req, other))),
            },
        }
    }
    /// The call refused with `r`, counted as the operation's outcome.
    pub(super) fn reject_call(&self, req: &ClientRequest, r: &crate::protocol::Reject) -> Outgoing {
        self.engine
            .metrics
            .record_operation(&self.route.name, &self.target, r.reason.as_str());
        record_error(&self.root, r.reason.as_str());
        Outgoing::reject(Some(&req.id), r)
    }

    fn completed(&self, req: &ClientRequest, result: Value) -> Outgoing {
        let ending = Ending::Completed {
            result: result.into(),
            declined: self.declined,
            cancelled: self.cancelled,
        };
        self.end(req, &ending)
    }

    /// A notification the server sent on the call's response stream, to the
    /// client when it is for it (spec 2026-07-28 progress.mdx and
    /// logging.mdx: progress under the client's own token, log messages at
    /// or above the level it asked for), exactly as for a legacy server.
    fn relay(&self, req: &ClientRequest, n: Value) {
        let Some(tx) = &self.to_client else { return };
        let method = n.get("method").and_then(Value::as_str).unwrap_or_default();
        let params = n.get("params").cloned().filter(|p| !p.is_null());
        let Some(n) = relayable(&req.ctx, req.ctx.progress_token.as_ref(), method, params) else {
            return;
        };
        // One slot stays free for the answer.
        if tx.capacity() > 1 {
            let _ = tx.try_send(Outgoing::Notification(n));
        }
    }
}

/// Why a `resultType` other than `complete` or `input_required` is no answer
/// to a call redmark relays. A task above all: spec ext-tasks "Capability
/// Negotiation", "A server MUST NOT return CreateTaskResult to a client that
/// did not include the extension capability on its request", and redmark
/// passes the client's declaration on only where the route relays tasks
/// (`task::declare_tasks`); relayed elsewhere, it would be a task nobody
/// can poll.
fn unasked(req: &ClientRequest, result_type: &Value) -> String {
    let method = req.method.as_str();
    match result_type.as_str() {
        Some(tasks::RESULT_TYPE) => format!(
            "the server answered {method} with a task (resultType `task`) it was not asked for: this route does not serve the tasks extension ({}), so the task could never be polled",
            tasks::EXTENSION
        ),
        Some(t) => format!(
            "the server answered {method} with resultType `{}`; 2026-07-28 allows only `complete` or `input_required` there",
            t.chars().take(64).collect::<String>()
        ),
        None => format!("the server answered {method} with a non-string resultType"),
    }
}
