//! What an operation sends towards the client request attached to it: relayed
//! notifications, then one final JSON-RPC response with its typed outcome.

use std::sync::Arc;

use http::StatusCode;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

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
    /// A round's questions: written from the text they are kept as.
    InputRequired { id: Id, result: InputRequired },
}

/// An `InputRequiredResult` (spec 2026-07-28 basic/patterns/mrtr.mdx).
/// The questions are kept as JSON text while they wait; reading each back
/// into a tree only to write it out again was a tenth of an elicitation
/// round's instructions.
#[derive(Debug, Clone)]
pub struct InputRequired {
    /// `inputRequests`: each question's `InputRequest`, by key, in the order asked.
    pub requests: Vec<(String, Box<RawValue>)>,
    /// The sealed `requestState`.
    pub state: String,
    /// The server's `serverInfo`, for `_meta`.
    pub server_info: Arc<crate::protocol::shape::ServerInfo>,
}

impl Serialize for InputRequired {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        struct Requests<'a>(&'a [(String, Box<RawValue>)]);
        impl Serialize for Requests<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_map(self.0.iter().map(|(k, v)| (k, v)))
            }
        }
        struct Meta<'a>(&'a crate::protocol::shape::ServerInfo);
        impl Serialize for Meta<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(crate::protocol::meta::SERVER_INFO, self.0)?;
                map.end()
            }
        }
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("resultType", "input_required")?;
        map.serialize_entry("inputRequests", &Requests(&self.requests))?;
        map.serialize_entry("requestState", &self.state)?;
        map.serialize_entry("_meta", &Meta(&self.server_info))?;
        map.end()
    }
}

/// Equal when the same JSON would be written.
impl PartialEq for InputRequired {
    fn eq(&self, other: &Self) -> bool {
        self.state == other.state
            && self.server_info == other.server_info
            && self.requests.len() == other.requests.len()
            && self
                .requests
                .iter()
                .zip(&other.requests)
                .all(|((k, v), (ok, ov))| k == ok && v.get() == ov.get())
    }
}

impl InputRequired {
    /// The result as a JSON tree (tests, and the paths that read it back).
    pub fn to_value(&self) -> Value {
        // Our own text and a `Value`: it always serialises.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Body {
    /// The body as a JSON tree (tests, and the paths that read it back).
    pub fn to_value(&self) -> Value {
        match self {
            Body::Json(v) => v.clone(),
            Body::Relayed { id, result } => crate::jsonrpc::result_response(id, result.to_value()),
            Body::InputRequired { id, result } => {
                crate::jsonrpc::result_response(id, result.to_value())
            }
        }
    }

    /// The result's `resultType`, if the body is a result that has one.
    pub fn result_type(&self) -> Option<&str> {
        match self {
            Body::Json(v) => v.get("result")?.get("resultType")?.as_str(),
            Body::Relayed { .. } => Some("complete"),
            Body::InputRequired { .. } => Some("input_required"),
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
        match self {
            Body::Json(v) => v.serialize(serializer),
            Body::Relayed { id, result } => response(serializer, id, result),
            Body::InputRequired { id, result } => response(serializer, id, result),
        }
    }
}

/// A JSON-RPC result response around `result`.
fn response<S: serde::Serializer>(
    serializer: S,
    id: &Id,
    result: &impl Serialize,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(3))?;
    map.serialize_entry("jsonrpc", "2.0")?;
    map.serialize_entry("id", id)?;
    map.serialize_entry("result", result)?;
    map.end()
}

impl Outgoing {
    /// A round's questions for the request `id`.
    pub fn input_required(id: &Id, result: InputRequired) -> Outgoing {
        Outgoing::Final {
            status: StatusCode::OK,
            body: Body::InputRequired {
                id: id.clone(),
                result,
            },
            outcome: Outcome::Ok,
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The questions go out as the text they are kept as, in the order
    /// asked, inside the result the spec lays out.
    #[test]
    fn an_input_required_result_is_written_from_its_questions_text() {
        let raw = |v: Value| serde_json::value::to_raw_value(&v).unwrap();
        let result = InputRequired {
            requests: vec![
                (
                    "room".into(),
                    raw(
                        json!({"method": "elicitation/create", "params": {"message": "Which room?"}}),
                    ),
                ),
                ("elicitation-2".into(), raw(json!({"method": "roots/list"}))),
            ],
            state: "sealed".into(),
            server_info: Arc::new(crate::protocol::shape::ServerInfo::new(
                json!({"name": "s", "version": "1"}),
            )),
        };
        let out = Outgoing::input_required(&Id::Number(7), result);
        let Outgoing::Final {
            status,
            body,
            outcome,
        } = out
        else {
            panic!("a final response")
        };
        assert_eq!((status, outcome), (StatusCode::OK, Outcome::Ok));
        assert_eq!(body.result_type(), Some("input_required"));
        let written: Value = serde_json::from_slice(&serde_json::to_vec(&body).unwrap()).unwrap();
        let expected = json!({"jsonrpc": "2.0", "id": 7, "result": {
            "resultType": "input_required",
            "inputRequests": {
                "room": {"method": "elicitation/create", "params": {"message": "Which room?"}},
                "elicitation-2": {"method": "roots/list"},
            },
            "requestState": "sealed",
            "_meta": {crate::protocol::meta::SERVER_INFO: {"name": "s", "version": "1"}},
        }});
        assert_eq!(written, expected);
        assert_eq!(body.to_value(), expected);
        let keys: Vec<&String> = written["result"]["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(keys, ["room", "elicitation-2"], "in the order asked");
    }
}
