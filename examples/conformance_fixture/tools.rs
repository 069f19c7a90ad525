//! The fixture's tools: the conformance suite's content and diagnostic tools,
//! the 2025-11-25 scenarios' logging, sampling and elicitation tools, and the
//! `test_input_required_result_*` tools. Each question is pushed the legacy
//! way while the call is pending, or (`--native`) returned as an
//! `InputRequiredResult` (see `ask.rs`).

use std::time::Duration;

use rmcp::{ErrorData, model::*};
use serde_json::{Value, json};

use super::ask::{Answer, Ask};
use super::{Ctx, PNG, WAV, client_declared, result};

/// Every tool, in the order `tools/list` gives them (always the same order).
const TOOLS: [(&str, &str); 28] = [
    ("test_simple_text", "Returns simple text content"),
    ("test_image_content", "Returns image content (a 1x1 PNG)"),
    (
        "test_audio_content",
        "Returns audio content (a minimal WAV)",
    ),
    (
        "test_embedded_resource",
        "Returns an embedded text resource",
    ),
    (
        "test_multiple_content_types",
        "Returns text, image and resource content",
    ),
    (
        "test_tool_with_progress",
        "Reports progress 0, 50 and 100 of 100 when asked to",
    ),
    (
        "test_error_handling",
        "Always fails with a tool error (isError: true)",
    ),
    (
        "test_logging_tool",
        "Logs three info messages while it runs",
    ),
    (
        "test_tool_with_logging",
        "Logs three info messages, 50 ms apart, while it runs",
    ),
    (
        "test_sampling",
        "Asks the model to answer `prompt` (sampling/createMessage)",
    ),
    (
        "test_elicitation",
        "Asks the user for a username and email with `message` (elicitation/create)",
    ),
    (
        "test_elicitation_sep1034_defaults",
        "Asks a form whose every primitive field has a default (SEP-1034)",
    ),
    (
        "test_elicitation_sep1330_enums",
        "Asks a form with the five kinds of enum field (SEP-1330)",
    ),
    (
        "test_missing_capability",
        "Needs sampling: pushes sampling/createMessage whatever the client declared",
    ),
    (
        "test_streaming_elicitation",
        "Pushes elicitation/create while the call is pending",
    ),
    (
        "test_trigger_tool_change",
        "Sends notifications/tools/list_changed",
    ),
    (
        "test_trigger_prompt_change",
        "Sends notifications/prompts/list_changed",
    ),
    (
        "test_input_required_result_elicitation",
        "Asks the user's name (elicitation/create), then greets them",
    ),
    (
        "test_input_required_result_sampling",
        "Asks the model for the capital of France (sampling/createMessage)",
    ),
    (
        "test_input_required_result_list_roots",
        "Asks for the client's roots (roots/list) and names them",
    ),
    (
        "test_input_required_result_request_state",
        "Asks for a confirmation; answers state-ok",
    ),
    (
        "test_input_required_result_multiple_inputs",
        "Asks a name, a greeting and the roots at once",
    ),
    (
        "test_input_required_result_multi_round",
        "Asks a name, then a favourite colour",
    ),
    (
        "test_input_required_result_tampered_state",
        "Asks for a confirmation",
    ),
    (
        "test_input_required_result_capabilities",
        "Asks only what the client declared it can answer (elicitation, sampling)",
    ),
    (
        "test_ask_count",
        "Asks how many (an integer from 0 to 100); not a conformance scenario",
    ),
    (
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
    ),
    (
        "test_mirrored_header",
        "Echoes `region`, which clients mirror in the Mcp-Param-Region header",
    ),
];

/// The input schema of a tool: empty but for the two that test schemas.
fn input_schema(name: &str) -> Value {
    match name {
        // Every 2020-12 keyword must reach the client unchanged (SEP-1613, SEP-2106).
        "json_schema_2020_12_tool" => json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"},
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false,
        }),
        "test_sampling" => one_string("prompt", "The prompt to send to the LLM"),
        "test_elicitation" => one_string("message", "The message to show the user"),
        // redmark checks the header against the body (SEP-2243) before relaying.
        "test_mirrored_header" => json!({
            "type": "object",
            "properties": {"region": {"type": "string", "description": "A region name",
                "x-mcp-header": "Region"}},
            "required": ["region"],
        }),
        _ => json!({"type": "object", "properties": {}}),
    }
}

