//! Multiplexed Streamable HTTP sessions: many waiting operations share one
//! upstream session once the route has seen its server send a push on the
//! call's own stream; until then, and for a server that pushes on the
//! standalone GET stream, one operation per session. Every push and answer
//! reaches exactly its own operation; a session that dies fails all of them.
//!
//! Servers: `tests/fixtures/mrtr_server.py --http` (PyPI `mcp` 1.30 FastMCP,
//! `ctx.elicit`, which relates each push to its call) and
//! `tests/fixtures/fault_server.py --http` (with `FAULT_PUSH=get`: pushes on
//! the GET stream; without: a session it drops mid-question).

// A test may panic (that is how it fails).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mrtr_support;

use std::sync::Arc;

use common::*;
use mrtr_support::*;
use serde_json::json;
use tokio::process::Command;

const MODE: &str = "redmark_upstream_session_mode";
const OPERATIONS: &str = r#"redmark_upstream_session_operations{route="main"}"#;

fn mode(m: &str) -> String {
    format!(r#"{MODE}{{route="main",mode="{m}"}}"#)
}

/// The FastMCP fixture over Streamable HTTP, and a gateway in front of it
/// with `pool` lines in `[route.pool]`.
async fn fastmcp(fx: &Fixture, pool: &str) -> (ChildGuard, TestGateway) {
    let mut cmd = Command::new(legacy_python());
    cmd.arg(fixture_file("mrtr_server.py"))
        .args(["--http", "0"])
        .env("FIXTURE_LOG", &fx.log.path);
    let (server, port) = spawn_listening(cmd, "Uvicorn running").await;
    let gw = gateway(port, pool).await;
    (server, gw)
}

async fn gateway(port: u16, pool: &str) -> TestGateway {
    let mut cfg = http_config(
        &format!("http://127.0.0.1:{port}/mcp"),
        "[mrtr]\ngather = \"50ms\"\ngather_quiet = \"50ms\"\n",
    );
    cfg.push_str(&format!("[route.pool]\n{pool}\n"));
    TestGateway::start(&cfg).await
}

/// The fault fixture over Streamable HTTP, `FAULT_PUSH` set to `push`.
async fn fault_server(fx: &Fixture, push: &str) -> (ChildGuard, u16) {
    let mut cmd = Command::new(legacy_python());
    cmd.arg(fixture_file("fault_server.py"))
        .args(["--http", "0"])
        .env("FIXTURE_LOG", &fx.log.path)
        .env("FAULT_PUSH", push);
    spawn_listening(cmd, "fault-server listening").await
}

fn ctx_ask(tag: &str) -> Op {
    Op::tool("ctx_ask", json!({"tag": tag})).caps(form_caps())
}

/// One `ctx_ask` walked to its end: what teaches the route where pushes go.
async fn learn(gw: &TestGateway) {
    let op = ctx_ask("teacher");
    let r = op.walk(gw, 1, |_, a| a.reply_only(accept("Teacher"))).await;
    let out = output(r.last().unwrap());
    assert_eq!(
        out,
        json!({"tag": "teacher", "action": "accept", "content": {"name": "Teacher"}})
    );
    gw.wait_metric(&mode("multiplexed"), 1.0).await;
}

/// Starts `n` operations at once; returns each with its question.
async fn ask_all(gw: &Arc<TestGateway>, ops: Vec<Op>) -> Vec<(Op, Asked)> {
    let started = ops.into_iter().map(|op| {
        let gw = gw.clone();
        tokio::spawn(async move {
            let asked = input_required("tools/call", &op.start(&gw).await);
            (op, asked)
        })
    });
    futures::future::join_all(started)
        .await
        .into_iter()
        .map(|r| r.expect("operation task"))
        .collect()
}

/// Answers every operation with the name `name-{tag}` at once, in the order given.
async fn answer_all(gw: &Arc<TestGateway>, asked: Vec<(Op, Asked)>) -> Vec<(String, Resp)> {
    let answered = asked.into_iter().map(|(op, asked)| {
        let gw = gw.clone();
        tokio::spawn(async move {
            let tag = op.params["arguments"]["tag"].as_str().unwrap().to_owned();
            let r = op.answer(&gw, &asked, accept(&format!("name-{tag}"))).await;
            (tag, r)
        })
    });
    futures::future::join_all(answered)
        .await
        .into_iter()
        .map(|r| r.expect("answer task"))
        .collect()
}

async fn metric_value(gw: &TestGateway, sample: &str) -> f64 {
    gw.metric(sample)
        .await
        .unwrap_or_else(|| panic!("no {sample} in /metrics"))
}

/// The issue's scenario: 200 questions from one principal open at once with
/// the default pool (whose 16 sessions per principal, one operation each,
/// used to cap it at 16), over a handful of sessions; answered in a shuffled
/// order, each operation gets exactly its own answer back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_waiting_questions_share_a_handful_of_sessions() {
    let fx = Fixture::new();
    let (_server, gw) = fastmcp(&fx, "").await;
    let gw = Arc::new(gw);
    learn(&gw).await;

    let questions: Vec<Op> = (0..200).map(|i| ctx_ask(&format!("q{i}"))).collect();
    let mut asked = ask_all(&gw, questions).await;
    for (_, a) in &asked {
        assert_eq!(a.message(), "What is your name?");
    }
    gw.wait_metric(PENDING, 200.0).await;
    assert_eq!(metric_value(&gw, OPERATIONS).await, 200.0);
    let leased = metric_value(&gw, &sessions("leased")).await;
    // The default `max_operations_per_session` is 64: 200 need 4 sessions.
    assert!(
        (4.0..=5.0).contains(&leased),
        "200 questions on {leased} sessions"
    );
    // The server saw each question's call on its own request.
    let asking: std::collections::HashSet<String> = fx
        .log
        .events()
        .iter()
        .filter(|e| e["event"] == "asking" && e["tool"] == "ctx_ask" && e["tag"] != "teacher")
        .map(|e| e["tag"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(asking.len(), 200);

    // A different order from the one they were asked in.
    asked.sort_by_key(|(op, _)| {
        let tag = op.params["arguments"]["tag"].as_str().unwrap();
        let i: u64 = tag[1..].parse().unwrap();
        (i * 7919) % 200
    });
    for (tag, r) in answer_all(&gw, asked).await {
        let out = output(&r);
        assert_eq!(
            out,
            json!({"tag": tag, "action": "accept", "content": {"name": format!("name-{tag}")}}),
            "operation {tag} got someone else's answer"
        );
    }
    gw.wait_metric(&ops("ctx_ask", "completed"), 201.0).await;
    settled(&gw).await;
    gw.wait_metric(OPERATIONS, 0.0).await;
}

/// Starts a `hang` call per tag (it says nothing until cancelled) and waits
/// until the server has all of them; dropping the tasks cancels them.
async fn hang_all(
    gw: &Arc<TestGateway>,
    fx: &Fixture,
    tags: &[&str],
) -> Vec<tokio::task::JoinHandle<()>> {
    let tasks = tags
        .iter()
        .map(|tag| {
            let gw = gw.clone();
            let op = Op::tool("hang", json!({"tag": tag})).caps(form_caps());
            tokio::spawn(async move {
                let _ = op.start(&gw).await;
            })
        })
        .collect();
    for tag in tags {
        fx.log
            .eventually(&format!("{tag} hanging"), |e| {
                e["event"] == "hanging" && e["tag"] == *tag
            })
            .await;
    }
    tasks
}

/// Before any push has been seen on a call's stream the route cannot know
/// where its server sends pushes: two calls in flight take two sessions.
/// Once a push came on its own call's stream, they share one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_are_exclusive_until_a_push_is_seen_on_its_call_stream() {
    let fx = Fixture::new();
    let (_server, gw) = fastmcp(&fx, "").await;
    let gw = Arc::new(gw);
    gw.wait_metric(&mode("learning"), 1.0).await;

    let before = hang_all(&gw, &fx, &["before-1", "before-2"]).await;
    gw.wait_metric(OPERATIONS, 2.0).await;
    assert_eq!(metric_value(&gw, &sessions("leased")).await, 2.0);
    assert_eq!(metric_value(&gw, &mode("learning")).await, 1.0);
    // Progress and answers on a call's stream teach nothing; only a push does.
    before.iter().for_each(tokio::task::JoinHandle::abort);
    gw.wait_metric(OPERATIONS, 0.0).await;
    // A given-up call's session is reused only once the server has ended
    // the call (or a short grace ran out): wait for both to come back.
    gw.wait_metric(&sessions("leased"), 0.0).await;

    learn(&gw).await;
    assert_eq!(metric_value(&gw, &mode("learning")).await, 0.0);
    // The two sessions of before are kept (their calls ended cleanly), each
    // on its own event loop: four calls now share them, none starts a third
    // (exclusive, they would take four).
    let tags = ["after-1", "after-2", "after-3", "after-4"];
    let after = hang_all(&gw, &fx, &tags).await;
    gw.wait_metric(OPERATIONS, 4.0).await;
    let leased = metric_value(&gw, &sessions("leased")).await;
    assert!(
        (1.0..=2.0).contains(&leased),
        "{leased} sessions for 4 calls"
    );
    after.iter().for_each(tokio::task::JoinHandle::abort);
    // Every cancellation reached the server over the shared sessions.
    for tag in tags {
        fx.log
            .eventually(&format!("{tag} cancelled"), |e| {
                e["event"] == "cancelled" && e["tag"] == tag
            })
            .await;
    }
    gw.wait_metric(OPERATIONS, 0.0).await;
    // A session whose calls were cancelled stays in use on a multiplexed route.
    gw.wait_metric(&sessions("leased"), 0.0).await;
    assert_eq!(metric_value(&gw, &sessions("idle")).await, leased.max(2.0));
}

/// At most `max_operations_per_session` operations ride one session; past
/// the sessions the principal may hold, the next call waits `lease_timeout`
/// and gets `upstream_busy`; the others still get their own answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn max_operations_per_session_is_honoured() {
    let fx = Fixture::new();
    let pool =
        "max_operations_per_session = 3\nmax_sessions_per_principal = 2\nlease_timeout = \"1s\"";
    let (_server, gw) = fastmcp(&fx, pool).await;
    let gw = Arc::new(gw);
    learn(&gw).await;

    let questions: Vec<Op> = (0..6).map(|i| ctx_ask(&format!("m{i}"))).collect();
    let asked = ask_all(&gw, questions).await;
    assert_eq!(metric_value(&gw, OPERATIONS).await, 6.0);
    assert_eq!(metric_value(&gw, &sessions("leased")).await, 2.0);

    let seventh = ctx_ask("m6").start(&gw).await;
    assert_error(&seventh, 503, -32603, "upstream_busy");

    for (tag, r) in answer_all(&gw, asked.into_iter().rev().collect()).await {
        assert_eq!(output(&r)["content"]["name"], format!("name-{tag}"));
    }
    settled(&gw).await;
}

