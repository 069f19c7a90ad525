//! A misbehaving upstream, and what each fault gives the client (1/2): the
//! server exits or drops its session, `initialize` goes wrong, the server is
//! too slow or stops reading. Each test asserts the client's exact error
//! (`data.reason`), that nothing hangs past its configured bound, that no
//! operation stays pending and no session leased, and (where a question was
//! open) that the audit log records how it ended. Bad messages, bursts and
//! list changes: `upstream_faults_messages.rs`.
//!
//! Drives `tests/fixtures/fault_server.py` (standard library only) over stdio
//! and Streamable HTTP; the fault is the tool called, or `FAULT_INIT`.

// A test may panic (that is how it fails).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mrtr_support;
mod upstream_faults_support;

use std::time::Duration;

use common::*;
use mrtr_support::*;
use serde_json::{Value, json};
use upstream_faults_support::*;

// --- exits or drops its session -------------------------------------------

async fn gone_while_a_question_waits(via: Via) {
    let f = Setup::new(via).start().await;
    let op = Op::tool("exit_while_asking", json!({}));
    let asked = input_required("tools/call", &op.start(&f.gw).await);
    let what = if via == Via::Stdio {
        "exiting"
    } else {
        "dropped"
    };
    f.fx.log.eventually(what, |e| e["event"] == what).await;
    if via == Via::Stdio {
        // A process that exits is noticed at once, with nobody attached.
        f.gw.wait_metric(&ops("exit_while_asking", "upstream_lost"), 1.0)
            .await;
    }
    // The retry hears the server went away: over HTTP, that is when its answer
    // meets the dropped session (404).
    let (r, _) = within(
        REQUEST_TIMEOUT,
        op.retry(&f.gw, &asked.state, json!({"elicitation-1": accept("Ada")})),
    )
    .await;
    assert_error(&r, 200, -32603, "upstream_lost");
    f.gw.wait_metric(&ops("exit_while_asking", "upstream_lost"), 1.0)
        .await;
    // Over stdio the question was open when the server went; over HTTP the
    // answer was sent before the 404 told redmark the session was gone.
    let outcome = if via == Via::Stdio {
        "abandoned"
    } else {
        "accepted"
    };
    f.audited("exit_while_asking", &[outcome]).await;
    f.done().await;
}

#[tokio::test]
async fn a_stdio_server_exiting_while_a_question_waits_is_upstream_lost() {
    gone_while_a_question_waits(Via::Stdio).await;
}

#[tokio::test]
async fn an_http_session_dropped_while_a_question_waits_is_upstream_lost() {
    gone_while_a_question_waits(Via::Http).await;
}

async fn gone_while_the_answer_is_delivered(via: Via) {
    let f = Setup::new(via).start().await;
    let op = Op::tool("exit_on_answer", json!({}));
    let asked = input_required("tools/call", &op.start(&f.gw).await);
    let (r, _) = within(
        CALL_TIMEOUT,
        op.retry(&f.gw, &asked.state, json!({"elicitation-1": accept("Ada")})),
    )
    .await;
    // A process that exits closes its stdout at once. An HTTP server that
    // closes the call's SSE stream unanswered may mean to be polled (spec
    // 2025-11-25 transports.mdx "The server MAY close the SSE stream at any
    // time"): redmark waits out call_timeout, then its cancellation meets the 404.
    let outcome = match via {
        Via::Stdio => {
            assert_error(&r, 200, -32603, "upstream_lost");
            "upstream_lost"
        }
        Via::Http => {
            assert_error(&r, 504, -32603, "upstream_timeout");
            "upstream_timeout"
        }
    };
    assert_eq!(
        f.fx.log
            .eventually("the answer", |e| e["event"] == "answer")
            .await["action"],
        "accept"
    );
    f.gw.wait_metric(&ops("exit_on_answer", outcome), 1.0).await;
    // The question was answered; the operation then lost its server.
    f.audited("exit_on_answer", &["accepted"]).await;
    f.done().await;
}

#[tokio::test]
async fn a_stdio_server_exiting_as_its_answer_arrives_is_upstream_lost() {
    gone_while_the_answer_is_delivered(Via::Stdio).await;
}

#[tokio::test]
async fn an_http_session_dropped_as_its_answer_arrives_is_upstream_timeout() {
    gone_while_the_answer_is_delivered(Via::Http).await;
}

// --- initialize -------------------------------------------------------------

