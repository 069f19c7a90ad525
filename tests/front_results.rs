//! Results relayed from server-everything (stdio) in 2026-07-28 shape, errors
//! relayed from it, credentials, cache scope, and the admin endpoints.
//! The request-level rules are in `front_rules.rs`.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod front_support;

use common::*;
use front_support::*;
use serde_json::{Value, json};

const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

async fn gateway() -> TestGateway {
    TestGateway::start(&everything_stdio_config("")).await
}

/// A successful answer to `method`: status, id, schema, `resultType`, serverInfo,
/// and caching hints exactly when the method is cacheable.
fn expect_result(r: &Resp, method: &str, id: &Value, cacheable: bool) {
    assert_eq!(r.status, 200, "{method}: {}", r.raw);
    assert!(
        r.content_type.starts_with("application/json"),
        "{method}: content type {:?}",
        r.content_type
    );
    let msg = r.last();
    assert_eq!(&msg["id"], id, "{method}: echoed id");
    assert_response_schema(method, msg);
    let result = r.result();
    assert_eq!(result["resultType"], "complete", "{method}: {result}");
    assert!(
        result["_meta"][SERVER_INFO]["name"].is_string(),
        "{method}: serverInfo in _meta: {result}"
    );
    if cacheable {
        assert!(
            result["ttlMs"].is_u64(),
            "{method}: ttlMs must be an integer >= 0: {result}"
        );
        assert!(
            matches!(result["cacheScope"].as_str(), Some("public" | "private")),
            "{method}: {result}"
        );
    } else {
        assert!(
            result.get("ttlMs").is_none(),
            "{method}: no ttlMs on a non-cacheable result: {result}"
        );
        assert!(
            result.get("cacheScope").is_none(),
            "{method}: no cacheScope on a non-cacheable result: {result}"
        );
    }
}

#[tokio::test]
async fn server_discover_result() {
    let gw = gateway().await;
    let r = call(&gw, json!("discover"), "server/discover", json!({})).await;
    expect_result(&r, "server/discover", &json!("discover"), true);
    assert_eq!(r.result()["supportedVersions"], json!(["2026-07-28"]));
    assert!(r.result()["capabilities"].get("tasks").is_none());
    gw.stop().await;
}

async fn check_list(method: &str, key: &str) {
    let gw = gateway().await;
    let r = call(&gw, json!(1), method, json!({})).await;
    expect_result(&r, method, &json!(1), true);
    assert!(
        !r.result()[key].as_array().expect(key).is_empty(),
        "{method}: {}",
        r.raw
    );
    gw.stop().await;
}

#[tokio::test]
async fn tools_list_result() {
    check_list("tools/list", "tools").await;
}

#[tokio::test]
async fn prompts_list_result() {
    check_list("prompts/list", "prompts").await;
}

#[tokio::test]
async fn resources_list_result() {
    check_list("resources/list", "resources").await;
}

#[tokio::test]
async fn resources_templates_list_result() {
    check_list("resources/templates/list", "resourceTemplates").await;
}

#[tokio::test]
async fn resources_read_result() {
    let gw = gateway().await;
    let list = call(&gw, json!(1), "resources/list", json!({})).await;
    let uri = list.result()["resources"][0]["uri"]
        .as_str()
        .expect("a listed resource")
        .to_owned();
    let r = call(&gw, json!("read"), "resources/read", json!({"uri": uri})).await;
    expect_result(&r, "resources/read", &json!("read"), true);
    assert_eq!(r.result()["contents"][0]["uri"], uri.as_str());
    gw.stop().await;
}

#[tokio::test]
async fn prompts_get_result() {
    let gw = gateway().await;
    let list = call(&gw, json!(1), "prompts/list", json!({})).await;
    let names: Vec<&str> = list.result()["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"simple-prompt"), "{names:?}");
    let r = call(
        &gw,
        json!(2),
        "prompts/get",
        json!({"name": "simple-prompt"}),
    )
    .await;
    expect_result(&r, "prompts/get", &json!(2), false);
    assert_eq!(
        r.result()["messages"][0]["content"]["text"],
        "This is a simple prompt without arguments."
    );
    gw.stop().await;
}

#[tokio::test]
async fn completion_complete_result() {
    let gw = gateway().await;
    let params = json!({"ref": {"type": "ref/prompt", "name": "completable-prompt"}, "argument": {"name": "department", "value": "Eng"}});
    let r = call(&gw, json!("complete"), "completion/complete", params).await;
    expect_result(&r, "completion/complete", &json!("complete"), false);
    assert_eq!(r.result()["completion"]["values"], json!(["Engineering"]));
    gw.stop().await;
}

#[tokio::test]
async fn tools_call_result() {
    let gw = gateway().await;
    let r = call(
        &gw,
        json!(3),
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "hi"}}),
    )
    .await;
    expect_result(&r, "tools/call", &json!(3), false);
    assert_eq!(r.result()["content"][0]["text"], "Echo: hi");
    gw.stop().await;
}

// --- Errors from the server behind ---

#[tokio::test]
async fn reading_a_missing_resource_is_invalid_params() {
    let gw = gateway().await;
    // server-everything (TypeScript SDK) answers -32602 itself; a server that
    // sends the legacy -32002 is translated (see the unit tests in shape.rs).
    let r = call(
        &gw,
        json!("missing"),
        "resources/read",
        json!({"uri": "demo://resource/static/document/no-such-file.md"}),
    )
    .await;
    assert_error(&r, 200, -32602, "upstream_error").json_reply_to(Some(json!("missing")));
    gw.stop().await;
}

