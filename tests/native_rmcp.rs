//! Native 2026-07-28 upstreams, the Rust row: an rmcp 3.11 server
//! (examples/conformance_fixture.rs `--native`) whose tools return rmcp's own
//! `InputRequiredResult` (its keys, its `requestState` sealed with rmcp's
//! `RequestStateCodec`). Behind `protocol = "auto"` redmark detects it native
//! (`/readyz`, `/metrics`); both real 2026 clients (PyPI `mcp` 2.3.0, npm
//! `@modelcontextprotocol/client`) answer its question with accept, decline and cancel; the seed's -1 and 4e9 break the
//! server's own schema (minimum 0, maximum 100) and never reach the server,
//! which is checked on what the server itself logged (`$FIXTURE_LOG`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

const TOOL: &str = "test_ask_count";

fn config(fx: &Fixture) -> String {
    let fixture = example_bin("conformance_fixture");
    // Schema violations are asked again (red mark) twice, then end the call.
    let policy = fx.policy("[defaults]\non_invalid = \"reask\"\nmax_reasks = 2\n");
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n\
         [[route]]\nname = \"main\"\npath = \"/mcp\"\n{policy}\n\n\
         [route.upstream]\nprotocol = \"auto\"\ncommand = [{}, \"--native\"]\n{}\n",
        toml_path(&fixture),
        fx.log_env(),
    )
}

fn ask_count() -> Op {
    Op::tool(TOOL, json!({})).caps(json!({"elicitation": {"form": {}}}))
}

/// Every `inputResponses` the server received for the tool, in order.
fn received(fx: &Fixture) -> Vec<Value> {
    fx.log
        .events()
        .into_iter()
        .filter(|e| e["event"] == "received" && e["target"] == TOOL && !e["responses"].is_null())
        .map(|e| e["responses"].clone())
        .collect()
}

async fn readyz(gw: &TestGateway) -> Value {
    let url = format!("{}/readyz", gw.admin);
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn auto_detects_the_rmcp_server_native_and_both_2026_clients_answer_it_three_ways() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&config(&fx)).await;
    let ep = McpClient::new(&gw.url);
    // The server's own key and requestState, relayed under redmark's wrapping.
    let q = input_required("tools/call", &ask_count().start(&ep).await);
    assert_eq!(q.keys(), vec!["count"]);
    assert_eq!(q.message(), "How many?");

    // Both real 2026 clients, each three ways.
    three_ways(&fx, &gw, false).await;
    three_ways(&fx, &gw, true).await;

    let ready = readyz(&gw).await;
    assert_eq!(ready["routes"][0]["protocol"], "2026-07-28", "{ready}");
    let gauge = r#"redmark_upstream_protocol{route="main",protocol="2026-07-28"}"#;
    assert_eq!(gw.metric(gauge).await, Some(1.0));
    gw.stop().await;
}

/// The PyPI `mcp` 2.3.0 client (or, with `node`, the npm
/// `@modelcontextprotocol/client`) answers the server's question with accept,
/// decline and cancel; the server receives each answer exactly as given.
async fn three_ways(fx: &Fixture, gw: &TestGateway, node: bool) {
    let before = received(fx).len();
    let step = |id: &str| json!({"op": "call_tool", "name": TOOL, "arguments": {}, "id": id});
    let script = json!({
        "steps": [step("accept"), step("decline"), step("cancel")],
        "elicitation": [
            {"action": "accept", "content": {"count": 3}},
            {"action": "decline"},
            {"action": "cancel"},
        ],
    });
    let out = if node {
        ts_client(&gw.url, &script).await
    } else {
        py_client(&gw.url, &script).await
    };
    let asked = out.iter().filter(|l| l["event"] == "elicitation").count();
    assert_eq!(asked, 3, "{out:#?}");
    let texts: Vec<&Value> = out
        .iter()
        .filter(|l| l.get("step").is_some())
        .map(|l| {
            assert_eq!(l["ok"], true, "{l}");
            &l["result"]["content"][0]["text"]
        })
        .collect();
    assert_eq!(
        texts,
        vec![
            &json!("Count: 3"),
            &json!("Count: (decline)"),
            &json!("Count: (cancel)")
        ],
        "{out:#?}"
    );
    // What the server received: each answer exactly as given.
    assert_eq!(
        received(fx)[before..],
        [
            json!({"count": {"action": "accept", "content": {"count": 3}}}),
            json!({"count": {"action": "decline"}}),
            json!({"count": {"action": "cancel"}}),
        ]
    );
}

#[tokio::test]
async fn answers_that_break_the_servers_schema_never_reach_the_rmcp_server() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&config(&fx)).await;
    let ep = McpClient::new(&gw.url);
    let op = ask_count();
    let q = input_required("tools/call", &op.start(&ep).await);

    // -1 (minimum 0), then 4e9 (maximum 100): asked again by redmark itself,
    // with a red mark and the server's key, then the call ends.
    let r = op.answer(&ep, &q, accepted(json!({"count": -1}))).await;
    let again = input_required("tools/call", &r);
    assert_eq!(again.keys(), vec!["count"]);
    assert!(again.message().contains('✗'), "{}", again.message());
    let r = op
        .answer(&ep, &again, accepted(json!({"count": 4e9})))
        .await;
    let third = input_required("tools/call", &r);
    let r = op.answer(&ep, &third, accepted(json!({"count": -1}))).await;
    assert_error(&r, 200, -32602, "policy_invalid_answer");
    assert!(received(&fx).is_empty(), "{:?}", received(&fx));

    // A valid answer goes through, with only the field the server asked for.
    let q = input_required("tools/call", &op.start(&ep).await);
    let r = op
        .answer(&ep, &q, accepted(json!({"count": 0, "extra": true})))
        .await;
    let done = complete("tools/call", &r);
    assert_eq!(done["content"][0]["text"], "Count: 0", "{done}");
    assert_eq!(
        received(&fx),
        vec![json!({"count": {"action": "accept", "content": {"count": 0}}})]
    );
    gw.stop().await;
}
