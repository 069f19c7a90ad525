//! What the `tasks_gateway*.rs` tests share beyond tests/common: gateway-made
//! tasks (the `io.modelcontextprotocol/tasks` extension) for a legacy server
//! that has none. The rooms example (a real rmcp server on 2025-era stdio
//! that pushes `elicitation/create` while a call is pending) behind a route
//! with `[route.tasks]` and a policy that says which tools become tasks, or
//! the FastMCP fixture server with every tool a task; the raw `tasks/*`
//! requests a client sends, and the waits on what `tasks/get` reads.
//! Include with `mod tasks_support;` after `mod common;` and `mod mrtr_support;`
//! (whose `Fixture::cfg` [`fastmcp_gateway`] uses).
#![allow(dead_code)]

use serde_json::{Value, json};

use crate::common::*;

pub const ALICE: &str = "alice-key";
pub const BOB: &str = "bob-key";

/// The rooms server behind a route with `policy` (a policy file's text)
/// and `[route.tasks]` (`tasks`: its keys; `None`: no section).
pub fn config(fx: &Fixture, policy: &str, tasks: Option<&str>) -> String {
    config_with(fx, "", policy, tasks)
}

/// [`config`] with `extra` in the top level (API keys).
pub fn config_with(fx: &Fixture, extra: &str, policy: &str, tasks: Option<&str>) -> String {
    let mut text = rooms_config(extra).replacen(
        "[route.upstream]",
        &format!("{}\n[route.upstream]", fx.policy(policy)),
        1,
    );
    if let Some(tasks) = tasks {
        text.push_str(&format!("\n[route.tasks]\n{tasks}\n"));
    }
    text
}

/// The shipped rooms policy, with `extra` added to `[tool.book_room]`.
pub fn rooms_policy(book_room: &str) -> String {
    let shipped = std::fs::read_to_string(repo().join("policies/rooms.toml")).unwrap();
    shipped.replacen(
        "[tool.book_room]\n",
        &format!("[tool.book_room]\n{book_room}\n"),
        1,
    )
}

/// A gateway in front of rooms with two principals (alice, bob, neither
/// in `facilities`), `book_room` made a task as `book_room` says, and
/// `[route.tasks]` as `tasks` says.
pub async fn gateway(fx: &Fixture, book_room: &str, tasks: &str) -> TestGateway {
    let keys = api_key(ALICE, "alice", &[]) + &api_key(BOB, "bob", &[]);
    TestGateway::start(&config_with(
        fx,
        &keys,
        &rooms_policy(book_room),
        Some(tasks),
    ))
    .await
}

/// A gateway in front of the FastMCP fixture server (PyPI `mcp` 1.30.0,
/// tests/fixtures/mrtr_server.py), every tool a task.
pub async fn fastmcp_gateway(fx: &Fixture) -> TestGateway {
    let text = fx
        .cfg()
        .route(&fx.policy("[defaults]\ntask = \"required\"\n"))
        .build()
        + "\n[route.tasks]\npoll_interval = \"100ms\"\n";
    TestGateway::start(&text).await
}

/// A request as `key`'s principal, with `_meta` declaring `caps`.
pub async fn rpc_as(
    gw: &TestGateway,
    key: &str,
    method: &str,
    mut params: Value,
    caps: Value,
) -> Resp {
    params["_meta"] = meta(caps);
    read_resp(gw.send(gw.request(method, params).bearer_auth(key)).await).await
}

/// A `tasks/*` request with `Mcp-Name` set to `name`.
pub async fn task_rpc(
    gw: &TestGateway,
    key: &str,
    method: &str,
    name: &str,
    mut params: Value,
    caps: Value,
) -> Resp {
    params["_meta"] = meta(caps);
    let rb = gw
        .request(method, params)
        .bearer_auth(key)
        .header("mcp-name", name);
    read_resp(gw.send(rb).await).await
}