#[tokio::test]
async fn an_unknown_prompt_is_relayed_as_an_error_with_a_reason() {
    let gw = gateway().await;
    let r = call(
        &gw,
        json!(4),
        "prompts/get",
        json!({"name": "no-such-prompt"}),
    )
    .await;
    assert_error(&r, 200, -32602, "upstream_error").json_reply_to(Some(json!(4)));
    gw.stop().await;
}

// spec 2026-07-28 server/tools.mdx "Error Handling": an unknown tool is a
// protocol error (-32602). server-everything (TypeScript SDK 1.32) answers it
// with an `isError` result, so redmark checks the name against the server's
// tool list before relaying the call.
#[tokio::test]
async fn an_unknown_tool_is_invalid_params() {
    let gw = gateway().await;
    let r = call(
        &gw,
        json!("no-tool"),
        "tools/call",
        json!({"name": "no-such-tool", "arguments": {}}),
    )
    .await;
    let err = assert_error(&r, 200, -32602, "unknown_tool").json_reply_to(Some(json!("no-tool")));
    assert_eq!(err.data()["tool"], "no-such-tool", "{}", r.raw);
    gw.stop().await;
}

// --- Credentials and cache scope ---

const KEY: &str = "front-results-key";

fn auth_config() -> String {
    everything_stdio_config(&api_key(KEY, "alice", &[]))
}

async fn with_key(gw: &TestGateway, method: &str, authorization: Option<&str>) -> Resp {
    let mut h = headers(method, None);
    if let Some(a) = authorization {
        h = set(h, "authorization", a);
    }
    post(gw, &h, body(json!(5), method, with_meta(json!({})))).await
}

fn expect_unauthorized(r: &Resp, reason: &str) {
    assert_error(r, 401, -32600, reason).json_reply_to(None);
    let challenge = r
        .headers
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(
        challenge.starts_with("Bearer"),
        "WWW-Authenticate: {challenge:?}"
    );
}

#[tokio::test]
async fn no_credentials_is_401_with_a_challenge() {
    let gw = TestGateway::start(&auth_config()).await;
    expect_unauthorized(&with_key(&gw, "tools/list", None).await, "unauthenticated");
    gw.stop().await;
}

#[tokio::test]
async fn a_wrong_key_is_401_invalid_credentials() {
    let gw = TestGateway::start(&auth_config()).await;
    expect_unauthorized(
        &with_key(&gw, "tools/list", Some("Bearer not-the-key")).await,
        "invalid_credentials",
    );
    gw.stop().await;
}

#[tokio::test]
async fn the_right_key_is_served_and_cache_scope_is_private() {
    let gw = TestGateway::start(&auth_config()).await;
    let key = format!("Bearer {KEY}");
    for method in ["server/discover", "tools/list"] {
        let r = with_key(&gw, method, Some(&key)).await;
        expect_result(&r, method, &json!(5), true);
        assert_eq!(r.result()["cacheScope"], "private", "{method}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn cache_scope_is_public_without_auth() {
    let gw = gateway().await;
    for method in ["server/discover", "tools/list"] {
        let r = call(&gw, json!(6), method, json!({})).await;
        expect_result(&r, method, &json!(6), true);
        assert_eq!(r.result()["cacheScope"], "public", "{method}");
    }
    gw.stop().await;
}

// --- Admin listener ---

#[tokio::test]
async fn metrics_count_requests_and_health_endpoints_answer() {
    let gw = gateway().await;
    for id in 0..2 {
        let r = call(&gw, json!(id), "tools/list", json!({})).await;
        assert_eq!(r.status, 200, "{}", r.raw);
    }
    let sample = requests("tools/list", "ok");
    let n = gw
        .metric(&sample)
        .await
        .unwrap_or_else(|| panic!("no {sample} in /metrics"));
    assert!(n >= 2.0, "{sample} = {n}");
    for path in ["/healthz", "/readyz"] {
        let resp = gw
            .http
            .get(format!("{}{path}", gw.admin))
            .send()
            .await
            .expect(path);
        assert_eq!(resp.status().as_u16(), 200, "{path}");
    }
    gw.stop().await;
}

/// Issue 42: a `resources/read` URI is the `tool` label of the operation
/// metrics. Long distinct URIs once grew every scrape by their whole length
/// (16 of 300 KiB: 49 MB); now each label is at most 128 bytes (cut, with a
/// stable hash) and the scrape stays small.
#[tokio::test]
async fn long_resource_uris_do_not_grow_the_scrape() {
    let gw = gateway().await;
    let before = gw.metrics().await.len();
    let filler = "a".repeat(32 * 1024);
    for i in 0..16 {
        let uri = format!("demo://resource/static/document/{i}-{filler}.md");
        let r = call(&gw, json!(i), "resources/read", json!({"uri": uri})).await;
        assert_eq!(r.status, 200, "{}", &r.raw[..r.raw.len().min(300)]);
    }
    let text = gw.metrics().await;
    // 16 URIs of 32 KiB, unshaped, are 512 KiB in each series that names them.
    assert!(
        text.len() < before + 64 * 1024,
        "the scrape grew from {before} to {} bytes",
        text.len()
    );
    let shaped: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("redmark_operations_total{") && l.contains("~"))
        .collect();
    assert_eq!(
        shaped.len(),
        16,
        "one series per URI, each cut with its hash"
    );
    for line in shaped {
        let value = line
            .split("tool=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(value.len(), 128, "{line}");
        assert!(
            value.starts_with("demo://resource/static/document/"),
            "{line}"
        );
    }
    gw.stop().await;
}
