//! 2025-era clients in front of native 2026-07-28 servers: redmark speaks
//! 2026-07-28 to the server, and each `InputRequiredResult` it answers
//! becomes questions pushed to the client on the call's stream; redmark
//! validates the answers with the policy and retries the server with them
//! and its `requestState`, until the final result. Servers: PyPI `mcp` 2.3.0
//! (resolvers) and the TypeScript SDK v2 (npm `@modelcontextprotocol/server`
//! 2.4.0), over stdio and Streamable HTTP; client: PyPI `mcp` 1.30.0
//! `ClientSession`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod native_upstream_support;

use common::*;
use native_upstream_support::*;
use serde_json::{Value, json};

#[tokio::test]
async fn a_2025_client_answers_a_native_python_server_over_http_three_ways() {
    let fx = Fixture::new();
    let (_server, upstream) = http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    three_ways_from_a_2025_client(&fx, &gw).await;
    gw.wait_metric(&ops("book", "completed"), 1.0).await;
    gw.wait_metric("redmark_pending_operations", 0.0).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_2025_client_answers_a_native_python_server_over_stdio_three_ways() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&config(&fx, &stdio_upstream(&fx))).await;
    three_ways_from_a_2025_client(&fx, &gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_2025_client_answers_a_typescript_v2_server_over_http_three_ways() {
    let fx = Fixture::new();
    let (_server, upstream) = ts_http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    three_ways_from_a_2025_client(&fx, &gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_2025_client_answers_a_typescript_v2_server_over_stdio_three_ways() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&config(&fx, &ts_stdio_upstream(&fx))).await;
    three_ways_from_a_2025_client(&fx, &gw).await;
    gw.stop().await;
}

/// The handshake describes the native server (its `server/discover`), and
/// an invalid answer is pushed again with the red mark before the server
/// sees anything; the valid one reaches it.
#[tokio::test]
async fn a_2025_clients_invalid_answer_is_asked_again_and_never_reaches_the_native_server() {
    let fx = Fixture::new();
    let (_server, upstream) = http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    let script = json!({
        "steps": [{"op": "call_tool", "name": "book", "arguments": {"hotel": "the Ritz"}}],
        "elicitation": [
            {"action": "accept", "content": {"nights": -1}},
            {"action": "accept", "content": {"nights": 2}},
        ],
    });
    let out = py_client_2025(&gw.url, &script).await;
    let init = out.iter().find(|l| l["event"] == "initialized").unwrap();
    assert_eq!(init["result"]["serverInfo"]["name"], "native-py", "{init}");
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert!(
        init["result"]["capabilities"].get("extensions").is_none(),
        "{init}"
    );
    let asked: Vec<&Value> = out.iter().filter(|l| l["event"] == "elicitation").collect();
    assert_eq!(asked.len(), 2, "{out:#?}");
    let again = asked[1]["message"].as_str().unwrap();
    assert!(again.starts_with("How many nights at the Ritz?"), "{again}");
    assert!(again.contains('✗'), "the red mark names the field: {again}");
    let done = out.iter().find(|l| l["step"] == 0).unwrap();
    assert_eq!(done["ok"], true, "{done}");
    assert_eq!(
        received(&fx),
        vec![json!({"action": "accept", "data": {"nights": 2}})],
        "only the valid answer reached the server"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_2025_node_client_answers_a_native_typescript_v2_server_over_http_three_ways() {
    let fx = Fixture::new();
    let (_server, upstream) = ts_http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    three_ways_from_a_2025_node_client(&fx, &gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_2025_node_client_answers_a_native_python_server_over_stdio_three_ways() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&config(&fx, &stdio_upstream(&fx))).await;
    three_ways_from_a_2025_node_client(&fx, &gw).await;
    gw.stop().await;
}
