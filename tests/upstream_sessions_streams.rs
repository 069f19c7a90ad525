//! What flows during a call through a legacy session: cancellation when the
//! client goes away, progress and log messages relayed only when asked for,
//! and `subscriptions/listen` carrying list-changed notices; also the fixture
//! over Streamable HTTP.
//!
//! The server is `tests/fixtures/legacy_server.py`, which logs what happened
//! to it (started, cancelled, ...) in a JSON-lines file.

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

use std::time::Duration;

use common::*;
use legacy_fixture::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// Sends a tools/call over a raw TCP connection, so the test decides exactly
/// when the connection closes.
async fn raw_call(
    gw: &TestGateway,
    id: i64,
    name: &str,
    arguments: Value,
    meta: Value,
) -> TcpStream {
    let url = reqwest::Url::parse(&gw.url).expect("gateway url");
    let host = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments, "_meta": meta}}).to_string();
    let head = format!(
        "POST {} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         mcp-protocol-version: {VERSION}\r\nmcp-method: tools/call\r\nmcp-name: {name}\r\ncontent-length: {}\r\n\r\n",
        url.path(),
        body.len()
    );
    let mut stream = TcpStream::connect(&host).await.expect("connect");
    stream.write_all(head.as_bytes()).await.expect("write head");
    stream.write_all(body.as_bytes()).await.expect("write body");
    stream
}

/// Reads (bounded) until `needle` appears; returns everything read.
async fn read_until(stream: &mut TcpStream, needle: &str) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let found = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            let n = stream.read(&mut buf).await.expect("read");
            if n == 0 {
                return false;
            }
            seen.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&seen).contains(needle) {
                return true;
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(
        matches!(found, Ok(true)),
        "never saw {needle:?}; got {text:?}"
    );
    text
}

/// Starts `slow(30)` over a raw connection, closes the connection once the
/// call reached the server (and, when `streamed`, once the SSE response has
/// begun), and waits for the fixture to log the cancellation. Returns the
/// "started" event.
async fn abandon_a_slow_call(gw: &TestGateway, fx: &Fixture, streamed: bool) -> Value {
    let meta = if streamed {
        meta_with(json!({}), json!({"progressToken": "slow-1"}))
    } else {
        meta(json!({}))
    };
    let mut conn = raw_call(gw, 1, "slow", json!({"seconds": 30}), meta).await;
    let started = fx
        .log
        .eventually("slow started", |e| {
            e["event"] == "started" && e["tool"] == "slow"
        })
        .await;
    if streamed {
        // The fixture reports progress 0 first, which opens the SSE response.
        let head = read_until(&mut conn, "notifications/progress").await;
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: text/event-stream"),
            "{head}"
        );
    }
    drop(conn);

    let cancelled = fx
        .log
        .eventually("slow cancelled", |e| {
            e["event"] == "cancelled" && e["tool"] == "slow"
        })
        .await;
    assert_eq!(cancelled["request_id"], started["request_id"]);
    assert_eq!(cancelled["pid"], started["pid"]);
    // Cancelled by notifications/cancelled, not merely by the session ending.
    fx.log
        .eventually("notifications/cancelled for slow", |e| {
            e["event"] == "cancel_requested"
                && e["request_id"] == started["request_id"]
                && e["pid"] == started["pid"]
        })
        .await;
    gw.wait_metric(&sessions("leased"), 0.0).await;
    started
}

async fn cancelled_when_the_client_leaves(streamed: bool) {
    let fx = Fixture::new();
    let gw = TestGateway::start(&fx.config("", "")).await;
    let started = abandon_a_slow_call(&gw, &fx, streamed).await;
    // The server ended the cancelled call (mcp 1.x answers it with an
    // error), and redmark read that answer before giving the session back:
    // nothing of the call can come late, so the session is reused.
    gw.wait_metric(&sessions("idle"), 1.0).await;
    let next = whoami(&gw, json!({})).await;
    assert_eq!(next["pid"], started["pid"]);
    assert!(
        !fx.log.events().iter().any(|e| e["event"] == "finished"),
        "{:?}",
        fx.log.events()
    );
    gw.stop().await;
}

// The gateway's own runtime flavour: cancellation must not depend on task order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn closing_a_streamed_call_cancels_it_upstream() {
    cancelled_when_the_client_leaves(true).await;
}

// The gateway's own runtime flavour: cancellation must not depend on task order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn closing_a_plain_json_call_cancels_it_upstream() {
    cancelled_when_the_client_leaves(false).await;
}

