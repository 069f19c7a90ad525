//! Upstream legacy sessions as a 2026-07-28 client sees them: the capability
//! profile picks the session, leases come back, crashed servers are replaced,
//! Streamable HTTP upstreams come and go, pool limits and idle reaping, and a
//! graceful shutdown. Streams (cancellation, progress, logs, listen) are in
//! `upstream_sessions_streams.rs`.
//!
//! Most tests drive `tests/fixtures/legacy_server.py` (FastMCP from
//! mcp==1.30.0), which writes what happened to it to a JSON-lines log.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
#[path = "fixtures/legacy_fixture.rs"]
mod legacy_fixture;

use common::*;
use legacy_fixture::*;
use serde_json::json;

fn tool_names(resp: &Resp) -> Vec<String> {
    resp.result()["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn capability_profile_decides_which_tools_server_everything_offers() {
    let gw = TestGateway::start(&everything_stdio_config("")).await;
    let plain = gw.rpc("tools/list", json!({}), json!({})).await;
    assert_response_schema("tools/list", plain.last());
    let plain = tool_names(&plain);
    assert!(plain.iter().any(|n| n == "echo"), "{plain:?}");
    assert!(
        !plain.iter().any(|n| n == "trigger-elicitation-request"),
        "no elicitation declared, yet: {plain:?}"
    );

    let eliciting = gw
        .rpc("tools/list", json!({}), json!({"elicitation": {}}))
        .await;
    assert_response_schema("tools/list", eliciting.last());
    let eliciting = tool_names(&eliciting);
    assert!(
        eliciting.iter().any(|n| n == "trigger-elicitation-request"),
        "{eliciting:?}"
    );

    // One session per profile, both back in the pool.
    gw.wait_metric(&sessions("leased"), 0.0).await;
    gw.wait_metric(&sessions("idle"), 2.0).await;
    gw.stop().await;
}

#[tokio::test]
async fn the_server_sees_exactly_the_declared_capabilities() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&fx.config("", "")).await;
    let cases = [
        (json!({}), json!({})),
        // spec 2026-07-28 client/elicitation.mdx: an empty `elicitation` means form mode.
        (
            json!({"elicitation": {}}),
            json!({"elicitation": {"form": {}}}),
        ),
        (
            json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": true}}),
            json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": true}}),
        ),
        (
            json!({"sampling": {"tools": {}}}),
            json!({"sampling": {"tools": {}}}),
        ),
    ];
    let mut pids = Vec::new();
    for (declared, seen) in &cases {
        let me = whoami(&gw, declared.clone()).await;
        assert_eq!(me["capabilities"], *seen, "declared {declared}");
        assert_eq!(me["protocolVersion"], "2025-11-25");
        pids.push(me["pid"].as_u64().expect("pid"));
    }
    let mut distinct = pids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        cases.len(),
        "one session (process) per profile: {pids:?}"
    );

    // The same profile again reuses its idle session.
    let again = whoami(&gw, cases[2].0.clone()).await;
    assert_eq!(again["pid"].as_u64(), Some(pids[2]));
    gw.wait_metric(&sessions("leased"), 0.0).await;
    gw.wait_metric(&sessions("idle"), cases.len() as f64).await;
    gw.stop().await;
}

