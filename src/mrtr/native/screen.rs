//! One input request of a native server's, screened before any client sees
//! it: read as a question, held to the policy's guard (`max_questions`,
//! secret-like fields, URL hosts, model-owned fields), and to the
//! capabilities the client declared on the request that would carry it.
//! The same screen serves a call's MRTR rounds (`ask`) and a relayed task's
//! questions (`task::read`); each then asks, declines, or ends as it can.

use serde_json::Value;

use crate::config::MissingCapability;
use crate::jsonrpc::Id;
use crate::mrtr::convert::{self, Kind, Question};
use crate::mrtr::ending::Ending;
use crate::policy::Policy;
use crate::policy::guard::{self, Verdict};
use crate::protocol::profile::Profile;
use crate::protocol::{Reason, Reject};

/// What the screen made of one input request.
pub(super) enum Screened {
    /// Put to the client.
    Ask(Question),
    /// Declined on the user's behalf (`on_missing_capability = "decline"`):
    /// never put to a person, audited `refused` as `missing_capability`.
    Decline(Question),
    /// Never put to a person: audited `refused` with `verdict`, and the call
    /// (or task) ends with `ending`.
    Refused {
        question: Question,
        verdict: &'static str,
        ending: Ending,
    },
    /// Not an input request redmark relays: nothing asked, nothing audited.
    NotRelayed(Reject),
}

/// Who is asked, and under which rules.
pub(super) struct Screen<'a> {
    pub policy: &'a Policy,
    pub target: &'a str,
    /// The capabilities declared on the request that would carry the question.
    pub profile: &'a Profile,
    pub on_missing_capability: MissingCapability,
    /// For the log lines.
    pub operation: &'a str,
    pub trace_id: Option<&'a str>,
}

impl Screen<'_> {
    /// Screens the server's input request `request` under `key`, the
    /// `asked`-th question of its operation.
    pub(super) fn screen(&self, key: &str, request: &Value, asked: u32) -> Screened {
        let method = request
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let params = request.get("params").cloned();
        let Ok(mut q) = convert::question(Id::Number(0), method, params.clone()) else {
            return Screened::NotRelayed(
                Reject::new(
                    Reason::NotRelayed,
                    format!(
                        "the server asked `{method}`, which is not an input request redmark relays"
                    ),
                )
                .with("key", key.to_owned()),
            );
        };
        q.key = key.to_owned();
        let params = params.unwrap_or(Value::Null);
        match guard::check(self.policy, self.target, method, &params, asked as usize) {
            Verdict::Ask => {}
            Verdict::Refuse(r) => {
                tracing::warn!(operation = %self.operation, trace_id = self.trace_id, tool = %self.target, key = %key, reason = %r.reason, "a native server's question refused by policy");
                return Screened::Refused {
                    question: q,
                    verdict: r.reason.as_str(),
                    ending: Ending::PolicyRefused {
                        reason: r.reason,
                        field: r.field,
                        message: r.message,
                    },
                };
            }
            // Never put to a person: `refused`, so it costs no attention.
            Verdict::ModelOwned { field, guidance } => {
                return Screened::Refused {
                    question: q,
                    verdict: Reason::PolicyModelOwned.as_str(),
                    ending: Ending::ModelOwned { field, guidance },
                };
            }
        }
        // spec 2026-07-28 mrtr.mdx "Server Requirements": never send an input
        // request the client has not declared support for.
        if convert::covered(self.profile, &q) {
            return Screened::Ask(q);
        }
        if q.kind == Kind::Elicitation && self.on_missing_capability == MissingCapability::Decline {
            tracing::info!(operation = %self.operation, trace_id = self.trace_id, key = %key, "client lacks the capability; declined on the user's behalf as configured (native)");
            return Screened::Decline(q);
        }
        let ending = Ending::MissingCapability(q.needs.to_value());
        Screened::Refused {
            question: q,
            verdict: Reason::MissingCapability.as_str(),
            ending,
        }
    }
}
