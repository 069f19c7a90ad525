//! Validation against the 2026-07-28 JSON schema (tests/schema/2026-07-28.json).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

use super::repo;

/// Validates `value` against `$defs/<definition>` of the 2026-07-28 schema.
pub fn assert_schema(definition: &str, value: &Value) {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    static VALIDATORS: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> =
        OnceLock::new();
    let schema = SCHEMA.get_or_init(|| {
        let text = std::fs::read_to_string(repo().join("tests/schema/2026-07-28.json"))
            .expect("schema file");
        serde_json::from_str(&text).expect("schema JSON")
    });
    let validator = {
        let mut map = VALIDATORS
            .get_or_init(|| Mutex::new(HashMap::new()))
            .lock()
            .unwrap();
        map.entry(definition.to_owned())
            .or_insert_with(|| {
                assert!(
                    schema["$defs"].get(definition).is_some(),
                    "no $defs/{definition} in the schema"
                );
                let wrapper = json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "$ref": format!("#/$defs/{definition}"),
                    "$defs": schema["$defs"].clone(),
                });
                Arc::new(
                    jsonschema::options()
                        .with_draft(jsonschema::Draft::Draft202012)
                        .build(&wrapper)
                        .expect("schema compiles"),
                )
            })
            .clone()
    };
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "not a valid {definition}: {errors:?}\n{value:#}"
    );
}

/// Validates a whole response: the envelope, and the inner result by its `resultType`.
pub fn assert_response_schema(method: &str, response: &Value) {
    if response.get("error").is_some() {
        assert_schema("JSONRPCErrorResponse", response);
        return;
    }
    let (envelope, result) = match method {
        "server/discover" => ("DiscoverResultResponse", "DiscoverResult"),
        "tools/list" => ("ListToolsResultResponse", "ListToolsResult"),
        "tools/call" => ("CallToolResultResponse", "CallToolResult"),
        "prompts/list" => ("ListPromptsResultResponse", "ListPromptsResult"),
        "prompts/get" => ("GetPromptResultResponse", "GetPromptResult"),
        "resources/list" => ("ListResourcesResultResponse", "ListResourcesResult"),
        "resources/templates/list" => (
            "ListResourceTemplatesResultResponse",
            "ListResourceTemplatesResult",
        ),
        "resources/read" => ("ReadResourceResultResponse", "ReadResourceResult"),
        "completion/complete" => ("CompleteResultResponse", "CompleteResult"),
        other => panic!("no schema mapping for {other}"),
    };
    assert_schema(envelope, response);
    let r = &response["result"];
    match r["resultType"].as_str() {
        Some("complete") => assert_schema(result, r),
        Some("input_required") => assert_schema("InputRequiredResult", r),
        other => panic!("resultType must be complete or input_required, got {other:?}"),
    }
}
