//! Every way an operation ends, each distinct: what the client gets, what the
//! server heard (from the fixture's log), the `outcome` label on
//! `redmark_operations_total`, and afterwards no pending operation and no
//! leased session.
//!
//! Drives `tests/fixtures/mrtr_server.py` (FastMCP from mcp==1.30.0).

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod mrtr_support;

use std::time::Duration;

use common::*;
use mrtr_support::*;
use serde_json::json;

#[tokio::test]
async fn accept_decline_and_cancel_reach_the_server_as_such() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;
    let cases = [
        ("end-accept", accept("Ada"), "completed"),
        ("end-decline", decline(), "declined"),
        ("end-cancel", cancel(), "cancelled"),
    ];
    for (tag, answer, outcome) in &cases {
        let op = Op::tool("ask", json!({"tag": tag}));
        let asked = input_required("tools/call", &op.start(&gw).await);
        let done = op
            .retry(&gw, &asked.state, json!({"elicitation-1": answer}))
            .await;
        let mut want = answer.clone();
        want["tag"] = json!(tag);
        assert_eq!(output(&done), want, "{tag}");
        // What the server received is exactly the client's answer: action, and content only on accept.
        let seen = fx.log.answer(tag).await;
        assert_eq!(seen["action"], answer["action"], "{tag}: {seen}");
        assert_eq!(seen.get("content"), answer.get("content"), "{tag}: {seen}");
        assert_eq!(
            gw.metric(&ops("ask", outcome)).await,
            Some(1.0),
            "{tag} ends as {outcome}"
        );
    }
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn nobody_answering_in_time_is_operation_expired() {
    let fx = Fixture::new();
    // A short end_grace: the handler lingers after its `cancel`, and only a
    // call still running after the grace hears notifications/cancelled.
    let gw = TestGateway::start(
        &fx.cfg()
            .mrtr("ttl = \"1s\"")
            .upstream("end_grace = \"1s\"")
            .build(),
    )
    .await;
    let op = Op::tool("ask", json!({"tag": "expire-1", "linger": true}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    gw.wait_metric(&ops("ask", "operation_expired"), 1.0).await;
    // The server's question heard `cancel`, and then the call, still running
    // after end_grace, was cancelled.
    assert_eq!(fx.log.answer("expire-1").await["action"], "cancel");
    fx.log
        .eventually("cancel_requested", |e| e["event"] == "cancel_requested")
        .await;
    fx.log
        .eventually("the lingering handler cancelled", |e| {
            e["event"] == "cancelled" && e["tag"] == "expire-1"
        })
        .await;
    // The state outlives its operation by a grace period, so a late retry
    // hears how the operation ended.
    let r = op
        .retry(&gw, &asked.state, json!({"elicitation-1": accept("late")}))
        .await;
    assert_error(&r, 200, -32602, "operation_expired");
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_client_gone_before_its_questions_were_delivered_is_client_disconnected() {
    let fx = Fixture::new();
    // A long gather window: the client leaves while redmark is still collecting pushes.
    let gw = TestGateway::start(
        &fx.cfg()
            .mrtr("gather = \"10s\"")
            .upstream("end_grace = \"1s\"")
            .build(),
    )
    .await;
    let op =
        Op::tool("ask_and_report", json!({"tag": "gone-1"})).meta(json!({"progressToken": "gone"}));
    let mut stream = SseReader::new(op.open(&gw, json!({})).await);
    // The server reports progress after its question, so once the progress
    // arrives redmark holds the question, not yet delivered.
    let progress = stream
        .next(Duration::from_secs(15))
        .await
        .expect("a first SSE message");
    assert_eq!(progress["method"], "notifications/progress", "{progress}");
    assert_eq!(progress["params"]["progressToken"], "gone");
    drop(stream);
    gw.wait_metric(&ops("ask_and_report", "client_disconnected"), 1.0)
        .await;
    // Nobody will answer: the question hears `cancel`, and the call, still
    // running after end_grace, is cancelled.
    assert_eq!(fx.log.answer("gone-1").await["action"], "cancel");
    fx.log
        .eventually("cancel_requested", |e| e["event"] == "cancel_requested")
        .await;
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_server_crash_while_waiting_is_upstream_lost() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;
    let trigger = fx.path("crash-now");
    let op = Op::tool(
        "crash_while_asking",
        json!({"tag": "lost-1", "trigger": trigger.to_str().unwrap()}),
    );
    let asked = input_required("tools/call", &op.start(&gw).await);
    std::fs::write(&trigger, b"").expect("write trigger");
    fx.log
        .eventually("crashing", |e| e["event"] == "crashing")
        .await;
    gw.wait_metric(&ops("crash_while_asking", "upstream_lost"), 1.0)
        .await;
    let r = op
        .retry(
            &gw,
            &asked.state,
            json!({"elicitation-1": accept("too late")}),
        )
        .await;
    assert_error(&r, 200, -32603, "upstream_lost");
    assert!(fx.log.tagged("answer", "lost-1").is_empty());
    settled(&gw).await;

    // The route is not stuck: a new call gets a new session.
    let op = Op::tool("ask", json!({"tag": "lost-2"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    output(
        &op.retry(&gw, &asked.state, json!({"elicitation-1": accept("fresh")}))
            .await,
    );
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn an_upstream_error_after_the_answer_is_relayed() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;
    let op = Op::tool("ask_then_error", json!({"tag": "err-1"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    let r = op
        .retry(&gw, &asked.state, json!({"elicitation-1": accept("Eve")}))
        .await;
    let err = assert_error(&r, 200, -32001, "upstream_error");
    assert_eq!(err["message"], "fixture failure after accept");
    // The server's own `data`, kept under `data.upstream`: redmark owns `data.reason`.
    assert_eq!(err["data"]["upstream"]["tag"], "err-1");
    assert!(err["data"].get("tag").is_none(), "{err}");
    assert_eq!(fx.log.answer("err-1").await["action"], "accept");
    assert_eq!(
        gw.metric(&ops("ask_then_error", "upstream_error")).await,
        Some(1.0)
    );
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn one_round_more_than_max_rounds_is_rounds_exhausted() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&fx.cfg().mrtr("max_rounds = 2").build()).await;
    let op = Op::tool("rounds", json!({"tag": "many-1", "n": 3}));
    let resps = op
        .walk(&gw, 2, |round, asked| {
            let key = format!("elicitation-{round}");
            assert_eq!(asked.keys(), [key.as_str()]);
            asked.reply(&key, accept(&round.to_string()))
        })
        .await;
    assert_error(&resps[2], 200, -32603, "rounds_exhausted");
    // The third question, never put to the client, heard `cancel`.
    fx.log.answers_at_least("many-1", 3).await;
    let actions: Vec<_> = fx
        .log
        .tagged("answer", "many-1")
        .iter()
        .map(|e| e["action"].clone())
        .collect();
    assert_eq!(actions, ["accept", "accept", "cancel"]);
    assert_eq!(
        gw.metric(&ops("rounds", "rounds_exhausted")).await,
        Some(1.0)
    );
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn malformed_answers_are_refused_by_key_and_the_operation_survives() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;
    let op = Op::tool("ask", json!({"tag": "bad-1"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    let bad = [
        json!("accept"),
        json!(["accept"]),
        json!({"action": "maybe"}),
        json!({"action": "accept"}),
        json!({"action": "accept", "content": {"name": {"nested": true}}}),
        json!({"action": "decline", "content": {"name": "x"}}),
        json!({"action": "cancel", "content": {}}),
    ];
    for answer in bad {
        let r = op
            .retry(&gw, &asked.state, json!({"elicitation-1": answer}))
            .await;
        let err = assert_error(&r, 200, -32602, "malformed_input_response");
        assert_eq!(err["data"]["key"], "elicitation-1", "{answer}: {err}");
        assert!(
            err["message"].as_str().unwrap().contains("elicitation-1"),
            "{err}"
        );
    }
    assert!(fx.log.tagged("answer", "bad-1").is_empty());
    let done = op
        .retry(&gw, &asked.state, json!({"elicitation-1": accept("fine")}))
        .await;
    assert_eq!(output(&done)["content"]["name"], "fine");
    assert_eq!(gw.metric(&ops("ask", "completed")).await, Some(1.0));
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_question_pushed_between_rounds_hears_cancel_when_nobody_answers() {
    let fx = Fixture::new();
    // Both questions linger after their `cancel`: a short end_grace cancels the call.
    let gw = TestGateway::start(
        &fx.cfg()
            .mrtr("ttl = \"10s\"")
            .upstream("end_grace = \"1s\"")
            .build(),
    )
    .await;
    let trigger = fx.path("second");
    let op = Op::tool(
        "late_pair",
        json!({"tag": "late-1", "trigger": trigger.to_str().unwrap()}),
    );
    let asked = input_required("tools/call", &op.start(&gw).await);
    assert_eq!(asked.keys(), ["elicitation-1"]);
    // The second question arrives while redmark waits for the client's retry.
    std::fs::write(&trigger, b"").expect("write trigger");
    fx.log
        .eventually("the second question", |e| {
            e["event"] == "asking" && e["message"] == "Second?"
        })
        .await;
    gw.wait_metric(&ops("late_pair", "operation_expired"), 1.0)
        .await;
    // Neither question is left waiting: both hear `cancel`.
    let heard = fx.log.answers_at_least("late-1", 2).await;
    assert_eq!(heard.len(), 2, "{heard:?}");
    for e in fx.log.tagged("answer", "late-1") {
        assert_eq!(e["action"], "cancel", "{e}");
    }
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_server_that_finishes_between_rounds_hands_its_result_to_the_retry() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;
    let trigger = fx.path("give-up");
    let op = Op::tool(
        "impatient",
        json!({"tag": "imp-1", "trigger": trigger.to_str().unwrap()}),
    );
    let asked = input_required("tools/call", &op.start(&gw).await);
    std::fs::write(&trigger, b"").expect("write trigger");
    gw.wait_metric(&ops("impatient", "completed"), 1.0).await;
    settled(&gw).await;
    let r = op
        .retry(&gw, &asked.state, json!({"elicitation-1": accept("late")}))
        .await;
    assert_eq!(output(&r), json!({"tag": "imp-1", "gave_up": true}));
    // The server gave up on its question: the late answer never reaches it.
    assert!(fx.log.tagged("answer", "imp-1").is_empty());
    assert_eq!(fx.log.tagged("gave_up", "imp-1").len(), 1);
    // That state has now been used: once, like every state.
    let r = op
        .retry(&gw, &asked.state, json!({"elicitation-1": accept("late")}))
        .await;
    assert_error(&r, 200, -32602, "state_replayed");
    gw.stop().await;
}

#[tokio::test]
async fn a_silent_server_is_upstream_timeout() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&fx.cfg().upstream("call_timeout = \"1s\"").build()).await;
    let r = Op::tool("hang", json!({"tag": "silent-1"}))
        .start(&gw)
        .await;
    assert_error(&r, 504, -32603, "upstream_timeout");
    fx.log
        .eventually("the call cancelled", |e| {
            e["event"] == "cancelled" && e["tag"] == "silent-1"
        })
        .await;
    assert_eq!(gw.metric(&ops("hang", "upstream_timeout")).await, Some(1.0));
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn too_many_waiting_operations_is_too_many_pending() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&fx.cfg().mrtr("max_pending_per_principal = 1").build()).await;
    let first = Op::tool("ask", json!({"tag": "tmp-1"}));
    let asked = input_required("tools/call", &first.start(&gw).await);
    let r = Op::tool("ask", json!({"tag": "tmp-2"})).start(&gw).await;
    assert_error(&r, 429, -32603, "too_many_pending");
    // The refused operation's question was never put to anyone: it heard `cancel`.
    assert_eq!(fx.log.answer("tmp-2").await["action"], "cancel");
    assert_eq!(gw.metric(&ops("ask", "too_many_pending")).await, Some(1.0));
    // The waiting one is unaffected.
    let done = first
        .retry(&gw, &asked.state, json!({"elicitation-1": accept("first")}))
        .await;
    assert_eq!(output(&done)["content"]["name"], "first");
    settled(&gw).await;
    gw.stop().await;
}
