//! How an operation ends. Each ending has its own outcome label (metrics,
//! logs, span status) and its own answer to the client.

use std::time::Duration;

use serde_json::{Value, json};

use super::outgoing::{Outcome, Outgoing};
use crate::jsonrpc::{ErrorObject, Id, Payload};
use crate::protocol::shape::{self, Stamp, Stamped};
use crate::protocol::{Method, Reason, Reject};
use crate::telemetry::audit;

#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// The server answered. `declined`/`cancelled`: some question was answered so.
    Completed {
        /// As the server sent it, where the call's answer could be kept so.
        result: Payload,
        declined: bool,
        cancelled: bool,
    },
    /// The server answered with an error (relayed).
    UpstreamError(ErrorObject),
    /// The server crashed or dropped the session: why (the cause only; the
    /// message says the server went away).
    UpstreamLost(String),
    /// The server was silent for longer than `call_timeout`.
    UpstreamTimeout(Duration),
    /// The server answered with something that is no answer to the request
    /// (a `resultType` it may not use there): why.
    UpstreamInvalid(String),
    /// The client went away before its answer was delivered.
    ClientDisconnected,
    /// Nobody answered within the TTL.
    Expired(Duration),
    /// The server asked more rounds than `max_rounds`.
    RoundsExhausted(u32),
    /// The server asked for something the client did not declare.
    MissingCapability(Value),
    /// The principal already has as many operations waiting as allowed.
    TooManyPending(usize),
    /// The gateway shut down while the operation waited for an answer.
    ShuttingDown,
    /// The policy refused the server's question (it never reached the client).
    PolicyRefused {
        reason: Reason,
        field: Option<String>,
        message: String,
    },
    /// The question was for a value the model owns: a precise tool error instead.
    ModelOwned { field: String, guidance: String },
    /// An answer broke a rule and could not be asked again.
    PolicyInvalid {
        field: String,
        rule: String,
        message: String,
    },
    /// An answer failed an authorization rule.
    PolicyDenied { field: String, message: String },
    /// An answer's authorization rule failed at run time: refused, fail closed.
    PolicyError { field: String, message: String },
    /// Replay mode: the next round's state, with the answers collected so
    /// far, would be longer than `[state] max_bytes`.
    StateTooLarge { len: usize, max: usize },
}

/// The tool result a model-owned field ends a `tools/call` with: a tool
/// error whose text tells the model what to pass (seed 003).
pub fn model_owned_result(guidance: &str) -> Value {
    json!({"content": [{"type": "text", "text": guidance}], "isError": true})
}

impl Ending {
    /// The ending of an operation whose call reported `e` (the session
    /// lost, most often): its message says the server went away, so it
    /// keeps only the cause.
    pub fn lost(e: crate::upstream::UpstreamError) -> Ending {
        Ending::UpstreamLost(e.cause())
    }

