//! Every way redmark ends a call early, each followed at once by plain calls
//! on the same route, in front of the real PyPI `mcp` 1.30 FastMCP server
//! (`tests/fixtures/mrtr_server.py`) over Streamable HTTP and over stdio,
//! also with both cores busy.
//!
//! An early ending (the client lacks the capability, the red marks ran out,
//! the policy refused a question, nobody answered within the TTL, the
//! client left) answers the server's questions (`cancel` or an error) and
//! lets the call end on its own; only a call still running after
//! `end_grace` hears `notifications/cancelled`. A cancellation that reached
//! mcp 1.x while it was finishing the call made it answer the request twice:
//! over HTTP it ended the whole session (the next POST got 404, and the
//! pool handed the dead session to the next call), over stdio its
//! `AssertionError` ended the process. Either way the plain calls after the
//! ending failed `upstream_lost`.

// A test may panic (that is how it fails) and cast freely.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mrtr_support;

use common::*;
use mrtr_support::*;
use serde_json::json;
use tokio::process::Command;

/// Plain calls after each early ending, and endings of each kind per test.
const PLAIN_CALLS: usize = 20;
const ROUNDS: usize = 3;

/// The ways a call ends early, and the outcome each is counted as.
#[derive(Clone, Copy, Debug)]
enum Early {
    MissingCapability,
    RedMarksRanOut,
    RefusedQuestion,
    Expired,
    ClientGone,
}

const ALL: [Early; 5] = [
    Early::MissingCapability,
    Early::RedMarksRanOut,
    Early::RefusedQuestion,
    Early::Expired,
    Early::ClientGone,
];

impl Early {
    fn outcome(self) -> (&'static str, &'static str) {
        match self {
            Early::MissingCapability => ("ask", "missing_capability"),
            Early::RedMarksRanOut => ("ask", "policy_invalid_answer"),
            Early::RefusedQuestion => ("pair", "policy_refused"),
            Early::Expired => ("ask", "operation_expired"),
            Early::ClientGone => ("ask_and_report", "client_disconnected"),
        }
    }

    /// `[mrtr]` keys this ending needs: a TTL short enough to wait out, or
    /// a gather window long enough to leave in.
    fn mrtr(self) -> &'static str {
        match self {
            Early::Expired => "ttl = \"1s\"",
            Early::ClientGone => "gather = \"10s\"",
            _ => "ttl = \"10m\"",
        }
    }

    /// Ends one call this way; `n` tells the calls apart in the fixture's log.
    async fn run(self, gw: &TestGateway, n: usize) {
        let tag = format!("{self:?}-{n}");
        match self {
            Early::MissingCapability => {
                let r = Op::tool("ask", json!({"tag": tag}))
                    .caps(json!({}))
                    .start(gw)
                    .await;
                assert_error(&r, 400, -32021, "missing_capability");
            }
            Early::RedMarksRanOut => {
                let op = Op::tool("ask", json!({"tag": tag}));
                let asked = input_required("tools/call", &op.start(gw).await);
                let bad = json!({"elicitation-1": accept("lowercase")});
                let again =
                    input_required("tools/call", &op.retry(gw, &asked.state, bad.clone()).await);
                let r = op.retry(gw, &again.state, bad).await;
                assert_error(&r, 200, -32602, "policy_invalid_answer");
            }
            Early::RefusedQuestion => {
                let r = Op::tool("pair", json!({"tag": tag})).start(gw).await;
                assert_error(&r, 200, -32603, "policy_too_many_questions");
            }
            Early::Expired => {
                let before = gw.metric(&ops("ask", "operation_expired")).await;
                let op = Op::tool("ask", json!({"tag": tag}));
                input_required("tools/call", &op.start(gw).await);
                let want = before.unwrap_or(0.0) + 1.0;
                gw.wait_metric(&ops("ask", "operation_expired"), want).await;
            }
            Early::ClientGone => {
                let before = gw
                    .metric(&ops("ask_and_report", "client_disconnected"))
                    .await;
                // Not lingering: the handler ends on the `cancel` its question hears.
                let op = Op::tool("ask_and_report", json!({"tag": tag, "linger": false}))
                    .meta(json!({"progressToken": "gone"}));
                let mut stream = SseReader::new(op.open(gw, json!({})).await);
                // The progress comes after the question: redmark holds it, undelivered.
                let progress = stream
                    .next(std::time::Duration::from_secs(30))
                    .await
                    .expect("a first SSE message");
                assert_eq!(progress["method"], "notifications/progress", "{progress}");
                drop(stream);
                let want = before.unwrap_or(0.0) + 1.0;
                gw.wait_metric(&ops("ask_and_report", "client_disconnected"), want)
                    .await;
            }
        }
    }
}

/// The red marks run out after one re-ask; `pair`'s second question is one too many.
const POLICY: &str = "[tool.ask]\nmax_reasks = 1\n\
                      [tool.ask.fields.name]\npattern = \"^[A-Z]\"\n\
                      [tool.pair]\nmax_questions = 1\n";

