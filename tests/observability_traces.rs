//! Traces and logs of the real `redmark` binary, received by an OTLP
//! receiver inside the test: one trace per logical operation, the caller's
//! `traceparent` as the root's parent, the MCP semantic-convention names and
//! attributes, error status for failed endings, gRPC export configured by
//! `[telemetry]`, and no answered or argument value in any span or event.
//! The JSON logs of the same traffic: tests/observability_logs.rs.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod observability_support;

use common::{McpClient, RedmarkProcess};
use observability_support::leaks::assert_no_leak;
use observability_support::*;
use serde_json::{Value, json};

fn children<'a>(spans: &'a [SpanRec], parent: &SpanRec) -> Vec<&'a SpanRec> {
    spans
        .iter()
        .filter(|s| s.parent == parent.span_id)
        .collect()
}

/// The trace context of the failing operation, sent in `_meta.traceparent`.
const FAILING_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const FAILING_PARENT: &str = "b7ad6b7169203331";

/// Two `create_ticket` operations of three rounds: 9 and 8 break `maximum = 5`
/// (red-marked re-asks, max_reasks = 2) and 3 completes, under the caller's
/// `traceparent` header; then 9 three times ends in policy_invalid_answer,
/// the caller's context in `_meta.traceparent` this time.
async fn two_ticket_operations(client: &McpClient) {
    let op = tool_call("create_ticket", json!({"title": TITLE}), "tkt")
        .header("traceparent", &client_traceparent());
    let priorities = [9, 8, 3];
    let resps = op
        .walk(client, 3, |round, q| {
            accept(q, "priority", json!({"priority": priorities[round - 1]}))
        })
        .await;
    assert_eq!(resps.len(), 4);
    for (resp, bad) in resps[1..3].iter().zip([9, 8]) {
        let message = resp.result()["inputRequests"]["priority"]["params"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            message.contains(&format!("{bad} was given")),
            "no red mark: {message}"
        );
    }
    let done = resps[3].result();
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(done["structuredContent"]["priority"], 3, "{done}");

    let op = tool_call("create_ticket", json!({"title": TITLE}), "bad")
        .meta(json!({"traceparent": format!("00-{FAILING_TRACE}-{FAILING_PARENT}-01")}));
    let resps = op
        .walk(client, 3, |_, q| {
            accept(q, "priority", json!({"priority": 9}))
        })
        .await;
    assert_eq!(
        resps[3].reason(),
        "policy_invalid_answer",
        "{:?}",
        resps[3].last()
    );
}