    /// The label on `redmark_operations_total{outcome}` and in logs.
    pub fn outcome(&self) -> &'static str {
        match self {
            Ending::Completed {
                cancelled: true, ..
            } => "cancelled",
            Ending::Completed { declined: true, .. } => "declined",
            Ending::Completed { .. } => "completed",
            Ending::UpstreamError(_) => "upstream_error",
            Ending::UpstreamLost(_) => "upstream_lost",
            Ending::UpstreamTimeout(_) => "upstream_timeout",
            Ending::UpstreamInvalid(_) => "upstream_invalid_result",
            Ending::ClientDisconnected => "client_disconnected",
            Ending::Expired(_) => "operation_expired",
            Ending::RoundsExhausted(_) => "rounds_exhausted",
            Ending::MissingCapability(_) => "missing_capability",
            Ending::TooManyPending(_) => "too_many_pending",
            Ending::ShuttingDown => "shutting_down",
            Ending::PolicyRefused { .. } => "policy_refused",
            Ending::ModelOwned { .. } => "model_owned",
            Ending::PolicyInvalid { .. } => "policy_invalid_answer",
            Ending::PolicyDenied { .. } => "policy_denied",
            Ending::PolicyError { .. } => "policy_error",
            Ending::StateTooLarge { .. } => "state_too_large",
        }
    }

    /// True for endings that are failures (span status error).
    pub fn is_failure(&self) -> bool {
        !matches!(self, Ending::Completed { .. })
    }

    /// How a question ended by this ending is audited: its outcome and verdict.
    pub fn question_verdict(&self) -> (audit::Outcome, &'static str) {
        match self {
            Ending::PolicyDenied { .. } => (audit::Outcome::Denied, "policy_denied"),
            // Authorization could not be proven: recorded as denied.
            Ending::PolicyError { .. } => (audit::Outcome::Denied, "policy_error"),
            _ => (audit::Outcome::Invalid, "policy_invalid_answer"),
        }
    }

    /// The `data.reason` a policy ending reports (for `redmark_policy_rejections_total`).
    pub fn policy_reason(&self) -> Option<Reason> {
        match self {
            Ending::PolicyRefused { reason, .. } => Some(*reason),
            Ending::ModelOwned { .. } => Some(Reason::PolicyModelOwned),
            Ending::PolicyInvalid { .. } => Some(Reason::PolicyInvalidAnswer),
            Ending::PolicyDenied { .. } => Some(Reason::PolicyDenied),
            Ending::PolicyError { .. } => Some(Reason::PolicyError),
            _ => None,
        }
    }

    /// The answer to the client request attached when the operation ended
    /// (or to a late retry of it): every path that ends an operation answers
    /// through here. `None`: nobody is left to answer (the client went away).
    pub fn reply(&self, method: Method, id: &Id, stamp: &Stamp) -> Option<Outgoing> {
        let complete = |result: Payload| Outgoing::relayed(id, Stamped::new(method, result, stamp));
        match self {
            Ending::Completed { result, .. } => Some(complete(result.clone())),
            Ending::UpstreamError(e) => {
                let (status, body, reason) = shape::upstream_error_reply(id, e.clone());
                Some(Outgoing::Final {
                    status,
                    body: body.into(),
                    outcome: Outcome::Error(reason),
                })
            }
            // A tool's model-owned value is a tool error the model can act on (seed 003).
            Ending::ModelOwned { guidance, .. } if method == Method::ToolsCall => {
                Some(complete(model_owned_result(guidance).into()))
            }
            other => other.reject().map(|r| Outgoing::reject(Some(id), &r)),
        }
    }

    /// [`Ending::reply`] for an ending nobody reads again (no tombstone
    /// keeps it): the result moves into the reply instead of being copied,
    /// and `self` keeps only what its outcome label needs.
    pub fn take_reply(&mut self, method: Method, id: &Id, stamp: &Stamp) -> Option<Outgoing> {
        match self {
            Ending::Completed { result, .. } => Some(Outgoing::relayed(
                id,
                Stamped::new(method, std::mem::replace(result, Value::Null.into()), stamp),
            )),
            other => other.reply(method, id, stamp),
        }
    }

    /// The refusal a client gets for this ending, if it is an error of redmark's own.
    pub fn reject(&self) -> Option<Reject> {
        let r = match self {
            Ending::Completed { .. } | Ending::UpstreamError(_) | Ending::ClientDisconnected => {
                return None;
            }
            Ending::PolicyRefused {
                reason,
                field,
                message,
            } => {
                let r = Reject::new(*reason, message.clone());
                match field {
                    Some(f) => r.with("field", f.clone()),
                    None => r,
                }
            }
            Ending::ModelOwned { field, guidance } => {
                Reject::new(Reason::PolicyModelOwned, guidance.clone()).with("field", field.clone())
            }
            Ending::PolicyInvalid {
                field,
                rule,
                message,
            } => Reject::new(Reason::PolicyInvalidAnswer, message.clone())
                .with("field", field.clone())
                .with("rule", rule.clone()),
            Ending::PolicyDenied { field, message } => {
                Reject::new(Reason::PolicyDenied, message.clone()).with("field", field.clone())
            }
            Ending::PolicyError { field, message } => {
                Reject::new(Reason::PolicyError, message.clone()).with("field", field.clone())
            }
            Ending::UpstreamLost(why) => Reject::new(
                Reason::UpstreamLost,
                format!("the upstream server went away: {why}"),
            ),
            Ending::UpstreamTimeout(after) => Reject::new(
                Reason::UpstreamTimeout,
                format!("the upstream server was silent for {after:?}; the call was cancelled"),
            ),
            Ending::UpstreamInvalid(why) => Reject::new(Reason::UpstreamInvalidResult, why.clone()),
            Ending::Expired(ttl) => Reject::new(
                Reason::OperationExpired,
                format!("nobody answered within {ttl:?}; the server's question was cancelled"),
            ),
            Ending::RoundsExhausted(n) => Reject::new(
                Reason::RoundsExhausted,
                format!(
                    "the server asked more than {n} rounds of questions; the call was cancelled"
                ),
            ),
            // spec 2026-07-28 basic/index.mdx "_meta": "the server MUST return a
            // MissingRequiredClientCapabilityError (-32021) whose
            // data.requiredCapabilities lists the missing capabilities. On HTTP,
            // the response status MUST be 400 Bad Request."
            Ending::MissingCapability(needs) if crate::protocol::tasks::declared(needs) => {
                Reject::new(
                    Reason::MissingCapability,
                    format!(
                        "the server serves this request only as a task, and this route does not serve the tasks extension ({}): redmark does not pass a client's declaration of it on",
                        crate::protocol::tasks::EXTENSION
                    ),
                )
                .with("requiredCapabilities", needs.clone())
            }
            Ending::MissingCapability(needs) => Reject::new(
                Reason::MissingCapability,
                format!(
                    "the server needs a client capability this request did not declare: {needs}"
                ),
            )
            .with("requiredCapabilities", needs.clone()),
            Ending::ShuttingDown => Reject::new(
                Reason::ShuttingDown,
                "redmark shut down while the question waited; call again",
            ),
            Ending::StateTooLarge { len, max } => Reject::new(
                Reason::StateTooLarge,
                format!(
                    "the answers collected so far do not fit in a requestState ({len} bytes, [state] max_bytes = {max}); the call was cancelled"
                ),
            )
            .with("max_bytes", *max),
            Ending::TooManyPending(n) => Reject::new(
                Reason::TooManyPending,
                format!(
                    "this principal already has {n} operations waiting for answers; answer or abandon some first"
                ),
            ),
        };
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_distinct() {
        let all = [
            Ending::Completed {
                result: json!({}).into(),
                declined: false,
                cancelled: false,
            },
            Ending::Completed {
                result: json!({}).into(),
                declined: true,
                cancelled: false,
            },
            Ending::Completed {
                result: json!({}).into(),
                declined: false,
                cancelled: true,
            },
            Ending::UpstreamError(ErrorObject::new(1, "x")),
            Ending::UpstreamLost("x".into()),
            Ending::UpstreamTimeout(Duration::from_secs(1)),
            Ending::UpstreamInvalid("x".into()),
            Ending::ClientDisconnected,
            Ending::Expired(Duration::from_secs(1)),
            Ending::RoundsExhausted(10),
            Ending::MissingCapability(json!({})),
            Ending::TooManyPending(1),
            Ending::ShuttingDown,
            Ending::PolicyRefused {
                reason: Reason::PolicySecretRequest,
                field: None,
                message: String::new(),
            },
            Ending::ModelOwned {
                field: "f".into(),
                guidance: String::new(),
            },
            Ending::PolicyInvalid {
                field: "f".into(),
                rule: "maximum".into(),
                message: String::new(),
            },
            Ending::PolicyDenied {
                field: "f".into(),
                message: String::new(),
            },
            Ending::StateTooLarge { len: 2, max: 1 },
        ];
        let labels: std::collections::HashSet<&str> = all.iter().map(Ending::outcome).collect();
        assert_eq!(labels.len(), all.len());
    }

    #[test]
    fn missing_capability_is_400_with_required_capabilities() {
        let r = Ending::MissingCapability(json!({"elicitation": {"form": {}}}))
            .reject()
            .unwrap();
        assert_eq!(r.status(), http::StatusCode::BAD_REQUEST);
        assert_eq!(r.code(), -32021);
        assert_eq!(
            r.data["requiredCapabilities"],
            json!({"elicitation": {"form": {}}})
        );
    }

    fn stamp() -> Stamp {
        Stamp {
            server_info: std::sync::Arc::new(crate::protocol::shape::ServerInfo::new(
                json!({"name": "s", "version": "1"}),
            )),
            ttl_ms: 0,
            scope: crate::protocol::shape::CacheScope::Public,
        }
    }

    #[test]
    fn a_taken_reply_is_the_reply_and_the_ending_keeps_its_outcome() {
        let id = Id::Number(3);
        for (declined, cancelled) in [(false, false), (true, false), (false, true)] {
            let ending = Ending::Completed {
                result: json!({"content": [{"type": "text", "text": "hi"}], "isError": false})
                    .into(),
                declined,
                cancelled,
            };
            let copied = ending.reply(Method::ToolsCall, &id, &stamp());
            let mut taken = ending.clone();
            let moved = taken.take_reply(Method::ToolsCall, &id, &stamp());
            assert_eq!(moved, copied);
            assert_eq!(taken.outcome(), ending.outcome());
            assert!(!taken.is_failure());
        }
        let mut lost = Ending::UpstreamLost("gone".into());
        assert_eq!(
            lost.take_reply(Method::ToolsCall, &id, &stamp()),
            lost.reply(Method::ToolsCall, &id, &stamp())
        );
    }

    #[test]
    fn a_model_owned_value_is_a_tool_error_for_tools_and_a_refusal_otherwise() {
        let owned = Ending::ModelOwned {
            field: "room_id".into(),
            guidance: "pass room_id".into(),
        };
        let id = Id::Number(7);
        let Some(Outgoing::Final { body, outcome, .. }) =
            owned.reply(Method::ToolsCall, &id, &stamp())
        else {
            panic!("a reply")
        };
        assert_eq!(outcome, Outcome::Ok);
        let body = body.to_value();
        assert_eq!(body["result"]["isError"], true);
        assert_eq!(body["result"]["content"][0]["text"], "pass room_id");
        let Some(Outgoing::Final { body, outcome, .. }) =
            owned.reply(Method::PromptsGet, &id, &stamp())
        else {
            panic!("a reply")
        };
        assert_eq!(outcome, Outcome::Error(Reason::PolicyModelOwned));
        assert_eq!(body.to_value()["error"]["data"]["field"], "room_id");
    }

    #[test]
    fn nobody_to_answer_gets_no_reply_and_upstream_errors_keep_their_code() {
        let id = Id::Number(1);
        assert!(
            Ending::ClientDisconnected
                .reply(Method::ToolsCall, &id, &stamp())
                .is_none()
        );
        let Some(Outgoing::Final {
            status,
            body,
            outcome,
        }) = Ending::UpstreamError(ErrorObject::new(-32601, "no such method")).reply(
            Method::ToolsCall,
            &id,
            &stamp(),
        )
        else {
            panic!("a reply")
        };
        assert_eq!(status, http::StatusCode::NOT_FOUND);
        assert_eq!(body.to_value()["error"]["code"], -32601);
        assert_eq!(outcome, Outcome::Error(Reason::UpstreamError));
    }
}