/// `tasks/get` of `id` as `key`'s principal, which must succeed.
pub async fn get(gw: &TestGateway, key: &str, id: &str) -> Value {
    let r = task_rpc(
        gw,
        key,
        "tasks/get",
        id,
        json!({"taskId": id}),
        declaring_tasks(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.raw);
    r.result().clone()
}

/// `tasks/update` of `id` with `answers` as its `inputResponses`.
pub async fn update(gw: &TestGateway, key: &str, id: &str, answers: Value) -> Resp {
    let params = json!({"taskId": id, "inputResponses": answers});
    task_rpc(gw, key, "tasks/update", id, params, declaring_tasks()).await
}

/// `tasks/cancel` of `id` as `key`'s principal.
pub async fn cancel(gw: &TestGateway, key: &str, id: &str) -> Resp {
    task_rpc(
        gw,
        key,
        "tasks/cancel",
        id,
        json!({"taskId": id}),
        declaring_tasks(),
    )
    .await
}

/// Polls `tasks/get` until the task reads `status`.
pub async fn until(gw: &TestGateway, key: &str, id: &str, status: &str) -> Value {
    let id = id.to_owned();
    eventually(&format!("the task to be {status}"), || {
        let id = id.clone();
        async move {
            let t = get(gw, key, &id).await;
            if t["status"] == status {
                Ok(t)
            } else {
                Err(t.to_string())
            }
        }
    })
    .await
}

/// Polls `tasks/get` until the task asks a question under `input_key` (a
/// red-marked answer's new question is asked under a new key).
pub async fn until_asked(gw: &TestGateway, key: &str, id: &str, input_key: &str) -> Value {
    eventually("the red-marked question", || async move {
        let t = get(gw, key, id).await;
        match t["inputRequests"].get(input_key) {
            Some(_) => Ok(t),
            None => Err(t.to_string()),
        }
    })
    .await
}

/// A `book_room` call whose hint names no room: the server asks which.
pub fn ambiguous() -> Value {
    json!({"name": "book_room", "arguments": {"day": "2026-12-08", "hour": 10, "room_hint": "the big one"}})
}

/// The `CreateTaskResult` of a call, checked whole (ext-tasks "Task Creation").
pub fn created(r: &Resp) -> String {
    assert_eq!(r.status, 200, "{}", r.raw);
    let t = r.result();
    assert_eq!(t["resultType"], "task", "{}", r.raw);
    // "The embedded `task` is the seed state for the task, typically
    // (though not necessarily) with `status: "working"`": a call that
    // became a task because it asked a person starts `input_required`.
    assert!(
        matches!(t["status"].as_str(), Some("working" | "input_required")),
        "{}",
        r.raw
    );
    for member in ["createdAt", "lastUpdatedAt"] {
        assert!(
            t[member].as_str().unwrap().ends_with('Z'),
            "{member}: {}",
            r.raw
        );
    }
    assert_eq!(t["ttlMs"], 3_600_000, "{}", r.raw);
    assert_eq!(t["pollIntervalMs"], 2_000, "{}", r.raw);
    t["taskId"].as_str().unwrap().to_owned()
}

/// The [`ambiguous`] call as `key`'s principal, made a task ([`created`]).
pub async fn ambiguous_task(gw: &TestGateway, key: &str) -> String {
    created(&rpc_as(gw, key, "tools/call", ambiguous(), declaring_tasks()).await)
}

/// An [`ambiguous_task`] once it reads `input_required` (the server asked
/// which room).
pub async fn waiting_task(gw: &TestGateway, key: &str) -> String {
    let id = ambiguous_task(gw, key).await;
    until(gw, key, &id, "input_required").await;
    id
}

/// The next message of a listen, a `notifications/tasks`.
pub async fn task_note(stream: &mut SseReader) -> Value {
    let n = stream
        .next(std::time::Duration::from_secs(30))
        .await
        .expect("a notification");
    assert_eq!(n["method"], "notifications/tasks", "{n}");
    n
}