#[tokio::test]
async fn progress_is_relayed_only_for_a_progress_token() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&fx.config("", "")).await;
    let params = json!({"name": "progress", "arguments": {"steps": 3}, "_meta": meta_with(json!({}), json!({"progressToken": "p-7"}))});
    let streamed = gw.rpc("tools/call", params, json!({})).await;
    assert_eq!(streamed.status, 200);
    assert!(
        streamed.is_sse(),
        "a progress token and progress: SSE ({})",
        streamed.content_type
    );
    let (last, notes) = streamed.messages.split_last().expect("messages");
    assert_eq!(notes.len(), 3, "{:?}", streamed.messages);
    for (i, n) in notes.iter().enumerate() {
        assert_schema("ProgressNotification", n);
        assert_eq!(n["params"]["progressToken"], "p-7");
        assert_eq!(n["params"]["progress"].as_f64(), Some((i + 1) as f64));
        assert_eq!(n["params"]["total"].as_f64(), Some(3.0));
    }
    assert_response_schema("tools/call", last);
    assert_eq!(last["result"]["content"][0]["text"], "done 3");

    let plain = call_tool(&gw, "progress", json!({"steps": 3}), json!({})).await;
    assert!(!plain.is_sse(), "no token: plain JSON");
    assert_eq!(plain.messages.len(), 1);
    assert_response_schema("tools/call", plain.last());
    assert_eq!(plain.result()["content"][0]["text"], "done 3");
    gw.stop().await;
}

#[tokio::test]
async fn log_messages_follow_the_requested_level() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&fx.config("", "")).await;
    let warn = |level: Option<&str>| {
        let extra = level.map_or_else(|| json!({}), |l| json!({LOG_LEVEL: l}));
        json!({"name": "log", "arguments": {"level": "warning", "text": "disk almost full"}, "_meta": meta_with(json!({}), extra)})
    };

    let info = gw.rpc("tools/call", warn(Some("info")), json!({})).await;
    assert!(info.is_sse(), "{}: {:?}", info.content_type, info.raw);
    let (last, notes) = info.messages.split_last().expect("messages");
    assert_eq!(notes.len(), 1, "{:?}", info.messages);
    assert_schema("LoggingMessageNotification", &notes[0]);
    assert_eq!(notes[0]["params"]["level"], "warning");
    assert_eq!(notes[0]["params"]["data"], "disk almost full");
    assert_response_schema("tools/call", last);

    for level in [Some("error"), None] {
        let quiet = gw.rpc("tools/call", warn(level), json!({})).await;
        assert!(!quiet.is_sse(), "level {level:?}: {:?}", quiet.raw);
        assert_eq!(quiet.messages.len(), 1, "level {level:?}");
        assert_eq!(quiet.result()["content"][0]["text"], "logged");
    }
    gw.stop().await;
}

#[tokio::test]
async fn listen_relays_tools_list_changed_and_the_list_is_fresh() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&fx.config("", "")).await;
    // Warm the list cache first: afterwards it must not hide the new tool.
    let before = gw.rpc("tools/list", json!({}), json!({})).await;
    let names = |r: &Resp| -> Vec<String> {
        r.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(names(&before).contains(&"add_tool".to_owned()));
    assert!(!names(&before).contains(&"fresh_tool".to_owned()));

    let listen_id = json!("listen-1");
    let params = json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}, "_meta": meta(json!({}))});
    let resp = gw
        .request_with_id(listen_id.clone(), "subscriptions/listen", &params)
        .send()
        .await
        .expect("POST listen");
    assert_eq!(resp.status(), 200);
    let mut listen = SseReader::new(resp);
    let ack = listen
        .next(Duration::from_secs(15))
        .await
        .expect("acknowledgement");
    assert_schema("SubscriptionsAcknowledgedNotification", &ack);
    assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], listen_id);
    // The fixture declares tools.listChanged but prompts.listChanged false.
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );

    let added = call_tool(&gw, "add_tool", json!({"name": "fresh_tool"}), json!({})).await;
    assert_eq!(added.result()["content"][0]["text"], "added fresh_tool");

    let changed = listen
        .next(Duration::from_secs(15))
        .await
        .expect("list_changed");
    assert_schema("ToolListChangedNotification", &changed);
    assert_eq!(changed["method"], "notifications/tools/list_changed");
    assert_eq!(changed["params"]["_meta"][SUBSCRIPTION_ID], listen_id);

    // The listen holds no session: this list is served by the route's one
    // idle session (process), the one that registered the tool.
    let after = gw.rpc("tools/list", json!({}), json!({})).await;
    assert_response_schema("tools/list", after.last());
    assert!(
        names(&after).contains(&"fresh_tool".to_owned()),
        "stale list: {:?}",
        names(&after)
    );
    let call = call_tool(&gw, "fresh_tool", json!({}), json!({})).await;
    assert_eq!(call.result()["content"][0]["text"], "I am fresh_tool");

    drop(listen);
    gw.wait_metric(&sessions("leased"), 0.0).await;
    gw.stop().await;
}

