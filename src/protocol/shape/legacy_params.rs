//! A client's params as a legacy server gets them: without the 2026-only
//! members (`inputResponses`, `requestState`, `_meta`'s
//! `io.modelcontextprotocol/` keys) and 2025-11-25's `task`, and, for a call, written from the
//! client's parts ([`crate::protocol::ClientParams`]) without a tree of
//! them built: `arguments` is copied as the client wrote it.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::jsonrpc::Payload;
use crate::protocol::meta;
use crate::protocol::params::Arguments;

/// Whether a params member is one no server gets as the client sent it:
/// the MRTR retry's answers and state (2026-07-28 only; redmark answers for
/// them), and `task`, 2025-11-25's task augmentation, which 2026-07-28
/// moved to the tasks extension (`protocol::tasks`): passed on, it would
/// have a server make a task that no `tasks/*` through redmark can reach.
pub(crate) fn is_withheld_member(name: &str) -> bool {
    matches!(name, "inputResponses" | "requestState" | "task")
}

/// Whether a `_meta` key is the protocol's own (`io.modelcontextprotocol/`),
/// which the gateway answers for and a legacy server does not know.
fn is_protocol_meta(key: &str) -> bool {
    key.starts_with(meta::RESERVED_PREFIX)
}

/// Params for the upstream: the client's params without 2026-only fields,
/// moved, not copied. One pass over each map, no lookups by name (each
/// would hash the name), and the order the client wrote is kept.
pub fn into_upstream_params(params: Map<String, Value>) -> Map<String, Value> {
    let mut out = params;
    out.retain(|k, v| match k.as_str() {
        "_meta" => match v {
            Value::Object(m) => {
                m.retain(|k, _| !is_protocol_meta(k));
                !m.is_empty()
            }
            _ => true,
        },
        name => !is_withheld_member(name),
    });
    out
}

/// A call's params as the legacy server gets them, written from the
/// client's parts without a map of them built: the members
/// [`into_upstream_params`] keeps, `_meta`'s members but the protocol's
/// (`meta`, the client's other `_meta` members) with `traceparent` when the
/// operation is traced, then `arguments` copied as the client wrote them.
pub fn call_params(
    members: &Map<String, Value>,
    meta: &Map<String, Value>,
    traceparent: Option<&str>,
    arguments: &Arguments,
) -> Payload {
    let params = CallParams {
        members,
        meta: UpstreamMeta { meta, traceparent },
        arguments: arguments.text(),
    };
    match serde_json::value::to_raw_value(&params) {
        Ok(text) => Payload::Text(text),
        // Writing trees and checked text does not fail; if it did, the
        // tree is the same params.
        Err(_) => Payload::Tree(serde_json::to_value(&params).unwrap_or(Value::Null)),
    }
}

struct CallParams<'a> {
    members: &'a Map<String, Value>,
    meta: UpstreamMeta<'a>,
    arguments: Option<&'a RawValue>,
}

impl Serialize for CallParams<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        for (k, v) in self.members {
            if !is_withheld_member(k) {
                map.serialize_entry(k, v)?;
            }
        }
        if !self.meta.is_empty() {
            map.serialize_entry("_meta", &self.meta)?;
        }
        if let Some(arguments) = self.arguments {
            map.serialize_entry("arguments", arguments)?;
        }
        map.end()
    }
}

/// The `_meta` a legacy server gets: no `io.modelcontextprotocol/` key.
struct UpstreamMeta<'a> {
    meta: &'a Map<String, Value>,
    traceparent: Option<&'a str>,
}

impl UpstreamMeta<'_> {
    fn kept(&self) -> impl Iterator<Item = (&String, &Value)> {
        // The operation's own `traceparent`, when it has one, replaces the client's.
        let ours = self.traceparent.is_some();
        self.meta.iter().filter(move |(k, _)| {
            let replaced = ours && k.as_str() == "traceparent";
            !(is_protocol_meta(k) || replaced)
        })
    }

    fn is_empty(&self) -> bool {
        self.traceparent.is_none() && self.kept().next().is_none()
    }
}

impl Serialize for UpstreamMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        for (k, v) in self.kept() {
            map.serialize_entry(k, v)?;
        }
        if let Some(tp) = self.traceparent {
            map.serialize_entry("traceparent", tp)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn upstream_params_drop_2026_fields() {
        let p = json!({"name": "t", "inputResponses": {}, "requestState": "s", "task": {"ttl": 1}, "_meta": {meta::PROTOCOL_VERSION: "2026-07-28", "progressToken": 3}});
        let out = into_upstream_params(p.as_object().unwrap().clone());
        assert_eq!(
            Value::Object(out),
            json!({"name": "t", "_meta": {"progressToken": 3}})
        );
    }

    /// The arguments go out as the client wrote them, spacing and order
    /// included, after the members that stay.
    #[test]
    fn call_params_write_the_arguments_as_sent() {
        let p: crate::protocol::ClientParams = serde_json::from_str(
            r#"{"arguments": {"z": 1, "a": [ "x" ]}, "name": "t", "requestState": "s", "task": {}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}"#,
        )
        .unwrap();
        let meta = p.meta.unwrap().other;
        let out = serde_json::to_string(&call_params(&p.members, &meta, None, &p.arguments));
        assert_eq!(
            out.unwrap(),
            r#"{"name":"t","arguments":{"z": 1, "a": [ "x" ]}}"#
        );
        let none = call_params(&p.members, &meta, None, &Arguments::default());
        assert_eq!(serde_json::to_string(&none).unwrap(), r#"{"name":"t"}"#);
    }

    /// `_meta` keeps the client's own members, never the protocol's, and
    /// the operation's `traceparent` replaces the client's.
    #[test]
    fn call_params_keep_the_clients_own_meta() {
        let p: crate::protocol::ClientParams = serde_json::from_str(
            r#"{"name": "t", "_meta": {"progressToken": 7, "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/related-task": {}, "traceparent": "client", "x.example/k": [1]}}"#,
        )
        .unwrap();
        let meta = p.meta.unwrap().other;
        let out = call_params(&p.members, &meta, None, &p.arguments);
        assert_eq!(
            out.into_value(),
            json!({"name": "t", "_meta": {"progressToken": 7, "traceparent": "client", "x.example/k": [1]}})
        );
        let out = call_params(&p.members, &meta, Some("00-ours-01"), &p.arguments);
        assert_eq!(
            out.into_value(),
            json!({"name": "t", "_meta": {"progressToken": 7, "x.example/k": [1], "traceparent": "00-ours-01"}})
        );
    }
}
