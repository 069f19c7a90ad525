//! The engine's timing on paused time: TTL expiry, the gather window and the
//! lease timeout, driven with `tokio::time::advance` against an in-process
//! scripted legacy server (no process, no socket, no real waiting).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::app::{self, Options};
use crate::config::Config;
use crate::front::Gateway;
use crate::jsonrpc::{Id, Message};
use crate::mrtr::clock::Clock;
use crate::telemetry::metrics::Metrics;
use crate::upstream::pool::Connector;
use crate::upstream::transport::memory::{self, Peer};

/// Progress notifications the scripted `flood` tool sends before falling silent.
const FLOOD: usize = 1000;

/// What the scripted server saw, in order.
type Events = mpsc::UnboundedReceiver<Value>;

/// A legacy server with two tools: `ask` pushes one question, `ask_two`
/// pushes two, `gap_ms` apart; each call is answered with what the person said.
fn scripted(gap: Duration) -> (Connector, Events) {
    let (tx, rx) = mpsc::unbounded_channel();
    let connector: Connector = Arc::new(move || {
        let (link, peer) = memory::pair();
        tokio::spawn(serve(peer, tx.clone(), gap));
        Ok(link)
    });
    (connector, rx)
}

async fn serve(mut peer: Peer, events: mpsc::UnboundedSender<Value>, gap: Duration) {
    let mut calls: HashMap<String, (Id, usize)> = HashMap::new();
    let mut next = 0;
    while let Some(message) = peer.recv().await {
        match message {
            Message::Request { id, method, params } => {
                // What the session wrote, as the server reads it.
                let params = params.map(crate::jsonrpc::Payload::into_value);
                let result = match method.as_str() {
                    "initialize" => {
                        json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "scripted", "version": "1"}})
                    }
                    "tools/list" => json!({"tools": [
                        {"name": "ask", "inputSchema": {"type": "object"}},
                        {"name": "ask_two", "inputSchema": {"type": "object"}},
                        {"name": "flood", "inputSchema": {"type": "object"}},
                        {"name": "ask_and_finish", "inputSchema": {"type": "object"}},
                        {"name": "ask_stable", "inputSchema": {"type": "object"}}]}),
                    "tools/call"
                        if params.as_ref().and_then(|p| p.get("name")) == Some(&json!("flood")) =>
                    {
                        // FLOOD progress notifications at once, then silence.
                        let token = params
                            .as_ref()
                            .and_then(|p| p.pointer("/_meta/progressToken"))
                            .cloned()
                            .unwrap_or(Value::Null);
                        for i in 0..FLOOD {
                            peer.send(Message::Notification {
                                method: "notifications/progress".into(),
                                params: Some(json!({"progressToken": token, "progress": i})),
                            })
                            .await;
                        }
                        continue;
                    }
                    "tools/call" => {
                        let name = params.as_ref().and_then(|p| p.get("name")).cloned();
                        let two = name == Some(json!("ask_two"));
                        // Asks, then answers the call by itself a moment later.
                        if name == Some(json!("ask_and_finish")) {
                            let params = json!({"mode": "form", "message": "q", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}});
                            peer.send(Message::Request {
                                id: Id::String(format!("f{next}")),
                                method: "elicitation/create".into(),
                                params: Some(params.into()),
                            })
                            .await;
                            next += 1;
                            tokio::time::sleep(gap).await;
                            peer.send(Message::Response {
                                id,
                                outcome: Ok(
                                    json!({"content": [{"type": "text", "text": "finished"}]}),
                                ),
                            })
                            .await;
                            continue;
                        }
                        for i in 0..if two { 2 } else { 1 } {
                            if i > 0 {
                                tokio::time::sleep(gap).await;
                            }
                            next += 1;
                            let push = format!("q{next}");
                            calls.insert(push.clone(), (id.clone(), if two { 2 } else { 1 }));
                            // `ask_stable` asks the same question on every call (replay mode's fingerprint).
                            let message = if name == Some(json!("ask_stable")) {
                                "stable question".to_owned()
                            } else {
                                format!("question {next}")
                            };
                            let params = json!({"mode": "form", "message": message,
                                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}});
                            peer.send(Message::Request {
                                id: Id::String(push),
                                method: "elicitation/create".into(),
                                params: Some(params.into()),
                            })
                            .await;
                        }
                        continue;
                    }
                    _ => continue,
                };
                peer.send(Message::Response {
                    id,
                    outcome: Ok(result),
                })
                .await;
            }
            Message::Response {
                id: Id::String(push),
                outcome,
            } => {
                let answer = outcome.unwrap_or_else(|e| json!({"error": e.code}));
                let _ = events.send(json!({"answered": push, "with": answer}));
                let Some((call, left)) = calls.remove(&push) else {
                    continue;
                };
                // A call with two questions finishes on its last answer.
                if left == 2 && calls.values().any(|(c, _)| *c == call) {
                    continue;
                }
                let text = answer["content"]["name"]
                    .as_str()
                    .or(answer["action"].as_str())
                    .unwrap_or("?")
                    .to_owned();
                peer.send(Message::Response {
                    id: call,
                    outcome: Ok(json!({"content": [{"type": "text", "text": text}]})),
                })
                .await;
            }
            Message::Notification { method, params } if method == "notifications/cancelled" => {
                let _ = events
                    .send(json!({"cancelled": params.and_then(|p| p.get("requestId").cloned())}));
            }
            _ => {}
        }
    }
}

