//! Rate limits (docs/src/reference/limits.md, "Rate limits"): `[route.rate_limit]` and a policy's
//! `[tool.NAME] rate`, through the real HTTP front to a real legacy server
//! (tests/fixtures/policy_server.py): a burst over a limit gets 429 with a
//! sane `Retry-After` and `data.reason: "rate_limited"` naming the limit,
//! another principal is unaffected, a person's retry is never throttled by
//! the call rate, and a limit recovers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod policy_support;

use common::*;
use policy_support::*;
use serde_json::json;

const ANN: &str = "ann-key-0123456789";
const BOB: &str = "bob-key-0123456789";

/// The policy fixture's gateway with two principals and `limits` appended
/// to the route (the config ends inside `[route.upstream]`).
async fn gateway(fx: &Fixture, limits: &str) -> TestGateway {
    let top = format!("{}{}", api_key(ANN, "ann", &[]), api_key(BOB, "bob", &[]));
    let config = format!("{}\n[route.rate_limit]\n{limits}\n", fx.config(&top));
    TestGateway::start(&config).await
}

async fn list(gw: &TestGateway, key: &str) -> Resp {
    let params = json!({"_meta": meta(json!({}))});
    let rb = gw.request("tools/list", params).bearer_auth(key);
    read_resp(gw.send(rb).await).await
}

fn retry_after(r: &Resp) -> u64 {
    r.headers
        .get("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After: {}", r.raw))
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn limited(gw_sample: &str) -> String {
    format!(r#"redmark_rate_limited_total{{route="main",scope="{gw_sample}"}}"#)
}

#[tokio::test]
async fn a_burst_over_the_principal_limit_gets_429_and_others_are_unaffected() {
    let fx = Fixture::with_policy("");
    let gw = gateway(&fx, "per_principal = \"1/m\"\nburst = 2").await;
    for _ in 0..2 {
        let ok = list(&gw, ANN).await;
        assert_eq!(ok.status, 200, "{}", ok.raw);
    }
    let refused = list(&gw, ANN).await;
    let err = assert_error(&refused, 429, -32603, "rate_limited");
    let data = &err.error["data"];
    assert_eq!(data["limit"], "per_principal");
    assert_eq!(data["rate"], "1/m");
    // One token every 60 s, and one was just spent: about a minute to wait.
    let wait = retry_after(&refused);
    assert!((50..=60).contains(&wait), "Retry-After: {wait}");
    let wait_ms = data["retryAfterMs"].as_u64().unwrap();
    assert!(wait_ms > 50_000 && wait_ms <= 60_000, "{wait_ms}");

    let other = list(&gw, BOB).await;
    assert_eq!(
        other.status, 200,
        "bob has a bucket of his own: {}",
        other.raw
    );
    assert_eq!(gw.metric(&limited("per_principal")).await, Some(1.0));
    gw.stop().await;
}

#[tokio::test]
async fn a_retry_is_not_throttled_by_the_call_rate() {
    let fx = Fixture::with_policy("");
    let gw = gateway(&fx, "per_principal = \"1/m\"\nper_route = \"1/m\"").await;
    let op = ask(
        &schema(json!({"n": {"type": "integer"}}), &["n"]),
        "How many?",
        "r1",
    )
    .key(ANN);
    let first = op.start(&gw).await;
    let question = asked(&first);
    // Both call buckets are empty now; the person's answer still goes through.
    let done = op
        .answer(
            &gw,
            &question,
            json!({"action": "accept", "content": {"n": 3}}),
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.raw);
    assert_eq!(done.result()["resultType"], "complete", "{}", done.raw);
    let next_call = list(&gw, ANN).await;
    let err = assert_error(&next_call, 429, -32603, "rate_limited");
    assert_eq!(err.error["data"]["limit"], "per_principal");
    let other = list(&gw, BOB).await;
    let err = assert_error(&other, 429, -32603, "rate_limited");
    assert_eq!(err.error["data"]["limit"], "per_route");
    gw.stop().await;
}

/// Issue 42: a made-up `requestState` on a method without retries once
/// passed for a person's retry and escaped `per_principal` and `per_route`.
/// Now it is refused before the limits (and never reaches the server), and
/// one on `tools/call` counts against `retries` and is refused unopened.
#[tokio::test]
async fn a_made_up_request_state_escapes_no_limit() {
    let fx = Fixture::with_policy("");
    let gw = gateway(&fx, "per_principal = \"1/m\"\nretries = \"1/m\"").await;
    let ok = list(&gw, ANN).await;
    assert_eq!(ok.status, 200, "{}", ok.raw);
    for method in [
        "tools/list",
        "prompts/list",
        "resources/list",
        "completion/complete",
    ] {
        let params = json!({"_meta": meta(json!({})), "requestState": "x"});
        let rb = gw.request(method, params).bearer_auth(ANN);
        let r = read_resp(gw.send(rb).await).await;
        assert_error(&r, 400, -32602, "state_not_allowed");
    }
    // The bucket that one plain list emptied is still empty.
    let plain = list(&gw, ANN).await;
    let err = assert_error(&plain, 429, -32603, "rate_limited");
    assert_eq!(err.error["data"]["limit"], "per_principal");
    // On tools/call a made-up state is a retry: it spends the retries
    // bucket, is refused unopened, and the next one is over the limit.
    let call = |state: &str| {
        let params = json!({"_meta": meta(json!({})), "name": "ask", "arguments": {}, "requestState": state});
        gw.request("tools/call", params).bearer_auth(ANN)
    };
    let first = read_resp(gw.send(call("x")).await).await;
    assert_error(&first, 200, -32602, "state_malformed");
    let second = read_resp(gw.send(call("y")).await).await;
    let err = assert_error(&second, 429, -32603, "rate_limited");
    assert_eq!(err.error["data"]["limit"], "retries");
    gw.stop().await;
}

#[tokio::test]
async fn a_tool_rate_from_the_policy_limits_that_tool_only() {
    let fx = Fixture::with_policy("[tool.ask]\nrate = \"1/m\"\n");
    let gw = gateway(&fx, "").await;
    let question = schema(json!({"n": {"type": "integer"}}), &["n"]);
    let first = ask(&question, "How many?", "t1").key(ANN).start(&gw).await;
    asked(&first);
    let second = ask(&question, "How many?", "t2").key(ANN).start(&gw).await;
    let err = assert_error(&second, 429, -32603, "rate_limited");
    assert_eq!(err.error["data"]["limit"], "tool");
    assert_eq!(err.error["data"]["rate"], "1/m");
    // Other requests, and other principals' calls of the tool, go on.
    assert_eq!(list(&gw, ANN).await.status, 200);
    let theirs = ask(&question, "How many?", "t3").key(BOB).start(&gw).await;
    asked(&theirs);
    assert_eq!(gw.metric(&limited("tool")).await, Some(1.0));
    gw.stop().await;
}

#[tokio::test]
async fn a_limit_recovers() {
    let fx = Fixture::with_policy("");
    let gw = gateway(&fx, "per_principal = \"2/s\"\nburst = 1").await;
    // Sent together, so both arrive within one 500 ms interval.
    let (a, b) = tokio::join!(list(&gw, ANN), list(&gw, ANN));
    let mut statuses = [a.status, b.status];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 429], "{} / {}", a.raw, b.raw);
    let refused = if a.status == 429 { a } else { b };
    assert_error(&refused, 429, -32603, "rate_limited");
    // Sub-second waits are announced as one second, never zero.
    assert_eq!(retry_after(&refused), 1);
    let back: Resp = eventually("the limit to let ann in again", || async {
        let r = list(&gw, ANN).await;
        if r.status == 200 { Ok(r) } else { Err(r.raw) }
    })
    .await;
    assert!(back.result()["tools"].is_array(), "{}", back.raw);
    gw.stop().await;
}

