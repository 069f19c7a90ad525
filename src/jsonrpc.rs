//! JSON-RPC 2.0 framing shared by both sides: ids, messages and error objects.
//!
//! Payloads stay `serde_json::Value`: a gateway relays fields it does not know,
//! so only the envelope is typed. A call's result, which redmark only
//! relays, may stay the text it came as ([`Payload`]), and so may the
//! params of a call it sends; a client's params are read typed by the
//! front ([`Message::read_request`], `protocol::ClientParams`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod payload;
mod read;

pub(crate) use payload::Key;
pub use payload::{Payload, Relayable};
pub(crate) use read::as_text;

/// A JSON-RPC request id. MCP forbids `null` ids (spec 2026-07-28
/// `basic/index.mdx` "Requests": "the ID **MUST NOT** be `null`").
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    Number(i64),
    String(String),
}

impl Id {
    /// Reads an id from a raw JSON value; `None` for anything MCP does not allow.
    pub fn from_value(value: &Value) -> Option<Id> {
        match value {
            Value::Number(n) => n.as_i64().map(Id::Number),
            Value::String(s) => Some(Id::String(s.clone())),
            _ => None,
        }
    }

    pub fn to_value(&self) -> Value {
        self.clone().into_value()
    }

    pub fn into_value(self) -> Value {
        match self {
            Id::Number(n) => Value::from(n),
            Id::String(s) => Value::from(s),
        }
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// The `error` member of a JSON-RPC error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

/// Standard JSON-RPC and MCP error codes (spec 2026-07-28 `basic/index.mdx`, "Error Codes").
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    pub const HEADER_MISMATCH: i64 = -32020;
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// Resource not found in 2025-11-25 and earlier; 2026-07-28 uses -32602 instead.
    pub const LEGACY_RESOURCE_NOT_FOUND: i64 = -32002;
}

/// One message read from a peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request's params are a tree when read from a peer; a request
    /// redmark sends may carry a client's params as the text they came as
    /// ([`Payload::Text`]), written out without being built.
    Request {
        id: Id,
        method: String,
        params: Option<Payload>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    Response {
        id: Id,
        outcome: Result<Value, ErrorObject>,
    },
}

/// A message read by [`Message::read_request`]: a request's params as `P`.
#[derive(Debug)]
pub enum Read<P> {
    Request {
        id: Id,
        method: String,
        params: Option<P>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    Response {
        id: Id,
        outcome: Result<Value, ErrorObject>,
    },
}

/// Why a JSON value is not a JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("a JSON-RPC message must be a JSON object")]
    NotAnObject,
    #[error("`jsonrpc` must be \"2.0\"")]
    WrongVersion,
    #[error("`method` must be a string")]
    BadMethod,
    #[error("`id` must be a string or an integer")]
    BadId,
    #[error("`params` must be an object")]
    BadParams,
    #[error("a response must carry exactly one of `result` and `error`")]
    BadResponse,
}

/// Why bytes from a peer are not a JSON-RPC message.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Not JSON at all.
    #[error("{0}")]
    Json(serde_json::Error),
    /// JSON, but not a message; `id` is the request's, where it could be read.
    #[error("{error}")]
    Framing { id: Option<Id>, error: FramingError },
}

impl Message {
    pub fn to_value(&self) -> Value {
        self.clone().into_value()
    }

    /// The message as JSON, moving its params or result instead of copying them.
    pub fn into_value(self) -> Value {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), "2.0".into());
        match self {
            Message::Request { id, method, params } => {
                obj.insert("id".into(), id.into_value());
                obj.insert("method".into(), method.into());
                if let Some(p) = params {
                    obj.insert("params".into(), p.into_value());
                }
            }
            Message::Notification { method, params } => {
                obj.insert("method".into(), method.into());
                if let Some(p) = params {
                    obj.insert("params".into(), p);
                }
            }
            Message::Response { id, outcome } => {
                obj.insert("id".into(), id.into_value());
                match outcome {
                    Ok(result) => obj.insert("result".into(), result),
                    Err(error) => obj.insert("error".into(), error_value(&error)),
                };
            }
        }
        Value::Object(obj)
    }
}

