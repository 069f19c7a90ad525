//! `tasks/*` requests of the tasks extension from a raw client: each names
//! its task in `Mcp-Name` (ext-tasks "Streamable HTTP: Routing Headers")
//! and declares the extension (with form elicitation) in its `_meta`.

use serde_json::{Value, json};

use super::{McpClient, PATIENCE, Resp, SseReader, eventually, meta, read_resp};

/// The extension's identifier.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Client capabilities that declare form elicitation and the extension.
pub fn declaring_tasks() -> Value {
    json!({"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}})
}

/// `method` on task `id` with `params`, as it was answered.
pub async fn task_request(client: &McpClient, method: &str, id: &str, mut params: Value) -> Resp {
    params["taskId"] = json!(id);
    params["_meta"] = meta(declaring_tasks());
    let rb = client.request(method, params).header("mcp-name", id);
    read_resp(client.send(rb).await).await
}

/// [`task_request`], which must succeed: its result.
pub async fn task_result(client: &McpClient, method: &str, id: &str, params: Value) -> Value {
    let r = task_request(client, method, id, params).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    r.result().clone()
}

/// Polls `tasks/get` until `ready` says the task is as wanted.
pub async fn until_task(
    client: &McpClient,
    id: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    eventually(what, || async {
        let t = task_result(client, "tasks/get", id, json!({})).await;
        if ready(&t) { Ok(t) } else { Err(t.to_string()) }
    })
    .await
}

/// `subscriptions/listen` with `params` and a `_meta` declaring the
/// extension, as `key`'s bearer when one is given: the listen's stream, and
/// its first message, which must be the acknowledgement.
pub async fn listen_declaring_tasks(
    client: &McpClient,
    key: Option<&str>,
    mut params: Value,
) -> (SseReader, Value) {
    params["_meta"] = meta(declaring_tasks());
    let mut rb = client.request("subscriptions/listen", params);
    if let Some(key) = key {
        rb = rb.bearer_auth(key);
    }
    let mut stream = SseReader::open(client.send(rb).await).await;
    let ack = stream.next(PATIENCE).await.expect("the acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    (stream, ack)
}
