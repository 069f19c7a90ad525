//! Gateway-made tasks (the `io.modelcontextprotocol/tasks` extension) for a
//! legacy server that has none: the rooms example (a real rmcp server on
//! 2025-era stdio that pushes `elicitation/create` while a call is pending)
//! behind a route with `[route.tasks]` and a policy that says which tools
//! become tasks. Raw HTTP, every rule of the extension redmark implements.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mrtr_support;

use common::*;
use serde_json::{Value, json};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Client capabilities that declare the extension (and form elicitation).
fn declaring() -> Value {
    json!({"elicitation": {"form": {}}, "extensions": {TASKS: {}}})
}

/// The rooms server behind a route with `policy` (a policy file's text)
/// and `[route.tasks]` (`tasks`: its keys; `None`: no section).
fn config(fx: &Fixture, policy: &str, tasks: Option<&str>) -> String {
    config_with(fx, "", policy, tasks)
}

/// [`config`] with `extra` in the top level (API keys).
fn config_with(fx: &Fixture, extra: &str, policy: &str, tasks: Option<&str>) -> String {
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

#[tokio::test]
async fn only_a_route_with_tasks_offers_the_extension() {
    let fx = Fixture::new();
    let with = TestGateway::start(&config(&fx, "", Some(""))).await;
    let discovered = with.rpc("server/discover", json!({}), declaring()).await;
    let caps = &complete("server/discover", &discovered)["capabilities"];
    assert_eq!(caps["extensions"][TASKS], json!({}), "{caps}");

    let fx = Fixture::new();
    let without = TestGateway::start(&config(&fx, "", None)).await;
    let discovered = without.rpc("server/discover", json!({}), declaring()).await;
    let caps = &complete("server/discover", &discovered)["capabilities"];
    assert!(caps.get("extensions").is_none(), "{caps}");
}

#[test]
fn check_refuses_a_task_policy_on_a_route_without_tasks_and_unusable_task_settings() {
    let policy = "[tool.book_room]\ntask = \"required\"\n";
    // Each case has a fixture (a policy file) of its own.
    let (a, b, c) = (Fixture::new(), Fixture::new(), Fixture::new());
    let cases = [
        (
            config(&a, policy, None),
            "the policy sets `task` but the route has no [route.tasks] section",
        ),
        (
            config(&b, "", Some("after = \"2h\"\nttl = \"1h\"")),
            "after (7200s) must be shorter than ttl (3600s)",
        ),
        (
            config(&c, "", Some("max_per_principal = 9\nmax_total = 3")),
            "max_per_principal (9) is larger than max_total (3)",
        ),
    ];
    let fx = Fixture::new();
    for (text, expected) in cases {
        let file = fx.path("redmark.toml");
        std::fs::write(&file, &text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_redmark"))
            .args(["check", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{text}\n{stdout}{stderr}");
        assert!(
            stderr.contains(expected) || stdout.contains(expected),
            "expected `{expected}`:\n{stdout}{stderr}"
        );
    }
    // The same settings, made sound, pass.
    let file = fx.path("redmark.toml");
    std::fs::write(&file, config(&fx, policy, Some("after = \"1s\""))).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_redmark"))
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

const ALICE: &str = "alice-key";
const BOB: &str = "bob-key";

/// The shipped rooms policy, with `extra` added to `[tool.book_room]`.
fn rooms_policy(book_room: &str) -> String {
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
async fn gateway(fx: &Fixture, book_room: &str, tasks: &str) -> TestGateway {
    let keys = api_key(ALICE, "alice", &[]) + &api_key(BOB, "bob", &[]);
    TestGateway::start(&config_with(
        fx,
        &keys,
        &rooms_policy(book_room),
        Some(tasks),
    ))
    .await
}

/// A request as `key`'s principal, with `_meta` declaring `caps`.
async fn rpc_as(gw: &TestGateway, key: &str, method: &str, mut params: Value, caps: Value) -> Resp {
    params["_meta"] = meta(caps);
    read_resp(gw.send(gw.request(method, params).bearer_auth(key)).await).await
}

/// A `tasks/*` request with `Mcp-Name` set to `name`.
async fn task_rpc(
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

async fn get(gw: &TestGateway, key: &str, id: &str) -> Value {
    let r = task_rpc(gw, key, "tasks/get", id, json!({"taskId": id}), declaring()).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    r.result().clone()
}

async fn update(gw: &TestGateway, key: &str, id: &str, answers: Value) -> Resp {
    let params = json!({"taskId": id, "inputResponses": answers});
    task_rpc(gw, key, "tasks/update", id, params, declaring()).await
}

/// Polls `tasks/get` until the task reads `status`.
async fn until(gw: &TestGateway, key: &str, id: &str, status: &str) -> Value {
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

/// A `book_room` call whose hint names no room: the server asks which.
fn ambiguous() -> Value {
    json!({"name": "book_room", "arguments": {"day": "2026-12-08", "hour": 10, "room_hint": "the big one"}})
}

/// The `CreateTaskResult` of a call, checked whole (ext-tasks "Task Creation").
fn created(r: &Resp) -> String {
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

/// The whole life of a task that asks a person: `input_required` with the
/// server's question under the policy's key; an answer that breaks the
/// policy's field rule (`enum`) comes back as a new question with the red
/// mark under a new key and never reaches the server; answers to old or
/// unknown keys are ignored; the valid answer completes it.
#[tokio::test]
async fn a_task_asks_through_tasks_get_and_its_answers_are_held_to_the_policy() {
    let fx = Fixture::new();
    let gw = gateway(&fx, "task = \"required\"", "").await;
    let r = rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring()).await;
    let id = created(&r);

    let asked = until(&gw, ALICE, &id, "input_required").await;
    assert_eq!(asked["resultType"], "complete", "{asked}");
    let requests = asked["inputRequests"].as_object().unwrap();
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["room"], "{asked}");
    assert_eq!(requests["room"]["method"], "elicitation/create", "{asked}");
    // Polled again, the same outstanding question under the same key.
    assert_eq!(
        get(&gw, ALICE, &id).await["inputRequests"],
        asked["inputRequests"]
    );

    // A room the policy's enum does not have: a new question with the red mark.
    let ballroom = json!({"room": {"action": "accept", "content": {"room_id": "ballroom"}}});
    let ack = update(&gw, ALICE, &id, ballroom).await;
    assert_eq!(ack.status, 200, "{}", ack.raw);
    assert_eq!(
        ack.result(),
        &json!({"resultType": "complete"}),
        "{}",
        ack.raw
    );
    let reasked = eventually("the red-marked question", || {
        let id = id.clone();
        let gw = &gw;
        async move {
            let t = get(gw, ALICE, &id).await;
            match t["inputRequests"].get("room.2") {
                Some(_) => Ok(t),
                None => Err(t.to_string()),
            }
        }
    })
    .await;
    let keys: Vec<_> = reasked["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        keys,
        ["room.2"],
        "keys unique over the task's life: {reasked}"
    );
    assert!(
        reasked["inputRequests"]["room.2"]
            .to_string()
            .contains("ballroom"),
        "{reasked}"
    );
    // The old key again, and a key never issued: ignored, acknowledged.
    let stale = update(
        &gw,
        ALICE,
        &id,
        json!({"room": {"action": "accept", "content": {"room_id": "nook"}}, "nope": {}}),
    )
    .await;
    assert_eq!(
        stale.result(),
        &json!({"resultType": "complete"}),
        "{}",
        stale.raw
    );
    assert_eq!(get(&gw, ALICE, &id).await["status"], "input_required");

    let nook = json!({"room.2": {"action": "accept", "content": {"room_id": "nook"}}});
    update(&gw, ALICE, &id, nook).await;
    let done = until(&gw, ALICE, &id, "completed").await;
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Booked The Nook"), "{done}");
    // Finished: cancel is still an empty ack and changes nothing.
    let cancel = task_rpc(
        &gw,
        ALICE,
        "tasks/cancel",
        &id,
        json!({"taskId": id}),
        declaring(),
    )
    .await;
    assert_eq!(
        cancel.result(),
        &json!({"resultType": "complete"}),
        "{}",
        cancel.raw
    );
    assert_eq!(get(&gw, ALICE, &id).await["status"], "completed");
    gw.stop().await;
}

/// A tool error (`isError: true`) is a completed task; a JSON-RPC error
/// (here the policy's: CEL authz keeps the Atrium for facilities, so the
/// call ends with `policy_denied`, as an MRTR call would) a failed one.
#[tokio::test]
async fn results_with_is_error_complete_and_json_rpc_errors_fail() {
    let fx = Fixture::new();
    let gw = gateway(&fx, "task = \"required\"", "").await;
    let bad_slot = json!({"name": "book_room", "arguments": {"day": "2026-12-08", "hour": 30, "room_hint": "nook"}});
    let id = created(&rpc_as(&gw, ALICE, "tools/call", bad_slot, declaring()).await);
    let done = until(&gw, ALICE, &id, "completed").await;
    assert_eq!(done["result"]["isError"], true, "{done}");

    let id = created(&rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring()).await);
    until(&gw, ALICE, &id, "input_required").await;
    let atrium = json!({"room": {"action": "accept", "content": {"room_id": "atrium"}}});
    update(&gw, ALICE, &id, atrium).await;
    let failed = until(&gw, ALICE, &id, "failed").await;
    assert_eq!(failed["error"]["code"], -32602, "{failed}");
    assert_eq!(
        failed["error"]["data"]["reason"], "policy_denied",
        "{failed}"
    );
    assert_eq!(
        failed["error"]["message"], "only the facilities group may book the Atrium",
        "{failed}"
    );
    assert!(failed.get("result").is_none(), "{failed}");
    gw.stop().await;
}

/// `tasks/cancel` on a task waiting for a person: an empty ack, the task
/// reads `cancelled`, the server's question is answered `cancel` (its
/// answer, "booking cancelled", goes nowhere), and a second cancel is the
/// same ack.
#[tokio::test]
async fn cancel_ends_a_waiting_task_and_is_idempotent() {
    let fx = Fixture::new();
    let gw = gateway(&fx, "task = \"required\"", "").await;
    let id = created(&rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring()).await);
    until(&gw, ALICE, &id, "input_required").await;
    for _ in 0..2 {
        let r = task_rpc(
            &gw,
            ALICE,
            "tasks/cancel",
            &id,
            json!({"taskId": id}),
            declaring(),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.raw);
        assert_eq!(r.result(), &json!({"resultType": "complete"}), "{}", r.raw);
        let t = get(&gw, ALICE, &id).await;
        assert_eq!(t["status"], "cancelled", "{t}");
        assert!(t.get("inputRequests").is_none(), "{t}");
    }
    // The server heard `cancel` (the engine answered its elicitation so,
    // and the operation ended `cancelled`).
    let sample = r#"redmark_operations_total{route="main",tool="book_room",outcome="cancelled"}"#;
    eventually("the operation to end cancelled", || async {
        match gw.metric(sample).await {
            Some(n) if n >= 1.0 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
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
    let r = rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring()).await;
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
        json!({"extensions": {TASKS: {}}}),
        "{}",
        r.raw
    );

    let id = created(&rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring()).await);

    // tasks/* from a request that did not declare the extension: -32021.
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let params = json!({"taskId": id, "inputResponses": {}});
        let r = task_rpc(&gw, ALICE, method, &id, params, json!({})).await;
        let err = assert_error(&r, 400, -32021, "missing_capability");
        assert_eq!(
            err.data()["requiredCapabilities"]["extensions"][TASKS],
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
        declaring(),
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
        declaring(),
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
    let r = task_rpc(
        &gw,
        BOB,
        "tasks/cancel",
        &id,
        json!({"taskId": id}),
        declaring(),
    )
    .await;
    assert_error(&r, 200, -32602, "task_unknown");
    assert_ne!(get(&gw, ALICE, &id).await["status"], "cancelled");

    // Mcp-Name that is not params.taskId: -32020; none at all: -32020 too.
    let r = task_rpc(
        &gw,
        ALICE,
        "tasks/get",
        "someone-else",
        json!({"taskId": id}),
        declaring(),
    )
    .await;
    assert_error(&r, 400, -32020, "header_mismatch");
    let mut params = json!({"taskId": id});
    params["_meta"] = meta(declaring());
    let r = read_resp(
        gw.send(gw.request("tasks/get", params).bearer_auth(ALICE))
            .await,
    )
    .await;
    assert_error(&r, 400, -32020, "header_missing");

    // tasks/result and tasks/list are not in the extension: -32601.
    for method in ["tasks/result", "tasks/list"] {
        let r = task_rpc(&gw, ALICE, method, &id, json!({"taskId": id}), declaring()).await;
        assert_error(&r, 404, -32601, "method_not_found");
    }
    gw.stop().await;
}

/// `task = "optional"` with `after`: a call that ends sooner is answered
/// plainly; one that asks a person becomes a task at once; a client
/// without the extension gets the plain call (MRTR) as before.
#[tokio::test]
async fn optional_tasks_after_a_time_and_plain_calls_otherwise() {
    let fx = Fixture::new();
    let gw = gateway(&fx, "task = \"optional\"", "after = \"30s\"").await;
    let quick = json!({"name": "book_room", "arguments": {"day": "2026-12-09", "hour": 9, "room_hint": "nook"}});
    let r = rpc_as(&gw, ALICE, "tools/call", quick, declaring()).await;
    assert_eq!(r.result()["resultType"], "complete", "{}", r.raw);
    assert!(
        r.result()["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Booked The Nook"),
        "{}",
        r.raw
    );

    let r = rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring()).await;
    let id = created(&r);
    assert_eq!(
        r.result()["status"],
        "input_required",
        "made a task at its question, well before `after`: {}",
        r.raw
    );
    let asked = get(&gw, ALICE, &id).await;
    assert!(asked["inputRequests"]["room"].is_object(), "{asked}");

    let r = rpc_as(
        &gw,
        ALICE,
        "tools/call",
        ambiguous(),
        json!({"elicitation": {"form": {}}}),
    )
    .await;
    assert_eq!(r.result()["resultType"], "input_required", "{}", r.raw);
    gw.stop().await;
}

/// A call still running after `[route.tasks] after` becomes a task
/// (`working`), its progress notifications are not a task's, and its
/// result completes the task: server-everything's long-running operation
/// (a 2025-era server over stdio, with a progress token).
#[tokio::test]
async fn a_call_still_running_after_the_set_time_becomes_a_working_task() {
    let fx = Fixture::new();
    let mut text = everything_stdio_config("").replacen(
        "[route.upstream]",
        &format!(
            "{}\n[route.upstream]",
            fx.policy("[defaults]\ntask = \"optional\"\n")
        ),
        1,
    );
    text.push_str("\n[route.tasks]\nafter = \"300ms\"\npoll_interval = \"100ms\"\n");
    let gw = TestGateway::start(&text).await;
    let mut params =
        json!({"name": "trigger-long-running-operation", "arguments": {"duration": 2, "steps": 4}});
    params["_meta"] = meta(declaring());
    params["_meta"]["progressToken"] = json!("p-1");
    let r = read_resp(gw.send(gw.request("tools/call", params)).await).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    assert!(!r.is_sse(), "a task is one JSON answer: {}", r.raw);
    assert_eq!(r.result()["resultType"], "task", "{}", r.raw);
    assert_eq!(r.result()["status"], "working", "{}", r.raw);
    assert_eq!(r.result()["pollIntervalMs"], 100, "{}", r.raw);
    let id = r.result()["taskId"].as_str().unwrap().to_owned();
    let working = task_rpc(
        &gw,
        "",
        "tasks/get",
        &id,
        json!({"taskId": id}),
        declaring(),
    )
    .await;
    assert_eq!(
        working.result()["resultType"],
        "complete",
        "{}",
        working.raw
    );
    let done = eventually("the task to complete", || {
        let (gw, id) = (&gw, id.clone());
        async move {
            let r = task_rpc(gw, "", "tasks/get", &id, json!({"taskId": id}), declaring()).await;
            match r.result()["status"].as_str() {
                Some("completed") => Ok(r.result().clone()),
                Some("working") => Err(r.raw),
                _ => panic!("{}", r.raw),
            }
        }
    })
    .await;
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Long running operation completed"), "{done}");
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
    created(&rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring()).await);
    let r = rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring()).await;
    let err = assert_error(&r, 429, -32603, "too_many_pending");
    assert!(
        err.error["message"]
            .as_str()
            .unwrap()
            .contains("max_per_principal"),
        "{}",
        r.raw
    );
    created(&rpc_as(&gw, BOB, "tools/call", ambiguous(), declaring()).await);
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
    let id = created(&rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring()).await);
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

/// Two replicas sharing a state key and a cluster secret, each in front
/// of its own rooms server: `tasks/*` that land on the replica that does
/// not hold the task are forwarded to the one named in the sealed id; when
/// that replica is gone, `tasks/get` reads the task `failed`, saying so.
#[tokio::test]
async fn tasks_on_another_replica_are_forwarded_to_the_owner_and_a_lost_one_reads_failed() {
    let state = redmark::mrtr::state::generate_secret();
    let cluster = redmark::mrtr::state::generate_secret();
    let replica = |fx: &Fixture, node: &str| {
        let extra = format!(
            "node_id = \"{node}\"\n{}\n[[state.keys]]\nid = \"k1\"\nsecret = \"{state}\"\nsign = true\n\n[cluster]\nlisten = \"127.0.0.1:0\"\nsecret = \"{cluster}\"\n",
            api_key(ALICE, "alice", &[]) + &api_key(BOB, "bob", &[]),
        );
        config_with(fx, &extra, &rooms_policy("task = \"required\""), Some(""))
    };
    let (fa, fb) = (Fixture::new(), Fixture::new());
    let a = TestGateway::start(&replica(&fa, "n1")).await;
    let b = TestGateway::start(&replica(&fb, "n2")).await;

    let id = created(&rpc_as(&a, ALICE, "tools/call", ambiguous(), declaring()).await);
    // Read, answered and finished through the other replica.
    let asked = until(&b, ALICE, &id, "input_required").await;
    assert!(asked["inputRequests"]["room"].is_object(), "{asked}");
    // Another principal is refused there as here.
    let theirs = task_rpc(
        &b,
        BOB,
        "tasks/get",
        &id,
        json!({"taskId": id}),
        declaring(),
    )
    .await;
    assert_error(&theirs, 200, -32602, "task_unknown");
    let answer = json!({"room": {"action": "accept", "content": {"room_id": "studio-b"}}});
    let ack = update(&b, ALICE, &id, answer).await;
    assert_eq!(
        ack.result(),
        &json!({"resultType": "complete"}),
        "{}",
        ack.raw
    );
    let done = until(&b, ALICE, &id, "completed").await;
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("studio-b"),
        "{done}"
    );
    let forwarded = r#"redmark_forwarded_retries_total{route="main",outcome="forwarded"}"#;
    assert!(
        b.metric(forwarded).await.unwrap_or(0.0) >= 3.0,
        "{}",
        b.metrics().await
    );

    // Cancelled through the other replica.
    let id = created(&rpc_as(&a, ALICE, "tools/call", ambiguous(), declaring()).await);
    until(&b, ALICE, &id, "input_required").await;
    let r = task_rpc(
        &b,
        ALICE,
        "tasks/cancel",
        &id,
        json!({"taskId": id}),
        declaring(),
    )
    .await;
    assert_eq!(r.result(), &json!({"resultType": "complete"}), "{}", r.raw);
    assert_eq!(get(&a, ALICE, &id).await["status"], "cancelled");

    // The owner is gone: its task reads failed, saying why.
    let id = created(&rpc_as(&a, ALICE, "tools/call", ambiguous(), declaring()).await);
    a.stop().await;
    let lost = get(&b, ALICE, &id).await;
    assert_eq!(lost["status"], "failed", "{lost}");
    assert_eq!(lost["taskId"], id.as_str(), "{lost}");
    assert_eq!(
        lost["error"]["data"]["reason"], "owner_unreachable",
        "{lost}"
    );
    assert!(
        lost["statusMessage"]
            .as_str()
            .unwrap()
            .contains("(n1) is lost"),
        "{lost}"
    );
    let r = update(&b, ALICE, &id, json!({"room": {"action": "decline"}})).await;
    assert_error(&r, 503, -32603, "owner_unreachable");
    // Counted once as lost, however often it is read so.
    get(&b, ALICE, &id).await;
    let lost = r#"redmark_tasks_total{route="main",tool="book_room",outcome="lost"}"#;
    b.wait_metric(lost, 1.0).await;
    get(&b, ALICE, &id).await;
    assert_eq!(b.metric(lost).await, Some(1.0));
    b.stop().await;
}

/// `subscriptions/listen` asking for task ids on a route that offers the
/// extension: -32021 for a client that did not declare it; a declaring
/// client's listen is served, acknowledging none of ids that are no task
/// of its own (here one never made).
#[tokio::test]
async fn a_listen_for_task_ids_needs_the_extension_and_acknowledges_only_its_own() {
    let fx = Fixture::new();
    let gw = gateway(&fx, "task = \"required\"", "").await;
    let filter = json!({"notifications": {"toolsListChanged": true, "taskIds": ["t-1"]}});
    let r = rpc_as(
        &gw,
        ALICE,
        "subscriptions/listen",
        filter.clone(),
        json!({}),
    )
    .await;
    let err = assert_error(&r, 400, -32021, "missing_capability");
    assert_eq!(
        err.data()["requiredCapabilities"]["extensions"][TASKS],
        json!({}),
        "{}",
        r.raw
    );

    let mut params = filter;
    params["_meta"] = meta(declaring());
    let resp = gw
        .send(
            gw.request("subscriptions/listen", params)
                .bearer_auth(ALICE),
        )
        .await;
    let mut stream = SseReader::new(resp);
    let ack = stream
        .next(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert!(ack["params"]["notifications"].is_object(), "{ack}");
    assert!(
        ack["params"]["notifications"].get("taskIds").is_none(),
        "{ack}"
    );
    drop(stream);
    gw.stop().await;
}

/// A gateway in front of the FastMCP fixture server (PyPI `mcp` 1.30.0,
/// tests/fixtures/mrtr_server.py), every tool a task.
async fn fastmcp_gateway(fx: &Fixture) -> TestGateway {
    let text = fx
        .cfg()
        .route(&fx.policy("[defaults]\ntask = \"required\"\n"))
        .build()
        + "\n[route.tasks]\npoll_interval = \"100ms\"\n";
    TestGateway::start(&text).await
}

/// Two questions pushed at once (`asyncio.gather`): answered one at a time,
/// the task stays `input_required` with only the other outstanding, and
/// the server gets both answers once both are in.
#[tokio::test]
async fn partial_answers_are_kept_until_the_round_is_complete() {
    let fx = Fixture::new();
    let gw = fastmcp_gateway(&fx).await;
    let call = json!({"name": "pair", "arguments": {"tag": "p-1"}});
    let r = rpc_as(&gw, "", "tools/call", call, declaring()).await;
    let id = r.result()["taskId"].as_str().unwrap().to_owned();
    let asked = until(&gw, "", &id, "input_required").await;
    let mut keys: Vec<String> = asked["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    keys.sort();
    assert_eq!(keys.len(), 2, "{asked}");
    let name = |n: &str| json!({"action": "accept", "content": {"name": n}});
    update(&gw, "", &id, json!({keys[0].clone(): name("Ada")})).await;
    let half = get(&gw, "", &id).await;
    assert_eq!(half["status"], "input_required", "{half}");
    let left: Vec<&String> = half["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(left, [&keys[1]], "{half}");
    assert!(
        fx.log.tagged("answer", "p-1").is_empty(),
        "nothing reached the server yet"
    );
    update(&gw, "", &id, json!({keys[1].clone(): name("Grace")})).await;
    let done = until(&gw, "", &id, "completed").await;
    let out: Value =
        serde_json::from_str(done["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let mut names = vec![
        out["first"]["content"]["name"].clone(),
        out["second"]["content"]["name"].clone(),
    ];
    names.sort_by_key(ToString::to_string);
    assert_eq!(names, [json!("Ada"), json!("Grace")], "{done}");
    gw.stop().await;
}

/// `tasks/cancel` of a task waiting for a person: the server hears
/// `cancel`, and, as it lingers, `notifications/cancelled`; of a task
/// still working: `notifications/cancelled`.
#[tokio::test]
async fn cancel_tells_the_server_cancel_and_notifications_cancelled() {
    let fx = Fixture::new();
    let gw = fastmcp_gateway(&fx).await;
    let call = json!({"name": "ask", "arguments": {"tag": "c-1", "linger": true}});
    let id = rpc_as(&gw, "", "tools/call", call, declaring())
        .await
        .result()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    until(&gw, "", &id, "input_required").await;
    task_rpc(
        &gw,
        "",
        "tasks/cancel",
        &id,
        json!({"taskId": id}),
        declaring(),
    )
    .await;
    let answer = fx.log.only_answer("c-1").await;
    assert_eq!(answer["action"], "cancel", "{answer}");
    fx.log
        .eventually("the lingering call to be cancelled", |e| {
            e["event"] == "cancelled" && e["tag"] == "c-1"
        })
        .await;

    let call = json!({"name": "hang", "arguments": {"tag": "h-1"}});
    let id = rpc_as(&gw, "", "tools/call", call, declaring())
        .await
        .result()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    fx.log
        .eventually("hang to start", |e| {
            e["event"] == "hanging" && e["tag"] == "h-1"
        })
        .await;
    assert_eq!(get(&gw, "", &id).await["status"], "working");
    task_rpc(
        &gw,
        "",
        "tasks/cancel",
        &id,
        json!({"taskId": id}),
        declaring(),
    )
    .await;
    assert_eq!(get(&gw, "", &id).await["status"], "cancelled");
    fx.log
        .eventually("the working call to be cancelled", |e| {
            e["event"] == "cancelled" && e["tag"] == "h-1"
        })
        .await;
    assert!(
        fx.log
            .events()
            .iter()
            .any(|e| e["event"] == "cancel_requested"),
        "notifications/cancelled arrived: {}",
        fx.log.seen()
    );
    gw.stop().await;
}

/// A task is one operation in the accounting: `redmark_tasks_total` counts
/// each task once by how it ended (a second cancel counts nothing),
/// `redmark_tasks_live` the tasks not yet ended, and the task's questions
/// are audited as an MRTR call's are (one line each: the red-marked answer
/// `invalid`, the valid one `accepted`, the cancelled task's `cancelled`),
/// so `redmark report` shows them.
#[tokio::test]
async fn a_task_is_counted_once_by_outcome_and_its_questions_are_audited() {
    let fx = Fixture::new();
    let audit = fx.path("audit.jsonl");
    let extra =
        api_key(ALICE, "alice", &[]) + &format!("\n[audit]\npath = {}\n", toml_path(&audit));
    let gw = TestGateway::start(&config_with(
        &fx,
        &extra,
        &rooms_policy("task = \"required\""),
        Some(""),
    ))
    .await;
    let total = |outcome: &str| {
        format!(r#"redmark_tasks_total{{route="main",tool="book_room",outcome="{outcome}"}}"#)
    };

    let id = created(&rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring()).await);
    until(&gw, ALICE, &id, "input_required").await;
    assert_eq!(gw.metric("redmark_tasks_live").await, Some(1.0));
    let ballroom = json!({"room": {"action": "accept", "content": {"room_id": "ballroom"}}});
    update(&gw, ALICE, &id, ballroom).await;
    eventually("the red-marked question", || {
        let id = id.clone();
        let gw = &gw;
        async move {
            let t = get(gw, ALICE, &id).await;
            t["inputRequests"]
                .get("room.2")
                .map(|_| ())
                .ok_or_else(|| t.to_string())
        }
    })
    .await;
    let nook = json!({"room.2": {"action": "accept", "content": {"room_id": "nook"}}});
    update(&gw, ALICE, &id, nook).await;
    until(&gw, ALICE, &id, "completed").await;
    gw.wait_metric(&total("completed"), 1.0).await;
    assert_eq!(gw.metric("redmark_tasks_live").await, Some(0.0));

    let id = created(&rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring()).await);
    until(&gw, ALICE, &id, "input_required").await;
    for _ in 0..2 {
        let r = task_rpc(
            &gw,
            ALICE,
            "tasks/cancel",
            &id,
            json!({"taskId": id}),
            declaring(),
        )
        .await;
        assert_eq!(r.result(), &json!({"resultType": "complete"}), "{}", r.raw);
    }
    gw.wait_metric(&total("cancelled"), 1.0).await;
    assert_eq!(gw.metric("redmark_tasks_live").await, Some(0.0));
    assert_eq!(gw.metric(&total("failed")).await, None);

    // The questions' audit lines, written as each question ends.
    let lines = eventually("the task's questions audited", || {
        let audit = audit.clone();
        async move {
            let lines: Vec<Value> = std::fs::read_to_string(&audit)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .filter(|l: &Value| l["tool"] == "book_room")
                .collect();
            let outcomes: Vec<&str> = lines.iter().filter_map(|l| l["outcome"].as_str()).collect();
            if outcomes.len() == 3 {
                Ok(lines)
            } else {
                Err(format!("{outcomes:?}"))
            }
        }
    })
    .await;
    let outcomes: Vec<&str> = lines.iter().filter_map(|l| l["outcome"].as_str()).collect();
    assert_eq!(outcomes, ["invalid", "accepted", "cancelled"], "{lines:?}");
    assert!(
        !std::fs::read_to_string(&audit)
            .unwrap()
            .contains("ballroom"),
        "answers are user data: never audited"
    );
    let report = redmark::telemetry::report::run(
        std::slice::from_ref(&audit),
        None,
        redmark::telemetry::report::Format::Json,
        redmark::telemetry::report::By::Tool,
    )
    .unwrap();
    let report: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["total"]["asked"], 3, "{report:#}");
    assert!(report.to_string().contains("book_room"), "{report:#}");
    gw.stop().await;
}

/// `notifications/tasks` on `subscriptions/listen` (ext-tasks "Task Status
/// Notifications"): the acknowledgement names the listener's own tasks
/// among the ids it asked for (not a forged id, not another principal's);
/// each notification is the task as `tasks/get` reads it, tagged with the
/// subscription id: `input_required` with its question, then, answered,
/// `completed` with the result, and nothing after.
#[tokio::test]
async fn a_listen_with_task_ids_is_sent_each_change_of_its_tasks() {
    use std::time::Duration;
    let fx = Fixture::new();
    let gw = gateway(&fx, "task = \"required\"", "").await;
    let id = created(&rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring()).await);
    let bobs = created(&rpc_as(&gw, BOB, "tools/call", ambiguous(), declaring()).await);
    until(&gw, ALICE, &id, "input_required").await;

    let listen = |key: &'static str, ids: Value| {
        let mut params = json!({"notifications": {"taskIds": ids}});
        params["_meta"] = meta(declaring());
        gw.send(gw.request("subscriptions/listen", params).bearer_auth(key))
    };
    let mut stream =
        SseReader::new(listen(ALICE, json!([id, bobs, "redmark-task.forged", id])).await);
    let ack = stream.next(Duration::from_secs(30)).await.unwrap();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([id]),
        "{ack}"
    );
    let subscription = ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone();

    let first = task_note(&mut stream).await;
    let p = &first["params"];
    assert_eq!(p["taskId"], id.as_str(), "{first}");
    assert_eq!(p["status"], "input_required", "{first}");
    assert!(p["inputRequests"]["room"].is_object(), "{first}");
    assert!(p.get("resultType").is_none(), "{first}");
    assert_eq!(
        p["_meta"]["io.modelcontextprotocol/subscriptionId"], subscription,
        "{first}"
    );
    // Identical to what tasks/get reads, but for resultType and the tag.
    let mut polled = get(&gw, ALICE, &id).await;
    polled.as_object_mut().unwrap().remove("resultType");
    let mut pushed = p.clone();
    pushed.as_object_mut().unwrap().remove("_meta");
    assert_eq!(pushed, polled);

    let nook = json!({"room": {"action": "accept", "content": {"room_id": "nook"}}});
    update(&gw, ALICE, &id, nook).await;
    let mut seen = Vec::new();
    let done = loop {
        let n = task_note(&mut stream).await;
        assert_eq!(n["params"]["taskId"], id.as_str(), "{n}");
        let status = n["params"]["status"].as_str().unwrap().to_owned();
        seen.push(status.clone());
        if status == "completed" {
            break n;
        }
        assert!(seen.len() < 10, "{seen:?}");
    };
    let text = done["params"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(text.starts_with("Booked The Nook"), "{done}");
    // An ended task sends nothing more.
    let more = tokio::time::timeout(
        Duration::from_millis(500),
        stream.next(Duration::from_secs(30)),
    )
    .await;
    assert!(more.is_err(), "nothing after completed: {more:?}");
    drop(stream);

    // Bob may not watch Alice's task: acknowledged without it.
    let mut stream = SseReader::new(listen(BOB, json!([id])).await);
    let ack = stream.next(Duration::from_secs(30)).await.unwrap();
    assert!(
        ack["params"]["notifications"].get("taskIds").is_none(),
        "{ack}"
    );
    drop(stream);
    gw.stop().await;
}

/// A replica that restarted lost its table: its earlier tasks are not
/// `task_unknown` but read `failed`, saying the replica restarted
/// (`task_lost`, naming the node), and `tasks/update` and `tasks/cancel`
/// on them are acknowledged as on any ended task. Ids of the new
/// incarnation, and forged ones, are served as before.
#[tokio::test]
async fn a_restarted_replica_reads_its_lost_tasks_failed_saying_so() {
    let state = redmark::mrtr::state::generate_secret();
    let extra = format!(
        "node_id = \"n1\"\n{}\n[[state.keys]]\nid = \"k1\"\nsecret = \"{state}\"\nsign = true\n",
        api_key(ALICE, "alice", &[]),
    );
    let fx = Fixture::new();
    let text = config_with(&fx, &extra, &rooms_policy("task = \"required\""), Some(""));
    let first = TestGateway::start(&text).await;
    let id = created(&rpc_as(&first, ALICE, "tools/call", ambiguous(), declaring()).await);
    until(&first, ALICE, &id, "input_required").await;
    first.stop().await;

    let again = TestGateway::start(&text).await;
    let lost = get(&again, ALICE, &id).await;
    assert_eq!(lost["status"], "failed", "{lost}");
    assert_eq!(lost["taskId"], id.as_str(), "{lost}");
    assert_eq!(lost["resultType"], "complete", "{lost}");
    assert_eq!(lost["error"]["code"], -32603, "{lost}");
    assert_eq!(lost["error"]["data"]["reason"], "task_lost", "{lost}");
    assert_eq!(lost["error"]["data"]["node"], "n1", "{lost}");
    assert!(
        lost["statusMessage"]
            .as_str()
            .unwrap()
            .contains("(n1) restarted"),
        "{lost}"
    );
    assert_eq!(lost["ttlMs"], 3_600_000, "{lost}");
    for (method, params) in [
        (
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"room": {"action": "decline"}}}),
        ),
        ("tasks/cancel", json!({"taskId": id})),
    ] {
        let r = task_rpc(&again, ALICE, method, &id, params, declaring()).await;
        assert_eq!(
            r.result(),
            &json!({"resultType": "complete"}),
            "{method}: {}",
            r.raw
        );
    }
    let counted = r#"redmark_tasks_total{route="main",tool="book_room",outcome="lost"}"#;
    again.wait_metric(counted, 1.0).await;
    get(&again, ALICE, &id).await;
    assert_eq!(again.metric(counted).await, Some(1.0), "counted once");
    // This incarnation's tasks are its own; a forged id is still unknown.
    let fresh = created(&rpc_as(&again, ALICE, "tools/call", ambiguous(), declaring()).await);
    until(&again, ALICE, &fresh, "input_required").await;
    let forged = "redmark-task.nope";
    let r = task_rpc(
        &again,
        ALICE,
        "tasks/get",
        forged,
        json!({"taskId": forged}),
        declaring(),
    )
    .await;
    assert_error(&r, 200, -32602, "task_unknown");
    again.stop().await;
}

/// The next message of a listen, a `notifications/tasks`.
async fn task_note(stream: &mut SseReader) -> Value {
    let n = stream
        .next(std::time::Duration::from_secs(30))
        .await
        .expect("a notification");
    assert_eq!(n["method"], "notifications/tasks", "{n}");
    n
}