/// Where the fixture server runs.
enum Transport {
    Stdio,
    /// Over Streamable HTTP at this URL, with the server's own output.
    Http(String, Output),
}

impl Transport {
    async fn http(fx: &Fixture) -> (Transport, ChildGuard) {
        let mut cmd = Command::new(legacy_python());
        cmd.arg(fixture_file("mrtr_server.py"))
            .args(["--http", "0"])
            .env("FIXTURE_LOG", &fx.log.path);
        let (guard, output) = spawn_until_kept(cmd, "Uvicorn running on").await;
        let port = listening_port(guard.pid()).await;
        let url = format!("http://127.0.0.1:{port}/mcp");
        (Transport::Http(url, output), guard)
    }

    fn config(&self, fx: &Fixture, early: Early) -> String {
        let cfg = fx
            .cfg()
            .mrtr(early.mrtr())
            .route(&format!("policy = {}", toml_path(&fx.policy_path())));
        match self {
            Transport::Stdio => cfg.build(),
            Transport::Http(url, _) => cfg.url(url).build(),
        }
    }

    /// What the HTTP server said of sessions it ended or answers it could not send.
    fn trouble(&self) -> Vec<String> {
        let Transport::Http(_, output) = self else {
            return Vec::new();
        };
        output
            .lock()
            .unwrap()
            .iter()
            .filter(|l| {
                [
                    "Request already responded to",
                    "AssertionError",
                    "BrokenResourceError",
                    "without completing response",
                    "Exception in ASGI application",
                    "404 Not Found",
                ]
                .iter()
                .any(|bad| l.contains(bad))
            })
            .cloned()
            .collect()
    }
}

/// Both cores busy for as long as it lives.
struct Load(#[allow(dead_code)] Vec<ChildGuard>);

impl Load {
    fn start() -> Load {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        Load(
            (0..cores)
                .map(|_| {
                    let child = Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .kill_on_drop(true)
                        .spawn()
                        .expect("a busy loop");
                    ChildGuard(child)
                })
                .collect(),
        )
    }
}

async fn each_early_ending_then_plain_calls(transport: Transport, fx: &Fixture) {
    for early in ALL {
        let gw = TestGateway::start(&transport.config(fx, early)).await;
        for round in 0..ROUNDS {
            early.run(&gw, round).await;
            for i in 0..PLAIN_CALLS {
                let r = Op::tool("log", json!({"level": "debug", "text": "plain"}))
                    .start(&gw)
                    .await;
                let result = complete("tools/call", &r);
                assert_ne!(
                    result["isError"], true,
                    "{early:?} round {round}: plain call {i} failed: {result}"
                );
            }
        }
        let (tool, outcome) = early.outcome();
        assert_eq!(
            gw.metric(&ops(tool, outcome)).await,
            Some(ROUNDS as f64),
            "{early:?}: every early ending counted as {outcome}"
        );
        assert_eq!(
            gw.metric(&ops("log", "completed")).await,
            Some((ROUNDS * PLAIN_CALLS) as f64),
            "{early:?}: every plain call completed"
        );
        assert_eq!(gw.metric(&ops("log", "upstream_lost")).await, None);
        settled(&gw).await;
        gw.stop().await;
    }
    let trouble = transport.trouble();
    if !trouble.is_empty() {
        if let Transport::Http(_, output) = &transport {
            eprintln!("{}", output.lock().unwrap().join("\n"));
        }
        panic!("the server reported trouble: {trouble:#?}");
    }
    // The server heard no cancellation of a call it was ending on its own.
    let cancels = fx
        .log
        .events()
        .into_iter()
        .filter(|e| e["event"] == "cancel_requested")
        .count();
    assert_eq!(
        cancels,
        0,
        "notifications/cancelled reached the server: {}",
        fx.log.seen()
    );
}

#[tokio::test]
async fn early_endings_leave_an_http_server_whole() {
    let fx = Fixture::new();
    fx.write_policy(POLICY);
    let (transport, _server) = Transport::http(&fx).await;
    each_early_ending_then_plain_calls(transport, &fx).await;
}

#[tokio::test]
async fn early_endings_leave_a_stdio_server_whole() {
    let fx = Fixture::new();
    fx.write_policy(POLICY);
    each_early_ending_then_plain_calls(Transport::Stdio, &fx).await;
}

#[tokio::test]
async fn early_endings_leave_the_servers_whole_on_a_loaded_machine() {
    let _load = Load::start();
    let fx = Fixture::new();
    fx.write_policy(POLICY);
    let (transport, _server) = Transport::http(&fx).await;
    each_early_ending_then_plain_calls(transport, &fx).await;
    let fx = Fixture::new();
    fx.write_policy(POLICY);
    each_early_ending_then_plain_calls(Transport::Stdio, &fx).await;
}