/// The completed operation's root: in the caller's trace, parented to the
/// caller's span, with the MCP names and redmark's attributes; every span of
/// that trace hangs directly under it.
fn completed_root<'a>(spans: &'a [SpanRec], roots: &[&'a SpanRec]) -> &'a SpanRec {
    let root = *roots
        .iter()
        .find(|r| r.trace_id == CLIENT_TRACE)
        .expect("a root in the caller's trace");
    assert_eq!(
        root.parent, CLIENT_SPAN,
        "the root's parent is the caller's span"
    );
    assert_eq!(root.service, "redmark-traces-test");
    assert_eq!(root.name, "tools/call create_ticket");
    assert_eq!(root.kind, KIND_SERVER);
    assert_ne!(
        root.status, STATUS_ERROR,
        "a completed operation is no error"
    );
    assert_eq!(root.str("mcp.method.name"), "tools/call");
    assert_eq!(root.str("gen_ai.tool.name"), "create_ticket");
    assert_eq!(root.str("mcp.protocol.version"), common::VERSION);
    assert_eq!(root.str("redmark.route"), "rooms");
    assert_eq!(root.str("redmark.outcome"), "completed");
    assert_eq!(root.int("redmark.rounds"), 3);
    assert!(!root.attrs.contains_key("error.type"), "{:#?}", root.attrs);
    let op_id = root.str("redmark.operation.id");
    assert!(
        op_id.len() == 32 && op_id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{op_id}"
    );

    // Exactly one trace: every span of it hangs directly under the root, and
    // nothing of this operation is anywhere else.
    let trace = trace_of(spans, CLIENT_TRACE);
    for s in &trace {
        assert!(
            s.span_id == root.span_id || s.parent == root.span_id,
            "{} ({}) is not under the root",
            s.name,
            s.parent
        );
    }
    let under_root = children(spans, root);
    assert_eq!(under_root.len() + 1, trace.len());
    assert_eq!(
        spans
            .iter()
            .filter(
                |s| s.attrs.get("redmark.operation.id") == root.attrs.get("redmark.operation.id")
            )
            .count(),
        1,
        "one root for the operation"
    );

    root
}

/// Under the completed root: four HTTP round trips (rounds 1 to 4, request
/// ids tkt-a to tkt-d), one upstream call, and one question re-asked twice
/// with a red mark, then accepted; nothing else.
fn under_the_completed_root(spans: &[SpanRec], root: &SpanRec) {
    let under_root = children(spans, root);
    let mut trips: Vec<&&SpanRec> = under_root
        .iter()
        .filter(|s| s.attrs.contains_key("redmark.round"))
        .collect();
    trips.sort_by_key(|s| s.int("redmark.round"));
    assert_eq!(trips.len(), 4, "{trips:#?}");
    for (i, trip) in trips.iter().enumerate() {
        assert_eq!(trip.int("redmark.round"), i as i64 + 1);
        assert_eq!(trip.name, "tools/call create_ticket");
        assert_eq!(trip.kind, KIND_SERVER);
        assert_eq!(trip.str("mcp.method.name"), "tools/call");
        // Every MCP request span carries the semantic conventions' attributes, not only the root.
        assert_eq!(
            trip.str("gen_ai.tool.name"),
            "create_ticket",
            "{:?}",
            trip.attrs
        );
        assert_eq!(
            trip.str("mcp.protocol.version"),
            "2026-07-28",
            "{:?}",
            trip.attrs
        );
        assert!(!trip.attrs.contains_key("error.type"), "{:?}", trip.attrs);
        let letter = char::from(b'a' + i as u8);
        assert_eq!(trip.str("jsonrpc.request.id"), format!("tkt-{letter}"));
    }

    // One upstream call for the whole operation.
    let upstream: Vec<&&SpanRec> = under_root
        .iter()
        .filter(|s| s.kind == KIND_CLIENT)
        .collect();
    assert_eq!(upstream.len(), 1, "{upstream:#?}");
    let up = upstream[0];
    assert_eq!(up.name, "tools/call create_ticket");
    assert_eq!(up.str("mcp.method.name"), "tools/call");
    assert_eq!(up.str("gen_ai.tool.name"), "create_ticket");
    assert!(
        up.str("mcp.protocol.version").starts_with("2025-"),
        "{:?}",
        up.attrs
    );
    assert_eq!(up.str("network.transport"), "pipe");
    assert!(
        up.str("server.address").ends_with("rooms"),
        "{:?}",
        up.attrs
    );
    assert!(
        !up.attrs.contains_key("mcp.session.id"),
        "stdio has no session id: {:?}",
        up.attrs
    );

    // One question, re-asked twice with a red mark, finally accepted.
    let questions: Vec<&&SpanRec> = under_root
        .iter()
        .filter(|s| s.attrs.contains_key("redmark.input.key"))
        .collect();
    assert_eq!(questions.len(), 1, "{questions:#?}");
    let q = questions[0];
    assert_eq!(q.name, "elicitation/create priority");
    assert_eq!(q.str("redmark.input.key"), "priority");
    assert_eq!(q.str("redmark.input.method"), "elicitation/create");
    assert_eq!(q.str("redmark.outcome"), "accepted");
    assert_eq!(q.str("redmark.policy.verdict"), "ok");
    assert!(q.int("redmark.answer_ms") >= 0);
    assert_eq!(
        trips.len() + upstream.len() + questions.len(),
        under_root.len()
    );
}

#[tokio::test]
async fn a_three_round_operation_is_one_trace_under_the_callers_span() {
    let receiver = Receiver::start(false).await;
    let dir = tempfile::tempdir().unwrap();
    let config = rooms_example_config(dir.path(), "");
    let gw = RedmarkProcess::start(&config, false, &otel_env(&receiver)).await;
    two_ticket_operations(&client(gw.url("/mcp/rooms"))).await;
    receiver
        .wait_for("both operations' roots", |s| {
            root_of(s, "create_ticket").len() == 2
        })
        .await;
    gw.stop().await;
    let spans = receiver.spans();
    assert!(
        receiver
            .calls()
            .iter()
            .all(|c| c == "/v1/traces application/x-protobuf"),
        "{:?}",
        receiver.calls()
    );

    // One root per operation, each parented to its caller's span.
    let roots = root_of(&spans, "create_ticket");
    let root = completed_root(&spans, &roots);
    under_the_completed_root(&spans, root);
    // The failing operation: its own trace, error status and error.type.
    let failed = *roots
        .iter()
        .find(|r| r.trace_id == FAILING_TRACE)
        .expect("a root in the second caller's trace");
    assert_eq!(failed.parent, FAILING_PARENT);
    assert_eq!(failed.status, STATUS_ERROR);
    assert_eq!(failed.str("error.type"), "policy_invalid_answer");
    assert_eq!(failed.str("redmark.outcome"), "policy_invalid_answer");
    let fq: Vec<&SpanRec> = children(&spans, failed)
        .into_iter()
        .filter(|s| s.attrs.contains_key("redmark.input.key"))
        .collect();
    assert_eq!(fq.len(), 1);
    assert_eq!(fq[0].str("redmark.outcome"), "invalid");
    // The round trip that heard the refusal is itself an error span, with the reason.
    let refused: Vec<&SpanRec> = children(&spans, failed)
        .into_iter()
        .filter(|s| s.attrs.contains_key("redmark.round") && s.attrs.contains_key("error.type"))
        .collect();
    assert_eq!(refused.len(), 1, "{refused:#?}");
    assert_eq!(refused[0].str("error.type"), "policy_invalid_answer");
    assert_eq!(refused[0].status, STATUS_ERROR);
    assert_eq!(refused[0].str("gen_ai.tool.name"), "create_ticket");
    assert_eq!(fq[0].str("redmark.policy.verdict"), "policy_invalid_answer");
    assert_ne!(
        root.str("redmark.operation.id"),
        failed.str("redmark.operation.id")
    );

    assert_no_leak(&spans, &[TITLE, "zebra", "4417"], &[9, 8, 3]);
}

/// A stdio legacy server that answers `tools/call` with the `_meta` it received.
const ECHO_META: &str = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    method, params = msg["method"], msg.get("params") or {}
    reply = {"jsonrpc": "2.0", "id": msg["id"]}
    if method == "initialize":
        reply["result"] = {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                           "serverInfo": {"name": "echo-meta", "version": "0"}}
    elif method == "tools/list":
        reply["result"] = {"tools": [{"name": "echo_meta", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        reply["result"] = {"content": [{"type": "text", "text": json.dumps(params.get("_meta", {}))}]}
    elif method == "ping":
        reply["result"] = {}
    else:
        reply["error"] = {"code": -32601, "message": "not here"}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
"#;

#[tokio::test]
async fn the_upstream_request_carries_the_upstream_spans_traceparent() {
    let receiver = Receiver::start(false).await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("echo_meta.py");
    std::fs::write(&script, ECHO_META).unwrap();
    let config = dir.path().join("redmark.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[[route]]\nname = \"echo\"\npath = \"/mcp\"\n[route.upstream]\ncommand = [\"python3\", {}]\n",
            common::toml_str(script.to_str().unwrap())
        ),
    )
    .unwrap();
    let gw = RedmarkProcess::start(&config, false, &otel_env(&receiver)).await;
    let client = client(gw.url("/mcp"));
    let op = tool_call(
        "echo_meta",
        json!({"secret_argument": "argument-value-5521"}),
        "echo",
    )
    .header("traceparent", &client_traceparent());
    let text = op.start(&client).await.result()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let seen: Value = serde_json::from_str(&text).unwrap();
    let tp = seen["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("no traceparent upstream: {seen}"));
    let parts: Vec<&str> = tp.split('-').collect();
    assert_eq!(parts.len(), 4, "{tp}");
    assert_eq!(
        parts[1], CLIENT_TRACE,
        "the upstream joins the caller's trace"
    );
    assert_ne!(
        parts[2], CLIENT_SPAN,
        "the upstream's parent is redmark's span"
    );

    gw.stop().await;
    // Stopped (SIGTERM flushes): everything it will ever export has been received.
    let spans = receiver.spans();
    let up = spans.iter().find(|s| s.span_id == parts[2]).unwrap();
    assert_eq!(
        up.kind, KIND_CLIENT,
        "the injected context is the upstream span's: {up:#?}"
    );
    let root = root_of(&spans, "echo_meta")[0];
    assert_eq!(up.parent, root.span_id);
    assert_eq!(root.parent, CLIENT_SPAN);
    assert_eq!(root.str("redmark.outcome"), "completed");
    assert_no_leak(&spans, &["argument-value-5521"], &[]);
}

#[tokio::test]
async fn grpc_export_is_configured_by_the_telemetry_section() {
    let receiver = Receiver::start(true).await;
    let dir = tempfile::tempdir().unwrap();
    let extra = format!(
        "[telemetry]\notlp_endpoint = {}\notlp_protocol = \"grpc\"\nservice_name = \"redmark-grpc-test\"\n",
        common::toml_str(&receiver.endpoint())
    );
    let config = rooms_example_config(dir.path(), &extra);
    let env = [("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned())];
    let gw = RedmarkProcess::start(&config, false, &env).await;
    let client = client(gw.url("/mcp/rooms"));
    let op = tool_call(
        "book_room",
        json!({"day": "2026-09-18", "hour": 11, "room_hint": "nook"}),
        "grpc",
    )
    .header("traceparent", &client_traceparent());
    assert_eq!(op.start(&client).await.result()["resultType"], "complete");
    gw.stop().await;
    // Stopped: everything it will ever export has been received.
    let spans = receiver.spans();
    let calls = receiver.calls();
    assert!(!calls.is_empty(), "nothing exported over gRPC");
    assert!(
        calls.iter().all(|c| c.starts_with(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export application/grpc"
        )),
        "{calls:?}"
    );
    let root = root_of(&spans, "book_room");
    assert_eq!(root.len(), 1, "{spans:#?}");
    assert_eq!(root[0].service, "redmark-grpc-test");
    assert_eq!(root[0].parent, CLIENT_SPAN);
    let kids = children(&spans, root[0]);
    assert_eq!(kids.iter().filter(|s| s.kind == KIND_CLIENT).count(), 1);
    assert_eq!(
        kids.iter()
            .filter(|s| s.attrs.contains_key("redmark.round"))
            .count(),
        1
    );
}

#[tokio::test]
async fn the_sampler_variable_is_honoured() {
    let receiver = Receiver::start(false).await;
    let dir = tempfile::tempdir().unwrap();
    let config = rooms_example_config(dir.path(), "");
    let mut env = otel_env(&receiver);
    env.push(("OTEL_TRACES_SAMPLER", "always_off".into()));
    let gw = RedmarkProcess::start(&config, false, &env).await;
    let client = client(gw.url("/mcp/rooms"));
    let op = tool_call(
        "book_room",
        json!({"day": "2026-09-18", "hour": 12, "room_hint": "nook"}),
        "off",
    )
    .header("traceparent", &client_traceparent());
    assert_eq!(op.start(&client).await.result()["resultType"], "complete");
    gw.stop().await;
    let spans = receiver.spans();
    assert!(spans.is_empty(), "always_off exported {spans:#?}");
}

/// A gateway-made task is one trace across its polls and updates: a
/// `task book_room` span under the caller's span is the parent of the
/// call's operation root and of every `tasks/get` and `tasks/update`.
#[tokio::test]
async fn a_task_is_one_trace_across_its_polls_and_updates() {
    let receiver = Receiver::start(false).await;
    let dir = tempfile::tempdir().unwrap();
    let config = rooms_example_config(dir.path(), "[route.tasks]\n");
    let shipped_path = common::repo().join("policies/rooms.toml");
    let shipped = std::fs::read_to_string(&shipped_path).unwrap();
    let policy = dir.path().join("tasks-policy.toml");
    std::fs::write(
        &policy,
        shipped.replacen(
            "[tool.book_room]\n",
            "[tool.book_room]\ntask = \"required\"\n",
            1,
        ),
    )
    .unwrap();
    let text = std::fs::read_to_string(&config).unwrap().replace(
        &common::toml_str(shipped_path.to_str().unwrap()),
        &common::toml_str(policy.to_str().unwrap()),
    );
    std::fs::write(&config, text).unwrap();
    let gw = RedmarkProcess::start(&config, false, &otel_env(&receiver)).await;
    let c = &client(gw.url("/mcp/rooms"));
    let caps = common::declaring_tasks();
    let with_meta = |mut params: Value| {
        params["_meta"] = common::meta(caps.clone());
        params
    };
    let mut call = with_meta(
        json!({"name": "book_room", "arguments": {"day": "2026-12-08", "hour": 10, "room_hint": "the big one"}}),
    );
    call["_meta"]["traceparent"] = json!(client_traceparent());
    let created = common::read_resp(c.send(c.request("tools/call", call)).await).await;
    assert_eq!(created.result()["resultType"], "task", "{}", created.raw);
    let id = created.result()["taskId"].as_str().unwrap().to_owned();
    let task_rpc = |method: &'static str, params: Value| {
        let rb = c
            .request(method, with_meta(params))
            .header("mcp-name", id.as_str());
        async move { common::read_resp(c.send(rb).await).await }
    };
    let until = |status: &'static str| {
        let task_rpc = &task_rpc;
        let id = id.clone();
        common::eventually(status, move || {
            let id = id.clone();
            async move {
                let r = task_rpc("tasks/get", json!({"taskId": id})).await;
                if r.result()["status"] == status {
                    Ok(())
                } else {
                    Err(r.raw.clone())
                }
            }
        })
    };
    until("input_required").await;
    let answer = json!({"taskId": id, "inputResponses": {"room": {"action": "accept", "content": {"room_id": "nook"}}}});
    let ack = task_rpc("tasks/update", answer).await;
    assert_eq!(
        ack.result(),
        &json!({"resultType": "complete"}),
        "{}",
        ack.raw
    );
    until("completed").await;

    let named = |spans: &[SpanRec], name: &str| spans.iter().filter(|s| s.name == name).count();
    receiver
        .wait_for("the task's spans", |s| {
            named(s, "task book_room") == 1
                && named(s, "tasks/update") == 1
                && named(s, "tasks/get") >= 2
                && !root_of(s, "book_room").is_empty()
        })
        .await;
    gw.stop().await;
    let spans = receiver.spans();
    let task = spans.iter().find(|s| s.name == "task book_room").unwrap();
    assert_eq!(task.trace_id, CLIENT_TRACE, "{task:#?}");
    assert_eq!(task.parent, CLIENT_SPAN, "{task:#?}");
    let roots = root_of(&spans, "book_room");
    assert!(
        roots
            .iter()
            .all(|r| r.parent == task.span_id && r.trace_id == CLIENT_TRACE),
        "{roots:#?}"
    );
    for s in spans.iter().filter(|s| s.name.starts_with("tasks/")) {
        assert_eq!(s.parent, task.span_id, "{s:#?}");
        assert_eq!(s.trace_id, CLIENT_TRACE, "{s:#?}");
    }
}