/// An input schema with one required string argument.
fn one_string(name: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name],
    })
}

pub fn list() -> ListToolsResult {
    let tools: Vec<Value> = TOOLS
        .iter()
        .map(|(name, description)| {
            json!({"name": name, "description": description, "inputSchema": input_schema(name)})
        })
        .collect();
    result(json!({ "tools": tools }))
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn content(content: Value) -> CallToolResult {
    result(json!({ "content": content }))
}

/// A tool error: the question could not be asked or answered.
fn cannot(why: &str) -> CallToolResult {
    let message = format!("Cannot ask the client: {why}.");
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// The tool's answer once its question was answered; a tool error otherwise.
fn answered(answer: Answer, say: impl FnOnce(&Value) -> String) -> CallToolResult {
    match answer {
        Ok(answer) => text(say(&answer)),
        Err(why) => cannot(&why),
    }
}

/// What an elicitation answer says: the accepted `field`, or the action.
fn elicited(answer: &Value, field: &str) -> String {
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => match answer.pointer(&format!("/content/{field}")) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => "(nothing)".into(),
        },
        Some(action) => format!("({action})"),
        None => "(no action)".into(),
    }
}

/// The text a sampling answer carries.
fn sampled(answer: &Value) -> String {
    let text = answer.pointer("/content/text").and_then(Value::as_str);
    text.unwrap_or("(no text)").to_owned()
}

/// The roots a `roots/list` answer names.
fn root_uris(answer: &Value) -> String {
    let roots = answer.get("roots").and_then(Value::as_array);
    let uris: Vec<&str> = roots
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uri").and_then(Value::as_str))
        .collect();
    uris.join(", ")
}

