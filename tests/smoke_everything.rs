//! The basic relay against a real third-party legacy server
//! (`@modelcontextprotocol/server-everything`), over stdio and HTTP.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;

use common::*;
use serde_json::json;

async fn lists_and_calls(gw: &TestGateway) {
    let d = gw.rpc("server/discover", json!({}), json!({})).await;
    assert_eq!(d.status, 200);
    assert_response_schema("server/discover", d.last());
    assert_eq!(d.result()["supportedVersions"], json!(["2026-07-28"]));
    assert!(d.result()["capabilities"]["tools"].is_object());
    assert_eq!(
        d.result()["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-servers/everything"
    );

    let tools = gw.rpc("tools/list", json!({}), json!({})).await;
    assert_response_schema("tools/list", tools.last());
    let names: Vec<&str> = tools.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"echo"), "{names:?}");

    let call = gw
        .rpc(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "hi"}}),
            json!({}),
        )
        .await;
    assert_eq!(call.status, 200);
    assert!(!call.is_sse(), "no progress token: plain JSON");
    assert_response_schema("tools/call", call.last());
    assert_eq!(call.result()["content"][0]["text"], "Echo: hi");
}

#[tokio::test]
async fn stdio_server_everything() {
    let gw = TestGateway::start(&everything_stdio_config("")).await;
    lists_and_calls(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn http_server_everything() {
    let (_server, url) = everything_http().await;
    let gw = TestGateway::start(&http_config(&url, "")).await;
    lists_and_calls(&gw).await;
    gw.stop().await;
}
