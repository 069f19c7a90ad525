//! Reading a message from a peer's bytes: each member parsed on its own,
//! the envelope checked once ([`Members::envelope`]), and a request's
//! params read as a tree or as the front's typed client params.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{FramingError, Id, Message, Payload, Read, ReadError};

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
/// always copies; a derived identifier matches the borrowed name). Both
/// readers use it: this module's and the relayed answer's ([`super::Relayable`]).
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
pub(super) enum Member {
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
}
