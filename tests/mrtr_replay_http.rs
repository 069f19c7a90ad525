//! Replay and hold mode against a real legacy server over Streamable HTTP
//! (issue 37): `tests/fixtures/replay_server.py`, FastMCP from PyPI
//! `mcp` 1.30.0 run with `mcp.run("streamable-http")`, behind one gateway.
//!
//! A replay round ends the server's call as a good client does: it answers
//! the question `cancel`, sends `notifications/cancelled`, and reads the
//! call's stream until the server ends it, and only then reuses the
//! session. Dropping the stream instead broke the server's stream writer
//! (anyio `BrokenResourceError`), the server ended the session (404), and
//! every other call on it failed `upstream_lost`.

// A test may panic (that is how it fails) and cast freely.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mrtr_support;

use common::*;
use mrtr_support::*;
use serde_json::{Value, json};
use tokio::process::Command;

/// Concurrent operations per test, as the issue measured them.
const OPERATIONS: usize = 20;

/// The fixture server over Streamable HTTP, logging to the fixture's log.
struct Upstream {
    _guard: ChildGuard,
    url: String,
    output: Output,
}

impl Upstream {
    async fn start(fx: &Fixture) -> Upstream {
        let mut cmd = Command::new(legacy_python());
        cmd.arg(fixture_file("replay_server.py"))
            .args(["--http", "0"])
            .env("FIXTURE_LOG", &fx.log.path);
        let (guard, output) = spawn_until_kept(cmd, "Uvicorn running on").await;
        let port = listening_port(guard.pid()).await;
        Upstream {
            _guard: guard,
            url: format!("http://127.0.0.1:{port}/mcp"),
            output,
        }
    }

    /// The server's own account of trouble: a stream writer that found its
    /// stream gone, a response it could not complete, a session it ended
    /// and then answered 404 for. (Not its `ClosedResourceError` traceback
    /// from the standalone stream's writer: mcp 1.30 logs that whenever a
    /// client DELETEs a session, which redmark does when it retires one.)
    fn trouble(&self) -> Vec<String> {
        self.output
            .lock()
            .unwrap()
            .iter()
            .filter(|l| {
                [
                    "BrokenResourceError",
                    "without completing response",
                    "Exception in ASGI application",
                    "crashed",
                    "404 Not Found",
                ]
                .iter()
                .any(|bad| l.contains(bad))
            })
            .cloned()
            .collect()
    }
}

impl Drop for Upstream {
    /// A failing test shows what the server logged.
    fn drop(&mut self) {
        if std::thread::panicking() {
            let lines = self
                .output
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            eprintln!("--- the server's output ---\n{}", lines.join("\n"));
        }
    }
}

async fn gateway(fx: &Fixture, up: &Upstream, policy: &str) -> TestGateway {
    TestGateway::start(&fx.cfg().url(&up.url).route(&fx.policy(policy)).build()).await
}

/// One three-round operation of `plain_two`: the start, answered `name`,
/// then answered `city`; returns the tool's output.
async fn three_rounds(gw: &TestGateway, tag: &str) -> Value {
    let op = Op::tool("plain_two", json!({"tag": tag})).caps(form_caps());
    let first = input_required("tools/call", &op.start(gw).await);
    assert_eq!(first.message(), "Your name?", "{tag}");
    let second = input_required(
        "tools/call",
        &op.answer(gw, &first, accepted(json!({"name": tag}))).await,
    );
    assert_eq!(second.message(), "Your city?", "{tag}");
    let last = op
        .answer(gw, &second, accepted(json!({"city": "Paris"})))
        .await;
    output(&last)
}

/// `OPERATIONS` operations at once, each walked to its end; then as many
/// plain calls at once on the sessions they used.
async fn many_then_plain(gw: &TestGateway, prefix: &str) {
    let walks = (0..OPERATIONS).map(|i| {
        let tag = format!("{prefix}-{i}");
        async move { (three_rounds(gw, &tag).await, tag) }
    });
    let done = futures::future::join_all(walks).await;
    for (out, tag) in &done {
        assert_eq!(out["answers"], json!([tag, "Paris"]), "{out}");
    }
    let plain = (0..OPERATIONS).map(|i| {
        let op = Op::tool("echo", json!({"tag": format!("{prefix}-plain-{i}")}));
        async move { output(&op.start(gw).await) }
    });
    for out in futures::future::join_all(plain).await {
        assert_eq!(out["echo"], true, "{out}");
    }
}

