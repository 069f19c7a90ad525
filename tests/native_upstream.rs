//! Native 2026-07-28 upstreams: a real PyPI `mcp` 2.3.0 server whose tool
//! asks through the SDK's resolvers (`Resolve(fn)` returning `Elicit(...)`,
//! tests/fixtures/native_py_server.py) answers `input_required` itself.
//! `protocol = "auto"` detects it with `server/discover` (shown in `/readyz`
//! and `/metrics`); its questions reach a real 2026 client (PyPI `mcp` 2.3.0)
//! under the server's own keys; answers that break the policy (the seed's -1
//! and 4e9, an authz-denied value) and a tampered state never reach the
//! server, which is checked on what the server itself logged; pinned to
//! `protocol = "legacy"`, the same server is fronted through conversion.
//! The same for the TypeScript SDK v2 server (npm `@modelcontextprotocol/server`
//! 2.4.0, tests/fixtures/native_ts_server.mjs: `inputRequired(...)` with its
//! own `requestState`), whose stateless legacy fallback cannot push a question.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

/// The key the SDK gives the resolver `ask_nights` of a script run as `__main__`.
const KEY: &str = "__main__:ask_nights";

const POLICY: &str = r#"
[defaults]
on_invalid = "reask"
max_reasks = 2

[tool.book.fields.nights]
minimum = 1
maximum = 30
authz = 'value <= 7 || "travel" in principal.groups'
authz_message = "stays longer than a week are for the travel desk"
"#;

fn server_cmd(fx: &Fixture, http: bool) -> Command {
    let mut cmd = Command::new(client_python());
    cmd.arg(fixture_file("native_py_server.py"));
    if http {
        cmd.args(["--http", "0"]);
    }
    cmd.env("FIXTURE_LOG", &fx.log.path);
    cmd
}

/// The config of one route in front of `upstream` (a `[route.upstream]` body).
fn config(fx: &Fixture, upstream: &str) -> String {
    config_with(fx, "", upstream)
}

/// [`config`] with `top` (tables such as `[state]`) before `[[route]]`.
fn config_with(fx: &Fixture, top: &str, upstream: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{top}\n\
         [[route]]\nname = \"main\"\npath = \"/mcp\"\n{}\n\
         [route.upstream]\n{upstream}\ninit_timeout = \"120s\"\n",
        fx.policy(POLICY)
    )
}

/// The fixture over Streamable HTTP (its child, and the gateway config's upstream body).
async fn http_server(fx: &Fixture) -> (ChildGuard, String) {
    let (child, port) = spawn_listening(server_cmd(fx, true), "Uvicorn running").await;
    (child, format!("url = \"http://127.0.0.1:{port}/mcp\""))
}

fn stdio_upstream(fx: &Fixture) -> String {
    format!(
        "command = [{}, {}]\nenv = {{ FIXTURE_LOG = {} }}",
        toml_path(&client_python()),
        toml_path(&fixture_file("native_py_server.py")),
        toml_path(&fx.log.path)
    )
}

fn caps() -> Value {
    json!({"elicitation": {"form": {}}})
}

fn book() -> Op {
    Op::tool("book", json!({"hotel": "the Ritz"})).caps(caps())
}

/// What the server's tool received, in order.
fn received(fx: &Fixture) -> Vec<Value> {
    fx.log
        .events()
        .into_iter()
        .filter(|e| e["event"] == "ran" && e["tool"] == "book")
        .map(|e| e["received"].clone())
        .collect()
}

fn asked(fx: &Fixture) -> usize {
    fx.log
        .events()
        .iter()
        .filter(|e| e["event"] == "asked")
        .count()
}

