//! The native fixture's task tools (the tasks extension,
//! `io.modelcontextprotocol/tasks`, served with rmcp's `TaskManager`), named
//! as the conformance suite's `tasks-*` scenarios call them: `slow_compute`
//! makes a task for a request that declared the extension and runs
//! synchronously otherwise; `failing_job` runs only as a task (a request
//! without the extension gets `-32021`) and fails with a JSON-RPC error;
//! `confirm_delete` and `multi_input` run only as tasks and ask their
//! questions as the task's `inputRequests` (one, then two at once).
//! Each call is logged to `$FIXTURE_LOG` with whether its request declared
//! the extension, so tests can check what reached the server.

use std::io::Write;
use std::time::Duration;

use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData, model::*};
use serde_json::{Value, json};

use super::{Ctx, de, result};

/// The tools, as `tools/list` gives them (native mode only).
pub const TOOLS: [(&str, &str); 4] = [
    (
        "slow_compute",
        "Sleeps `seconds` then answers; a task for a client that declared the tasks extension",
    ),
    (
        "failing_job",
        "Runs only as a task, and fails with a JSON-RPC error",
    ),
    (
        "confirm_delete",
        "Runs only as a task: asks (inputRequests) whether to delete `filename`, then answers",
    ),
    (
        "multi_input",
        "Runs only as a task: asks two questions at once, then answers with both names",
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
        ("failing_job", true) => {
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
        ("confirm_delete", true) => {
            let filename = arguments
                .get("filename")
                .and_then(Value::as_str)
                .unwrap_or("the file")
                .to_owned();
            let task = tasks.spawn(options, move |ctx| {
                Box::pin(async move {
                    let asked = ask(
                        &format!("Delete {filename}?"),
                        json!({"confirm": {"type": "boolean", "title": "Delete it"}}),
                    )?;
                    let answer = ctx.request_input("confirm-1", asked).await?;
                    let confirmed =
                        answer["action"] == "accept" && answer["content"]["confirm"] == json!(true);
                    let said = if confirmed { "deleted" } else { "kept" };
                    Ok(text(&format!("{said} {filename}")))
                })
            });
            Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
        }
        ("multi_input", true) => {
            let task = tasks.spawn(options, move |ctx| {
                Box::pin(async move {
                    let schema =
                        json!({"name": {"type": "string"}, "confirm": {"type": "boolean"}});
                    let (first, second) = tokio::try_join!(
                        async {
                            ctx.request_input("first", ask("First name?", schema.clone())?)
                                .await
                        },
                        async {
                            ctx.request_input("second", ask("Second name?", schema.clone())?)
                                .await
                        },
                    )?;
                    let name = |a: &Value| a["content"]["name"].as_str().unwrap_or("-").to_owned();
                    Ok(text(&format!("got {} and {}", name(&first), name(&second))))
                })
            });
            Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
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
    text(&format!("computed {label}"))
}

fn text(said: &str) -> CallToolResult {
    result(json!({"content": [{"type": "text", "text": said}]}))
}

/// A form question (`elicitation/create`) with these properties.
fn ask(message: &str, properties: Value) -> Result<InputRequest, TaskExit> {
    serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": properties},
        }
    }))
    .map_err(|e| TaskExit::Error(ErrorData::internal_error(e.to_string(), None)))
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
