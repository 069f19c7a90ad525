//! Gateway-made tasks refused and expired: the extension's protocol errors
//! (each with its code and `data.reason`), the per-principal bound on the
//! task table, and a task that fails at its own TTL or at `[mrtr] ttl`.
//! Shared steps: tests/tasks_support.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mrtr_support;
mod tasks_support;

use common::*;
use serde_json::{Value, json};
use tasks_support::*;

/// The extension's protocol errors, each with its code and reason.
#[tokio::test]
async fn tasks_errors_are_the_extensions() {
    let fx = Fixture::new();
    let gw = gateway(&fx, "task = \"required\"", "").await;

    // task = "required" and a client without the extension: -32021 naming it.
    let r = rpc_as(
        &gw,
        ALICE,
        "tools/call",
        ambiguous(),
        json!({"elicitation": {"form": {}}}),
    )
    .await;
    let err = assert_error(&r, 400, -32021, "missing_capability");
    assert_eq!(
        err.data()["requiredCapabilities"],
        json!({"extensions": {TASKS_EXTENSION: {}}}),
        "{}",
        r.raw
    );

    let id = ambiguous_task(&gw, ALICE).await;

    // tasks/* from a request that did not declare the extension: -32021.
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let params = json!({"taskId": id, "inputResponses": {}});
        let r = task_rpc(&gw, ALICE, method, &id, params, json!({})).await;
        let err = assert_error(&r, 400, -32021, "missing_capability");
        assert_eq!(
            err.data()["requiredCapabilities"]["extensions"][TASKS_EXTENSION],
            json!({}),
            "{}",
            r.raw
        );
    }
    // Another principal's task: -32602, the same answer as an unknown id.
    let theirs = task_rpc(
        &gw,
        BOB,
        "tasks/get",
        &id,
        json!({"taskId": id}),
        declaring_tasks(),
    )
    .await;
    let err = assert_error(&theirs, 200, -32602, "task_unknown");
    let unknown_id = "redmark-task.nothing";
    let unknown = task_rpc(
        &gw,
        ALICE,
        "tasks/get",
        unknown_id,
        json!({"taskId": unknown_id}),
        declaring_tasks(),
    )
    .await;
    let other = assert_error(&unknown, 200, -32602, "task_unknown");
    assert!(!theirs.raw.contains("alice"), "{}", theirs.raw);
    // The same words but the id shown back: nothing disclosed.
    let words = |m: &Value| {
        let parts: Vec<String> = m.as_str().unwrap().split('`').map(str::to_owned).collect();
        (parts[0].clone(), parts[2].clone())
    };
    assert_eq!(
        words(&err.error["message"]),
        words(&other.error["message"]),
        "nothing disclosed"
    );
    // Bob can neither answer nor cancel it.
    let r = update(&gw, BOB, &id, json!({"room": {"action": "decline"}})).await;
    assert_error(&r, 200, -32602, "task_unknown");
    let r = cancel(&gw, BOB, &id).await;
    assert_error(&r, 200, -32602, "task_unknown");
    assert_ne!(get(&gw, ALICE, &id).await["status"], "cancelled");

    // Mcp-Name that is not params.taskId: -32020; none at all: -32020 too.
    let r = task_rpc(
        &gw,
        ALICE,
        "tasks/get",
        "someone-else",
        json!({"taskId": id}),
        declaring_tasks(),
    )
    .await;
    assert_error(&r, 400, -32020, "header_mismatch");
    let mut params = json!({"taskId": id});
    params["_meta"] = meta(declaring_tasks());
    let r = read_resp(
        gw.send(gw.request("tasks/get", params).bearer_auth(ALICE))
            .await,
    )
    .await;
    assert_error(&r, 400, -32020, "header_missing");

    // tasks/result and tasks/list are not in the extension: -32601.
    for method in ["tasks/result", "tasks/list"] {
        let r = task_rpc(
            &gw,
            ALICE,
            method,
            &id,
            json!({"taskId": id}),
            declaring_tasks(),
        )
        .await;
        assert_error(&r, 404, -32601, "method_not_found");
    }
    gw.stop().await;
}

/// The table is bounded per principal: past `max_per_principal` a new
/// task is refused (429, `too_many_pending`); another principal still
/// gets one.
#[tokio::test]
async fn tasks_are_bounded_per_principal() {
    let fx = Fixture::new();
    let gw = gateway(
        &fx,
        "task = \"required\"",
        "max_per_principal = 1\nmax_total = 4",
    )
    .await;
    ambiguous_task(&gw, ALICE).await;
    let r = rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring_tasks()).await;
    let err = assert_error(&r, 429, -32603, "too_many_pending");
    assert!(
        err.error["message"]
            .as_str()
            .unwrap()
            .contains("max_per_principal"),
        "{}",
        r.raw
    );
    ambiguous_task(&gw, BOB).await;
    gw.stop().await;
}

/// A task nobody answers within its TTL fails with a diagnostic.
#[tokio::test]
async fn a_task_nobody_answers_fails_at_its_ttl_with_a_diagnostic() {
    let fx = Fixture::new();
    let gw = gateway(
        &fx,
        "task = \"required\"",
        "ttl = \"2s\"\npoll_interval = \"100ms\"",
    )
    .await;
    let r = rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring_tasks()).await;
    assert_eq!(r.result()["ttlMs"], 2_000, "{}", r.raw);
    let id = r.result()["taskId"].as_str().unwrap().to_owned();
    until(&gw, ALICE, &id, "input_required").await;
    let failed = until(&gw, ALICE, &id, "failed").await;
    assert_eq!(
        failed["error"]["data"]["reason"], "operation_expired",
        "{failed}"
    );
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not finish within its ttl (2s"),
        "{failed}"
    );
    gw.stop().await;
}

/// A round nobody answers within `[mrtr] ttl` (how long the server's call
/// is held for an answer) fails the task then, with its diagnostic, even
/// though the task's own TTL is longer.
#[tokio::test]
async fn a_round_unanswered_within_the_mrtr_ttl_fails_the_task() {
    let fx = Fixture::new();
    let keys = api_key(ALICE, "alice", &[]) + "\n[mrtr]\nttl = \"1s\"\n";
    let policy = rooms_policy("task = \"required\"");
    let gw = TestGateway::start(&config_with(&fx, &keys, &policy, Some(""))).await;
    let id = ambiguous_task(&gw, ALICE).await;
    let failed = until(&gw, ALICE, &id, "failed").await;
    assert_eq!(
        failed["error"]["data"]["reason"], "operation_expired",
        "{failed}"
    );
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[mrtr] ttl"),
        "{failed}"
    );
    gw.stop().await;
}
