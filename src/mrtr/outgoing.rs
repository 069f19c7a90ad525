//! What an operation sends towards the client request attached to it: relayed
//! notifications, then one final JSON-RPC response with its typed outcome.

use http::StatusCode;
use serde_json::Value;

use crate::jsonrpc::Id;
use crate::protocol::{Reason, Reject};

/// How a final response ended, for metrics and the access log: no reading
/// the JSON back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A result (`complete` or `input_required`).
    Ok,
    /// An error with this `data.reason`.
    Error(Reason),
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error(r) => r.as_str(),
        }
    }
}

#[derive(Debug, PartialEq)]
pub enum Outgoing {
    /// A notification relayed before the final response.
    Notification(Value),
    /// The final JSON-RPC response; ends the exchange.
    Final {
        status: StatusCode,
        body: Value,
        outcome: Outcome,
    },
}

impl Outgoing {
    pub fn result(id: &Id, result: Value) -> Outgoing {
        Outgoing::Final {
            status: StatusCode::OK,
            body: crate::jsonrpc::result_response(id, result),
            outcome: Outcome::Ok,
        }
    }

    pub fn reject(id: Option<&Id>, reject: &Reject) -> Outgoing {
        Outgoing::Final {
            status: reject.status(),
            body: reject.response(id),
            outcome: Outcome::Error(reject.reason),
        }
    }
}
