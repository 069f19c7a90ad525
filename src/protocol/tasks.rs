//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): where
//! it is offered. A route with `[route.tasks]` serves gateway-made tasks
//! (`front::tasks`) and offers the extension in `server/discover`
//! ([`offer`]), or relays a native server's own (`mrtr::native::task`),
//! offering it as the server does. Every other route is never half-supported: it neither
//! advertises the extension (in what it relays of a server's
//! `server/discover`) nor passes a client's declaration on to a server, and
//! a task it did not ask for is an invalid answer (spec 2026-07-28
//! `basic/versioning.mdx` "Extension Negotiation": an extension is in force
//! only when both sides declared it).

use serde_json::{Map, Value, json};

use crate::protocol::{Reason, Reject};

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

/// Adds the extension to a `server/discover` result's
/// `capabilities.extensions` (ext-tasks "Capability Negotiation": "No
/// extension-specific settings are currently defined; an empty object
/// indicates support").
pub fn offer(discover: &mut Value) {
    let Some(caps) = discover
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let extensions = caps
        .entry("extensions")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(extensions) = extensions.as_object_mut() {
        extensions.insert(EXTENSION.to_owned(), Value::Object(Map::new()));
    }
}

/// Whether a request's per-request client capabilities declare the extension.
pub fn declared_on(ctx: &crate::protocol::RequestContext) -> bool {
    declared(&ctx.capabilities)
}

/// -32021 naming the extension (ext-tasks "Capability Negotiation": "the
/// server MUST return an error with the code `-32021` (Missing Required
/// Client Capability), indicating the required extension").
pub fn extension_required(why: &str) -> Reject {
    Reject::new(Reason::MissingCapability, why.to_owned()).with(
        "requiredCapabilities",
        json!({"extensions": {EXTENSION: {}}}),
    )
}

/// A task id that is not one of this principal's live tasks on this route:
/// the same answer whether it never existed, expired or is another's, so
/// nothing is disclosed (ext-tasks "Error Handling": "Invalid or
/// nonexistent `taskId`: `-32602` (Invalid params)").
pub fn unknown(task_id: &str) -> Reject {
    let shown: String = task_id.chars().take(80).collect();
    Reject::new(
        Reason::TaskUnknown,
        format!("no task `{shown}` of yours on this route (never made, expired, or not yours)"),
    )
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
    fn offering_adds_the_extension_beside_others() {
        let mut d = json!({"capabilities": {"tools": {}}});
        offer(&mut d);
        assert_eq!(d["capabilities"]["extensions"], json!({EXTENSION: {}}));
        let mut d = json!({"capabilities": {"extensions": {"com.example/x": {}}}});
        offer(&mut d);
        assert!(declared(&d["capabilities"]));
        assert!(
            d["capabilities"]["extensions"]
                .get("com.example/x")
                .is_some()
        );
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