pub async fn call(
    name: &str,
    arguments: Value,
    ctx: &Ctx,
    ask: &Ask<'_>,
) -> Result<CallToolResult, ErrorData> {
    let result = match name {
        "test_simple_text" => text("This is a simple text response for testing."),
        "test_image_content" => {
            content(json!([{"type": "image", "data": PNG, "mimeType": "image/png"}]))
        }
        "test_audio_content" => {
            content(json!([{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]))
        }
        "test_embedded_resource" => content(json!([{"type": "resource", "resource": {
            "uri": "test://embedded-resource", "mimeType": "text/plain",
            "text": "This is an embedded resource content."}}])),
        "test_multiple_content_types" => content(json!([
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}},
        ])),
        "test_tool_with_progress" => progress(ctx).await,
        "test_error_handling" => CallToolResult::error(vec![ContentBlock::text(
            "This tool intentionally returns an error for testing",
        )]),
        "test_logging_tool" => logging(ctx, Duration::ZERO).await,
        // tools-call-with-logging: ~50 ms between messages, so a client sees
        // them arrive one by one while the call is pending.
        "test_tool_with_logging" => logging(ctx, Duration::from_millis(50)).await,
        "test_sampling" => {
            let prompt = string_argument(&arguments, "prompt")?;
            let answer = ask.sample("sampling", &prompt, 100).await;
            answered(answer, |a| format!("LLM response: {}", sampled(a)))
        }
        "test_elicitation" => {
            let message = string_argument(&arguments, "message")?;
            let schema = json!({
                "type": "object",
                "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"},
                },
                "required": ["username", "email"],
            });
            let answer = ask.elicit_form("user_info", &message, schema).await;
            answered(answer, |a| format!("User response: {}", outcome(a)))
        }
        "test_elicitation_sep1034_defaults" => {
            let answer = ask
                .elicit_form("defaults", "Please review the defaults.", sep1034_schema())
                .await;
            answered(answer, |a| format!("Elicitation completed: {}", outcome(a)))
        }
        "test_elicitation_sep1330_enums" => {
            let answer = ask
                .elicit_form("enums", "Please choose.", sep1330_schema())
                .await;
            answered(answer, |a| format!("Elicitation completed: {}", outcome(a)))
        }
        "test_trigger_tool_change" => {
            let sent = ctx.peer.notify_tool_list_changed().await;
            text(format!("tools/list_changed sent: {}", sent.is_ok()))
        }
        "test_trigger_prompt_change" => {
            let sent = ctx.peer.notify_prompt_list_changed().await;
            text(format!("prompts/list_changed sent: {}", sent.is_ok()))
        }
        "test_missing_capability" => {
            let answer = ask.sample("llm_response", "Say hello.", 50).await;
            answered(answer, |a| format!("LLM response: {}", sampled(a)))
        }
        "test_streaming_elicitation" => {
            let answer = ask
                .elicit_a("response", "Please respond.", "response", "string")
                .await;
            answered(answer, |a| {
                format!("User response: {}", elicited(a, "response"))
            })
        }
        "test_input_required_result_elicitation" => {
            let answer = ask
                .elicit_a("user_name", "What is your name?", "name", "string")
                .await;
            answered(answer, |a| format!("Hello, {}!", elicited(a, "name")))
        }
        "test_input_required_result_sampling" => {
            let answer = ask
                .sample("capital_question", "What is the capital of France?", 100)
                .await;
            answered(answer, |a| format!("The model said: {}", sampled(a)))
        }
        "test_input_required_result_list_roots" => {
            let answer = ask.roots("client_roots").await;
            answered(answer, |a| format!("Client roots: {}", root_uris(a)))
        }
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            let answer = ask
                .elicit_a("confirm", "Please confirm", "ok", "boolean")
                .await;
            answered(answer, |a| {
                format!("state-ok: confirmed={}", elicited(a, "ok"))
            })
        }
        "test_input_required_result_multiple_inputs" => multiple_inputs(ask).await,
        "test_input_required_result_multi_round" => multi_round(ask).await,
        "test_input_required_result_capabilities" => capabilities(ctx, ask).await,
        "test_ask_count" => {
            let count = json!({"type": "integer", "minimum": 0, "maximum": 100});
            let answer = ask.elicit("count", "How many?", "count", count).await;
            answered(answer, |a| format!("Count: {}", elicited(a, "count")))
        }
        "json_schema_2020_12_tool" => text(format!("Arguments: {arguments}")),
        "test_mirrored_header" => text(format!("Region: {}", arguments["region"])),
        _ => {
            let unknown = format!("Unknown tool: {name}");
            return Err(ErrorData::invalid_params(unknown, None));
        }
    };
    Ok(result)
}

/// A required string argument.
fn string_argument(arguments: &Value, name: &str) -> Result<String, ErrorData> {
    match arguments.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(ErrorData::invalid_params(
            format!("argument `{name}` (a string) is required"),
            None,
        )),
    }
}

/// An elicitation answer as `action=ACTION, content={...}`.
fn outcome(answer: &Value) -> String {
    let action = answer.get("action").and_then(Value::as_str);
    let content = answer.get("content").cloned().unwrap_or(json!({}));
    format!("action={}, content={content}", action.unwrap_or("(none)"))
}

/// SEP-1034: a default for every primitive type (elicitation-sep1034-defaults).
fn sep1034_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status",
                "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": true},
        },
        "required": [],
    })
}

/// SEP-1330: the five kinds of enum field (elicitation-sep1330-enums).
fn sep1330_schema() -> Value {
    let titled = |pairs: [(&str, &str); 3]| -> Value {
        let items = pairs.map(|(value, title)| json!({"const": value, "title": title}));
        json!(items)
    };
    json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "description": "Untitled single-select",
                "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "description": "Titled single-select",
                "oneOf": titled([("value1", "First Option"), ("value2", "Second Option"),
                    ("value3", "Third Option")])},
            "legacyEnum": {"type": "string", "description": "Legacy titled enum",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "description": "Untitled multi-select",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "description": "Titled multi-select",
                "items": {"anyOf": titled([("value1", "First Choice"), ("value2", "Second Choice"),
                    ("value3", "Third Choice")])}},
        },
        "required": [],
    })
}

