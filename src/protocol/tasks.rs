//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on a
//! route that does not serve it: never half-supported. redmark routes no
//! `tasks/*` method, so it neither advertises the extension (in what it
//! relays of a server's `server/discover`) nor passes a client's
//! declaration on to a server, and a task it did not ask for is an invalid
//! answer (spec 2026-07-28 `basic/versioning.mdx` "Extension Negotiation":
//! an extension is in force only when both sides declared it).

use serde_json::{Map, Value};

/// The extension's identifier (spec ext-tasks "Extension Identifier").
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The `resultType` of a `CreateTaskResult` (spec ext-tasks "Polymorphic Results").
pub const RESULT_TYPE: &str = "task";

/// Whether a capabilities object (a client's or a server's) declares the extension.
pub fn declared(capabilities: &Value) -> bool {
    capabilities
        .get("extensions")
        .and_then(|e| e.get(EXTENSION))
        .is_some()
}

/// `capabilities` without the extension: taken out of `extensions`, and
/// `extensions` dropped when nothing else is left in it. Any other
/// extension stays as declared.
pub fn withheld(capabilities: &Map<String, Value>) -> Map<String, Value> {
    let mut caps = capabilities.clone();
    withhold(&mut caps);
    caps
}

/// [`withheld`], in place.
pub fn withhold(capabilities: &mut Map<String, Value>) {
    let emptied = match capabilities.get_mut("extensions") {
        Some(Value::Object(extensions)) => {
            extensions.remove(EXTENSION);
            extensions.is_empty()
        }
        _ => false,
    };
    if emptied {
        capabilities.remove("extensions");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn only_the_tasks_extension_is_withheld() {
        let caps = object(json!({
            "elicitation": {"form": {}},
            "extensions": {EXTENSION: {}, "com.example/other": {"x": 1}}
        }));
        assert!(declared(&Value::Object(caps.clone())));
        let out = withheld(&caps);
        assert_eq!(
            Value::Object(out.clone()),
            json!({"elicitation": {"form": {}}, "extensions": {"com.example/other": {"x": 1}}})
        );
        assert!(!declared(&Value::Object(out)));
    }

    #[test]
    fn extensions_emptied_by_it_go_too() {
        let mut caps = object(json!({"sampling": {}, "extensions": {EXTENSION: {}}}));
        withhold(&mut caps);
        assert_eq!(Value::Object(caps), json!({"sampling": {}}));
        let mut none = object(json!({"sampling": {}}));
        withhold(&mut none);
        assert_eq!(Value::Object(none), json!({"sampling": {}}));
    }
}
