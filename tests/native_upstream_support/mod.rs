//! Shared pieces of the native-upstream tests (`tests/native_upstream.rs`,
//! the PyPI `mcp` 2.3.0 server; `tests/native_upstream_ts.rs`, the npm
//! `@modelcontextprotocol/server` 2.4.0 server): each fixture server's
//! command and config, the policy they are fronted with, and what the
//! servers logged they received.
#![allow(dead_code)]

use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::common::*;

/// The key the SDK gives the resolver `ask_nights` of a script run as `__main__`.
pub const KEY: &str = "__main__:ask_nights";

pub const POLICY: &str = r#"
[defaults]
on_invalid = "reask"
max_reasks = 2

[tool.book.fields.nights]
minimum = 1
maximum = 30
authz = 'value <= 7 || "travel" in principal.groups'
authz_message = "stays longer than a week are for the travel desk"
"#;

pub fn server_cmd(fx: &Fixture, http: bool) -> Command {
    let mut cmd = Command::new(client_python());
    cmd.arg(fixture_file("native_py_server.py"));
    if http {
        cmd.args(["--http", "0"]);
    }
    cmd.env("FIXTURE_LOG", &fx.log.path);
    cmd
}

/// The config of one route in front of `upstream` (a `[route.upstream]` body).
pub fn config(fx: &Fixture, upstream: &str) -> String {
    config_with(fx, "", upstream)
}

/// [`config`] with `top` (tables such as `[state]`) before `[[route]]`.
pub fn config_with(fx: &Fixture, top: &str, upstream: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{top}\n\
         [[route]]\nname = \"main\"\npath = \"/mcp\"\n{}\n\
         [route.upstream]\n{upstream}\ninit_timeout = \"120s\"\n",
        fx.policy(POLICY)
    )
}

/// The fixture over Streamable HTTP (its child, and the gateway config's upstream body).
pub async fn http_server(fx: &Fixture) -> (ChildGuard, String) {
    let (child, port) = spawn_listening(server_cmd(fx, true), "Uvicorn running").await;
    (child, format!("url = \"http://127.0.0.1:{port}/mcp\""))
}

pub fn stdio_upstream(fx: &Fixture) -> String {
    format!(
        "command = [{}, {}]\nenv = {{ FIXTURE_LOG = {} }}",
        toml_path(&client_python()),
        toml_path(&fixture_file("native_py_server.py")),
        toml_path(&fx.log.path)
    )
}

pub fn caps() -> Value {
    json!({"elicitation": {"form": {}}})
}

pub fn book() -> Op {
    Op::tool("book", json!({"hotel": "the Ritz"})).caps(caps())
}

/// What the server's tool received, in order.
pub fn received(fx: &Fixture) -> Vec<Value> {
    fx.log
        .events()
        .into_iter()
        .filter(|e| e["event"] == "ran" && e["tool"] == "book")
        .map(|e| e["received"].clone())
        .collect()
}

pub fn asked(fx: &Fixture) -> usize {
    fx.log
        .events()
        .iter()
        .filter(|e| e["event"] == "asked")
        .count()
}