/// Replay mode: every round runs the call again and gives it up at the
/// first unanswered question. 20 concurrent three-round operations all
/// complete, plain calls on the same sessions succeed, the server never
/// sees a stream dropped under its writer, and nothing stays pending or
/// leased.
#[tokio::test]
async fn replay_rounds_against_fastmcp_over_http_all_complete() {
    let fx = Fixture::new();
    let up = Upstream::start(&fx).await;
    let gw = gateway(&fx, &up, "[tool.plain_two]\nmode = \"replay\"\n").await;

    many_then_plain(&gw, "replay").await;

    settled(&gw).await;
    // Three runs each: the first two were given up at the question they
    // asked; only the third completed.
    for i in 0..OPERATIONS {
        let tag = format!("replay-{i}");
        assert_eq!(fx.log.tagged("run", &tag).len(), 3, "{}", fx.log.seen());
        assert_eq!(fx.log.tagged("done", &tag).len(), 1, "{}", fx.log.seen());
    }
    assert_eq!(
        gw.metric(&ops("plain_two", "completed")).await,
        Some(OPERATIONS as f64)
    );
    assert_eq!(up.trouble(), Vec::<String>::new());
    gw.stop().await;
}

/// Hold mode against the same server: the call stays open between rounds
/// on a shared session; every operation completes with each question asked
/// once, and plain calls after them succeed.
#[tokio::test]
async fn hold_rounds_against_fastmcp_over_http_all_complete() {
    let fx = Fixture::new();
    let up = Upstream::start(&fx).await;
    let gw = gateway(&fx, &up, "[defaults]\nmode = \"hold\"\n").await;

    many_then_plain(&gw, "hold").await;

    settled(&gw).await;
    let runs = fx
        .log
        .events()
        .iter()
        .filter(|e| e["event"] == "run")
        .count();
    assert_eq!(runs, OPERATIONS, "each call ran once");
    assert_eq!(
        gw.metric(&ops("plain_two", "completed")).await,
        Some(OPERATIONS as f64)
    );
    assert_eq!(up.trouble(), Vec::<String>::new());
    gw.stop().await;
}

impl Upstream {
    /// Ends every session the server has made, as an operator restarting
    /// its sessions would: a DELETE with each one's id, straight to the
    /// server. From then on it answers 404 for them.
    async fn end_its_sessions(&self) {
        let ids: Vec<String> = self
            .output
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l.split("Created new transport with session ID: ").nth(1))
            .map(|id| id.trim().to_owned())
            .collect();
        assert!(!ids.is_empty(), "the server made no session");
        let http = reqwest::Client::new();
        for id in ids {
            let status = http
                .delete(&self.url)
                .header("mcp-session-id", &id)
                .header("mcp-protocol-version", "2025-11-25")
                .send()
                .await
                .expect("DELETE")
                .status();
            // 404: the discovery probe's session, never established.
            assert!(
                status.is_success() || status == 404,
                "DELETE {id}: {status}"
            );
        }
    }
}

/// A session the server ended while it sat idle in the pool: the next call
/// leased on it gets 404, which means the server never processed it, so it
/// goes out on a new session instead of failing.
#[tokio::test]
async fn a_call_on_a_session_the_server_ended_goes_out_on_a_new_one() {
    let fx = Fixture::new();
    let up = Upstream::start(&fx).await;
    let gw = gateway(&fx, &up, "[tool.plain_two]\nmode = \"replay\"\n").await;
    let op = Op::tool("echo", json!({"tag": "before"}));
    assert_eq!(output(&op.start(&gw).await)["echo"], true);
    settled(&gw).await;

    up.end_its_sessions().await;

    let op = Op::tool("echo", json!({"tag": "after"}));
    assert_eq!(output(&op.start(&gw).await)["tag"], "after");
    // A replay operation walks to its end on the new session too.
    assert_eq!(
        three_rounds(&gw, "after-end").await["answers"],
        json!(["after-end", "Paris"])
    );
    settled(&gw).await;
    assert_eq!(gw.metric(&ops("echo", "upstream_lost")).await, None);
    gw.stop().await;
}

/// Hold mode: a call the server already has is never sent again behind the
/// client's back. Its session ended mid-question, the retry hears
/// `upstream_lost`, and the tool ran exactly once.
#[tokio::test]
async fn hold_mode_never_sends_a_call_again_when_its_session_ends() {
    let fx = Fixture::new();
    let up = Upstream::start(&fx).await;
    let gw = gateway(&fx, &up, "[defaults]\nmode = \"hold\"\n").await;
    let op = Op::tool("plain_two", json!({"tag": "held"})).caps(form_caps());
    let first = input_required("tools/call", &op.start(&gw).await);

    up.end_its_sessions().await;

    let r = op
        .answer(&gw, &first, accepted(json!({"name": "Ada"})))
        .await;
    assert_error(&r, 200, -32603, "upstream_lost");
    settled(&gw).await;
    assert_eq!(fx.log.tagged("run", "held").len(), 1, "{}", fx.log.seen());
    gw.stop().await;
}
