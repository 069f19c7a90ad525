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

pub(crate) use payload::Key;
pub use payload::{Payload, Relayable};

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

/// The members of a message, each parsed on its own: reading a message this
/// way builds no map of the whole message (a hashed insert per member, then a
/// removal per member again), only the payloads' own trees.
/// `P` is how `params` is read: a tree, or the front's typed client params.
struct Members<P = Value> {
    jsonrpc: Option<Value>,
    id: Option<Value>,
    method: Option<Value>,
    params: Option<P>,
    result: Option<Value>,
    error: Option<Value>,
}

impl<P> Default for Members<P> {
    fn default() -> Self {
        Members {
            jsonrpc: None,
            id: None,
            method: None,
            params: None,
            result: None,
            error: None,
        }
    }
}

/// A message's member name, read without a copy of it (serde's `Cow<str>`
/// always copies; a derived identifier matches the borrowed name).
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Member {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    #[serde(other)]
    Other,
}

impl<'de, P: Deserialize<'de>> Deserialize<'de> for Members<P> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<P>(std::marker::PhantomData<P>);
        impl<'de, P: Deserialize<'de>> serde::de::Visitor<'de> for Visit<P> {
            type Value = Members<P>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON-RPC message object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Members<P>, A::Error> {
                let mut m = Members::default();
                while let Some(member) = map.next_key::<Member>()? {
                    // A repeated member replaces the earlier one, as in a `Value` map.
                    let slot = match member {
                        Member::Jsonrpc => &mut m.jsonrpc,
                        Member::Id => &mut m.id,
                        Member::Method => &mut m.method,
                        Member::Params => {
                            // `null` is read as no params, as `classify` reads it.
                            m.params = map.next_value::<Option<P>>()?;
                            continue;
                        }
                        Member::Result => &mut m.result,
                        Member::Error => &mut m.error,
                        Member::Other => {
                            // Read as a `Value`, not skipped: `IgnoredAny` checks only the
                            // syntax, and a member a `Value` refuses (a lone surrogate,
                            // invalid UTF-8, a number out of range, nesting past the
                            // limit) must refuse the message as it always did.
                            map.next_value::<Value>()?;
                            continue;
                        }
                    };
                    *slot = Some(map.next_value()?);
                }
                Ok(m)
            }
        }
        deserializer.deserialize_map(Visit(std::marker::PhantomData))
    }
}

impl<P> Members<P> {
    /// What every message must be, whatever it is: `jsonrpc` "2.0", and an
    /// `id`, where there is one, a string or an integer.
    fn envelope(&self) -> Result<Option<Id>, FramingError> {
        if self.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
            return Err(FramingError::WrongVersion);
        }
        match &self.id {
            None => Ok(None),
            Some(raw) => Id::from_value(raw).map(Some).ok_or(FramingError::BadId),
        }
    }
}

impl Members {
    fn from_object(mut obj: Map<String, Value>) -> Members {
        Members {
            jsonrpc: obj.remove("jsonrpc"),
            id: obj.remove("id"),
            method: obj.remove("method"),
            params: obj.remove("params"),
            result: obj.remove("result"),
            error: obj.remove("error"),
        }
    }

    fn classify(self) -> Result<Message, FramingError> {
        let id = self.envelope()?;
        if let Some(method) = self.method {
            let Value::String(method) = method else {
                return Err(FramingError::BadMethod);
            };
            let params = match self.params {
                None | Some(Value::Null) => None,
                Some(p @ Value::Object(_)) => Some(p),
                Some(_) => return Err(FramingError::BadParams),
            };
            return Ok(match id {
                Some(id) => Message::Request {
                    id,
                    method,
                    params: params.map(Payload::Tree),
                },
                None => Message::Notification { method, params },
            });
        }
        let id = id.ok_or(FramingError::BadId)?;
        let outcome = match (self.result, self.error) {
            (Some(result), None) => Ok(result),
            (None, Some(error)) => {
                Err(serde_json::from_value(error).map_err(|_| FramingError::BadResponse)?)
            }
            _ => return Err(FramingError::BadResponse),
        };
        Ok(Message::Response { id, outcome })
    }
}

/// The bytes as text, checked as UTF-8 once and whole. serde_json reading
/// bytes checks each string it meets on its own, and reading text checks
/// none: a passthrough call's 19 strings were 1.7k instructions of
/// `from_utf8`, the whole body about a tenth of that. Invalid UTF-8 is left
/// to the byte reader, whose error says where.
pub(crate) fn as_text(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes).ok()
}

impl Message {
    /// Classifies a parsed JSON value as a request, notification or response.
    pub fn from_value(value: Value) -> Result<Message, FramingError> {
        let Value::Object(obj) = value else {
            return Err(FramingError::NotAnObject);
        };
        Members::from_object(obj).classify()
    }

    /// Reads one message from a peer's bytes, with the same verdicts as
    /// parsing a `Value` and [`Message::from_value`], without the map of
    /// the whole message in between.
    pub fn from_slice(bytes: &[u8]) -> Result<Message, ReadError> {
        if let Some(text) = as_text(bytes)
            && let Ok(members) = serde_json::from_str::<Members>(text)
            && let Ok(message) = members.classify()
        {
            return Ok(message);
        }
        // Not JSON, not an object, or not a message: the slow path says
        // which, precisely, with the request's id. Only refusals pay for it.
        let value: Value = serde_json::from_slice(bytes).map_err(ReadError::Json)?;
        let id = value.get("id").and_then(Id::from_value);
        Message::from_value(value).map_err(|error| ReadError::Framing { id, error })
    }

    /// Reads one message as [`Message::from_slice`] does, a request's
    /// params as `P` (the front reads a client's params typed, without a
    /// tree for what it only relays). Same verdicts: what `P` refuses
    /// goes to the `Value` path, which says precisely why, and a request
    /// that path accepts has its params made a `P` from the tree.
    pub fn read_request<'a, P>(bytes: &'a [u8]) -> Result<Read<P>, ReadError>
    where
        P: Deserialize<'a> + From<Map<String, Value>>,
    {
        if let Some(text) = as_text(bytes)
            && let Ok(members) = serde_json::from_str::<Members<P>>(text)
            && let Ok(Some(id)) = members.envelope()
            && let Some(Value::String(method)) = members.method
        {
            return Ok(Read::Request {
                id,
                method,
                params: members.params,
            });
        }
        Ok(match Message::from_slice(bytes)? {
            Message::Request { id, method, params } => Read::Request {
                id,
                method,
                params: match params.map(Payload::into_value) {
                    Some(Value::Object(p)) => Some(P::from(p)),
                    _ => None,
                },
            },
            Message::Notification { method, params } => Read::Notification { method, params },
            Message::Response { id, outcome } => Read::Response { id, outcome },
        })
    }

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