/// A server that sends its pushes on the standalone GET stream names no call
/// by stream: its route stays one operation per session, so a push is always
/// the one call's of its session, never a guess.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_that_pushes_on_the_get_stream_stays_exclusive() {
    let fx = Fixture::new();
    let (_server, port) = fault_server(&fx, "get").await;
    let gw = Arc::new(gateway(port, "").await);
    let ask = |_: &str| Op::tool("ask", json!({})).caps(form_caps());

    let first = ask("g0");
    let r = first
        .walk(&gw, 1, |_, a| a.reply_only(accept("First")))
        .await;
    assert_eq!(output(r.last().unwrap())["content"]["name"], "First");
    gw.wait_metric(&mode("exclusive"), 1.0).await;
    assert_eq!(metric_value(&gw, &mode("multiplexed")).await, 0.0);

    let asked = ask_all(&gw, vec![ask("g1"), ask("g2"), ask("g3")]).await;
    assert_eq!(metric_value(&gw, OPERATIONS).await, 3.0);
    assert_eq!(metric_value(&gw, &sessions("leased")).await, 3.0);
    let answered = asked.into_iter().enumerate().map(|(i, (op, asked))| {
        let gw = gw.clone();
        tokio::spawn(async move {
            let name = format!("get-{i}");
            let r = op.answer(&gw, &asked, accept(&name)).await;
            (name, r)
        })
    });
    for r in futures::future::join_all(answered).await {
        let (name, r) = r.unwrap();
        assert_eq!(output(&r)["content"]["name"], name.as_str());
    }
    assert_eq!(metric_value(&gw, &mode("exclusive")).await, 1.0);
    settled(&gw).await;
}