/// Written as [`Message::into_value`] lays it out, straight from the
/// message: a session's outgoing messages are serialised once, by the
/// transport, without first building a map of their members.
impl Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("jsonrpc", "2.0")?;
        match self {
            Message::Request { id, method, params } => {
                map.serialize_entry("id", id)?;
                map.serialize_entry("method", method)?;
                if let Some(p) = params {
                    map.serialize_entry("params", p)?;
                }
            }
            Message::Notification { method, params } => {
                map.serialize_entry("method", method)?;
                if let Some(p) = params {
                    map.serialize_entry("params", p)?;
                }
            }
            Message::Response { id, outcome } => {
                map.serialize_entry("id", id)?;
                match outcome {
                    Ok(result) => map.serialize_entry("result", result)?,
                    Err(error) => map.serialize_entry("error", error)?,
                }
            }
        }
        map.end()
    }
}

fn error_value(error: &ErrorObject) -> Value {
    serde_json::to_value(error)
        .unwrap_or_else(|_| serde_json::json!({"code": error.code, "message": error.message}))
}

/// A JSON-RPC error response; `id` is `None` only when the request id could not be read.
pub fn error_response(id: Option<&Id>, error: &ErrorObject) -> Value {
    let mut obj = Map::new();
    obj.insert("jsonrpc".into(), "2.0".into());
    if let Some(id) = id {
        obj.insert("id".into(), id.to_value());
    }
    obj.insert("error".into(), error_value(error));
    Value::Object(obj)
}

