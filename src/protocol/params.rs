//! A client's `params` as the front reads them: `_meta`'s protocol members
//! typed ([`ClientMeta`]), `arguments` kept as the text the client sent
//! ([`Arguments`]), every other member a tree.
//!
//! `_meta`'s protocol members (version, capabilities, client info, log
//! level) go into the request's context and never to a legacy server; read
//! into a map they were hashed in, looked up, copied out and cut again.
//!
//! `arguments` is read into a tree only by what looks inside it (a policy
//! rule, a mirrored header, a question's audit line, a retry's digest).
//! Most calls never look: their arguments go to the server as they came.
//! Read into a tree, copied into the operation and written out again, they
//! were three passes with a map and a hash per object, growing with the
//! arguments' size (`benches/WHERE_THE_TIME_GOES.md`).
//!
//! The text is checked when it is read with the verdicts a tree gives (a
//! lone surrogate escape, a number out of range or nesting past the limit
//! refuse the request as before), so the tree, when asked for, always
//! reads.

use std::sync::OnceLock;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::meta;
use crate::jsonrpc::Key;

/// `params.arguments`: its text, and its tree once something asked.
#[derive(Debug, Clone, Default)]
pub struct Arguments {
    text: Option<Box<RawValue>>,
    tree: OnceLock<Value>,
}

impl Arguments {
    /// Arguments given as a tree (a request made other than from a client's bytes).
    pub fn from_value(value: Value) -> Arguments {
        Arguments {
            text: serde_json::value::to_raw_value(&value).ok(),
            tree: OnceLock::from(value),
        }
    }

    /// The text as the client sent it; `None` when there were no arguments.
    pub fn text(&self) -> Option<&RawValue> {
        self.text.as_deref()
    }

    /// The tree; `null` when there were no arguments.
    pub fn value(&self) -> &Value {
        self.tree.get_or_init(|| match &self.text {
            // Checked when it was read (`Checked`): a `Value` reads it.
            Some(text) => serde_json::from_str(text.get()).unwrap_or(Value::Null),
            None => Value::Null,
        })
    }

    /// The tree as an object; empty when there were no arguments or they
    /// are not an object.
    pub fn object(&self) -> &Map<String, Value> {
        static EMPTY: OnceLock<Map<String, Value>> = OnceLock::new();
        self.value()
            .as_object()
            .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
    }
}

/// Equal when they are the same JSON (tests; the relay never compares).
impl PartialEq for Arguments {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

/// A client request's `params`: the members but `_meta` and `arguments` as
/// a tree, in the order sent, and those two apart.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientParams {
    pub members: Map<String, Value>,
    /// `None` when `_meta` is missing or not an object.
    pub meta: Option<ClientMeta>,
    pub arguments: Arguments,
}

/// A client request's `_meta`: the protocol members redmark reads, each as
/// sent (their checks are the front's), and every other member in the
/// order sent (`progressToken`, `traceparent`, extensions' keys).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientMeta {
    pub protocol_version: Option<Value>,
    pub capabilities: Option<Value>,
    pub client_info: Option<Value>,
    pub log_level: Option<Value>,
    pub other: Map<String, Value>,
}

impl ClientMeta {
    /// The member's slot, for the protocol members read typed.
    fn slot(&mut self, key: &str) -> Option<&mut Option<Value>> {
        match key {
            meta::PROTOCOL_VERSION => Some(&mut self.protocol_version),
            meta::CLIENT_CAPABILITIES => Some(&mut self.capabilities),
            meta::CLIENT_INFO => Some(&mut self.client_info),
            meta::LOG_LEVEL => Some(&mut self.log_level),
            _ => None,
        }
    }
}

/// From a tree: the `Value` path of [`crate::jsonrpc::Message::read_request`], tests.
impl From<Map<String, Value>> for ClientParams {
    fn from(mut members: Map<String, Value>) -> ClientParams {
        let arguments = match members.shift_remove("arguments") {
            Some(v) => Arguments::from_value(v),
            None => Arguments::default(),
        };
        let meta = match members.shift_remove("_meta") {
            Some(Value::Object(m)) => {
                let mut meta = ClientMeta::default();
                for (k, v) in m {
                    match meta.slot(&k) {
                        Some(slot) => *slot = Some(v),
                        None => {
                            meta.other.insert(k, v);
                        }
                    }
                }
                Some(meta)
            }
            _ => None,
        };
        ClientParams {
            members,
            meta,
            arguments,
        }
    }
}

