//! Tasks through the three replicas behind nginx (tests/cluster_support):
//! a gateway-made task (route `/tasks`, a rooms server per replica) and a
//! native server's task relayed (route `/native-tasks`), each created on
//! one replica and served through the others, every `tasks/*` away from its
//! replica forwarded to it.

// A test may panic (that is how it fails).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster_support;
mod common;
mod mrtr_support;

use std::time::Duration;

use cluster_support::*;
use common::*;
use serde_json::{Value, json};

/// A gateway-made task through nginx's round robin: created on one
/// replica, then polled, answered and cancelled through whichever replica
/// each request lands on; every `tasks/*` away from the task's replica is
/// forwarded to it (the sealed id names it), and every replica reads the
/// task the same.
#[tokio::test]
async fn a_task_is_created_on_one_replica_and_polled_updated_and_cancelled_through_the_others() {
    let cluster = Cluster::start().await;
    let client = McpClient::new(cluster.url("/tasks"));
    let caps = declaring_tasks();
    let task_rpc = |method: &'static str, id: String, params: Value| {
        let client = &client;
        async move { task_request(client, method, &id, params).await }
    };
    let call = json!({"name": "book_room", "arguments": {"day": "2026-12-10", "hour": 11, "room_hint": "the big one"}});
    let status_of = |id: String| async move {
        let r = task_rpc("tasks/get", id, json!({})).await;
        assert_eq!(r.status, 200, "{}", r.raw);
        r.result().clone()
    };

    let made = client.rpc("tools/call", call.clone(), caps.clone()).await;
    assert_eq!(made.result()["resultType"], "task", "{}", made.raw);
    let id = made.result()["taskId"].as_str().unwrap().to_owned();
    let asked = eventually("the task to ask", || {
        let id = id.clone();
        async move {
            let t = status_of(id).await;
            if t["status"] == "input_required" {
                Ok(t)
            } else {
                Err(t.to_string())
            }
        }
    })
    .await;
    // Three polls in a row land on three replicas: the same question.
    for _ in 0..3 {
        assert_eq!(
            status_of(id.clone()).await["inputRequests"],
            asked["inputRequests"]
        );
    }
    // A listen for the task on any replica is sent it: the one holding it
    // as it changes, the others read it from there.
    let mut streams = Vec::new();
    for replica in cluster.running() {
        let direct = McpClient::new(replica.process().url("/tasks"));
        let params = json!({"notifications": {"taskIds": [id]}});
        let (mut stream, ack) = listen_declaring_tasks(&direct, None, params).await;
        assert_eq!(
            ack["params"]["notifications"]["taskIds"],
            json!([id]),
            "{}: {ack}",
            replica.node
        );
        let note = stream.next(Duration::from_secs(30)).await.unwrap();
        assert_eq!(note["method"], "notifications/tasks", "{note}");
        assert_eq!(
            note["params"]["inputRequests"], asked["inputRequests"],
            "{}: {note}",
            replica.node
        );
        streams.push((replica.node, stream));
    }
    let answer =
        json!({"inputResponses": {"room": {"action": "accept", "content": {"room_id": "nook"}}}});
    let ack = task_rpc("tasks/update", id.clone(), answer).await;
    assert_eq!(
        ack.result(),
        &json!({"resultType": "complete"}),
        "{}",
        ack.raw
    );
    let done = eventually("the task to complete", || {
        let id = id.clone();
        async move {
            let t = status_of(id).await;
            if t["status"] == "completed" {
                Ok(t)
            } else {
                Err(t.to_string())
            }
        }
    })
    .await;
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("nook"),
        "{done}"
    );
    for (node, mut stream) in streams {
        let completed = loop {
            let n = stream.next(Duration::from_secs(30)).await.unwrap();
            if n["params"]["status"] == "completed" {
                break n;
            }
        };
        assert_eq!(completed["params"]["result"], done["result"], "{node}");
    }

    let made = client.rpc("tools/call", call, caps.clone()).await;
    let id = made.result()["taskId"].as_str().unwrap().to_owned();
    eventually("the second task to ask", || {
        let id = id.clone();
        async move {
            let t = status_of(id).await;
            if t["status"] == "input_required" {
                Ok(())
            } else {
                Err(t.to_string())
            }
        }
    })
    .await;
    let ack = task_rpc("tasks/cancel", id.clone(), json!({})).await;
    assert_eq!(
        ack.result(),
        &json!({"resultType": "complete"}),
        "{}",
        ack.raw
    );
    for _ in 0..3 {
        assert_eq!(status_of(id.clone()).await["status"], "cancelled");
    }
    let out = cluster.sum(&forwarded("tasks")).await;
    let into = cluster.sum(&received("tasks")).await;
    assert!(out >= 6.0, "{out} tasks/* forwarded");
    assert_eq!(out, into, "every forward arrived");
}

