//! A real 2026-07-28 client (PyPI `mcp` 2.3.0, `Client(url, mode="2026-07-28")`)
//! listing and calling tools through redmark, in front of real legacy servers.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;

use common::*;
use serde_json::{Value, json};

fn step(lines: &[Value], i: u64) -> &Value {
    lines
        .iter()
        .find(|l| l["step"] == i)
        .unwrap_or_else(|| panic!("no output for step {i}: {lines:?}"))
}

#[tokio::test]
async fn python_client_lists_and_calls_through_the_gateway_to_rooms() {
    let gw = TestGateway::start(&rooms_config("")).await;
    let script = json!({"steps": [
        {"op": "list_tools"},
        {"op": "call_tool", "name": "book_room", "arguments": {"day": "2026-09-18", "hour": 10, "room_hint": "nook"}},
        {"op": "call_tool", "name": "cancel_booking", "arguments": {"booking_id": "bk-nope"}},
    ]});
    let lines = py_client(&gw.url, &script).await;
    let tools = step(&lines, 0);
    assert_eq!(tools["ok"], true, "{tools}");
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for want in [
        "book_room",
        "create_ticket",
        "create_invoice",
        "cancel_booking",
        "list_rooms",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let destructive = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "cancel_booking")
        .unwrap();
    assert_eq!(destructive["annotations"]["destructiveHint"], true);

    let booked = step(&lines, 1);
    assert_eq!(booked["ok"], true, "{booked}");
    assert_eq!(booked["result"]["structuredContent"]["room_id"], "nook");
    assert_ne!(booked["result"]["isError"], true);

    let unknown = step(&lines, 2);
    assert_eq!(unknown["ok"], true, "a tool error is a result: {unknown}");
    assert_eq!(unknown["result"]["isError"], true);
    gw.stop().await;
}

#[tokio::test]
async fn python_client_through_the_gateway_to_server_everything_over_http() {
    let (_server, url) = everything_http().await;
    let gw = TestGateway::start(&http_config(&url, "")).await;
    let script = json!({"steps": [
        {"op": "discover"},
        {"op": "list_tools"},
        {"op": "call_tool", "name": "echo", "arguments": {"message": "through redmark"}},
        {"op": "call_tool", "name": "get-sum", "arguments": {"a": 2, "b": 3}},
    ]});
    let lines = py_client(&gw.url, &script).await;
    for i in 0..4 {
        assert_eq!(step(&lines, i)["ok"], true, "{:?}", step(&lines, i));
    }
    assert_eq!(
        step(&lines, 0)["result"]["supportedVersions"],
        json!(["2026-07-28"])
    );
    assert_eq!(
        step(&lines, 2)["result"]["content"][0]["text"],
        "Echo: through redmark"
    );
    let sum = step(&lines, 3)["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(sum.contains('5'), "{sum}");
    gw.stop().await;
}

#[tokio::test]
async fn python_client_with_an_api_key() {
    let key = "test-key-123";
    let auth = api_key(key, "alice", &["facilities"]);
    let gw = TestGateway::start(&rooms_config(&auth)).await;
    let ok = py_client(&gw.url, &json!({"steps": [{"op": "list_tools"}], "headers": {"Authorization": format!("Bearer {key}")}})).await;
    assert_eq!(step(&ok, 0)["ok"], true, "{ok:?}");
    let refused = py_client(
        &gw.url,
        &json!({"steps": [{"op": "list_tools"}], "headers": {"Authorization": "Bearer wrong"}}),
    )
    .await;
    let line = refused
        .iter()
        .find(|l| l["step"] == 0 || l["event"] == "fatal")
        .expect("an outcome line");
    assert_ne!(line["ok"], true, "a wrong key must not be served: {line}");
    gw.stop().await;
}