#[tokio::test]
async fn a_bad_rate_is_refused_at_start_with_its_line() {
    let fx = Fixture::with_policy("");
    let config = format!(
        "{}\n[route.rate_limit]\nper_principal = \"20/d\"\n",
        fx.config("")
    );
    let path = fx.path("redmark.toml");
    std::fs::write(&path, config).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_redmark"))
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("20/d") && stderr.contains("redmark.toml:"),
        "{stderr}"
    );
}

/// A 2025-era session's own messages count against the principal's limit
/// like any request: `initialize`, `notifications/initialized` and `ping`
/// are not a way around it.
#[tokio::test]
async fn a_2025_era_sessions_own_messages_count_against_the_principal_limit() {
    let fx = Fixture::with_policy("");
    let gw = gateway(&fx, "per_principal = \"1/m\"\nburst = 3").await;
    let mut s = Session2025::new(&gw.url).with_key(ANN);
    let init = s.initialize("2025-11-25", json!({})).await;
    assert_eq!(init.status, 200, "{}", init.raw);
    let pong = s.request(json!(1), "ping", json!({})).await;
    assert_eq!(pong.result(), &json!({}));
    let refused = s.request(json!(2), "ping", json!({})).await;
    let err = assert_error(&refused, 429, -32603, "rate_limited");
    assert_eq!(err.error["data"]["limit"], "per_principal");
    assert!(retry_after(&refused) >= 1);
    // Another principal is unaffected.
    let mut bob = Session2025::new(&gw.url).with_key(BOB);
    assert_eq!(bob.initialize("2025-11-25", json!({})).await.status, 200);
    gw.stop().await;
}