async fn readyz(gw: &TestGateway) -> Value {
    let url = format!("{}/readyz", gw.admin);
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

fn protocol_gauge(protocol: &str) -> String {
    format!(r#"redmark_upstream_protocol{{route="main",protocol="{protocol}"}}"#)
}

/// A real 2026 client answers accept, decline and cancel; the server's own
/// tool reports each outcome exactly as it received it.
async fn three_ways_from_the_py_client(fx: &Fixture, gw: &TestGateway) {
    three_ways(fx, gw, false, KEY).await;
}

/// [`three_ways_from_the_py_client`] from the Node client when `node`; `key`
/// is the server's own input-request key.
async fn three_ways(fx: &Fixture, gw: &TestGateway, node: bool, key: &str) {
    let step = |id: &str| json!({"op": "call_tool", "name": "book", "arguments": {"hotel": "the Ritz"}, "id": id});
    let script = json!({
        "steps": [step("accept"), step("decline"), step("cancel")],
        "elicitation": [
            {"action": "accept", "content": {"nights": 3}},
            {"action": "decline"},
            {"action": "cancel"},
        ],
    });
    let out = if node {
        ts_client(&gw.url, &script).await
    } else {
        py_client(&gw.url, &script).await
    };
    let asked: Vec<&Value> = out.iter().filter(|l| l["event"] == "elicitation").collect();
    assert_eq!(asked.len(), 3, "{out:#?}");
    if node {
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

#[tokio::test]
async fn auto_detects_a_native_http_server_and_its_questions_reach_a_2026_client() {
    let fx = Fixture::new();
    let (_server, upstream) = http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    // The server's own key, as the SDK names it, and its own caching hints on lists.
    let ep = McpClient::new(&gw.url);
    let first = book().start(&ep).await;
    let q = input_required("tools/call", &first);
    assert_eq!(q.keys(), vec![KEY]);
    let listed = ep.rpc("tools/list", json!({}), caps()).await;
    assert_eq!(listed.result()["ttlMs"], 0, "{:?}", listed.result());
    assert_eq!(listed.result()["cacheScope"], "private");
    // Stamped with the server's own serverInfo, from its `server/discover`.
    let info = &listed.result()["_meta"]["io.modelcontextprotocol/serverInfo"];
    assert_eq!(info["name"], "native-py", "{:?}", listed.result());

    three_ways_from_the_py_client(&fx, &gw).await;

    let ready = readyz(&gw).await;
    assert_eq!(ready["routes"][0]["protocol"], "2026-07-28", "{ready}");
    assert_eq!(ready["routes"][0]["state"], "up", "{ready}");
    assert_eq!(gw.metric(&protocol_gauge("2026-07-28")).await, Some(1.0));
    assert_eq!(gw.metric(&protocol_gauge("legacy")).await, Some(0.0));
    assert!(
        gw.metrics().await.contains(
            r#"redmark_operations_total{route="main",tool="book",outcome="completed"} 1"#
        ),
        "{}",
        gw.metrics().await
    );
    gw.stop().await;
}

#[tokio::test]
async fn ts_client_answers_a_native_http_server_three_ways() {
    let fx = Fixture::new();
    let (_server, upstream) = http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    three_ways(&fx, &gw, true, KEY).await;
    gw.stop().await;
}

#[tokio::test]
async fn auto_detects_a_native_stdio_server_which_serves_concurrent_calls() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&config(&fx, &stdio_upstream(&fx))).await;
    three_ways_from_the_py_client(&fx, &gw).await;
    // One process, several requests at once, each answered under its own id.
    let ep = McpClient::new(&gw.url);
    let calls = (0..4).map(|_| {
        let ep = &ep;
        async move { book().start(ep).await }
    });
    for r in futures::future::join_all(calls).await {
        assert_eq!(input_required("tools/call", &r).keys(), vec![KEY]);
    }
    let ready = readyz(&gw).await;
    assert_eq!(ready["routes"][0]["protocol"], "2026-07-28", "{ready}");
    gw.stop().await;
}

#[tokio::test]
async fn invalid_and_denied_answers_never_reach_the_native_server() {
    let fx = Fixture::new();
    let (_server, upstream) = http_server(&fx).await;
    let audit_path = fx.path("audit.jsonl");
    let top = format!("[audit]\npath = {}\n", toml_path(&audit_path));
    let gw = TestGateway::start(&config_with(&fx, &top, &upstream)).await;
    let ep = McpClient::new(&gw.url);
    let op = book();
    let first = op.start(&ep).await;
    let q = input_required("tools/call", &first);
    let asked_before = asked(&fx);

    // The seed's -1, then 4e9: asked again by redmark with a red mark, the
    // server's key kept, the server not troubled.
    let r = op.answer(&ep, &q, accepted(json!({"nights": -1}))).await;
    let again = input_required("tools/call", &r);
    assert_eq!(again.keys(), vec![KEY]);
    assert!(again.message().contains('✗'), "{}", again.message());
    assert!(again.message().starts_with("How many nights at the Ritz?"));
    let r = op
        .answer(&ep, &again, accepted(json!({"nights": 4e9})))
        .await;
    let third = input_required("tools/call", &r);
    // max_reasks = 2: the next invalid answer ends the call.
    let r = op.answer(&ep, &third, accepted(json!({"nights": 0}))).await;
    assert_error(&r, 200, -32602, "policy_invalid_answer");
    assert_eq!(asked(&fx), asked_before, "the server saw a retry");

    // An authz-denied value: never asked again, never delivered.
    let first = op.start(&ep).await;
    let q = input_required("tools/call", &first);
    let before = asked(&fx);
    let r = op.answer(&ep, &q, accepted(json!({"nights": 10}))).await;
    assert_error(&r, 200, -32602, "policy_denied");
    assert_eq!(asked(&fx), before);
    assert!(received(&fx).is_empty(), "{:?}", received(&fx));

    // A valid answer still goes through, fields the server did not ask for dropped.
    let first = op.start(&ep).await;
    let q = input_required("tools/call", &first);
    let r = op
        .answer(&ep, &q, accepted(json!({"nights": 2, "minibar": true})))
        .await;
    complete("tools/call", &r);
    assert_eq!(
        received(&fx),
        vec![json!({"action": "accept", "data": {"nights": 2}})]
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_tampered_wrapped_state_is_refused_before_the_server_sees_anything() {
    let fx = Fixture::new();
    let (_server, upstream) = http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    let ep = McpClient::new(&gw.url);
    let op = book();
    let q = input_required("tools/call", &op.start(&ep).await);
    let before = asked(&fx);
    let (kid, body) = q.state.split_once('.').unwrap();
    let mut bytes = body.as_bytes().to_vec();
    let mid = bytes.len() / 2;
    bytes[mid] = if bytes[mid] == b'A' { b'B' } else { b'A' };
    let tampered = format!("{kid}.{}", String::from_utf8(bytes).unwrap());
    let r = op
        .retry(
            &ep,
            &tampered,
            json!({KEY: {"action": "accept", "content": {"nights": 3}}}),
        )
        .await;
    assert_error(&r, 200, -32602, "state_bad_signature");
    // Another call's arguments with this state: refused too.
    let other = Op::tool("book", json!({"hotel": "the Savoy"})).caps(caps());
    let r = other
        .retry(
            &ep,
            &q.state,
            json!({KEY: {"action": "accept", "content": {"nights": 3}}}),
        )
        .await;
    assert_error(&r, 200, -32602, "state_wrong_request");
    assert_eq!(asked(&fx), before, "the server saw a refused retry");
    assert!(received(&fx).is_empty());
    // The state itself is still good, once.
    let good = json!({KEY: {"action": "accept", "content": {"nights": 3}}});
    complete("tools/call", &op.retry(&ep, &q.state, good.clone()).await);
    let r = op.retry(&ep, &q.state, good).await;
    assert_error(&r, 200, -32602, "state_replayed");
    assert_eq!(received(&fx).len(), 1);
    gw.stop().await;
}

/// The wrapped state (the server's own, plus the questions) is bounded by
/// `[state] max_bytes` like any other: past it the call ends, precisely.
#[tokio::test]
async fn a_wrapped_state_past_max_bytes_ends_the_call() {
    let fx = Fixture::new();
    let (_server, upstream) = http_server(&fx).await;
    let gw = TestGateway::start(&config_with(&fx, "[state]\nmax_bytes = 1024\n", &upstream)).await;
    let ep = McpClient::new(&gw.url);
    let r = book().start(&ep).await;
    let data = assert_error(&r, 200, -32602, "state_too_large").data();
    assert_eq!(data["max_bytes"], 1024, "{data}");
    gw.stop().await;
}

#[tokio::test]
async fn a_client_without_the_capability_never_gets_the_native_question() {
    let fx = Fixture::new();
    let (_server, upstream) = http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    let ep = McpClient::new(&gw.url);
    let r = Op::tool("book", json!({"hotel": "the Ritz"}))
        .caps(json!({}))
        .start(&ep)
        .await;
    // The server checks the capability itself; its -32021 reaches the client as redmark's.
    let data = assert_error(&r, 400, -32021, "missing_capability").data();
    assert_eq!(data["requiredCapabilities"], caps(), "{data}");
    // A retry that drops the capability after it was asked: redmark's own -32021.
    let q = input_required("tools/call", &book().start(&ep).await);
    let r = Op::tool("book", json!({"hotel": "the Ritz"}))
        .caps(json!({}))
        .retry(
            &ep,
            &q.state,
            json!({KEY: {"action": "accept", "content": {"nights": 3}}}),
        )
        .await;
    assert_error(&r, 400, -32021, "missing_capability");
    assert!(received(&fx).is_empty());
    gw.stop().await;
}

#[tokio::test]
async fn the_same_server_pinned_legacy_is_fronted_through_conversion() {
    let fx = Fixture::new();
    let (_server, upstream) = http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &format!("{upstream}\nprotocol = \"legacy\""))).await;
    let ep = McpClient::new(&gw.url);
    let op = book();
    let q = input_required("tools/call", &op.start(&ep).await);
    // A converted push: redmark's own key, not the SDK's.
    assert_eq!(q.keys(), vec!["elicitation-1"]);
    let r = op.answer(&ep, &q, accepted(json!({"nights": 4e9}))).await;
    let again = input_required("tools/call", &r);
    let r = op.answer(&ep, &again, accepted(json!({"nights": 3}))).await;
    complete("tools/call", &r);
    assert_eq!(
        received(&fx),
        vec![json!({"action": "accept", "data": {"nights": 3}})]
    );
    let ready = readyz(&gw).await;
    assert_eq!(ready["routes"][0]["protocol"], "legacy", "{ready}");
    assert_eq!(gw.metric(&protocol_gauge("legacy")).await, Some(1.0));
    gw.stop().await;
}

/// Detection is cached per route and forgotten when the server stops
/// answering: the native server goes away, and a legacy server (PyPI `mcp`
/// 1.30.0 FastMCP) comes up on the same port; the next request detects it
/// and the route is fronted through conversion.
#[tokio::test]
async fn a_server_that_goes_away_is_detected_again() {
    let fx = Fixture::new();
    let (mut native, port) = spawn_listening(server_cmd(&fx, true), "Uvicorn running").await;
    let upstream = format!("url = \"http://127.0.0.1:{port}/mcp\"");
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    let ep = McpClient::new(&gw.url);
    input_required("tools/call", &book().start(&ep).await);
    assert_eq!(gw.metric(&protocol_gauge("2026-07-28")).await, Some(1.0));

    native.0.kill().await.unwrap();
    let r = ep.rpc("tools/list", json!({}), caps()).await;
    assert_eq!(r.reason(), "upstream_unavailable", "{:?}", r.last());
    assert_eq!(gw.metric(&protocol_gauge("unknown")).await, Some(1.0));

    let mut legacy = Command::new(legacy_python());
    legacy
        .arg(fixture_file("e2e_legacy_py.py"))
        .args(["--http", &port.to_string()]);
    let _legacy = spawn_until(legacy, "Uvicorn running").await;
    let op = Op::tool("register", json!({"event": "the launch"})).caps(caps());
    let q = eventually("the legacy server answers", || {
        let (op, ep) = (&op, &ep);
        async move {
            let r = op.start(ep).await;
            if r.last().get("result").is_some() {
                Ok(input_required("tools/call", &r))
            } else {
                Err(format!("{:?}", r.last()))
            }
        }
    })
    .await;
    // Converted: redmark's own key for a legacy push.
    assert_eq!(q.keys(), vec!["elicitation-1"]);
    let r = op
        .answer(&ep, &q, accepted(json!({"name": "Ada", "guests": 1})))
        .await;
    complete("tools/call", &r);
    assert_eq!(gw.metric(&protocol_gauge("legacy")).await, Some(1.0));
    assert_eq!(readyz(&gw).await["routes"][0]["protocol"], "legacy");
    gw.stop().await;
}

// --- The TypeScript SDK v2 server (npm @modelcontextprotocol/server 2.4.0) ---

/// The key the TS fixture gives its question (its own `inputRequests` key).
const TS_KEY: &str = "nights";

fn ts_server_cmd(fx: &Fixture) -> Command {
    ensure_deps();
    let mut cmd = Command::new("node");
    cmd.arg(fixture_file("native_ts_server.mjs"))
        .env("PORT", "0")
        .env("REDMARK_NPM_DIR", repo().join(".cache/npm"))
        .env("FIXTURE_LOG", &fx.log.path);
    cmd
}

/// The TS fixture over Streamable HTTP (`createMcpHandler`, stateless).
async fn ts_http_server(fx: &Fixture) -> (ChildGuard, String) {
    let (child, port) = spawn_listening(ts_server_cmd(fx), "native-ts listening on port").await;
    (child, format!("url = \"http://127.0.0.1:{port}/mcp\""))
}

fn ts_stdio_upstream(fx: &Fixture) -> String {
    format!(
        "command = [\"node\", {}, \"stdio\"]\nenv = {{ FIXTURE_LOG = {}, REDMARK_NPM_DIR = {} }}",
        toml_path(&fixture_file("native_ts_server.mjs")),
        toml_path(&fx.log.path),
        toml_path(&repo().join(".cache/npm"))
    )
}

/// The `requestState` the TS server saw on each run of `book`: its own, restored.
fn ts_states(fx: &Fixture) -> Vec<Value> {
    fx.log
        .events()
        .into_iter()
        .filter(|e| e["event"] == "ran" && e["tool"] == "book")
        .map(|e| e["state"].clone())
        .collect()
}

#[tokio::test]
async fn auto_detects_the_ts_v2_server_and_both_2026_clients_answer_it_three_ways() {
    let fx = Fixture::new();
    let (_server, upstream) = ts_http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    let q = input_required("tools/call", &book().start(&McpClient::new(&gw.url)).await);
    assert_eq!(q.keys(), vec![TS_KEY]);
    assert_eq!(q.message(), "How many nights at the Ritz?");
    let ready = readyz(&gw).await;
    assert_eq!(ready["routes"][0]["protocol"], "2026-07-28", "{ready}");

    three_ways(&fx, &gw, false, TS_KEY).await;
    // The server's own requestState came back to it on every retry.
    assert_eq!(ts_states(&fx), vec![json!("ts-state:the Ritz"); 3]);
    three_ways(&fx, &gw, true, TS_KEY).await;
    assert_eq!(ts_states(&fx), vec![json!("ts-state:the Ritz"); 6]);
    gw.stop().await;
}

#[tokio::test]
async fn the_ts_v2_server_over_stdio_is_native_too() {
    let fx = Fixture::new();
    ensure_deps();
    let gw = TestGateway::start(&config(&fx, &ts_stdio_upstream(&fx))).await;
    three_ways(&fx, &gw, false, TS_KEY).await;
    assert_eq!(readyz(&gw).await["routes"][0]["protocol"], "2026-07-28");
    gw.stop().await;
}

#[tokio::test]
async fn invalid_and_denied_answers_never_reach_the_ts_v2_server() {
    let fx = Fixture::new();
    let (_server, upstream) = ts_http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    let ep = McpClient::new(&gw.url);
    let op = book();
    let q = input_required("tools/call", &op.start(&ep).await);
    let asked_before = asked(&fx);
    let r = op.answer(&ep, &q, accepted(json!({"nights": -1}))).await;
    let again = input_required("tools/call", &r);
    assert_eq!(again.keys(), vec![TS_KEY]);
    assert!(again.message().contains('✗'), "{}", again.message());
    let r = op
        .answer(&ep, &again, accepted(json!({"nights": 4e9})))
        .await;
    let third = input_required("tools/call", &r);
    let r = op.answer(&ep, &third, accepted(json!({"nights": 0}))).await;
    assert_error(&r, 200, -32602, "policy_invalid_answer");

    let q = input_required("tools/call", &op.start(&ep).await);
    let r = op.answer(&ep, &q, accepted(json!({"nights": 10}))).await;
    assert_error(&r, 200, -32602, "policy_denied");
    // Asked twice (two fresh calls), never retried, never ran.
    assert_eq!(asked(&fx), asked_before + 1);
    assert!(received(&fx).is_empty(), "{:?}", received(&fx));

    let q = input_required("tools/call", &op.start(&ep).await);
    let r = op.answer(&ep, &q, accepted(json!({"nights": 2}))).await;
    complete("tools/call", &r);
    assert_eq!(
        received(&fx),
        vec![json!({"action": "accept", "data": {"nights": 2}})]
    );
    gw.stop().await;
}

/// The v2 server's `createMcpHandler` still answers `initialize`, but serves
/// 2025-era traffic statelessly: every request is a fresh instance that never
/// saw the client's declared capabilities, so its pushed `elicitation/create`
/// is refused inside the server. Pinned to `protocol = "legacy"`, redmark
/// holds the session and relays the server's own answer: a tool error, and
/// the question never reaches the client.
#[tokio::test]
async fn the_ts_v2_server_pinned_legacy_answers_through_its_stateless_fallback() {
    let fx = Fixture::new();
    let (_server, upstream) = ts_http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &format!("{upstream}\nprotocol = \"legacy\""))).await;
    let r = book().start(&McpClient::new(&gw.url)).await;
    let out = complete("tools/call", &r);
    assert_eq!(out["isError"], true, "{out}");
    assert_eq!(
        out["content"][0]["text"],
        "Client does not support form elicitation."
    );
    let legacy_asks: Vec<Value> = fx
        .log
        .events()
        .into_iter()
        .filter(|e| e["event"] == "asked")
        .collect();
    assert_eq!(
        legacy_asks,
        vec![json!({"event": "asked", "hotel": "the Ritz", "era": "legacy"})]
    );
    assert_eq!(readyz(&gw).await["routes"][0]["protocol"], "legacy");
    gw.stop().await;
}

