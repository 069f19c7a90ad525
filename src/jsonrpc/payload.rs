//! A response's `result` (or a request's `params`) as redmark holds it: a
//! tree where redmark reads or builds it, or JSON text where redmark only
//! relays it (a server's result; a call's params written from the client's
//! parts, `protocol::shape::call_params`).
//!
//! A call's result is written to the client with three members added
//! (`resultType`, `_meta.serverInfo`, the caching hints of a list) and
//! nothing else changed. Reading it into a `Value` (a map per object, a
//! SipHash per key) to write it out again was the largest part of relaying
//! it; kept as text, only its top-level members are found, and the rest is
//! copied (`benches/WHERE_THE_TIME_GOES.md`).
//!
//! The text is JSON serde_json has checked (syntax and UTF-8), not a tree:
//! a lone surrogate escape or a number out of `f64`'s range inside it is
//! relayed as the server sent it, as any HTTP proxy would, where reading it
//! into a `Value` would refuse the whole answer.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::read::Member;
use super::{ErrorObject, Id, Message, ReadError};

/// A response's `result`.
#[derive(Debug, Clone)]
pub enum Payload {
    /// Read (or built) as a tree.
    Tree(Value),
    /// As the server sent it.
    Text(Box<RawValue>),
}

impl Payload {
    /// The result as a tree (read from the text if need be); `Null` for
    /// text a `Value` cannot hold (see the module's note).
    pub fn into_value(self) -> Value {
        match self {
            Payload::Tree(v) => v,
            Payload::Text(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
        }
    }

    /// The members of an object result in the order sent, each value as
    /// its text; `None` when the result is not an object.
    pub fn text_members(raw: &RawValue) -> Option<Vec<(Cow<'_, str>, &RawValue)>> {
        serde_json::from_str::<Members<'_>>(raw.get())
            .ok()
            .map(|m| m.0)
    }
}

impl From<Value> for Payload {
    fn from(v: Value) -> Payload {
        Payload::Tree(v)
    }
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Payload::Tree(v) => v.serialize(serializer),
            Payload::Text(raw) => raw.serialize(serializer),
        }
    }
}

/// Equal when they are the same JSON (text is read to compare: tests and
/// tombstones, never the relay).
impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Payload::Tree(a), Payload::Tree(b)) => a == b,
            (a, b) => a.clone().into_value() == b.clone().into_value(),
        }
    }
}

/// A message read for relaying: a response to one of redmark's requests
/// keeps its `result` as text; anything else is a [`Message`].
#[derive(Debug)]
pub enum Relayable {
    Response {
        id: Id,
        outcome: Result<Payload, ErrorObject>,
    },
    Message(Message),
}

impl Relayable {
    /// Reads one message. A response with a `result` is read with the
    /// verdicts of [`Message::from_slice`] on its envelope, its result
    /// checked as JSON but not built; everything else goes through
    /// [`Message::from_slice`] itself.
    pub fn from_slice(bytes: &[u8]) -> Result<Relayable, ReadError> {
        if let Some(text) = super::as_text(bytes)
            && let Ok(envelope) = serde_json::from_str::<Envelope<'_>>(text)
            && let Some(response) = envelope.response()
        {
            return Ok(response);
        }
        Message::from_slice(bytes).map(|m| match m {
            Message::Response { id, outcome } => Relayable::Response {
                id,
                outcome: outcome.map(Payload::Tree),
            },
            other => Relayable::Message(other),
        })
    }
}

/// The envelope of a response with a result: every other member read as
/// [`Message::from_slice`] reads it (an unknown one as a `Value`, so that
/// what refuses a message there refuses it here). At `method`, `params` or
/// `error` it stops: a request, a notification or an error goes to the
/// message path without being read twice.
#[derive(Default)]
struct Envelope<'a> {
    jsonrpc: Option<Cow<'a, str>>,
    id: Option<Value>,
    result: Option<&'a RawValue>,
    /// A member seen twice: left to the `Value` path, where the last wins.
    repeated: bool,
}

impl Envelope<'_> {
    fn response(self) -> Option<Relayable> {
        if self.repeated || self.jsonrpc.as_deref() != Some("2.0") {
            return None;
        }
        let id = Id::from_value(self.id.as_ref()?)?;
        let result = self.result?.to_owned();
        Some(Relayable::Response {
            id,
            outcome: Ok(Payload::Text(result)),
        })
    }
}