async fn initialize_fault(via: Via, init: &str, reason: &str) {
    let f = Setup::new(via).init(init).start().await;
    let (r, took) = f.call_within(INIT_TIMEOUT, "echo", json!({})).await;
    assert_error(&r, 502, -32603, reason);
    if reason == "upstream_unavailable" {
        assert!(took >= INIT_TIMEOUT, "waited init_timeout, not {took:?}");
    }
    f.fx.log
        .eventually("initialize", |e| e["method"] == "initialize")
        .await;
    // The route is not stuck: the next call is refused the same way, in time.
    let (again, _) = f.call_within(INIT_TIMEOUT, "echo", json!({})).await;
    assert_error(&again, 502, -32603, reason);
    f.gw.wait_metric(&sessions("leased"), 0.0).await;
    f.gw.wait_metric(PENDING, 0.0).await;
    let log = f.fx.log.clone();
    f.gw.stop().await;
    // spec 2025-11-25 cancellation.mdx: "The `initialize` request MUST NOT be cancelled by clients".
    let cancels: Vec<Value> = log
        .events()
        .into_iter()
        .filter(|e| e["method"] == "notifications/cancelled")
        .collect();
    assert!(cancels.is_empty(), "initialize was cancelled: {cancels:?}");
}

#[tokio::test]
async fn a_silent_initialize_is_upstream_unavailable_and_never_cancelled_stdio() {
    initialize_fault(Via::Stdio, "silent", "upstream_unavailable").await;
}

#[tokio::test]
async fn a_silent_initialize_is_upstream_unavailable_and_never_cancelled_http() {
    initialize_fault(Via::Http, "silent", "upstream_unavailable").await;
}

#[tokio::test]
async fn an_unsupported_version_is_upstream_incompatible() {
    initialize_fault(Via::Stdio, "version", "upstream_incompatible").await;
    initialize_fault(Via::Http, "version", "upstream_incompatible").await;
}

#[tokio::test]
async fn a_garbage_initialize_answer_is_upstream_unavailable() {
    initialize_fault(Via::Stdio, "garbage", "upstream_unavailable").await;
    initialize_fault(Via::Http, "garbage", "upstream_unavailable").await;
}

#[tokio::test]
async fn a_server_slower_than_call_timeout_is_upstream_timeout_and_is_cancelled() {
    for via in [Via::Stdio, Via::Http] {
        let f = Setup::new(via).start().await;
        let (r, took) = f.call_within(CALL_TIMEOUT, "slow", json!({})).await;
        assert_error(&r, 504, -32603, "upstream_timeout");
        assert!(took >= CALL_TIMEOUT, "{took:?}");
        // The call is cancelled upstream (`notifications/cancelled` for its id).
        let call =
            f.fx.log
                .eventually("the call", |e| e["method"] == "tools/call")
                .await;
        f.fx.log
            .eventually("the call cancelled", |e| {
                e["method"] == "notifications/cancelled" && e["requestId"] == call["id"]
            })
            .await;
        f.gw.wait_metric(&ops("slow", "upstream_timeout"), 1.0)
            .await;
        f.done().await;
    }
}

#[tokio::test]
async fn a_server_that_stops_reading_is_upstream_lost_within_request_timeout() {
    let f = Setup::new(Via::Stdio).upstream("").mrtr("").start().await;
    // The server stops reading, then pushes requests redmark must answer: its
    // writes back up (bounded queues), and the session is given up after
    // request_timeout instead of growing or waiting for ever.
    let (r, _) = f
        .call_within(
            REQUEST_TIMEOUT + Duration::from_secs(5),
            "stall",
            json!({"n": 20000}),
        )
        .await;
    let err = assert_error(&r, 200, -32603, "upstream_lost");
    assert_contains(err["message"].as_str().unwrap(), &["stopped reading"]);
    f.fx.log
        .eventually("stalled", |e| e["event"] == "stalled")
        .await;
    f.gw.wait_metric(&ops("stall", "upstream_lost"), 1.0).await;
    f.done().await;
}

#[tokio::test]
async fn a_stderr_line_over_64_kib_does_not_break_the_server() {
    let f = Setup::new(Via::Stdio).start().await;
    let (r, _) = f
        .call_within(CALL_TIMEOUT, "stderr", json!({"bytes": 200000}))
        .await;
    assert_eq!(text(&r), "wrote stderr");
    f.fx.log
        .eventually("stderr written to the end", |e| e["event"] == "stderr_ok")
        .await;
    let ok = f.call("echo", json!({})).await;
    assert_eq!(text(&ok), "ok");
    f.done().await;
}