/// `on_missing_capability = "decline"`: a client without elicitation never
/// receives the native server's question; redmark declares form elicitation
/// upstream, declines on the user's behalf, retries the server itself with
/// the server's own state, and relays the server's final answer.
#[tokio::test]
async fn decline_on_missing_capability_answers_a_native_server_itself() {
    let fx = Fixture::new();
    let (_py, py) = http_server(&fx).await;
    let (_ts, ts) = ts_http_server(&fx).await;
    for (i, upstream) in [py, ts].into_iter().enumerate() {
        let audit_path = fx.path(&format!("audit-{i}.jsonl"));
        let top = format!("[audit]\npath = {}\n", toml_path(&audit_path));
        let cfg = config_with(&fx, &top, &upstream).replace(
            "path = \"/mcp\"\n",
            "path = \"/mcp\"\non_missing_capability = \"decline\"\n",
        );
        let gw = TestGateway::start(&cfg).await;
        let r = Op::tool("book", json!({"hotel": "the Ritz"}))
            .caps(json!({}))
            .start(&McpClient::new(&gw.url))
            .await;
        let out = complete("tools/call", &r);
        assert_eq!(
            out["content"][0]["text"]
                .as_str()
                .map(|t| serde_json::from_str::<Value>(t).unwrap()),
            Some(json!({"action": "decline", "data": null})),
            "{out}"
        );
        assert!(
            gw.metrics().await.contains(
                r#"redmark_operations_total{route="main",tool="book",outcome="declined"} 1"#
            ),
            "{}",
            gw.metrics().await
        );
        gw.stop().await;
        // Audited, though no person saw it: `refused`, with the reason.
        let text = std::fs::read_to_string(&audit_path).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert_eq!(lines[0]["outcome"], "refused", "{text}");
        assert_eq!(lines[0]["verdict"], "missing_capability", "{text}");
        assert_eq!(lines[0]["origin"], "native", "{text}");
    }
    assert_eq!(
        received(&fx),
        vec![json!({"action": "decline", "data": null}); 2]
    );
    // The TS server's own requestState came back with the decline (the py
    // server logs none).
    assert_eq!(
        ts_states(&fx),
        vec![Value::Null, json!("ts-state:the Ritz")]
    );
}