/// A gateway with one route `r` at `/mcp` in front of `connector`; `top` goes
/// before the route (`[mrtr]`), `route` after it (`[route.pool]`).
fn gateway(top: &str, route: &str, connector: Connector) -> Arc<Gateway> {
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{top}\n[[route]]\nname = \"r\"\npath = \"/mcp\"\n[route.upstream]\nurl = \"http://127.0.0.1:9/mcp\"\n{route}"
    );
    let config = Config::parse(&text, "engine.toml", std::env::temp_dir())
        .unwrap_or_else(|e| panic!("config: {e}"));
    let options = Options {
        clock: Clock::following_tokio(),
        connectors: [("r".to_owned(), connector)].into_iter().collect(),
    };
    app::build(&config, Arc::new(Metrics::new()), options).unwrap_or_else(|e| panic!("build: {e}"))
}

/// [`gateway`] with a route policy file of `policy` (kept in `dir`).
fn gateway_with_policy(
    top: &str,
    policy: &str,
    dir: &std::path::Path,
    connector: Connector,
) -> Arc<Gateway> {
    let path = dir.join("policy.toml");
    std::fs::write(&path, policy).unwrap_or_else(|e| panic!("policy: {e}"));
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{top}\n[[route]]\nname = \"r\"\npath = \"/mcp\"\npolicy = {}\n[route.upstream]\nurl = \"http://127.0.0.1:9/mcp\"\n",
        toml::Value::String(path.display().to_string())
    );
    let config = Config::parse(&text, "engine.toml", dir.to_path_buf())
        .unwrap_or_else(|e| panic!("config: {e}"));
    let options = Options {
        clock: Clock::following_tokio(),
        connectors: [("r".to_owned(), connector)].into_iter().collect(),
    };
    app::build(&config, Arc::new(Metrics::new()), options).unwrap_or_else(|e| panic!("build: {e}"))
}