impl<'de> Deserialize<'de> for Envelope<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Envelope<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON-RPC response object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Envelope<'de>, A::Error> {
                let mut e = Envelope::default();
                let mut seen = [false; 3];
                while let Some(member) = map.next_key::<Member>()? {
                    let at = match member {
                        Member::Jsonrpc => {
                            e.jsonrpc = Some(map.next_value::<Key<'de>>()?.0);
                            0
                        }
                        Member::Id => {
                            e.id = Some(map.next_value()?);
                            1
                        }
                        Member::Result => {
                            e.result = Some(map.next_value()?);
                            2
                        }
                        Member::Method | Member::Params | Member::Error => {
                            // Not a result: stop here, the message path reads it.
                            return Err(serde::de::Error::custom("not a result"));
                        }
                        Member::Other => {
                            map.next_value::<Value>()?;
                            continue;
                        }
                    };
                    e.repeated |= std::mem::replace(&mut seen[at], true);
                }
                Ok(e)
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// An object's members, each value as its text.
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Members<'de>, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    out.push((key.0, map.next_value()?));
                }
                Ok(Members(out))
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// A string borrowed from the input where it has no escapes (serde's own
/// `Cow<str>` always copies): member names that are matched or relayed,
/// not kept (here, and in the front's typed read of a client's params).
pub(crate) struct Key<'a>(pub(crate) Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(Visit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn relayed(bytes: &[u8]) -> (Id, Payload) {
        match Relayable::from_slice(bytes) {
            Ok(Relayable::Response {
                id,
                outcome: Ok(payload),
            }) => (id, payload),
            other => panic!("expected a result, got {other:?}"),
        }
    }

    #[test]
    fn a_result_is_kept_as_the_text_the_server_sent() {
        let body = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}"#;
        let (id, payload) = relayed(body);
        assert_eq!(id, Id::Number(7));
        let Payload::Text(raw) = &payload else {
            panic!("kept as text")
        };
        assert_eq!(
            raw.get(),
            r#"{"content":[{"type":"text","text":"hi"}],"isError":false}"#
        );
        let members = Payload::text_members(raw).unwrap();
        let names: Vec<&str> = members.iter().map(|(k, _)| &**k).collect();
        assert_eq!(names, ["content", "isError"], "in the order sent");
        assert_eq!(
            payload.into_value(),
            json!({"content": [{"type": "text", "text": "hi"}], "isError": false})
        );
    }

    /// Whatever `Message::from_slice` refuses or reads as something else
    /// is not taken for a relayable result.
    #[test]
    fn anything_but_a_well_formed_result_takes_the_message_path() {
        let as_message = |bytes: &[u8]| {
            assert!(
                !matches!(
                    Relayable::from_slice(bytes),
                    Ok(Relayable::Response {
                        outcome: Ok(Payload::Text(_)),
                        ..
                    })
                ),
                "{}",
                String::from_utf8_lossy(bytes)
            );
            let expected = Message::from_slice(bytes).map_err(|e| e.to_string());
            let got = Relayable::from_slice(bytes)
                .map(|r| match r {
                    Relayable::Response { id, outcome } => Message::Response {
                        id,
                        outcome: outcome.map(Payload::into_value),
                    },
                    Relayable::Message(m) => m,
                })
                .map_err(|e| e.to_string());
            assert_eq!(got, expected, "{}", String::from_utf8_lossy(bytes));
        };
        for bytes in [
            &br#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":-1,"message":"x"}}"#,
            br#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            br#"{"id":1,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#,
            br#"{"jsonrpc":"2.0","result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"a":1},"result":{"b":2}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{},"x":"\ud800"}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"#,
            b"[1]",
        ] {
            as_message(bytes);
        }
    }

    /// The server's own payload is relayed as it came (module note).
    #[test]
    fn a_result_a_value_could_not_hold_is_relayed_as_sent() {
        let (_, payload) =
            relayed(br#"{"jsonrpc":"2.0","id":1,"result":{"n":1e400,"s":"\ud800"}}"#);
        let Payload::Text(raw) = payload else {
            panic!("kept as text")
        };
        assert_eq!(raw.get(), r#"{"n":1e400,"s":"\ud800"}"#);
    }

    /// The body is checked as UTF-8 whole before it is read as text: bytes
    /// that are not UTF-8 anywhere, the result included, refuse the message
    /// as reading bytes did; text that is UTF-8 is relayed byte for byte.
    #[test]
    fn a_result_that_is_not_utf8_is_refused_and_one_that_is_is_relayed() {
        let bad = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"\xff\"}}";
        assert!(matches!(
            Relayable::from_slice(bad),
            Err(ReadError::Json(_))
        ));
        let (_, payload) = relayed(
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"caf\u{e9} \u{1f600}\"}}"
                .as_bytes(),
        );
        let Payload::Text(raw) = payload else {
            panic!("a result is relayed as text")
        };
        assert_eq!(raw.get(), "{\"text\":\"caf\u{e9} \u{1f600}\"}");
    }

    #[test]
    fn member_names_with_escapes_are_read_too() {
        let raw = serde_json::value::to_raw_value(&json!({"a\"b": 1, "c": [2]})).unwrap();
        let members = Payload::text_members(&raw).unwrap();
        assert_eq!(members[0].0, "a\"b");
        assert_eq!(members[1].1.get(), "[2]");
        assert!(
            Payload::text_members(&serde_json::value::to_raw_value(&json!([1])).unwrap()).is_none()
        );
    }
}