/// A native server's task relayed through three replicas: created on one,
/// its questions read and its answers judged through the others (each
/// forwarded to the replica that relayed it, so a red mark reads the same
/// everywhere), and, that replica killed, served by the survivors from
/// its id alone (the server still holds the task).
#[tokio::test]
async fn a_relayed_native_task_is_served_through_every_replica_and_outlives_its_relayer() {
    let mut cluster = Cluster::start().await;
    let client = McpClient::new(cluster.url("/native-tasks"));
    let caps = declaring_tasks();
    let task_rpc = |method: &'static str, id: String, params: Value| {
        let client = &client;
        async move { task_result(client, method, &id, params).await }
    };
    let made = client
        .rpc(
            "tools/call",
            json!({"name": "multi_input", "arguments": {}}),
            caps.clone(),
        )
        .await;
    assert_eq!(made.result()["resultType"], "task", "{}", made.raw);
    let id = made.result()["taskId"].as_str().unwrap().to_owned();
    eventually("two questions", || {
        let id = id.clone();
        async move {
            let t = task_rpc("tasks/get", id, json!({})).await;
            match t["inputRequests"].as_object() {
                Some(r) if r.len() == 2 => Ok(()),
                _ => Err(t.to_string()),
            }
        }
    })
    .await;
    // An answer that breaks the policy's rule, and a valid one: wherever
    // they land, the owner judges them, and every replica reads the red
    // mark under the same new key.
    let ack = task_rpc(
        "tasks/update",
        id.clone(),
        json!({"inputResponses": {
            "first": {"action": "accept", "content": {"name": "Not Valid"}},
            "second": {"action": "accept", "content": {"name": "bob"}}}}),
    )
    .await;
    assert_eq!(ack, json!({"resultType": "complete"}));
    for _ in 0..3 {
        let t = task_rpc("tasks/get", id.clone(), json!({})).await;
        let keys: Vec<&String> = t["inputRequests"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["first.redmark-2"], "{t}");
    }
    assert!(cluster.sum(&forwarded("native-tasks")).await >= 2.0);
    let relayer = eventually("the relaying replica", || async {
        for r in cluster.running() {
            if r.metric("redmark_tasks_live").await == 1.0 {
                return Ok(r.node);
            }
        }
        Err("no replica counts the task live")
    })
    .await;
    drop(cluster.replica_mut(relayer).process.take());
    // The survivors serve it from its id: the server still holds the task;
    // the red mark was the lost replica's, so the question reads as the
    // server asks it.
    for _ in 0..2 {
        let t = task_rpc("tasks/get", id.clone(), json!({})).await;
        assert_eq!(t["status"], "input_required", "{t}");
        let keys: Vec<&String> = t["inputRequests"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["first"], "{t}");
    }
    task_rpc(
        "tasks/update",
        id.clone(),
        json!({"inputResponses": {"first": {"action": "accept", "content": {"name": "ada"}}}}),
    )
    .await;
    let done = eventually("the task to complete", || {
        let id = id.clone();
        async move {
            let t = task_rpc("tasks/get", id, json!({})).await;
            if t["status"] == "completed" {
                Ok(t)
            } else {
                Err(t.to_string())
            }
        }
    })
    .await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        r#"answers: Some(String("ada")) and Some(String("bob"))"#,
        "{done}"
    );
}

/// A relayed task's answers are held to rules over the call's arguments
/// even once the replica that relayed it is gone: the arguments are kept,
/// sealed, in the shared store (`[state] store`), and the replica that
/// takes the task over reads them there. `confirm_delete` confirms
/// `notes.txt` (allowed; without the arguments the rule could not be
/// evaluated and the task failed `policy_error`) and `/etc/hosts` (the
/// rule refuses it: `policy_denied`).
#[tokio::test]
async fn rules_over_a_relayed_tasks_arguments_hold_after_its_relayer_is_gone() {
    let mut cluster = Cluster::start().await;
    let client = McpClient::new(cluster.url("/native-tasks"));
    let create = async |filename: &str| {
        let made = client
            .rpc(
                "tools/call",
                json!({"name": "confirm_delete", "arguments": {"filename": filename}}),
                declaring_tasks(),
            )
            .await;
        assert_eq!(made.result()["resultType"], "task", "{}", made.raw);
        made.result()["taskId"].as_str().unwrap().to_owned()
    };
    let notes = create("notes.txt").await;
    let hosts = create("/etc/hosts").await;
    let asking = async |id: &str| {
        eventually("the confirmation", || async {
            let t = task_result(&client, "tasks/get", id, json!({})).await;
            match t["inputRequests"].as_object() {
                Some(r) if !r.is_empty() => Ok(r.keys().cloned().collect::<Vec<_>>()),
                _ => Err(t.to_string()),
            }
        })
        .await
    };
    assert_eq!(asking(&notes).await, ["confirm"]);
    assert_eq!(asking(&hosts).await, ["confirm"]);
    // Every replica that relayed one of them is killed (two at most of three).
    let mut relayers = Vec::new();
    for r in cluster.running() {
        if r.metric("redmark_tasks_live").await >= 1.0 {
            relayers.push(r.node);
        }
    }
    assert!(!relayers.is_empty() && relayers.len() < 3, "{relayers:?}");
    for node in relayers {
        drop(cluster.replica_mut(node).process.take());
    }
    let yes = json!({"action": "accept", "content": {"confirm": true}});
    for id in [&notes, &hosts] {
        let ack = task_result(
            &client,
            "tasks/update",
            id,
            json!({"inputResponses": {"confirm": yes}}),
        )
        .await;
        assert_eq!(ack, json!({"resultType": "complete"}));
    }
    let done = eventually("notes.txt deleted", || async {
        let t = task_result(&client, "tasks/get", &notes, json!({})).await;
        if t["status"] == "completed" {
            Ok(t)
        } else {
            Err(t.to_string())
        }
    })
    .await;
    assert_eq!(done["result"]["content"][0]["text"], "deleted", "{done}");
    // An authz refusal ends the task (as it ends a call): the answer never
    // reached the server, which hears `tasks/cancel`.
    let refused = task_result(&client, "tasks/get", &hosts, json!({})).await;
    assert_eq!(refused["status"], "failed", "{refused}");
    assert_eq!(
        refused["error"]["data"]["reason"], "policy_denied",
        "{refused}"
    );
    assert_eq!(
        refused["statusMessage"], "nothing under /etc is deleted",
        "{refused}"
    );
}