impl<'de> Deserialize<'de> for ClientMeta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = ClientMeta;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ClientMeta, A::Error> {
                let mut meta = ClientMeta::default();
                while let Some(Key(key)) = map.next_key()? {
                    // A repeated member replaces the earlier one, as in a `Value` map.
                    match meta.slot(&key) {
                        Some(slot) => *slot = Some(map.next_value()?),
                        None => {
                            let value = map.next_value::<Value>()?;
                            meta.other.insert(key.into_owned(), value);
                        }
                    }
                }
                Ok(meta)
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// Boxed as the front reads them: a message's members are moved a few
/// times on their way into the typed request.
impl From<Map<String, Value>> for Box<ClientParams> {
    fn from(members: Map<String, Value>) -> Box<ClientParams> {
        Box::new(ClientParams::from(members))
    }
}

impl<'de> Deserialize<'de> for ClientParams {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = ClientParams;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ClientParams, A::Error> {
                let mut params = ClientParams::default();
                while let Some(Key(key)) = map.next_key()? {
                    if key == "arguments" {
                        // Borrowed from the body, checked, then copied once.
                        let text: &'de RawValue = map.next_value()?;
                        serde_json::from_str::<Checked>(text.get()).map_err(de::Error::custom)?;
                        // A repeated member replaces the earlier one, as in a `Value` map.
                        params.arguments = Arguments {
                            text: Some(text.to_owned()),
                            tree: OnceLock::new(),
                        };
                    } else if key == "_meta" {
                        // Not an object: the `Value` path reads it, as no `_meta`.
                        params.meta = map.next_value::<Option<ClientMeta>>()?;
                    } else {
                        let value = map.next_value::<Value>()?;
                        params.members.insert(key.into_owned(), value);
                    }
                }
                Ok(params)
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// Reads JSON with the checks a `Value` makes and builds nothing (not
/// `IgnoredAny`, which skips strings and numbers unread): strings
/// are read (escapes and surrogates checked, borrowed where they have no
/// escape), numbers parsed (range checked), nesting counted.
struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        // Keys are strings: read as such (a `Value` map reads each one).
        while map.next_key::<CheckedKey>()?.is_some() {
            map.next_value::<Checked>()?;
        }
        Ok(Checked)
    }
}

/// A key, read (and so checked) as a string and dropped.
struct CheckedKey;

impl<'de> Deserialize<'de> for CheckedKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_str(CheckedVisitor)
            .map(|_| CheckedKey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(params: &str) -> Result<ClientParams, serde_json::Error> {
        serde_json::from_str(params)
    }

    #[test]
    fn arguments_are_kept_as_sent_and_read_on_demand() {
        let p = read(r#"{"name":"t","arguments":{"b":1,  "a":[true,"x"]},"_meta":{}}"#).unwrap();
        assert_eq!(
            p.arguments.text().map(RawValue::get),
            Some(r#"{"b":1,  "a":[true,"x"]}"#)
        );
        assert_eq!(p.members.keys().collect::<Vec<_>>(), ["name"]);
        assert_eq!(p.meta, Some(ClientMeta::default()));
        assert_eq!(*p.arguments.value(), json!({"b": 1, "a": [true, "x"]}));
        assert_eq!(p.arguments.object().len(), 2);
    }

    #[test]
    fn no_arguments_read_as_null_and_an_empty_object() {
        let p = read(r#"{"name":"t"}"#).unwrap();
        assert!(p.arguments.text().is_none());
        assert_eq!(*p.arguments.value(), Value::Null);
        assert!(p.arguments.object().is_empty());
        // Not an object: kept and relayed, read as no arguments by the object readers.
        let p = read(r#"{"arguments":[1]}"#).unwrap();
        assert_eq!(p.arguments.text().map(RawValue::get), Some("[1]"));
        assert!(p.arguments.object().is_empty());
    }

    /// What a `Value` refuses inside `arguments` refuses the params, as a
    /// tree read of them did.
    #[test]
    fn arguments_a_tree_refuses_are_refused() {
        for bad in [
            r#"{"arguments":{"a":"\ud800"}}"#,
            r#"{"arguments":{"a":1e400}}"#,
            r#"{"arguments":{"\udc00":1}}"#,
            &format!(r#"{{"arguments":{}{}}}"#, "[".repeat(200), "]".repeat(200)),
        ] {
            assert!(read(bad).is_err(), "{bad}");
            assert!(serde_json::from_str::<Value>(bad).is_err(), "{bad}");
        }
        // And what it accepts is accepted, escapes included.
        let p = read(r#"{"arguments":{"a":"\ud83d\ude00 \"q\"","n":-1.5e3}}"#).unwrap();
        assert_eq!(p.arguments.value()["a"], json!("😀 \"q\""));
    }

    #[test]
    fn a_repeated_arguments_member_replaces_the_first() {
        let p = read(r#"{"arguments":{"a":1},"arguments":{"b":2}}"#).unwrap();
        assert_eq!(*p.arguments.value(), json!({"b": 2}));
    }

    #[test]
    fn from_a_tree_splits_the_arguments_off() {
        let p = ClientParams::from(
            json!({"name": "t", "arguments": {"x": 1}})
                .as_object()
                .unwrap()
                .clone(),
        );
        assert_eq!(p.members, *json!({"name": "t"}).as_object().unwrap());
        assert_eq!(p.arguments.text().map(RawValue::get), Some(r#"{"x":1}"#));
    }
}