/// A 2026-07-28 `tools/call` POST; `extra` is merged into the params (and
/// into `_meta` under its own `_meta`), over a client that can elicit.
fn tools_call(id: i64, tool: &str, extra: &Value) -> http::Request<Full<Bytes>> {
    let mut params = json!({"name": tool, "arguments": {}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}});
    for (k, v) in extra.as_object().into_iter().flatten() {
        match (params.get_mut("_meta"), k.as_str(), v.as_object()) {
            (Some(Value::Object(meta)), "_meta", Some(more)) => meta.extend(more.clone()),
            _ => params[k] = v.clone(),
        }
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    http::Request::post("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap_or_else(|e| panic!("request: {e}"))
}

/// A response's whole body (an SSE body ends with the final message).
async fn body_bytes(resp: http::Response<crate::front::response::Body>) -> Bytes {
    resp.into_body()
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default()
}

/// One POST through the whole front: pipeline, dispatch, operation.
async fn call(gw: &Arc<Gateway>, id: i64, tool: &str, extra: Value) -> (StatusCode, Value) {
    let resp = crate::front::http::handle(gw.clone(), tools_call(id, tool, &extra)).await;
    let status = resp.status();
    let bytes = body_bytes(resp).await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// The server's next event; a test that waits for one that never comes fails
/// (on paused time the hour passes at once) instead of hanging.
async fn next(events: &mut Events) -> Value {
    match tokio::time::timeout(Duration::from_secs(3600), events.recv()).await {
        Ok(Some(event)) => event,
        other => panic!("the server saw nothing more: {other:?}"),
    }
}

fn state(reply: &Value) -> String {
    assert_eq!(reply["result"]["resultType"], "input_required", "{reply}");
    reply["result"]["requestState"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The keys of a round's `inputRequests`, in order.
fn keys(reply: &Value) -> Vec<&str> {
    reply["result"]["inputRequests"]
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

fn reason(reply: &Value) -> &str {
    reply["error"]["data"]["reason"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_question_expires_on_the_ttl_and_the_server_hears_cancel() {
    let (connector, mut events) = scripted(Duration::ZERO);
    let gw = gateway("[mrtr]\nttl = \"10m\"\n", "", connector);
    let (_, first) = call(&gw, 1, "ask", json!({})).await;
    let token = state(&first);
    assert_eq!(gw.engine.table.len(), 1);

    tokio::time::advance(Duration::from_secs(599)).await;
    assert_eq!(
        gw.engine.table.len(),
        1,
        "still waiting just before the TTL"
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    let answered = next(&mut events).await;
    assert_eq!(answered["with"]["action"], "cancel", "{answered}");
    // The server ended its call on that `cancel`: a request no longer in
    // progress hears no `notifications/cancelled` (spec 2025-11-25
    // basic/utilities/cancellation.mdx).
    tokio::time::advance(crate::upstream::session::END_GRACE * 2).await;
    assert!(events.try_recv().is_err(), "nothing after the answer");
    assert_eq!(gw.engine.table.len(), 0, "nothing left pending");
    let metrics = gw.metrics.render();
    assert!(
        metrics.contains(
            r#"redmark_operations_total{route="r",tool="ask",outcome="operation_expired"} 1"#
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("redmark_pending_operations 0"),
        "{metrics}"
    );

    // A retry within the grace minute hears how the operation ended ...
    let retry = json!({"requestState": token, "inputResponses": {"elicitation-1": {"action": "accept", "content": {"name": "late"}}}});
    let (_, late) = call(&gw, 2, "ask", retry.clone()).await;
    assert_eq!(reason(&late), "operation_expired", "{late}");
    // ... and after it, the state itself has expired.
    tokio::time::advance(Duration::from_secs(61)).await;
    let (_, later) = call(&gw, 3, "ask", retry).await;
    assert_eq!(reason(&later), "state_expired", "{later}");
}

#[tokio::test(start_paused = true)]
async fn an_answer_before_the_ttl_reaches_the_server() {
    let (connector, mut events) = scripted(Duration::ZERO);
    let gw = gateway("[mrtr]\nttl = \"10m\"\n", "", connector);
    let (_, first) = call(&gw, 1, "ask", json!({})).await;
    tokio::time::advance(Duration::from_secs(9 * 60)).await;
    let retry = json!({"requestState": state(&first), "inputResponses": {"elicitation-1": {"action": "accept", "content": {"name": "Ada"}}}});
    let (status, done) = call(&gw, 2, "ask", retry).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(done["result"]["content"][0]["text"], "Ada", "{done}");
    assert_eq!(next(&mut events).await["with"]["content"]["name"], "Ada");
}

#[tokio::test(start_paused = true)]
async fn pushes_within_the_gather_window_are_asked_in_one_round() {
    let (connector, _events) = scripted(Duration::from_millis(5));
    let gw = gateway(
        "[mrtr]\ngather = \"20ms\"\ngather_quiet = \"10ms\"\n",
        "",
        connector,
    );
    let (_, first) = call(&gw, 1, "ask_two", json!({})).await;
    assert_eq!(keys(&first), ["elicitation-1", "elicitation-2"], "{first}");
}

#[tokio::test(start_paused = true)]
async fn a_lone_question_is_asked_once_the_server_is_quiet_not_at_the_gather_bound() {
    let (connector, _events) = scripted(Duration::ZERO);
    let gw = gateway(
        "[mrtr]\ngather = \"10s\"\ngather_quiet = \"2ms\"\n",
        "",
        connector,
    );
    let started = tokio::time::Instant::now();
    let (_, first) = call(&gw, 1, "ask", json!({})).await;
    assert_eq!(keys(&first), ["elicitation-1"], "{first}");
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "asked after {:?} (paused time): the quiet time ends the window, not its 10 s bound",
        started.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_push_after_the_quiet_time_is_a_round_of_its_own() {
    let (connector, _events) = scripted(Duration::from_millis(5));
    let gw = gateway(
        "[mrtr]\ngather = \"20ms\"\ngather_quiet = \"2ms\"\n",
        "",
        connector,
    );
    let (_, first) = call(&gw, 1, "ask_two", json!({})).await;
    assert_eq!(keys(&first), ["elicitation-1"], "{first}");
    let retry = json!({"requestState": state(&first), "inputResponses": {"elicitation-1": {"action": "accept", "content": {"name": "a"}}}});
    let (_, second) = call(&gw, 2, "ask_two", retry).await;
    assert_eq!(keys(&second), ["elicitation-2"], "{second}");
}

#[tokio::test(start_paused = true)]
async fn a_push_after_the_gather_window_is_a_round_of_its_own() {
    let (connector, _events) = scripted(Duration::from_millis(50));
    let gw = gateway("[mrtr]\ngather = \"20ms\"\n", "", connector);
    let (_, first) = call(&gw, 1, "ask_two", json!({})).await;
    assert_eq!(keys(&first), ["elicitation-1"], "{first}");
    let retry = json!({"requestState": state(&first), "inputResponses": {"elicitation-1": {"action": "accept", "content": {"name": "a"}}}});
    let (_, second) = call(&gw, 2, "ask_two", retry).await;
    assert_eq!(keys(&second), ["elicitation-2"], "{second}");
}

#[tokio::test(start_paused = true)]
async fn a_call_waits_lease_timeout_for_a_busy_session_then_hears_upstream_busy() {
    let (connector, _events) = scripted(Duration::ZERO);
    // One session for the route: the waiting question holds it.
    let gw_one = gateway(
        "",
        "[route.pool]\nmax_sessions = 1\nlease_timeout = \"30s\"\n",
        connector,
    );
    let (_, first) = call(&gw_one, 1, "ask", json!({})).await;
    state(&first);
    let started = tokio::time::Instant::now();
    let (status, busy) = call(&gw_one, 2, "ask", json!({})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{busy}");
    assert_eq!(reason(&busy), "upstream_busy", "{busy}");
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(30),
        "waited exactly lease_timeout (paused time)"
    );
}

#[tokio::test(start_paused = true)]
async fn a_client_that_never_reads_does_not_hold_the_call_past_call_timeout() {
    let (connector, mut events) = scripted(Duration::ZERO);
    let gw = gateway("", "call_timeout = \"5s\"\n", connector);
    let req = tools_call(
        1,
        "flood",
        &json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}, "progressToken": "p"}}),
    );
    let started = tokio::time::Instant::now();
    // The SSE response opens; nobody reads its body.
    let resp = crate::front::http::handle(gw.clone(), req).await;
    assert_eq!(resp.status(), StatusCode::OK);
    // The call still ends on call_timeout: the server hears cancel.
    let cancelled = next(&mut events).await;
    assert!(cancelled.get("cancelled").is_some(), "{cancelled}");
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(5),
        "ended exactly call_timeout after the server fell silent"
    );
    // The operation finishes (and returns its lease) without anyone reading,
    // once the server has had END_GRACE to end the cancelled call (this one
    // never does).
    tokio::time::advance(crate::upstream::session::END_GRACE).await;
    let leased_none = r#"redmark_upstream_sessions{route="r",state="leased"} 0"#;
    for _ in 0..1000 {
        if gw.metrics.render().contains(leased_none) {
            break;
        }
        tokio::task::yield_now().await;
    }
    let metrics = gw.metrics.render();
    assert!(metrics.contains(leased_none), "{metrics}");
    assert!(
        metrics.contains(
            r#"redmark_operations_total{route="r",tool="flood",outcome="upstream_timeout"} 1"#
        ),
        "{metrics}"
    );
    let dropped = metrics
        .lines()
        .find_map(|l| l.strip_prefix(r#"redmark_notifications_dropped_total{route="r"} "#))
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or_default();
    // What the queue held (one slot kept for the answer) reached the body; the rest was dropped.
    let bytes = body_bytes(resp).await;
    let mut decoder = crate::sse::Decoder::new(1 << 24);
    let messages: Vec<Value> = decoder
        .feed(&bytes)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| !e.data.is_empty())
        .filter_map(|e| serde_json::from_str(&e.data).ok())
        .collect();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    assert_eq!(reason(&last), "upstream_timeout", "{last}");
    let relayed = messages.len() - 1;
    assert!(
        relayed <= crate::mrtr::start::STREAM_DEPTH,
        "{relayed} notifications queued for a client that did not read"
    );
    assert_eq!(
        relayed + dropped,
        FLOOD,
        "every notification relayed or counted"
    );
}

/// Fires `n` identical retries at once and returns their answers.
async fn retries(
    gw: &Arc<Gateway>,
    tool: &'static str,
    retry: &Value,
    n: i64,
) -> Vec<(StatusCode, Value)> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (gw, retry) = (gw.clone(), retry.clone());
            tokio::spawn(async move { call(&gw, 100 + i, tool, retry).await })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap_or_else(|e| panic!("join: {e}")));
    }
    out
}

#[tokio::test(start_paused = true)]
async fn every_one_of_many_identical_retries_gets_one_answer() {
    let (connector, _events) = scripted(Duration::from_millis(100));
    let gw = gateway("[mrtr]\nttl = \"10m\"\ngather = \"1ms\"\n", "", connector);
    // The server answers its call by itself just as the retries arrive: the
    // operation ends with retries still queued, in whichever order it sees them.
    for _ in 0..20 {
        let (_, first) = call(&gw, 1, "ask_and_finish", json!({})).await;
        let retry = json!({"requestState": state(&first), "inputResponses": {"elicitation-1": {"action": "accept", "content": {"name": "Ada"}}}});
        tokio::time::sleep(Duration::from_millis(99)).await;
        for (status, reply) in retries(&gw, "ask_and_finish", &retry, 30).await {
            assert_eq!(status, StatusCode::OK, "{reply}");
            if reply["result"]["content"][0]["text"] != "finished" {
                assert_eq!(reason(&reply), "state_replayed", "{reply}");
            }
        }
        assert_eq!(gw.engine.table.len(), 0);
    }
}

/// Replay mode on paused time: the round ends at once (the server hears
/// `cancel` and `notifications/cancelled`; nothing is pending while the
/// person thinks), a retry just inside the TTL runs the call again and
/// completes, and one just past it is `state_expired` (no grace: there is no
/// operation to report on).
#[tokio::test(start_paused = true)]
async fn a_replay_state_lives_for_the_ttl_while_nothing_waits() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let (connector, mut events) = scripted(Duration::ZERO);
    let gw = gateway_with_policy(
        "[mrtr]\nttl = \"10m\"\n",
        "[defaults]\nmode = \"replay\"\n",
        dir.path(),
        connector,
    );
    let (_, first) = call(&gw, 1, "ask_stable", json!({})).await;
    let token = state(&first);
    assert_eq!(keys(&first), ["elicitation-1"]);
    let answered = next(&mut events).await;
    assert_eq!(answered["with"]["action"], "cancel", "{answered}");
    // The server ended the call on `cancel` itself, so the next thing it
    // sees is the retry's answer below, no `notifications/cancelled`.
    assert_eq!(gw.engine.table.len(), 0, "nothing is held between rounds");

    tokio::time::advance(Duration::from_secs(599)).await;
    let answer = json!({"elicitation-1": {"action": "accept", "content": {"name": "Ada"}}});
    let retry = json!({"requestState": token, "inputResponses": answer});
    let (_, done) = call(&gw, 2, "ask_stable", retry.clone()).await;
    assert_eq!(done["result"]["content"][0]["text"], "Ada", "{done}");
    assert_eq!(next(&mut events).await["with"]["content"]["name"], "Ada");
    // Used once.
    let (_, again) = call(&gw, 3, "ask_stable", retry).await;
    assert_eq!(reason(&again), "state_replayed", "{again}");

    let (_, second) = call(&gw, 4, "ask_stable", json!({})).await;
    let token = state(&second);
    tokio::time::advance(Duration::from_secs(601)).await;
    let retry = json!({"requestState": token, "inputResponses": answer});
    let (_, late) = call(&gw, 5, "ask_stable", retry).await;
    assert_eq!(reason(&late), "state_expired", "{late}");
    let metrics = gw.metrics.render();
    assert!(
        metrics.contains(r#"redmark_replay_rounds_total{route="r",tool="ask_stable"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("redmark_pending_operations 0"),
        "{metrics}"
    );
}
