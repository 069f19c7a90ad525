//! Gateway-made tasks across replicas: `tasks/*` landing on a replica that
//! does not hold the task are forwarded to the one its sealed id names; a
//! task whose replica is gone, or restarted, reads `failed` saying so.
//! Shared steps: tests/tasks_support.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mrtr_support;
mod tasks_support;

use common::*;
use serde_json::json;
use tasks_support::*;

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

    let id = ambiguous_task(&a, ALICE).await;
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
        declaring_tasks(),
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
    let id = ambiguous_task(&a, ALICE).await;
    until(&b, ALICE, &id, "input_required").await;
    let r = cancel(&b, ALICE, &id).await;
    assert_eq!(r.result(), &json!({"resultType": "complete"}), "{}", r.raw);
    assert_eq!(get(&a, ALICE, &id).await["status"], "cancelled");

    // The owner is gone: its task reads failed, saying why.
    let id = ambiguous_task(&a, ALICE).await;
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
    let id = waiting_task(&first, ALICE).await;
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
        let r = task_rpc(&again, ALICE, method, &id, params, declaring_tasks()).await;
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
    waiting_task(&again, ALICE).await;
    let forged = "redmark-task.nope";
    let r = task_rpc(
        &again,
        ALICE,
        "tasks/get",
        forged,
        json!({"taskId": forged}),
        declaring_tasks(),
    )
    .await;
    assert_error(&r, 200, -32602, "task_unknown");
    again.stop().await;
}
