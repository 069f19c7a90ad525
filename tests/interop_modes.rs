//! Hold and replay mode against real legacy server SDKs (Streamable HTTP, and
//! stdio for rmcp)
//! (issue 37's matrix, the cells beyond `tests/mrtr_replay_http.rs`, which
//! covers PyPI `mcp` 1.30 FastMCP): in each cell 20 operations at once, each
//! walked to its end, then plain calls on the same sessions, and at the end
//! nothing pending or leased and no operation lost.
//!
//! - `@modelcontextprotocol/server-everything` 2026.8.31 (npm sdk 1.x):
//!   `trigger-elicitation-request`, one question;
//! - tests/fixtures/e2e_legacy_ts.mjs (npm `@modelcontextprotocol/sdk`
//!   1.32.2, `elicitInput` with `relatedRequestId`): `survey`, one question;
//! - tests/fixtures/native_py_server.py (PyPI `mcp` 2.3.0, `Resolve` ->
//!   `Elicit`): `book`, one question, on `initialize` sessions
//!   (`protocol = "legacy"`) in both modes, and natively relayed
//!   (`protocol = "auto"`; the mode is a legacy server's only);
//! - tests/fixtures/native_ts_server.mjs (npm `@modelcontextprotocol/server`
//!   2.4.0, the TypeScript SDK v2), natively relayed;
//! - tests/fixtures/fastmcp2_server.py (PyPI `fastmcp` 2.14, the standalone
//!   FastMCP 2.x, `ctx.elicit`): `survey`, one question;
//! - examples/rooms (rmcp 3.11, legacy) over stdio: `create_ticket`.
//!
//! All end their call by themselves once told `cancel`, as a replay round
//! tells them.

// A test may panic (that is how it fails) and cast freely.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};
use tokio::process::Command;

const OPERATIONS: usize = 20;

