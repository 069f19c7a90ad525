//! One trace per operation across replicas: a two-round hold-mode operation
//! started on one `redmark` process and answered through the other. The
//! receiving replica's forward is a span of its own (`redmark.forward`, with
//! `redmark.forwarded_to`) in the operation's trace, under its root, which
//! lives on the owner: the trace context rides in the sealed state.
//!
//! Drives `tests/fixtures/mrtr_server.py` (FastMCP from mcp==1.30.0) and the
//! OTLP receiver of tests/observability_support.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod mrtr_support;
mod observability_support;

use std::collections::HashSet;

use common::*;
use mrtr_support::{accept, form_caps, secret};
use observability_support::{KIND_CLIENT, Receiver, SpanRec, root_of, trace_of};
use serde_json::json;

#[tokio::test]
async fn a_forwarded_round_is_a_span_in_the_operations_one_trace() {
    let receiver = Receiver::start(false).await;
    let fx = Fixture::new();
    let (state, cluster) = (secret(), secret());
    let mut replicas = Vec::new();
    for node in ["n1", "n2"] {
        let config = fx
            .cfg()
            .top(&format!("node_id = \"{node}\""))
            .top(&format!(
                "[[state.keys]]\nid = \"k1\"\nsecret = \"{state}\"\nsign = true\n"
            ))
            .top(&format!(
                "[cluster]\nlisten = \"127.0.0.1:0\"\nsecret = \"{cluster}\"\ndrain = \"1s\"\n"
            ))
            .build();
        let path = fx.path(&format!("{node}.toml"));
        std::fs::write(&path, config).unwrap();
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
            ("OTEL_SERVICE_NAME", format!("redmark-{node}")),
        ];
        replicas.push(RedmarkProcess::start(&path, false, &env).await);
    }
    let a = McpClient::new(replicas[0].url("/mcp"));
    let b = McpClient::new(replicas[1].url("/mcp"));
    let op = Op::tool("rounds", json!({"tag": "traced", "n": 2})).caps(form_caps());
    let asked = input_required(op.method, &op.start(&a).await);
    let r1 = op.answer(&b, &asked, accept("one")).await;
    let asked = input_required(op.method, &r1);
    let done = op.answer(&a, &asked, accept("two")).await;
    assert_eq!(output(&done)["tag"], "traced");
    receiver
        .wait_for("the root and the forward", |s| {
            root_of(s, "rounds").len() == 1 && s.iter().any(|s| s.name == "redmark.forward")
        })
        .await;
    for r in replicas {
        r.stop().await;
    }
    let spans = receiver.spans();
    let root = root_of(&spans, "rounds")[0];
    assert_eq!(root.service, "redmark-n1");
    let forward = spans.iter().find(|s| s.name == "redmark.forward").unwrap();
    assert_eq!(forward.service, "redmark-n2");
    assert_eq!(forward.str("redmark.forwarded_to"), "n1");
    assert_eq!(forward.kind, KIND_CLIENT);
    assert_eq!(forward.trace_id, root.trace_id, "one trace");
    assert_eq!(forward.parent, root.span_id, "under the operation's root");
    // One tree: every span of the trace but the root has its parent in it.
    let trace = trace_of(&spans, &root.trace_id);
    let ids: HashSet<&str> = trace.iter().map(|s| s.span_id.as_str()).collect();
    let tops: Vec<&str> = trace
        .iter()
        .filter(|s| !ids.contains(s.parent.as_str()))
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(tops.len(), 1, "one root: {tops:?}");
    let services: HashSet<&str> = trace.iter().map(|s| s.service.as_str()).collect();
    assert_eq!(services.len(), 2, "{services:?}");
}

/// Two replicas (`n1`, `n2`) sharing a state key and a cluster secret, each
/// with `route` (the `[[route]]` tables) after its `[server]` settings.
async fn two_replicas(fx: &Fixture, receiver: &Receiver, route: &str) -> Vec<RedmarkProcess> {
    let (state, cluster) = (secret(), secret());
    let mut replicas = Vec::new();
    for node in ["n1", "n2"] {
        let config = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\nnode_id = \"{node}\"\n\n\
             [[state.keys]]\nid = \"k1\"\nsecret = \"{state}\"\nsign = true\n\n\
             [cluster]\nlisten = \"127.0.0.1:0\"\nsecret = \"{cluster}\"\ndrain = \"1s\"\n\n{route}"
        );
        let path = fx.path(&format!("{node}.toml"));
        std::fs::write(&path, config).unwrap();
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
            ("OTEL_SERVICE_NAME", format!("redmark-{node}")),
        ];
        replicas.push(RedmarkProcess::start(&path, false, &env).await);
    }
    replicas
}

/// A task made on `a`, polled and answered through `b` (forwarded to `a`).
async fn task_through(
    a: &McpClient,
    b: &McpClient,
    tool: &str,
    arguments: serde_json::Value,
    answers: serde_json::Value,
) {
    let mut params = json!({"name": tool, "arguments": arguments});
    params["_meta"] = meta(declaring_tasks());
    params["_meta"]["traceparent"] = json!(observability_support::client_traceparent());
    let made = read_resp(a.send(a.request("tools/call", params)).await).await;
    assert_eq!(made.result()["resultType"], "task", "{}", made.raw);
    let id = made.result()["taskId"].as_str().unwrap().to_owned();
    until_task(b, &id, "input_required", |t| {
        t["status"] == "input_required"
    })
    .await;
    let ack = task_result(b, "tasks/update", &id, json!({"inputResponses": answers})).await;
    assert_eq!(ack, json!({"resultType": "complete"}));
    until_task(b, &id, "completed", |t| t["status"] == "completed").await;
}