/// Operations sharing a session all end when it dies, each with the ending
/// a lost session has always given (`upstream_lost`), and the route keeps
/// serving on a new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shared_session_that_dies_fails_all_its_operations() {
    let fx = Fixture::new();
    let (_server, port) = fault_server(&fx, "call").await;
    let gw = Arc::new(gateway(port, "").await);
    let op = |tool: &str| Op::tool(tool, json!({})).caps(form_caps());

    let r = op("ask")
        .walk(&gw, 1, |_, a| a.reply_only(accept("First")))
        .await;
    assert_eq!(output(r.last().unwrap())["content"]["name"], "First");
    gw.wait_metric(&mode("multiplexed"), 1.0).await;

    let asked = ask_all(&gw, vec![op("ask"), op("ask"), op("exit_while_asking")]).await;
    assert_eq!(metric_value(&gw, OPERATIONS).await, 3.0);
    assert_eq!(metric_value(&gw, &sessions("leased")).await, 1.0);
    fx.log
        .eventually("dropped", |e| e["event"] == "dropped")
        .await;

    // The first answer meets the dropped session (404); every operation on it ends.
    for (op, asked) in asked {
        let key = asked.key().to_owned();
        let r = op
            .retry(&gw, &asked.state, json!({key: accept("Late")}))
            .await;
        assert_error(&r, 200, -32603, "upstream_lost");
    }
    gw.wait_metric(&ops("ask", "upstream_lost"), 2.0).await;
    gw.wait_metric(&ops("exit_while_asking", "upstream_lost"), 1.0)
        .await;
    settled(&gw).await;

    let r = op("ask")
        .walk(&gw, 1, |_, a| a.reply_only(accept("Again")))
        .await;
    assert_eq!(output(r.last().unwrap())["content"]["name"], "Again");
}