/// The fixture over Streamable HTTP (`--http PORT`): capabilities, progress
/// and cancellation take the HTTP transport's paths (POST-scoped SSE streams,
/// `notifications/cancelled` as its own POST).
// The gateway's own runtime flavour: cancellation must not depend on task order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_fixture_over_streamable_http() {
    let fx = Fixture::new();
    let mut cmd = tokio::process::Command::new(legacy_python());
    cmd.arg(Fixture::script())
        .args(["--http", "0"])
        .env("FIXTURE_LOG", &fx.log.path);
    let (_server, port) = spawn_listening(cmd, "Uvicorn running").await;
    let gw = TestGateway::start(&http_config(&format!("http://127.0.0.1:{port}/mcp"), "")).await;

    let caps = json!({"elicitation": {"form": {}}, "roots": {"listChanged": true}});
    let me = whoami(&gw, caps.clone()).await;
    assert_eq!(me["capabilities"], caps);

    let params = json!({"name": "progress", "arguments": {"steps": 2}, "_meta": meta_with(json!({}), json!({"progressToken": 9}))});
    let streamed = gw.rpc("tools/call", params, json!({})).await;
    assert!(streamed.is_sse(), "{:?}", streamed.raw);
    let methods: Vec<&str> = streamed
        .messages
        .iter()
        .filter_map(|m| m["method"].as_str())
        .collect();
    assert_eq!(
        methods,
        ["notifications/progress", "notifications/progress"]
    );
    assert_eq!(streamed.result()["content"][0]["text"], "done 2");

    abandon_a_slow_call(&gw, &fx, false).await;
    // One server process serves every HTTP session; it is still up.
    let again = whoami(&gw, json!({})).await;
    assert_eq!(again["pid"], me["pid"]);
    gw.stop().await;
}

/// A 2025-era session's standalone stream (`GET`) carries the server's
/// list-changed notices, without 2026-07-28's subscription id; its calls
/// carry the log messages at the level its `logging/setLevel` chose.
#[tokio::test]
async fn a_2025_era_session_hears_list_changed_on_get_and_logs_at_its_level() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&fx.config("", "")).await;
    let mut s = Session2025::new(&gw.url);
    let init = s.initialize("2025-11-25", json!({})).await;
    assert_eq!(init.result()["capabilities"]["tools"]["listChanged"], true);
    let get = gw
        .http
        .get(&gw.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", s.id.clone().unwrap())
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    let mut standalone = SseReader::new(get);
    // The stream hears the route's notices from the moment it is answered,
    // and holds no upstream session for it (issue 47, item 10).
    gw.wait_metric(&sessions("leased"), 0.0).await;
    let added = s
        .request(
            json!(1),
            "tools/call",
            json!({"name": "add_tool", "arguments": {"name": "fresh_tool"}}),
        )
        .await;
    assert_eq!(
        added.last()["result"]["content"][0]["text"],
        "added fresh_tool"
    );
    let changed = standalone
        .next(Duration::from_secs(15))
        .await
        .expect("list_changed");
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );
    assert!(changed.pointer("/params/_meta").is_none(), "{changed}");

    let set = s
        .request(json!(2), "logging/setLevel", json!({"level": "warning"}))
        .await;
    assert_eq!(set.result(), &json!({}));
    let quiet = s
        .request(
            json!(3),
            "tools/call",
            json!({"name": "log", "arguments": {"level": "info", "text": "hidden"}}),
        )
        .await;
    assert!(
        !quiet
            .messages
            .iter()
            .any(|m| m["method"] == "notifications/message"),
        "an info message below the session's level: {:?}",
        quiet.messages
    );
    let loud = s
        .request(
            json!(4),
            "tools/call",
            json!({"name": "log", "arguments": {"level": "error", "text": "shown"}}),
        )
        .await;
    let logged: Vec<&Value> = loud
        .messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect();
    assert_eq!(logged.len(), 1, "{:?}", loud.messages);
    assert_eq!(logged[0]["params"]["data"], "shown");
    assert_eq!(loud.last()["id"], 4);
    drop(standalone);
    assert_eq!(s.delete().await, 200);
    gw.wait_metric(&sessions("leased"), 0.0).await;
    gw.stop().await;
}