/// Progress and log notifications the TS v2 server streams on a call's SSE
/// response reach the client on its own response stream, before the answer,
/// as for a legacy server: progress under the client's token, log messages
/// at or above the level it asked for, and nothing for a client that asked
/// for neither (a plain JSON answer).
#[tokio::test]
async fn progress_and_log_notifications_of_a_native_server_are_relayed() {
    let fx = Fixture::new();
    let (_server, upstream) = ts_http_server(&fx).await;
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    let ep = McpClient::new(&gw.url);
    let slow = Op::tool("slow", json!({"steps": 2})).caps(caps());
    let r = slow
        .clone()
        .meta(json!({"progressToken": "p-7", "io.modelcontextprotocol/logLevel": "info"}))
        .start(&ep)
        .await;
    assert!(r.is_sse(), "{}", r.raw);
    let methods: Vec<&str> = r
        .messages
        .iter()
        .map(|m| m["method"].as_str().unwrap_or("(answer)"))
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/progress",
            "notifications/message",
            "notifications/progress",
            "notifications/message",
            "(answer)",
        ],
        "{:#?}",
        r.messages
    );
    assert_eq!(
        r.messages[0]["params"],
        json!({"progressToken": "p-7", "progress": 1, "total": 2, "message": "step 1"})
    );
    assert_eq!(r.messages[3]["params"]["data"], "step 2 of 2");
    complete("tools/call", &r);

    // A log level above the server's messages: only progress.
    let r = slow
        .clone()
        .meta(json!({"progressToken": 9, "io.modelcontextprotocol/logLevel": "error"}))
        .start(&ep)
        .await;
    let progress: Vec<&Value> = r
        .messages
        .iter()
        .filter(|m| m.get("method").is_some())
        .collect();
    assert_eq!(progress.len(), 2, "{:#?}", r.messages);
    assert!(
        progress
            .iter()
            .all(|m| m["method"] == "notifications/progress" && m["params"]["progressToken"] == 9)
    );

    // Neither: the server's notifications are not for this client.
    let r = slow.start(&ep).await;
    assert!(!r.is_sse(), "{}", r.raw);
    complete("tools/call", &r);
    gw.stop().await;
}

/// `subscriptions/listen` to a native HTTP route goes to the server's own
/// listen stream (no legacy session): the server's acknowledgement first,
/// then the change it publishes, each under the client's request id as the
/// subscription id.
#[tokio::test]
async fn subscriptions_listen_relays_the_native_servers_own_stream() {
    let fx = Fixture::new();
    let (_server, upstream) = ts_http_server(&fx).await;
    listen_is_relayed(&fx, &upstream).await;
}

/// Over stdio the server's notifications share one channel and name the
/// listen by its `subscriptionId` (redmark's id for it): they reach the
/// client retagged with its own id.
#[tokio::test]
async fn subscriptions_listen_relays_a_native_stdio_servers_own_stream() {
    let fx = Fixture::new();
    ensure_deps();
    listen_is_relayed(&fx, &ts_stdio_upstream(&fx)).await;
}

async fn listen_is_relayed(fx: &Fixture, upstream: &str) {
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