/// Every span named `name` is in `trace` under `parent`; there is one at least.
fn all_under(spans: &[SpanRec], name: &str, trace: &str, parent: &str) {
    let named: Vec<&SpanRec> = spans.iter().filter(|s| s.name == name).collect();
    assert!(!named.is_empty(), "no {name} span");
    for s in named {
        assert_eq!(
            (s.trace_id.as_str(), s.parent.as_str()),
            (trace, parent),
            "{s:#?}"
        );
    }
}

/// A gateway-made task is one trace across replicas: the replica that
/// forwards its `tasks/*` to the one holding it traces each forward under
/// the task's span (its trace context rides in the sealed task id), and
/// the holder's `tasks/get` and `tasks/update` spans are there too.
#[tokio::test]
async fn a_tasks_forwarded_requests_stay_in_its_one_trace() {
    let receiver = Receiver::start(false).await;
    let fx = Fixture::new();
    let shipped = std::fs::read_to_string(repo().join("policies/rooms.toml")).unwrap();
    let policy = shipped.replacen(
        "[tool.book_room]\n",
        "[tool.book_room]\ntask = \"required\"\n",
        1,
    );
    let route = format!(
        "[[route]]\nname = \"main\"\npath = \"/mcp\"\n{}\n[route.upstream]\ncommand = [{}]\n{}\n[route.tasks]\npoll_interval = \"100ms\"\n",
        fx.policy(&policy),
        toml_path(&rooms_bin()),
        rooms_state_env(),
    );
    let replicas = two_replicas(&fx, &receiver, &route).await;
    let (a, b) = (
        McpClient::new(replicas[0].url("/mcp")),
        McpClient::new(replicas[1].url("/mcp")),
    );
    task_through(
        &a,
        &b,
        "book_room",
        json!({"day": "2026-12-08", "hour": 10, "room_hint": "the big one"}),
        json!({"room": {"action": "accept", "content": {"room_id": "nook"}}}),
    )
    .await;
    receiver
        .wait_for("the task, its requests and the forwards", |s| {
            s.iter().any(|s| s.name == "task book_room")
                && s.iter().any(|s| s.name == "tasks/update")
                && s.iter().filter(|s| s.name == "redmark.forward").count() >= 3
        })
        .await;
    for r in replicas {
        r.stop().await;
    }
    let spans = receiver.spans();
    let task = spans.iter().find(|s| s.name == "task book_room").unwrap();
    assert_eq!(task.service, "redmark-n1");
    assert_eq!(task.trace_id, observability_support::CLIENT_TRACE);
    all_under(&spans, "redmark.forward", &task.trace_id, &task.span_id);
    all_under(&spans, "tasks/get", &task.trace_id, &task.span_id);
    all_under(&spans, "tasks/update", &task.trace_id, &task.span_id);
    assert!(
        spans
            .iter()
            .filter(|s| s.name == "redmark.forward")
            .all(|s| s.service == "redmark-n2")
    );
}

/// A native server's relayed task is one trace too: the call that made it
/// is the parent of every `tasks/*` span, on the relaying replica and of
/// the forwards on the other.
#[tokio::test]
async fn a_relayed_native_tasks_requests_are_in_the_calls_trace() {
    let receiver = Receiver::start(false).await;
    let fx = Fixture::new();
    let route = format!(
        "[[route]]\nname = \"main\"\npath = \"/mcp\"\n[route.upstream]\nprotocol = \"2026-07-28\"\ncommand = [{}, \"--native\"]\n\n[route.tasks]\n",
        toml_path(&example_bin("conformance_fixture")),
    );
    let replicas = two_replicas(&fx, &receiver, &route).await;
    let (a, b) = (
        McpClient::new(replicas[0].url("/mcp")),
        McpClient::new(replicas[1].url("/mcp")),
    );
    task_through(
        &a,
        &b,
        "confirm_delete",
        json!({"filename": "a.txt"}),
        json!({"confirm": {"action": "accept", "content": {"confirm": true}}}),
    )
    .await;
    receiver
        .wait_for("the call, the task's requests and the forwards", |s| {
            root_of(s, "confirm_delete").len() == 1
                && s.iter().any(|s| s.name == "tasks/update")
                && s.iter().filter(|s| s.name == "redmark.forward").count() >= 3
        })
        .await;
    for r in replicas {
        r.stop().await;
    }
    let spans = receiver.spans();
    let root = root_of(&spans, "confirm_delete")[0];
    assert_eq!(root.service, "redmark-n1");
    assert_eq!(root.trace_id, observability_support::CLIENT_TRACE);
    all_under(&spans, "redmark.forward", &root.trace_id, &root.span_id);
    all_under(&spans, "tasks/get", &root.trace_id, &root.span_id);
    all_under(&spans, "tasks/update", &root.trace_id, &root.span_id);
}
