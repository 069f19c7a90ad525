//! HTTP/2 to a Streamable HTTP server (`[route.upstream] http2`): with
//! `prior_knowledge` redmark speaks h2c, and the hold-mode calls waiting on
//! one session are streams of one connection, each completing with its own
//! answer; with the default (`auto`) over `http://` it speaks HTTP/1.1, a
//! connection per waiting call.
//!
//! Server: `examples/bench_upstream.rs` in process (hyper, HTTP/1.1 and h2c
//! on one port), which counts its connections and the requests of each HTTP
//! version. Its `ask` pushes one `elicitation/create` on the call's own SSE
//! stream and answers with the name it got.

// A test may panic (that is how it fails).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mrtr_support;

#[allow(dead_code)]
#[path = "../examples/bench_upstream.rs"]
mod bench_upstream;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bench_upstream::Stats;
use common::*;
use mrtr_support::*;
use serde_json::{Value, json};

const OPERATIONS: &str = r#"redmark_upstream_session_operations{route="main"}"#;
const WAITING: usize = 24;

/// The bench upstream on a free port, and a gateway in front of it with
/// `upstream` lines in `[route.upstream]`.
async fn start(upstream: &str) -> (Arc<Stats>, TestGateway, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (ready, stats) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(bench_upstream::run_http(listener, ready));
    let stats = stats.await.unwrap();
    let mut cfg = http_config(&format!("http://127.0.0.1:{port}/mcp"), "");
    cfg.push_str(upstream);
    cfg.push('\n');
    (stats, TestGateway::start(&cfg).await, server)
}

fn ask() -> Op {
    Op::tool("ask", json!({})).caps(form_caps())
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// One `ask` walked to its end: what teaches the route that its server
/// pushes on each call's own stream (so sessions carry many calls).
async fn learn(gw: &TestGateway) {
    let r = ask()
        .walk(gw, 1, |_, a| a.reply_only(accept("Teacher")))
        .await;
    assert_eq!(text(&complete("tools/call", r.last().unwrap())), "Teacher");
}

/// Opens [`WAITING`] `ask` calls, each left waiting for its answer, then
/// answers them all; each must come back with its own name.
async fn wait_and_answer(gw: &Arc<TestGateway>) {
    let asked = futures::future::join_all((0..WAITING).map(|_| {
        let gw = gw.clone();
        tokio::spawn(async move {
            let op = ask();
            let asked = input_required("tools/call", &op.start(&gw).await);
            (op, asked)
        })
    }))
    .await;
    gw.wait_metric(PENDING, WAITING as f64).await;
    gw.wait_metric(OPERATIONS, WAITING as f64).await;
    let answered = futures::future::join_all(asked.into_iter().enumerate().map(|(i, r)| {
        let gw = gw.clone();
        let (op, asked) = r.unwrap();
        tokio::spawn(async move {
            let r = op.answer(&gw, &asked, accept(&format!("name-{i}"))).await;
            (i, r)
        })
    }))
    .await;
    for r in answered {
        let (i, r) = r.unwrap();
        assert_eq!(text(&complete("tools/call", &r)), format!("name-{i}"));
    }
    settled(gw).await;
}

/// The issue's memory fix: every waiting call of a session is a stream of
/// one HTTP/2 connection, spoken with prior knowledge over `http://`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prior_knowledge_carries_waiting_calls_as_streams_of_one_connection() {
    let (stats, gw, _server) = start("http2 = \"prior_knowledge\"").await;
    let gw = Arc::new(gw);
    learn(&gw).await;
    // The session's own connection (and the route's, which asked
    // `server/discover` before falling back to a legacy session).
    let before = stats.connections.load(Ordering::SeqCst);
    wait_and_answer(&gw).await;
    assert_eq!(stats.http1_requests.load(Ordering::SeqCst), 0);
    // initialize, initialized, the GET stream, 1 + WAITING calls and their answers.
    assert!(stats.http2_requests.load(Ordering::SeqCst) >= 2 + 2 * (1 + WAITING));
    assert_eq!(
        stats.connections.load(Ordering::SeqCst),
        before,
        "{WAITING} waiting calls on one session opened connections of their own"
    );
}

/// The default over `http://` stays HTTP/1.1 (a server that cannot speak h2c
/// keeps working), so each waiting call holds a connection of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_over_cleartext_speaks_http1_with_a_connection_per_waiting_call() {
    let (stats, gw, _server) = start("").await;
    let gw = Arc::new(gw);
    learn(&gw).await;
    let before = stats.connections.load(Ordering::SeqCst);
    wait_and_answer(&gw).await;
    assert_eq!(stats.http2_requests.load(Ordering::SeqCst), 0);
    // Each waiting call held one; the answers found the idle ones or more.
    assert!(stats.connections.load(Ordering::SeqCst) - before >= WAITING - 1);
}
