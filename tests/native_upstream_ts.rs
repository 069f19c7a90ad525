//! Native 2026-07-28 upstreams, the TypeScript SDK v2 server (npm
//! `@modelcontextprotocol/server` 2.4.0, tests/fixtures/native_ts_server.mjs:
//! `inputRequired(...)` with its own `requestState`), whose stateless legacy
//! fallback cannot push a question: detected over HTTP and stdio, answered
//! by both 2026 clients, policy-breaking answers kept from it, its progress
//! and log notifications and its `subscriptions/listen` stream relayed.
//! The PyPI `mcp` server's tests are in tests/native_upstream.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod native_upstream_support;

use common::*;
use native_upstream_support::*;
use serde_json::{Value, json};

#[tokio::test]
async fn auto_detects_the_ts_v2_server_and_both_2026_clients_answer_it_three_ways() {
    let fx = Fixture::new();
    let (_server, upstream) = ts_http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    let q = input_required("tools/call", &book().start(&McpClient::new(&gw.url)).await);
    assert_eq!(q.keys(), vec![TS_KEY]);
    assert_eq!(q.message(), "How many nights at the Ritz?");
    let ready = readyz(&gw).await;
    assert_eq!(ready["routes"][0]["protocol"], "2026-07-28", "{ready}");

    three_ways(&fx, &gw, false, TS_KEY).await;
    // The server's own requestState came back to it on every retry.
    assert_eq!(ts_states(&fx), vec![json!("ts-state:the Ritz"); 3]);
    three_ways(&fx, &gw, true, TS_KEY).await;
    assert_eq!(ts_states(&fx), vec![json!("ts-state:the Ritz"); 6]);
    gw.stop().await;
}

#[tokio::test]
async fn the_ts_v2_server_over_stdio_is_native_too() {
    let fx = Fixture::new();
    ensure_deps();
    let gw = TestGateway::start(&config(&fx, &ts_stdio_upstream(&fx))).await;
    three_ways(&fx, &gw, false, TS_KEY).await;
    assert_eq!(readyz(&gw).await["routes"][0]["protocol"], "2026-07-28");
    gw.stop().await;
}

#[tokio::test]
async fn invalid_and_denied_answers_never_reach_the_ts_v2_server() {
    let fx = Fixture::new();
    let (_server, upstream) = ts_http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    let ep = McpClient::new(&gw.url);
    let op = book();
    let q = input_required("tools/call", &op.start(&ep).await);
    let asked_before = asked(&fx);
    let r = op.answer(&ep, &q, accepted(json!({"nights": -1}))).await;
    let again = input_required("tools/call", &r);
    assert_eq!(again.keys(), vec![TS_KEY]);
    assert!(again.message().contains('✗'), "{}", again.message());
    let r = op
        .answer(&ep, &again, accepted(json!({"nights": 4e9})))
        .await;
    let third = input_required("tools/call", &r);
    let r = op.answer(&ep, &third, accepted(json!({"nights": 0}))).await;
    assert_error(&r, 200, -32602, "policy_invalid_answer");

    let q = input_required("tools/call", &op.start(&ep).await);
    let r = op.answer(&ep, &q, accepted(json!({"nights": 10}))).await;
    assert_error(&r, 200, -32602, "policy_denied");
    // Asked twice (two fresh calls), never retried, never ran.
    assert_eq!(asked(&fx), asked_before + 1);
    assert!(received(&fx).is_empty(), "{:?}", received(&fx));

    let q = input_required("tools/call", &op.start(&ep).await);
    let r = op.answer(&ep, &q, accepted(json!({"nights": 2}))).await;
    complete("tools/call", &r);
    assert_eq!(
        received(&fx),
        vec![json!({"action": "accept", "data": {"nights": 2}})]
    );
    gw.stop().await;
}