/// Progress 0, 50 and 100 of 100, 50 ms apart, under the request's token.
async fn progress(ctx: &Ctx) -> CallToolResult {
    let token = ctx.meta.get_progress_token();
    for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if let Some(token) = &token {
            let message = format!("Completed step {step} of 100");
            let param = ProgressNotificationParam::new(token.clone(), step)
                .with_total(100.0)
                .with_message(message);
            if let Err(e) = ctx.peer.notify_progress(param).await {
                eprintln!("conformance-fixture: could not send progress: {e}");
            }
        }
    }
    text(format!("Progress reported (token {token:?})"))
}

/// Three info log messages, `gap` apart. A legacy server may log at any time;
/// a 2026-07-28 client only receives them when its request asked (`_meta`
/// logLevel).
#[allow(deprecated)] // logging is SEP-2577-deprecated in rmcp, but part of 2025-11-25
async fn logging(ctx: &Ctx, gap: Duration) -> CallToolResult {
    // A 2026-07-28 request gets log messages only when its `_meta` asked
    // (logLevel); on a legacy session redmark makes that decision.
    if ctx.meta.protocol_version().is_some() && ctx.meta.log_level().is_none() {
        return text("Tool with logging executed successfully");
    }
    for (i, message) in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 && !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
        let param = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(message))
            .with_logger("conformance-fixture");
        if let Err(e) = ctx.peer.notify_logging_message(param).await {
            eprintln!("conformance-fixture: could not log: {e}");
        }
    }
    text("Tool with logging executed successfully")
}

/// Three questions pushed together: redmark gathers them into one round.
async fn multiple_inputs(ask: &Ask<'_>) -> CallToolResult {
    let (name, greeting, roots) = tokio::join!(
        ask.elicit_a("user_name", "What is your name?", "name", "string"),
        ask.sample("greeting", "Generate a greeting", 50),
        ask.roots("client_roots"),
    );
    match (name, greeting, roots) {
        (Ok(name), Ok(greeting), Ok(roots)) => text(format!(
            "{} (from the model) {}! Your roots: {}",
            sampled(&greeting),
            elicited(&name, "name"),
            root_uris(&roots)
        )),
        (Err(why), _, _) | (_, Err(why), _) | (_, _, Err(why)) => cannot(&why),
    }
}

/// One question, then another after the first is answered: two rounds.
async fn multi_round(ask: &Ask<'_>) -> CallToolResult {
    let name = match ask
        .elicit_a("step1", "Step 1: What is your name?", "name", "string")
        .await
    {
        Ok(answer) => elicited(&answer, "name"),
        Err(why) => return cannot(&why),
    };
    let color = ask
        .elicit_a(
            "step2",
            "Step 2: What is your favorite color?",
            "color",
            "string",
        )
        .await;
    answered(color, |a| {
        format!("{name}'s favorite color is {}.", elicited(a, "color"))
    })
}

/// Asks only what the client declared in `initialize`: a legacy server's own
/// capability check (redmark's upstream session declares exactly what the
/// 2026-07-28 request declared).
async fn capabilities(ctx: &Ctx, ask: &Ask<'_>) -> CallToolResult {
    let elicitation = async {
        if client_declared(ctx, "elicitation") {
            let answer = ask
                .elicit_a("user_name", "What is your name?", "name", "string")
                .await;
            Some(answer.map(|a| format!("name: {}", elicited(&a, "name"))))
        } else {
            None
        }
    };
    let sampling = async {
        if client_declared(ctx, "sampling") {
            let answer = ask.sample("greeting", "Say hello.", 50).await;
            Some(answer.map(|a| format!("model: {}", sampled(&a))))
        } else {
            None
        }
    };
    let (elicitation, sampling) = tokio::join!(elicitation, sampling);
    let answers: Result<Vec<String>, String> =
        [elicitation, sampling].into_iter().flatten().collect();
    match answers {
        Ok(answers) if answers.is_empty() => text("The client declared nothing to ask with."),
        Ok(answers) => text(answers.join("; ")),
        Err(why) => cannot(&why),
    }
}
