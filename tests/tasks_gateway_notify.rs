//! Watching and counting gateway-made tasks: `subscriptions/listen` with
//! task ids (`notifications/tasks`), and a task's accounting
//! (`redmark_tasks_total`, `redmark_tasks_live`) and audit lines.
//! Shared steps: tests/tasks_support.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mrtr_support;
mod tasks_support;

use common::*;
use serde_json::{Value, json};
use tasks_support::*;

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
        err.data()["requiredCapabilities"]["extensions"][TASKS_EXTENSION],
        json!({}),
        "{}",
        r.raw
    );

    let (stream, ack) = listen_declaring_tasks(&gw, Some(ALICE), filter).await;
    assert!(ack["params"]["notifications"].is_object(), "{ack}");
    assert!(
        ack["params"]["notifications"].get("taskIds").is_none(),
        "{ack}"
    );
    drop(stream);
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
    let id = ambiguous_task(&gw, ALICE).await;
    let bobs = ambiguous_task(&gw, BOB).await;
    until(&gw, ALICE, &id, "input_required").await;

    let listen = async |key: &'static str, ids: Value| {
        let params = json!({"notifications": {"taskIds": ids}});
        listen_declaring_tasks(&gw, Some(key), params).await
    };
    let (mut stream, ack) = listen(ALICE, json!([id, bobs, "redmark-task.forged", id])).await;
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
    let (stream, ack) = listen(BOB, json!([id])).await;
    assert!(
        ack["params"]["notifications"].get("taskIds").is_none(),
        "{ack}"
    );
    drop(stream);
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

    let id = waiting_task(&gw, ALICE).await;
    assert_eq!(gw.metric("redmark_tasks_live").await, Some(1.0));
    let ballroom = json!({"room": {"action": "accept", "content": {"room_id": "ballroom"}}});
    update(&gw, ALICE, &id, ballroom).await;
    until_asked(&gw, ALICE, &id, "room.2").await;
    let nook = json!({"room.2": {"action": "accept", "content": {"room_id": "nook"}}});
    update(&gw, ALICE, &id, nook).await;
    until(&gw, ALICE, &id, "completed").await;
    gw.wait_metric(&total("completed"), 1.0).await;
    assert_eq!(gw.metric("redmark_tasks_live").await, Some(0.0));

    let id = waiting_task(&gw, ALICE).await;
    for _ in 0..2 {
        let r = cancel(&gw, ALICE, &id).await;
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
