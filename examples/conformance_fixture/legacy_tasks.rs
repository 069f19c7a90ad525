//! The legacy mode's tools for the conformance suite's `tasks-*` scenarios,
//! under the names those scenarios call. They are plain legacy tools that
//! know nothing of tasks: they take long, push a question, or fail. redmark
//! makes tasks of them on a route with `[route.tasks]` (examples/conformance/
//! tasks.toml, policies/conformance-tasks.toml says which tools and how):
//!
//! - `greet`: answers at once (never a task);
//! - `slow_compute`: sleeps `seconds`, stops when the call is cancelled;
//! - `failing_job`: a tool error (`isError: true`) after about a second;
//! - `protocol_error_job`: a JSON-RPC error (what a task reads as `failed`);
//! - `confirm_delete`: pushes one `elicitation/create` (a boolean `confirm`);
//! - `multi_input`: pushes two `elicitation/create` at once;
//! - `test_tool_with_task`: pushes one question (a `name`), then greets.

use std::time::Duration;

use rmcp::{ErrorData, model::*};
use serde_json::{Value, json};

use super::ask::Ask;
use super::{Ctx, de, result};

/// The tools, as `tools/list` gives them (legacy mode only).
pub const TOOLS: [(&str, &str); 7] = [
    ("greet", "Answers `Hello, {name}!` at once"),
    (
        "slow_compute",
        "Sleeps `seconds` (at most 600) then answers; stops when the call is cancelled",
    ),
    (
        "failing_job",
        "Fails with a tool error (isError: true) after about a second",
    ),
    ("protocol_error_job", "Fails with a JSON-RPC error"),
    (
        "confirm_delete",
        "Asks the user to confirm deleting `filename` (elicitation/create)",
    ),
    (
        "multi_input",
        "Asks the user two questions at once (two elicitation/create)",
    ),
    (
        "test_tool_with_task",
        "Asks the user's name (elicitation/create), then greets them",
    ),
];

/// The tools' definitions.
pub fn list() -> Vec<Tool> {
    TOOLS
        .iter()
        .map(|(name, description)| {
            let schema = match *name {
                "greet" => json!({"type": "object", "properties": {
                    "name": {"type": "string"}}, "required": ["name"]}),
                "slow_compute" => json!({"type": "object", "properties": {
                    "seconds": {"type": "number", "minimum": 0}, "label": {"type": "string"}}}),
                "confirm_delete" => json!({"type": "object", "properties": {
                    "filename": {"type": "string"}}}),
                _ => json!({"type": "object", "properties": {}}),
            };
            de(json!({"name": name, "description": description, "inputSchema": schema}))
        })
        .collect()
}

/// A task tool's answer, or `None` when `name` is not one.
pub async fn call(
    name: &str,
    arguments: &Value,
    ctx: &Ctx,
    ask: &Ask<'_>,
) -> Option<Result<CallToolResult, ErrorData>> {
    let text_argument = |field: &str| {
        arguments
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let answer = match name {
        "greet" => Ok(text(format!("Hello, {}!", text_argument("name")))),
        "slow_compute" => {
            let seconds = arguments
                .get("seconds")
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
                .clamp(0.0, 600.0);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {
                    Ok(text(format!("computed {}", text_argument("label"))))
                }
                // redmark ends a cancelled task's call with notifications/cancelled.
                () = ctx.ct.cancelled() => Err(ErrorData::internal_error("cancelled", None)),
            }
        }
        "failing_job" => {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok(CallToolResult::error(vec![ContentBlock::text(
                "the job failed (a tool execution error)",
            )]))
        }
        "protocol_error_job" => Err(ErrorData::internal_error(
            "the job failed (a protocol-level error)",
            None,
        )),
        "confirm_delete" => {
            let filename = text_argument("filename");
            let message = format!("Delete {filename}?");
            let answer = ask
                .elicit_a("confirm", &message, "confirm", "boolean")
                .await;
            Ok(match answer {
                Ok(a) if a.pointer("/content/confirm") == Some(&json!(true)) => {
                    text(format!("deleted {filename}"))
                }
                Ok(_) => text(format!("kept {filename}")),
                Err(why) => cannot(&why),
            })
        }
        "multi_input" => {
            // The suite answers both with `{name, confirm}`: each form asks both.
            let schema = json!({"type": "object", "properties": {
                "name": {"type": "string"}, "confirm": {"type": "boolean"}}});
            let (first, second) = tokio::join!(
                ask.elicit_form("first", "First question", schema.clone()),
                ask.elicit_form("second", "Second question", schema),
            );
            Ok(match (first, second) {
                (Ok(first), Ok(second)) => text(format!(
                    "answers: {} and {}",
                    first.pointer("/content/name").unwrap_or(&Value::Null),
                    second.pointer("/content/name").unwrap_or(&Value::Null)
                )),
                (Err(why), _) | (_, Err(why)) => cannot(&why),
            })
        }
        "test_tool_with_task" => {
            let answer = ask
                .elicit_a("user_name", "What is your name?", "name", "string")
                .await;
            Ok(match answer {
                Ok(a) => {
                    let name = a.pointer("/content/name").and_then(Value::as_str);
                    text(format!("Hello, {}!", name.unwrap_or("(nobody)")))
                }
                Err(why) => cannot(&why),
            })
        }
        _ => return None,
    };
    Some(answer)
}

fn text(text: String) -> CallToolResult {
    result(json!({"content": [{"type": "text", "text": text}]}))
}

fn cannot(why: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "Cannot ask the client: {why}."
    ))])
}
