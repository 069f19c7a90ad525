//! Gateway-made tasks (the `io.modelcontextprotocol/tasks` extension) for a
//! legacy server that has none: the rooms example (a real rmcp server on
//! 2025-era stdio that pushes `elicitation/create` while a call is pending)
//! behind a route with `[route.tasks]` and a policy that says which tools
//! become tasks. Raw HTTP: which routes offer the extension and what
//! `redmark check` refuses, which calls become tasks, and a task's life
//! (questions, answers held to the policy, partial answers, results and
//! errors, cancellation). Shared steps: tests/tasks_support. Protocol
//! errors, bounds and TTLs: tasks_gateway_errors.rs; replicas:
//! tasks_gateway_replicas.rs; listens and accounting: tasks_gateway_notify.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mrtr_support;
mod tasks_support;

use common::*;
use serde_json::{Value, json};
use tasks_support::*;

#[tokio::test]
async fn only_a_route_with_tasks_offers_the_extension() {
    let fx = Fixture::new();
    let with = TestGateway::start(&config(&fx, "", Some(""))).await;
    let discovered = with
        .rpc("server/discover", json!({}), declaring_tasks())
        .await;
    let caps = &complete("server/discover", &discovered)["capabilities"];
    assert_eq!(caps["extensions"][TASKS_EXTENSION], json!({}), "{caps}");

    let fx = Fixture::new();
    let without = TestGateway::start(&config(&fx, "", None)).await;
    let discovered = without
        .rpc("server/discover", json!({}), declaring_tasks())
        .await;
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

/// `task = "optional"` with `after`: a call that ends sooner is answered
/// plainly; one that asks a person becomes a task at once; a client
/// without the extension gets the plain call (MRTR) as before.
#[tokio::test]
async fn optional_tasks_after_a_time_and_plain_calls_otherwise() {
    let fx = Fixture::new();
    let gw = gateway(&fx, "task = \"optional\"", "after = \"30s\"").await;
    let quick = json!({"name": "book_room", "arguments": {"day": "2026-12-09", "hour": 9, "room_hint": "nook"}});
    let r = rpc_as(&gw, ALICE, "tools/call", quick, declaring_tasks()).await;
    assert_eq!(r.result()["resultType"], "complete", "{}", r.raw);
    assert!(
        r.result()["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Booked The Nook"),
        "{}",
        r.raw
    );

    let r = rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring_tasks()).await;
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
    params["_meta"] = meta(declaring_tasks());
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
        declaring_tasks(),
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
            let r = task_rpc(
                gw,
                "",
                "tasks/get",
                &id,
                json!({"taskId": id}),
                declaring_tasks(),
            )
            .await;
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

/// The whole life of a task that asks a person: `input_required` with the
/// server's question under the policy's key; an answer that breaks the
/// policy's field rule (`enum`) comes back as a new question with the red
/// mark under a new key and never reaches the server; answers to old or
/// unknown keys are ignored; the valid answer completes it.
#[tokio::test]
async fn a_task_asks_through_tasks_get_and_its_answers_are_held_to_the_policy() {
    let fx = Fixture::new();
    let gw = gateway(&fx, "task = \"required\"", "").await;
    let r = rpc_as(&gw, ALICE, "tools/call", ambiguous(), declaring_tasks()).await;
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
    let reasked = until_asked(&gw, ALICE, &id, "room.2").await;
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
    let cancel = cancel(&gw, ALICE, &id).await;
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
    let id = created(&rpc_as(&gw, ALICE, "tools/call", bad_slot, declaring_tasks()).await);
    let done = until(&gw, ALICE, &id, "completed").await;
    assert_eq!(done["result"]["isError"], true, "{done}");

    let id = waiting_task(&gw, ALICE).await;
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

/// Two questions pushed at once (`asyncio.gather`): answered one at a time,
/// the task stays `input_required` with only the other outstanding, and
/// the server gets both answers once both are in.
#[tokio::test]
async fn partial_answers_are_kept_until_the_round_is_complete() {
    let fx = Fixture::new();
    let gw = fastmcp_gateway(&fx).await;
    let call = json!({"name": "pair", "arguments": {"tag": "p-1"}});
    let r = rpc_as(&gw, "", "tools/call", call, declaring_tasks()).await;
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

/// `tasks/cancel` on a task waiting for a person: an empty ack, the task
/// reads `cancelled`, the server's question is answered `cancel` (its
/// answer, "booking cancelled", goes nowhere), and a second cancel is the
/// same ack.
#[tokio::test]
async fn cancel_ends_a_waiting_task_and_is_idempotent() {
    let fx = Fixture::new();
    let gw = gateway(&fx, "task = \"required\"", "").await;
    let id = waiting_task(&gw, ALICE).await;
    for _ in 0..2 {
        let r = cancel(&gw, ALICE, &id).await;
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

/// `tasks/cancel` of a task waiting for a person: the server hears
/// `cancel`, and, as it lingers, `notifications/cancelled`; of a task
/// still working: `notifications/cancelled`.
#[tokio::test]
async fn cancel_tells_the_server_cancel_and_notifications_cancelled() {
    let fx = Fixture::new();
    // The call lingers after its `cancel`: a short end_grace, then
    // `notifications/cancelled`.
    let text = fx
        .cfg()
        .route(&fx.policy("[defaults]\ntask = \"required\"\n"))
        .upstream("end_grace = \"1s\"")
        .build()
        + "\n[route.tasks]\npoll_interval = \"100ms\"\n";
    let gw = TestGateway::start(&text).await;
    let call = json!({"name": "ask", "arguments": {"tag": "c-1", "linger": true}});
    let id = rpc_as(&gw, "", "tools/call", call, declaring_tasks())
        .await
        .result()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    until(&gw, "", &id, "input_required").await;
    cancel(&gw, "", &id).await;
    let answer = fx.log.only_answer("c-1").await;
    assert_eq!(answer["action"], "cancel", "{answer}");
    fx.log
        .eventually("the lingering call to be cancelled", |e| {
            e["event"] == "cancelled" && e["tag"] == "c-1"
        })
        .await;

    let call = json!({"name": "hang", "arguments": {"tag": "h-1"}});
    let id = rpc_as(&gw, "", "tools/call", call, declaring_tasks())
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
    cancel(&gw, "", &id).await;
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
