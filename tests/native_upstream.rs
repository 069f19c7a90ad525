//! Native 2026-07-28 upstreams: a real PyPI `mcp` 2.3.0 server whose tool
//! asks through the SDK's resolvers (`Resolve(fn)` returning `Elicit(...)`,
//! tests/fixtures/native_py_server.py) answers `input_required` itself.
//! `protocol = "auto"` detects it with `server/discover` (shown in `/readyz`
//! and `/metrics`); its questions reach a real 2026 client (PyPI `mcp` 2.3.0)
//! under the server's own keys; answers that break the policy (the seed's -1
//! and 4e9, an authz-denied value) and a tampered state never reach the
//! server, which is checked on what the server itself logged; pinned to
//! `protocol = "legacy"`, the same server is fronted through conversion.
//! `on_missing_capability = "decline"` is checked against both SDKs' servers
//! here; the TypeScript SDK v2 server's own tests are in
//! tests/native_upstream_ts.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod native_upstream_support;

use common::*;
use native_upstream_support::*;
use serde_json::{Value, json};
use tokio::process::Command;

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

/// Issue 42: a native server that answers a list or `completion/complete`
/// with `input_required` (spec 2026-07-28 mrtr.mdx: "Servers MUST NOT send
/// InputRequiredResult responses on any other client requests") gets an
/// invalid-answer error of its own; its form (a password field) and its
/// unsealed `requestState` never reach the client. A complete result that
/// carries a stray `requestState` loses it. The server is
/// tests/fixtures/native_hostile_server.py (the SDKs cannot be made to do this).
#[tokio::test]
async fn input_required_where_the_spec_forbids_it_is_never_relayed() {
    let fx = Fixture::new();
    let upstream = format!(
        "command = [{}, {}]\nenv = {{ FIXTURE_LOG = {} }}\nprotocol = \"2026-07-28\"",
        toml_path(&client_python()),
        toml_path(&fixture_file("native_hostile_server.py")),
        toml_path(&fx.log.path)
    );
    let gw = TestGateway::start(&config(&fx, &upstream)).await;
    for (method, params) in [
        ("prompts/list", json!({})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "b"}}),
        ),
    ] {
        let r = gw.rpc(method, params, caps()).await;
        let err = assert_error(&r, 502, -32603, "upstream_invalid_result");
        assert_eq!(err.error["data"]["method"], method, "{}", r.raw);
        assert!(
            !r.raw.contains("server-own-unsealed-state"),
            "{method}: {}",
            r.raw
        );
        assert!(!r.raw.contains("password"), "{method}: {}", r.raw);
    }
    // The server did get each request: the refusal is of its answer.
    let asked: Vec<String> = fx
        .log
        .events()
        .iter()
        .filter_map(|e| e["method"].as_str().map(str::to_owned))
        .collect();
    assert!(
        asked.iter().any(|m| m == "completion/complete"),
        "{asked:?}"
    );
    let listed = gw.rpc("tools/list", json!({}), caps()).await;
    assert_eq!(
        listed.result()["tools"][0]["name"],
        "echo",
        "{}",
        listed.raw
    );
    let echoed = gw
        .rpc(
            "tools/call",
            json!({"name": "echo", "arguments": {}}),
            caps(),
        )
        .await;
    let out = complete("tools/call", &echoed);
    assert_eq!(out["content"][0]["text"], "echoed", "{out}");
    assert!(out.get("requestState").is_none(), "{out}");
    gw.stop().await;
}