#[tokio::test]
async fn leases_come_back_after_concurrent_calls() {
    let per_principal = 4;
    // `[route.pool]` follows the route's `[route.upstream]` table.
    let config = format!(
        "{}[route.pool]\nmax_sessions_per_principal = {per_principal}\n",
        everything_stdio_config("")
    );
    let gw = TestGateway::start(&config).await;
    let calls = (0..20).map(|i| {
        let gw = &gw;
        async move {
            (
                i,
                gw.rpc(
                    "tools/call",
                    json!({"name": "echo", "arguments": {"message": format!("m{i}")}}),
                    json!({}),
                )
                .await,
            )
        }
    });
    for (i, resp) in futures::future::join_all(calls).await {
        assert_eq!(resp.status, 200, "{:?}", resp.raw);
        assert_eq!(resp.result()["content"][0]["text"], format!("Echo: m{i}"));
    }
    gw.wait_metric(&sessions("leased"), 0.0).await;
    let idle = gw.metric(&sessions("idle")).await.expect("idle sample");
    assert!(
        (1.0..=f64::from(per_principal)).contains(&idle),
        "idle sessions: {idle}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_crashed_stdio_server_is_replaced() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&fx.config("", "")).await;
    let before = whoami(&gw, json!({})).await["pid"].as_u64().expect("pid");

    let crash = call_tool(&gw, "crash", json!({}), json!({})).await;
    assert_response_schema("tools/call", crash.last());
    assert_eq!(crash.reason(), "upstream_lost", "{:?}", crash.raw);
    fx.log
        .eventually("crash started", |e| {
            e["event"] == "started" && e["tool"] == "crash"
        })
        .await;
    gw.wait_metric(&sessions("leased"), 0.0).await;
    gw.wait_metric(&sessions("idle"), 0.0).await;

    let after = whoami(&gw, json!({})).await["pid"].as_u64().expect("pid");
    assert_ne!(before, after, "a new process serves the next call");
    gw.wait_metric(&sessions("idle"), 1.0).await;
    gw.stop().await;
}

#[tokio::test]
async fn streamable_http_upstream_survives_a_server_restart() {
    let (mut server, port) = everything_http_on(0).await;
    let gw = TestGateway::start(&http_config(&format!("http://127.0.0.1:{port}/mcp"), "")).await;
    for i in 0..3 {
        let r = call_tool(&gw, "echo", json!({"message": format!("h{i}")}), json!({})).await;
        assert_eq!(r.result()["content"][0]["text"], format!("Echo: h{i}"));
    }
    gw.wait_metric(&sessions("idle"), 1.0).await;

    server.0.kill().await.expect("kill server-everything");
    // The idle session's server is gone: the call that finds out says so.
    let lost = call_tool(&gw, "echo", json!({"message": "x"}), json!({})).await;
    assert_response_schema("tools/call", lost.last());
    assert!(
        ["upstream_lost", "upstream_unavailable"].contains(&lost.reason().as_str()),
        "{:?}",
        lost.raw
    );
    // With nothing listening, no new session can start.
    let down = call_tool(&gw, "echo", json!({"message": "x"}), json!({})).await;
    assert_eq!(down.reason(), "upstream_unavailable", "{:?}", down.raw);
    assert_eq!(down.status, 502);
    gw.wait_metric(&sessions("leased"), 0.0).await;
    gw.wait_metric(&sessions("idle"), 0.0).await;

    // Back at the address the gateway was configured with: a fixed port,
    // the one the first server had (free since it was killed).
    let _server = everything_http_on(port).await;
    let back = call_tool(&gw, "echo", json!({"message": "back"}), json!({})).await;
    assert_eq!(
        back.result()["content"][0]["text"],
        "Echo: back",
        "{:?}",
        back.raw
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_full_pool_answers_busy_until_the_session_is_back() {
    let fx = Fixture::new();
    let gw =
        TestGateway::start(&fx.config("", "max_sessions = 1\nlease_timeout = \"200ms\"")).await;
    // Warm the tool catalog so the busy call needs no session to list tools.
    whoami(&gw, json!({})).await;

    // Long enough that a loaded machine cannot give the session back before
    // the busy call has waited out its 200 ms lease timeout.
    let slow = gw.request(
        "tools/call",
        json!({"name": "slow", "arguments": {"seconds": 5}, "_meta": meta(json!({}))}),
    );
    let slow = tokio::spawn(async move { read_resp(slow.send().await.expect("POST")).await });
    fx.log
        .eventually("slow started", |e| {
            e["event"] == "started" && e["tool"] == "slow"
        })
        .await;
    gw.wait_metric(&sessions("leased"), 1.0).await;

    let busy = call_tool(&gw, "whoami", json!({}), json!({})).await;
    assert_eq!(busy.status, 503, "{:?}", busy.raw);
    assert_eq!(busy.reason(), "upstream_busy");
    assert_schema("JSONRPCErrorResponse", busy.last());

    let slow = slow.await.expect("slow task");
    assert_eq!(slow.result()["content"][0]["text"], "slept 5");
    let me = whoami(&gw, json!({})).await;
    assert!(me["pid"].is_u64());
    gw.wait_metric(&sessions("leased"), 0.0).await;
    gw.wait_metric(&sessions("idle"), 1.0).await;
    gw.stop().await;
}

#[tokio::test]
async fn idle_sessions_are_reaped_and_their_servers_end() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&fx.config("", "idle_timeout = \"200ms\"")).await;
    let pid = whoami(&gw, json!({})).await["pid"].as_u64().expect("pid");
    gw.wait_metric(&sessions("idle"), 0.0).await;
    gw.wait_metric(&sessions("leased"), 0.0).await;
    wait_gone(pid).await;
    // spec 2025-11-25 transports.mdx "stdio" shutdown: close stdin, and let the server exit by itself.
    fx.log
        .eventually("exit after stdin EOF", |e| {
            e["event"] == "exit" && e["pid"] == pid
        })
        .await;
    // The next call starts a fresh session.
    let next = whoami(&gw, json!({})).await["pid"].as_u64().expect("pid");
    assert_ne!(next, pid);
    gw.stop().await;
}

#[tokio::test]
async fn graceful_shutdown_finishes_the_call_in_flight() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&fx.config("", "")).await;
    let slow = gw.request(
        "tools/call",
        json!({"name": "slow", "arguments": {"seconds": 1}, "_meta": meta(json!({}))}),
    );
    let slow = tokio::spawn(async move { read_resp(slow.send().await.expect("POST")).await });
    let started = fx
        .log
        .eventually("slow started", |e| {
            e["event"] == "started" && e["tool"] == "slow"
        })
        .await;
    let pid = started["pid"].as_u64().expect("pid");

    gw.stop().await;
    let slow = slow.await.expect("slow task");
    assert_eq!(slow.status, 200);
    assert_eq!(
        slow.result()["content"][0]["text"],
        "slept 1",
        "{:?}",
        slow.raw
    );
    fx.log
        .eventually("slow finished", |e| {
            e["event"] == "finished" && e["pid"] == pid
        })
        .await;
    wait_gone(pid).await;
    fx.log
        .eventually("exit after stdin EOF", |e| {
            e["event"] == "exit" && e["pid"] == pid
        })
        .await;
}
