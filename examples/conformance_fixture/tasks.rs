//! The native fixture's task tools (the tasks extension,
//! `io.modelcontextprotocol/tasks`, served with rmcp's `TaskManager`), named
//! as the conformance suite's `tasks-*` scenarios call them: `slow_compute`
//! makes a task for a request that declared the extension and runs
//! synchronously otherwise; `failing_job` runs only as a task (a request
//! without the extension gets `-32021`) and fails with a JSON-RPC error
//! (where the scenarios expect a tool error; `protocol_error_job` is the
//! same); `confirm_delete` and `multi_input` run only as tasks and ask one
//! and two questions as the task's `inputRequests`; `test_tool_with_task`
//! asks its question as a plain `InputRequiredResult` first and becomes a
//! task on the retry; `greet` is never a task.
//! Each call is logged to `$FIXTURE_LOG` with whether its request declared
//! the extension, so tests can check what reached the server.

use std::io::Write;
use std::time::Duration;

use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData, model::*};
use serde_json::{Value, json};

use super::{Ctx, de, result};

/// The tools, as `tools/list` gives them (native mode only).
pub const TOOLS: [(&str, &str); 7] = [
    (
        "slow_compute",
        "Sleeps `seconds` then answers; a task for a client that declared the tasks extension",
    ),
    (
        "failing_job",
        "Runs only as a task, and fails with a JSON-RPC error",
    ),
    (
        "protocol_error_job",
        "Runs only as a task, and fails with a JSON-RPC error",
    ),
    ("greet", "Answers `Hello, {name}!` at once, never as a task"),
    (
        "confirm_delete",
        "Runs only as a task: asks to confirm deleting `filename` (inputRequests)",
    ),
    (
        "multi_input",
        "Runs only as a task: asks two questions at once (inputRequests)",
    ),
    (
        "test_tool_with_task",
        "Asks the user's name (InputRequiredResult), then runs as a task that greets them",
    ),
];

/// The task tools' definitions.
pub fn list() -> Vec<Tool> {
    TOOLS
        .iter()
        .map(|(name, description)| {
            let schema = match *name {
                "slow_compute" => json!({"type": "object", "properties": {
                    "seconds": {"type": "number", "minimum": 0}, "label": {"type": "string"}}}),
                "greet" => json!({"type": "object", "properties": {
                    "name": {"type": "string"}}, "required": ["name"]}),
                "confirm_delete" => json!({"type": "object", "properties": {
                    "filename": {"type": "string"}}}),
                _ => json!({"type": "object"}),
            };
            de(json!({"name": name, "description": description, "inputSchema": schema}))
        })
        .collect()
}

/// Whether the request declared the tasks extension in its own `_meta`.
fn declared(ctx: &Ctx) -> bool {
    ctx.client_capabilities()
        .is_some_and(|caps| caps.supports_tasks())
}

/// A task tool's answer, or `None` when `name` is not one.
pub fn call(
    tasks: &TaskManager,
    name: &str,
    arguments: &Value,
    responses: Option<&InputResponses>,
    ctx: &Ctx,
) -> Option<Result<CallToolResponse, ErrorData>> {
    let declared = declared(ctx);
    let seconds = arguments
        .get("seconds")
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
        .clamp(0.0, 600.0);
    let label = arguments
        .get("label")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if !TOOLS.iter().any(|(tool, _)| *tool == name) {
        return None;
    }
    log(name, declared);
    let options = TaskOptions::new().with_poll_interval_ms(100);
    let answer = match (name, declared) {
        ("slow_compute", true) => {
            let task = tasks.spawn(options, move |ctx| {
                Box::pin(async move {
                    tokio::select! {
                        () = ctx.cancelled() => Err(TaskExit::Cancelled),
                        () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => Ok(computed(&label)),
                    }
                })
            });
            Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
        }
        // spec ext-tasks "Capability Negotiation": a task-supporting tool
        // falls through to synchronous execution for a client without it.
        ("slow_compute", false) => Ok(computed(&label).into()),
        ("failing_job" | "protocol_error_job", true) => {
            let task = tasks.spawn(options, |_| {
                Box::pin(async {
                    Err(TaskExit::Error(ErrorData::internal_error(
                        "the job failed",
                        None,
                    )))
                })
            });
            Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
        }
        ("greet", _) => {
            let name = arguments.get("name").and_then(Value::as_str);
            Ok(text(format!("Hello, {}!", name.unwrap_or(""))).into())
        }
        ("confirm_delete", true) => {
            let filename = arguments.get("filename").and_then(Value::as_str);
            let message = format!("Delete {}?", filename.unwrap_or("the file"));
            let task = tasks.spawn(options, move |ctx| {
                Box::pin(async move {
                    let answer = ctx.request_input("confirm", confirm(&message)).await?;
                    let yes = answer.pointer("/content/confirm") == Some(&json!(true));
                    Ok(text(if yes { "deleted" } else { "kept" }.to_owned()))
                })
            });
            Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
        }
        ("multi_input", true) => {
            let task = tasks.spawn(options, |ctx| {
                Box::pin(async move {
                    let (first, second) = tokio::join!(
                        ctx.request_input("first", confirm("First question")),
                        ctx.request_input("second", confirm("Second question")),
                    );
                    let (first, second) = (first?, second?);
                    let name = |a: &Value| a.pointer("/content/name").cloned();
                    Ok(text(format!(
                        "answers: {:?} and {:?}",
                        name(&first),
                        name(&second)
                    )))
                })
            });
            Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
        }
        // spec ext-tasks "Task Creation": a tool that asks over
        // InputRequiredResult before creating a task "SHOULD resolve all MRTR
        // exchanges synchronously before responding with a CreateTaskResult".
        ("test_tool_with_task", true) => {
            let answer = responses.and_then(|r| r.get("user_name"));
            let name = answer.and_then(|a| a.pointer("/content/name"));
            match name.and_then(Value::as_str) {
                Some(name) => {
                    let greeting = format!("Hello, {name}!");
                    let task = tasks.spawn(options, move |_| {
                        Box::pin(async move { Ok(text(greeting)) })
                    });
                    Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
                }
                None => {
                    let ask = elicit("What is your name?", json!({"name": {"type": "string"}}));
                    let requests = [("user_name".to_owned(), ask)].into_iter().collect();
                    Ok(InputRequiredResult::new(Some(requests), None).into())
                }
            }
        }
        // spec ext-tasks: "If a server is unable to service a request to a
        // client that does not declare this extension capability without
        // returning CreateTaskResult, the server MUST return ... -32021".
        _ => Err(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        )),
    };
    Some(answer)
}

fn computed(label: &str) -> CallToolResult {
    text(format!("computed {label}"))
}

fn text(text: String) -> CallToolResult {
    result(json!({"content": [{"type": "text", "text": text}]}))
}

/// An `elicitation/create` form asking for `properties`.
fn elicit(message: &str, properties: Value) -> InputRequest {
    de(
        json!({"method": "elicitation/create", "params": {"mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": properties}}}),
    )
}

/// The form `confirm_delete` and `multi_input` ask (the suite answers
/// `multi_input` with a `name` and a `confirm`).
fn confirm(message: &str) -> InputRequest {
    elicit(
        message,
        json!({"name": {"type": "string"}, "confirm": {"type": "boolean"}}),
    )
}

fn log(tool: &str, declared: bool) {
    let Some(path) = std::env::var_os("FIXTURE_LOG") else {
        return;
    };
    let line = json!({"event": "task_tool", "tool": tool, "declared_tasks": declared});
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    if let Ok(mut file) = file {
        let _ = writeln!(file, "{line}");
    }
}
