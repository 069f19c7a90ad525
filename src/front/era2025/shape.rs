//! 2026-07-28 answers as a 2025-era client reads them: a final result
//! without what 2026-07-28 adds, and each question of a round
//! (`front::rounds`) as the JSON-RPC request pushed on the call's stream.

use serde_json::{Map, Value, json};

use crate::mrtr::outgoing::Body;
use crate::protocol::meta;

/// A final answer written for a 2025-era client: no `resultType`, caching
/// hints or `serverInfo` (members its schema does not have).
pub fn final_body(body: Body) -> Body {
    match body {
        Body::Relayed { id, result } => Body::Relayed {
            id,
            result: result.for_2025_client(),
        },
        Body::Json(mut v) => {
            if let Some(result) = v.get_mut("result").and_then(Value::as_object_mut) {
                strip_2026_members(result);
            }
            Body::Json(v)
        }
        other => other,
    }
}

fn strip_2026_members(result: &mut Map<String, Value>) {
    for key in ["resultType", "ttlMs", "cacheScope"] {
        result.shift_remove(key);
    }
    let empty = match result.get_mut("_meta").and_then(Value::as_object_mut) {
        Some(m) => {
            m.shift_remove(meta::SERVER_INFO);
            m.shift_remove(meta::RELATED_TASK);
            m.is_empty()
        }
        None => false,
    };
    if empty {
        result.shift_remove("_meta");
    }
}

/// An input request pushed to a 2025-era client as the JSON-RPC request
/// `id`, in the form its negotiated `version` knows.
pub fn push(id: &str, request: &Value, version: &str) -> Value {
    let method = request
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut params = request
        .get("params")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if method == "elicitation/create" {
        let url_mode = params.get("mode").and_then(Value::as_str) == Some("url");
        if version < "2025-11-25" {
            // 2025-06-18's ElicitRequest has no `mode`: form is all there was.
            if !url_mode {
                params.shift_remove("mode");
            }
        } else if url_mode && !params.contains_key("elicitationId") {
            // 2025-11-25 schema ElicitRequestURLParams: `elicitationId` is
            // required; the question's id names it uniquely.
            params.insert("elicitationId".into(), Value::String(id.to_owned()));
        }
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> Value {
        json!({"method": "elicitation/create", "params": {"mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {}}}})
    }

    #[test]
    fn a_form_question_keeps_mode_only_for_clients_that_know_it() {
        let new = push("q1", &form(), "2025-11-25");
        assert_eq!(new["params"]["mode"], "form");
        assert_eq!(new["id"], "q1");
        assert_eq!(new["method"], "elicitation/create");
        let old = push("q1", &form(), "2025-06-18");
        assert!(old["params"].get("mode").is_none(), "{old}");
        assert_eq!(old["params"]["message"], "m");
    }

    #[test]
    fn a_url_question_gets_an_elicitation_id() {
        let url = json!({"method": "elicitation/create", "params": {"mode": "url", "message": "m", "url": "https://x.example/"}});
        let pushed = push("q-7", &url, "2025-11-25");
        assert_eq!(pushed["params"]["elicitationId"], "q-7");
    }

    #[test]
    fn a_2026_result_loses_what_2025_clients_do_not_know() {
        let body = Body::Json(json!({"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "complete", "ttlMs": 0, "cacheScope": "private", "tools": [],
            "_meta": {meta::SERVER_INFO: {"name": "s"}, "x": 1}
        }}));
        let Body::Json(v) = final_body(body) else {
            panic!()
        };
        assert_eq!(v["result"], json!({"tools": [], "_meta": {"x": 1}}));
    }
}
