//! What an operation sends towards the client request attached to it: relayed
//! notifications, then one final JSON-RPC response with its typed outcome.

use http::StatusCode;
use serde::Serialize;
use serde_json::Value;

use crate::jsonrpc::Id;
use crate::protocol::shape::Stamped;
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
        body: Body,
        outcome: Outcome,
    },
}

/// A final response's JSON-RPC body.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Built as a tree: errors, input requests, redmark's own results.
    Json(Value),
    /// A server's result, relayed: stamped as it is written.
    Relayed { id: Id, result: Stamped },
}

impl Body {
    /// The body as a JSON tree (tests, and the paths that read it back).
    pub fn to_value(&self) -> Value {
        match self {
            Body::Json(v) => v.clone(),
            Body::Relayed { id, result } => crate::jsonrpc::result_response(id, result.to_value()),
        }
    }

    /// The result's `resultType`, if the body is a result that has one.
    pub fn result_type(&self) -> Option<&str> {
        match self {
            Body::Json(v) => v.get("result")?.get("resultType")?.as_str(),
            Body::Relayed { .. } => Some("complete"),
        }
    }
}

impl From<Value> for Body {
    fn from(v: Value) -> Body {
        Body::Json(v)
    }
}

/// Written as [`Body::to_value`] lays it out, without building the tree.
impl Serialize for Body {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Body::Json(v) => v.serialize(serializer),
            Body::Relayed { id, result } => {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("jsonrpc", "2.0")?;
                map.serialize_entry("id", id)?;
                map.serialize_entry("result", result)?;
                map.end()
            }
        }
    }
}

impl Outgoing {
    pub fn result(id: &Id, result: Value) -> Outgoing {
        Outgoing::Final {
            status: StatusCode::OK,
            body: Body::Json(crate::jsonrpc::result_response(id, result)),
            outcome: Outcome::Ok,
        }
    }

    /// A server's result, relayed with what 2026-07-28 adds to it.
    pub fn relayed(id: &Id, result: Stamped) -> Outgoing {
        Outgoing::Final {
            status: StatusCode::OK,
            body: Body::Relayed {
                id: id.clone(),
                result,
            },
            outcome: Outcome::Ok,
        }
    }

    pub fn reject(id: Option<&Id>, reject: &Reject) -> Outgoing {
        Outgoing::Final {
            status: reject.status(),
            body: Body::Json(reject.response(id)),
            outcome: Outcome::Error(reject.reason),
        }
    }
}