/// The v2 server's `createMcpHandler` still answers `initialize`, but serves
/// 2025-era traffic statelessly: every request is a fresh instance that never
/// saw the client's declared capabilities, so its pushed `elicitation/create`
/// is refused inside the server. Pinned to `protocol = "legacy"`, redmark
/// holds the session and relays the server's own answer: a tool error, and
/// the question never reaches the client.
#[tokio::test]
async fn the_ts_v2_server_pinned_legacy_answers_through_its_stateless_fallback() {
    let fx = Fixture::new();
    let (_server, upstream) = ts_http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &format!("{upstream}\nprotocol = \"legacy\""))).await;
    let r = book().start(&McpClient::new(&gw.url)).await;
    let out = complete("tools/call", &r);
    assert_eq!(out["isError"], true, "{out}");
    assert_eq!(
        out["content"][0]["text"],
        "Client does not support form elicitation."
    );
    let legacy_asks: Vec<Value> = fx
        .log
        .events()
        .into_iter()
        .filter(|e| e["event"] == "asked")
        .collect();
    assert_eq!(
        legacy_asks,
        vec![json!({"event": "asked", "hotel": "the Ritz", "era": "legacy"})]
    );
    assert_eq!(readyz(&gw).await["routes"][0]["protocol"], "legacy");
    gw.stop().await;
}

/// Progress and log notifications the TS v2 server streams on a call's SSE
/// response reach the client on its own response stream, before the answer,
/// as for a legacy server: progress under the client's token, log messages
/// at or above the level it asked for, and nothing for a client that asked
/// for neither (a plain JSON answer).
#[tokio::test]
async fn progress_and_log_notifications_of_a_native_server_are_relayed() {
    let fx = Fixture::new();
    let (_server, upstream) = ts_http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    let ep = McpClient::new(&gw.url);
    let slow = Op::tool("slow", json!({"steps": 2})).caps(caps());
    let r = slow
        .clone()
        .meta(json!({"progressToken": "p-7", "io.modelcontextprotocol/logLevel": "info"}))
        .start(&ep)
        .await;
    assert!(r.is_sse(), "{}", r.raw);
    let methods: Vec<&str> = r
        .messages
        .iter()
        .map(|m| m["method"].as_str().unwrap_or("(answer)"))
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/progress",
            "notifications/message",
            "notifications/progress",
            "notifications/message",
            "(answer)",
        ],
        "{:#?}",
        r.messages
    );
    assert_eq!(
        r.messages[0]["params"],
        json!({"progressToken": "p-7", "progress": 1, "total": 2, "message": "step 1"})
    );
    assert_eq!(r.messages[3]["params"]["data"], "step 2 of 2");
    complete("tools/call", &r);

    // A log level above the server's messages: only progress.
    let r = slow
        .clone()
        .meta(json!({"progressToken": 9, "io.modelcontextprotocol/logLevel": "error"}))
        .start(&ep)
        .await;
    let progress: Vec<&Value> = r
        .messages
        .iter()
        .filter(|m| m.get("method").is_some())
        .collect();
    assert_eq!(progress.len(), 2, "{:#?}", r.messages);
    assert!(
        progress
            .iter()
            .all(|m| m["method"] == "notifications/progress" && m["params"]["progressToken"] == 9)
    );

    // Neither: the server's notifications are not for this client.
    let r = slow.start(&ep).await;
    assert!(!r.is_sse(), "{}", r.raw);
    complete("tools/call", &r);
    gw.stop().await;
}

/// `subscriptions/listen` to a native HTTP route goes to the server's own
/// listen stream (no legacy session): the server's acknowledgement first,
/// then the change it publishes, each under the client's request id as the
/// subscription id.
#[tokio::test]
async fn subscriptions_listen_relays_the_native_servers_own_stream() {
    let fx = Fixture::new();
    let (_server, upstream) = ts_http_server(&fx).await;
    listen_is_relayed(&fx, &upstream).await;
}

/// Over stdio the server's notifications share one channel and name the
/// listen by its `subscriptionId` (redmark's id for it): they reach the
/// client retagged with its own id.
#[tokio::test]
async fn subscriptions_listen_relays_a_native_stdio_servers_own_stream() {
    let fx = Fixture::new();
    ensure_deps();
    listen_is_relayed(&fx, &ts_stdio_upstream(&fx)).await;
}