pub fn result_response(id: &Id, result: Value) -> Value {
    // Not `json!`: it would serialise `result` into a copy of itself.
    let mut obj = Map::with_capacity(3);
    obj.insert("jsonrpc".into(), "2.0".into());
    obj.insert("id".into(), id.to_value());
    obj.insert("result".into(), result);
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classifies_messages() {
        let req = Message::from_value(json!({"jsonrpc":"2.0","id":"a","method":"m","params":{}}))
            .unwrap();
        assert!(matches!(req, Message::Request { id: Id::String(ref s), .. } if s == "a"));
        let note = Message::from_value(json!({"jsonrpc":"2.0","method":"n"})).unwrap();
        assert!(matches!(note, Message::Notification { .. }));
        let resp = Message::from_value(json!({"jsonrpc":"2.0","id":3,"result":{}})).unwrap();
        assert_eq!(
            resp,
            Message::Response {
                id: Id::Number(3),
                outcome: Ok(json!({}))
            }
        );
        let err =
            Message::from_value(json!({"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x"}}))
                .unwrap();
        assert!(matches!(
            err,
            Message::Response {
                outcome: Err(ErrorObject { code: -1, .. }),
                ..
            }
        ));
    }

    #[test]
    fn rejects_what_mcp_forbids() {
        assert_eq!(
            Message::from_value(json!([1])),
            Err(FramingError::NotAnObject)
        );
        assert_eq!(
            Message::from_value(json!({"jsonrpc":"1.0","id":1,"method":"m"})),
            Err(FramingError::WrongVersion)
        );
        assert_eq!(
            Message::from_value(json!({"jsonrpc":"2.0","id":null,"method":"m"})),
            Err(FramingError::BadId)
        );
        assert_eq!(
            Message::from_value(json!({"jsonrpc":"2.0","id":1.5,"method":"m"})),
            Err(FramingError::BadId)
        );
        assert_eq!(
            Message::from_value(json!({"jsonrpc":"2.0","id":1,"method":"m","params":[1]})),
            Err(FramingError::BadParams)
        );
        assert_eq!(
            Message::from_value(json!({"jsonrpc":"2.0","id":1,"result":1,"error":{}})),
            Err(FramingError::BadResponse)
        );
    }

    #[test]
    fn serialises_as_its_value_does() {
        let messages = [
            Message::Request {
                id: Id::Number(1),
                method: "tools/call".into(),
                params: Some(json!({"name": "t", "arguments": {"b": 1, "a": [true]}}).into()),
            },
            Message::Request {
                id: Id::String("x".into()),
                method: "ping".into(),
                params: None,
            },
            Message::Notification {
                method: "notifications/cancelled".into(),
                params: Some(json!({"requestId": 1})),
            },
            Message::Response {
                id: Id::Number(2),
                outcome: Ok(json!({"action": "accept", "content": {"z": 1, "a": 2}})),
            },
            Message::Response {
                id: Id::Number(3),
                outcome: Err(ErrorObject::new(-32601, "nope").with_data(json!({"k": 1}))),
            },
        ];
        for m in messages {
            assert_eq!(
                serde_json::to_string(&m).unwrap(),
                serde_json::to_string(&m.to_value()).unwrap()
            );
        }
    }

    #[test]
    fn reading_bytes_gives_the_verdicts_of_reading_a_value() {
        let cases: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":"a","method":"m","params":{"b":1,"a":2}}"#,
            br#"{"jsonrpc":"2.0","method":"n","params":null}"#,
            br#"{"jsonrpc":"2.0","id":3,"result":{"z":[1,{"y":2}],"a":null},"extra":[1,2]}"#,
            br#"{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x","data":{"k":1}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"first","method":"second"}"#,
            br#"{"jsonr\u0070c":"2.0","id":1,"method":"escaped key"}"#,
            br#"[1]"#,
            br#""text""#,
            br#"{"jsonrpc":"1.0","id":1,"method":"m"}"#,
            br#"{"id":1,"method":"m"}"#,
            br#"{"jsonrpc":"2.0","id":null,"method":"m"}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}"#,
            br#"{"jsonrpc":"2.0","result":{}}"#,
        ];
        for bytes in cases {
            let by_value = Message::from_value(serde_json::from_slice(bytes).unwrap());
            let by_bytes = Message::from_slice(bytes);
            match (by_value, by_bytes) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{}", String::from_utf8_lossy(bytes)),
                (Err(a), Err(ReadError::Framing { error, .. })) => {
                    assert_eq!(a, error, "{}", String::from_utf8_lossy(bytes));
                }
                (a, b) => panic!("{}: {a:?} vs {b:?}", String::from_utf8_lossy(bytes)),
            }
        }
        // The id of a request that is not a message still reaches its error.
        assert!(matches!(
            Message::from_slice(br#"{"jsonrpc":"2.0","id":"q","method":"m","params":3}"#),
            Err(ReadError::Framing { id: Some(Id::String(ref s)), error: FramingError::BadParams }) if s == "q"
        ));
        assert!(matches!(
            Message::from_slice(br#"[{"jsonrpc":"2.0","id":4,"method":"m"}]"#),
            Err(ReadError::Framing {
                id: None,
                error: FramingError::NotAnObject
            })
        ));
        assert!(matches!(
            Message::from_slice(b"{\"jsonrpc\":"),
            Err(ReadError::Json(_))
        ));
        assert!(matches!(
            Message::from_slice(b"{} trailing"),
            Err(ReadError::Json(_))
        ));
        // What a `Value` refuses in a member redmark does not read is refused too.
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","x":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let refused: [&[u8]; 5] = [
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","x":"\ud800"}"#,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"\xff\"}",
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","x":1e400}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","x":{"\ud800":1}}"#,
            deep.as_bytes(),
        ];
        for bytes in refused {
            assert!(serde_json::from_slice::<Value>(bytes).is_err());
            assert!(
                matches!(Message::from_slice(bytes), Err(ReadError::Json(_))),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn round_trips() {
        let m = Message::Response {
            id: Id::String("x".into()),
            outcome: Err(ErrorObject::new(-32601, "nope")),
        };
        assert_eq!(Message::from_value(m.to_value()).unwrap(), m);
    }
}