/// A real server, and how one cell drives it.
struct Cell {
    /// A server over Streamable HTTP the cell started (none over stdio).
    _server: Option<ChildGuard>,
    /// Its URL, or (over stdio) its command.
    url: String,
    /// Over stdio, the command's arguments.
    args: Vec<String>,
    tool: &'static str,
    arguments: Value,
    answer: Value,
    /// What the tool's text says when the server got the answer.
    says: &'static str,
    plain: (&'static str, Value),
    /// Keys added to `[route.upstream]`.
    upstream: &'static str,
    /// How the question's key ends: redmark's own for a converted push,
    /// the SDK's for a native server's question.
    key: &'static str,
}

async fn everything() -> Cell {
    let (guard, url) = everything_http().await;
    Cell {
        _server: Some(guard),
        url,
        args: Vec::new(),
        tool: "trigger-elicitation-request",
        arguments: json!({}),
        answer: accepted(json!({"name": "Ada Lovelace", "check": true, "integer": 7})),
        says: "✅ User provided the requested information!",
        plain: ("echo", json!({"message": "plain"})),
        upstream: "",
        key: "elicitation-1",
    }
}

async fn ts_sdk() -> Cell {
    ensure_deps();
    let mut cmd = Command::new("node");
    cmd.arg(fixture_file("e2e_legacy_ts.mjs"))
        .env("PORT", "0")
        .env("REDMARK_NPM_DIR", repo().join(".cache/npm"));
    let (guard, port) = spawn_listening(cmd, "e2e-legacy-ts listening on port").await;
    Cell {
        _server: Some(guard),
        url: format!("http://127.0.0.1:{port}/mcp"),
        args: Vec::new(),
        tool: "survey",
        arguments: json!({"topic": "replay"}),
        answer: accepted(json!({"rating": 4})),
        says: "\"action\":\"accept\"",
        // The fixture has one tool: its plain call is one answered at once.
        plain: ("survey", json!({"topic": "plain"})),
        upstream: "",
        key: "elicitation-1",
    }
}

/// `protocol`: `legacy` (initialize sessions, pushes) or `auto` (native).
async fn py_mcp2(protocol: &'static str) -> Cell {
    let mut cmd = Command::new(client_python());
    cmd.arg(fixture_file("native_py_server.py"))
        .args(["--http", "0"]);
    let (guard, port) = spawn_listening(cmd, "Uvicorn running on").await;
    Cell {
        _server: Some(guard),
        url: format!("http://127.0.0.1:{port}/mcp"),
        args: Vec::new(),
        tool: "book",
        arguments: json!({"hotel": "Ritz"}),
        answer: accepted(json!({"nights": 3})),
        says: "\"action\": \"accept\"",
        plain: ("ping", json!({})),
        upstream: if protocol == "legacy" {
            "protocol = \"legacy\"\n"
        } else {
            "protocol = \"auto\"\n"
        },
        // The SDK's resolver key is `module:function`.
        key: if protocol == "legacy" {
            "elicitation-1"
        } else {
            ":ask_nights"
        },
    }
}

/// tests/fixtures/fastmcp2_server.py: PyPI `fastmcp` 2.14 (the standalone
/// FastMCP 2.x), `ctx.elicit`, over Streamable HTTP.
async fn fastmcp2() -> Cell {
    let mut cmd = Command::new(fastmcp_python());
    cmd.arg(fixture_file("fastmcp2_server.py"))
        .args(["--http", "0"]);
    let (guard, port) = spawn_listening(cmd, "Uvicorn running on").await;
    Cell {
        _server: Some(guard),
        url: format!("http://127.0.0.1:{port}/mcp"),
        args: Vec::new(),
        tool: "survey",
        arguments: json!({"topic": "replay"}),
        answer: accepted(json!({"rating": 4})),
        says: "rated 4",
        plain: ("echo", json!({"message": "plain"})),
        upstream: "",
        key: "elicitation-1",
    }
}

/// server-everything over stdio: the same question as over HTTP.
fn everything_stdio() -> Cell {
    Cell {
        _server: None,
        url: "node".into(),
        args: vec![everything_js().to_str().unwrap().to_owned(), "stdio".into()],
        tool: "trigger-elicitation-request",
        arguments: json!({}),
        answer: accepted(json!({"name": "Ada Lovelace", "check": true, "integer": 7})),
        says: "✅ User provided the requested information!",
        plain: ("echo", json!({"message": "plain"})),
        upstream: "",
        key: "elicitation-1",
    }
}

/// The npm sdk 1.32.2 fixture over stdio (`elicitInput`).
fn ts_sdk_stdio() -> Cell {
    ensure_deps();
    Cell {
        _server: None,
        url: "node".into(),
        args: vec![
            fixture_file("e2e_legacy_ts.mjs")
                .to_str()
                .unwrap()
                .to_owned(),
            "stdio".into(),
        ],
        tool: "survey",
        arguments: json!({"topic": "replay"}),
        answer: accepted(json!({"rating": 4})),
        says: "\"action\":\"accept\"",
        plain: ("survey", json!({"topic": "plain"})),
        upstream: "",
        key: "elicitation-1",
    }
}

/// rmcp 3.11 speaking 2026-07-28 itself (examples/conformance_fixture.rs
/// `--native`) over stdio, natively relayed: `test_elicitation` asks under
/// its own key, `user_info`.
fn rmcp_native() -> Cell {
    Cell {
        _server: None,
        url: example_bin("conformance_fixture")
            .to_str()
            .unwrap()
            .to_owned(),
        args: vec!["--native".into()],
        tool: "test_elicitation",
        arguments: json!({"message": "Who are you?"}),
        answer: accepted(json!({"username": "ada", "email": "ada@example.org"})),
        says: "accept",
        plain: ("test_simple_text", json!({})),
        upstream: "protocol = \"auto\"\n",
        key: "user_info",
    }
}

/// examples/rooms (rmcp 3.11 as a legacy server) over stdio: `create_ticket`
/// asks the ticket's priority.
fn rooms() -> Cell {
    Cell {
        _server: None,
        url: rooms_bin().to_str().unwrap().to_owned(),
        args: Vec::new(),
        tool: "create_ticket",
        arguments: json!({"title": "Projector"}),
        answer: accepted(json!({"priority": 3})),
        says: "with priority 3",
        plain: ("list_rooms", json!({})),
        upstream: "",
        key: "elicitation-1",
    }
}

/// The TypeScript SDK v2 (npm `@modelcontextprotocol/server` 2.4.0), native:
/// its stateless legacy fallback cannot push, so only the relay is a cell.
async fn ts_v2_native() -> Cell {
    ensure_deps();
    let mut cmd = Command::new("node");
    cmd.arg(fixture_file("native_ts_server.mjs"))
        .env("PORT", "0")
        .env("REDMARK_NPM_DIR", repo().join(".cache/npm"));
    let (guard, port) = spawn_listening(cmd, "native-ts listening on port").await;
    Cell {
        _server: Some(guard),
        url: format!("http://127.0.0.1:{port}/mcp"),
        args: Vec::new(),
        tool: "book",
        arguments: json!({"hotel": "Ritz"}),
        answer: accepted(json!({"nights": 3})),
        says: "accept",
        plain: ("slow", json!({"steps": 1})),
        upstream: "protocol = \"auto\"\n",
        key: "nights",
    }
}

/// The gateway in front of `cell` with `mode` as every tool's mode.
async fn gateway(cell: &Cell, fx: &Fixture, mode: &str) -> TestGateway {
    let policy = fx.policy(&format!("[defaults]\nmode = \"{mode}\"\n"));
    let config = if cell._server.is_some() {
        http_config(&cell.url, "")
    } else {
        let command: Vec<&str> = std::iter::once(cell.url.as_str())
            .chain(cell.args.iter().map(String::as_str))
            .collect();
        stdio_config(&command, "")
    }
    .replace(
        "[[route]]\nname = \"main\"\npath = \"/mcp\"\n",
        &format!("[[route]]\nname = \"main\"\npath = \"/mcp\"\n{policy}\n"),
    ) + cell.upstream;
    TestGateway::start(&config).await
}

fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

async fn run(cell: Cell, mode: &str) {
    let fx = Fixture::new();
    let gw = gateway(&cell, &fx, mode).await;
    let caps = json!({"elicitation": {"form": {}}});
    let walks = (0..OPERATIONS).map(|_| {
        let op = Op::tool(cell.tool, cell.arguments.clone()).caps(caps.clone());
        let (gw, answer) = (&gw, cell.answer.clone());
        let want_key = cell.key;
        async move {
            let first = input_required("tools/call", &op.start(gw).await);
            // A converted push gets redmark's key; a native server's own
            // question keeps the SDK's.
            let key = first.key().to_owned();
            assert!(key.ends_with(want_key), "{key}, not {want_key}");
            complete("tools/call", &op.answer(gw, &first, answer).await)
        }
    });
    for result in futures::future::join_all(walks).await {
        assert_ne!(result["isError"], true, "{result}");
        assert!(text_of(&result).contains(cell.says), "{mode}: {result}");
    }
    // Plain calls on the sessions the operations used (the survey's is
    // answered at once, in the same way, with no question left over).
    let plain = (0..OPERATIONS).map(|_| {
        let op = Op::tool(cell.plain.0, cell.plain.1.clone()).caps(caps.clone());
        let (gw, answer) = (&gw, cell.answer.clone());
        async move {
            let r = op.start(gw).await;
            if r.result()["resultType"] == "input_required" {
                let asked = input_required("tools/call", &r);
                complete("tools/call", &op.answer(gw, &asked, answer).await)
            } else {
                complete("tools/call", &r)
            }
        }
    });
    for result in futures::future::join_all(plain).await {
        assert_ne!(result["isError"], true, "{result}");
    }
    gw.wait_metric("redmark_pending_operations", 0.0).await;
    gw.wait_metric(&sessions("leased"), 0.0).await;
    for tool in [cell.tool, cell.plain.0] {
        assert_eq!(gw.metric(&ops(tool, "upstream_lost")).await, None, "{mode}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn server_everything_over_stdio_in_replay_mode() {
    run(everything_stdio(), "replay").await;
}

#[tokio::test]
async fn server_everything_over_stdio_in_hold_mode() {
    run(everything_stdio(), "hold").await;
}

#[tokio::test]
async fn the_npm_sdk_1_server_over_stdio_in_replay_mode() {
    run(ts_sdk_stdio(), "replay").await;
}

#[tokio::test]
async fn the_npm_sdk_1_server_over_stdio_in_hold_mode() {
    run(ts_sdk_stdio(), "hold").await;
}

#[tokio::test]
async fn rmcp_3_natively_relayed_over_stdio() {
    run(rmcp_native(), "hold").await;
}

#[tokio::test]
async fn pypi_fastmcp_2_over_http_in_replay_mode() {
    run(fastmcp2().await, "replay").await;
}

#[tokio::test]
async fn pypi_fastmcp_2_over_http_in_hold_mode() {
    run(fastmcp2().await, "hold").await;
}

#[tokio::test]
async fn server_everything_over_http_in_replay_mode() {
    run(everything().await, "replay").await;
}

#[tokio::test]
async fn server_everything_over_http_in_hold_mode() {
    run(everything().await, "hold").await;
}

#[tokio::test]
async fn the_npm_sdk_1_server_over_http_in_replay_mode() {
    run(ts_sdk().await, "replay").await;
}

#[tokio::test]
async fn the_npm_sdk_1_server_over_http_in_hold_mode() {
    run(ts_sdk().await, "hold").await;
}

#[tokio::test]
async fn pypi_mcp_2_on_initialize_sessions_over_http_in_replay_mode() {
    run(py_mcp2("legacy").await, "replay").await;
}

#[tokio::test]
async fn pypi_mcp_2_on_initialize_sessions_over_http_in_hold_mode() {
    run(py_mcp2("legacy").await, "hold").await;
}

#[tokio::test]
async fn pypi_mcp_2_natively_relayed_over_http() {
    run(py_mcp2("auto").await, "hold").await;
}

#[tokio::test]
async fn the_typescript_sdk_v2_natively_relayed_over_http() {
    run(ts_v2_native().await, "hold").await;
}

#[tokio::test]
async fn rmcp_rooms_over_stdio_in_replay_mode() {
    run(rooms(), "replay").await;
}

#[tokio::test]
async fn rmcp_rooms_over_stdio_in_hold_mode() {
    run(rooms(), "hold").await;
}