pub async fn readyz(gw: &TestGateway) -> Value {
    let url = format!("{}/readyz", gw.admin);
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

pub fn protocol_gauge(protocol: &str) -> String {
    format!(r#"redmark_upstream_protocol{{route="main",protocol="{protocol}"}}"#)
}

/// A real 2026 client answers accept, decline and cancel; the server's own
/// tool reports each outcome exactly as it received it.
pub async fn three_ways_from_the_py_client(fx: &Fixture, gw: &TestGateway) {
    three_ways(fx, gw, false, KEY).await;
}

/// [`three_ways_from_the_py_client`] from the Node client when `node`; `key`
/// is the server's own input-request key.
pub async fn three_ways(fx: &Fixture, gw: &TestGateway, node: bool, key: &str) {
    let script = three_ways_script();
    let out = if node {
        ts_client(&gw.url, &script).await
    } else {
        py_client(&gw.url, &script).await
    };
    three_ways_outcomes(fx, &out, node.then_some(key));
}

/// The same three answers from a 2025-era client (PyPI `mcp` 1.30.0
/// `ClientSession`): the server's `InputRequiredResult`s reach it as pushed
/// questions, and redmark retries the server with its answers.
pub async fn three_ways_from_a_2025_client(fx: &Fixture, gw: &TestGateway) {
    three_ways_2025(fx, gw, false).await;
}

/// [`three_ways_from_a_2025_client`] from npm `@modelcontextprotocol/sdk` 1.32.2's `Client`.
pub async fn three_ways_from_a_2025_node_client(fx: &Fixture, gw: &TestGateway) {
    three_ways_2025(fx, gw, true).await;
}

async fn three_ways_2025(fx: &Fixture, gw: &TestGateway, node: bool) {
    let script = three_ways_script();
    let out = if node {
        ts_client_2025(&gw.url, &script).await
    } else {
        py_client_2025(&gw.url, &script).await
    };
    assert!(out.iter().any(|l| l["event"] == "initialized"), "{out:#?}");
    three_ways_outcomes(fx, &out, None);
}

/// Three calls of `book`, answered accept (3 nights), decline and cancel.
fn three_ways_script() -> Value {
    let step = |id: &str| json!({"op": "call_tool", "name": "book", "arguments": {"hotel": "the Ritz"}, "id": id});
    json!({
        "steps": [step("accept"), step("decline"), step("cancel")],
        "elicitation": [
            {"action": "accept", "content": {"nights": 3}},
            {"action": "decline"},
            {"action": "cancel"},
        ],
    })
}

/// What every three-way run shows: three questions, three results, and the
/// server's tool received accept (with the content), decline, cancel.
fn three_ways_outcomes(fx: &Fixture, out: &[Value], key: Option<&str>) {
    let asked: Vec<&Value> = out.iter().filter(|l| l["event"] == "elicitation").collect();
    assert_eq!(asked.len(), 3, "{out:#?}");
    if let Some(key) = key {
        // The Node driver prints the key it answered: the server's own.
        assert_eq!(asked[0]["key"], key, "{out:#?}");
    }
    assert_eq!(
        asked[0]["message"], "How many nights at the Ritz?",
        "{out:#?}"
    );
    for l in out.iter().filter(|l| l.get("step").is_some()) {
        assert_eq!(l["ok"], true, "{l}");
    }
    // The last three runs: a test may have called the tool before.
    let got = received(fx);
    assert_eq!(
        got[got.len().saturating_sub(3)..],
        [
            json!({"action": "accept", "data": {"nights": 3}}),
            json!({"action": "decline", "data": null}),
            json!({"action": "cancel", "data": null}),
        ],
        "{got:?}"
    );
}

// --- The TypeScript SDK v2 server (npm @modelcontextprotocol/server 2.4.0) ---

/// The key the TS fixture gives its question (its own `inputRequests` key).
pub const TS_KEY: &str = "nights";

pub fn ts_server_cmd(fx: &Fixture) -> Command {
    ensure_deps();
    let mut cmd = Command::new("node");
    cmd.arg(fixture_file("native_ts_server.mjs"))
        .env("PORT", "0")
        .env("REDMARK_NPM_DIR", repo().join(".cache/npm"))
        .env("FIXTURE_LOG", &fx.log.path);
    cmd
}

/// The TS fixture over Streamable HTTP (`createMcpHandler`, stateless).
pub async fn ts_http_server(fx: &Fixture) -> (ChildGuard, String) {
    let (child, port) = spawn_listening(ts_server_cmd(fx), "native-ts listening on port").await;
    (child, format!("url = \"http://127.0.0.1:{port}/mcp\""))
}

pub fn ts_stdio_upstream(fx: &Fixture) -> String {
    format!(
        "command = [\"node\", {}, \"stdio\"]\nenv = {{ FIXTURE_LOG = {}, REDMARK_NPM_DIR = {} }}",
        toml_path(&fixture_file("native_ts_server.mjs")),
        toml_path(&fx.log.path),
        toml_path(&repo().join(".cache/npm"))
    )
}

/// The `requestState` the TS server saw on each run of `book`: its own, restored.
pub fn ts_states(fx: &Fixture) -> Vec<Value> {
    fx.log
        .events()
        .into_iter()
        .filter(|e| e["event"] == "ran" && e["tool"] == "book")
        .map(|e| e["state"].clone())
        .collect()
}

pub async fn listen_is_relayed(fx: &Fixture, upstream: &str) {
    let gw = TestGateway::start(&config(fx, upstream)).await;
    let ep = McpClient::new(&gw.url);
    // Detected first (a call), so the listen goes to the native server.
    complete(
        "tools/call",
        &Op::tool("touch", json!({})).caps(caps()).start(&ep).await,
    );
    let params = json!({"notifications": {"toolsListChanged": true}, "_meta": meta(caps())});
    let resp = ep
        .send(ep.request_with_id(json!("sub-1"), "subscriptions/listen", &params))
        .await;
    let mut stream = SseReader::new(resp);
    let ack = stream.next(Duration::from_secs(15)).await.expect("an ack");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "sub-1",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["toolsListChanged"], true,
        "{ack}"
    );
    complete(
        "tools/call",
        &Op::tool("touch", json!({})).caps(caps()).start(&ep).await,
    );
    let changed = stream
        .next(Duration::from_secs(15))
        .await
        .expect("a change");
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    // No legacy session was opened for it.
    for state in ["leased", "idle"] {
        assert_eq!(
            gw.metric(&sessions(state)).await.unwrap_or(0.0),
            0.0,
            "{state}"
        );
    }
    drop(stream);
    gw.stop().await;
}
