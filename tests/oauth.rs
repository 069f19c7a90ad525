//! redmark as an OAuth 2.1 resource server, against real parts: npm
//! `oidc-provider` issues client-credentials JWT access tokens with resource
//! indicators; the PyPI `mcp` 2.3.0 client calls tools with them; a PyPI
//! `mcp` 1.30 server behind redmark logs every header it receives.
//!
//! One test per refusal (no token, expired, wrong audience, wrong issuer,
//! bad signature, `alg: none`, missing scope, rotated key), each with its
//! exact status, `data.reason` and `WWW-Authenticate` challenge.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod oauth_support;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use common::*;
use oauth_support::*;
use serde_json::{Value, json};

/// A gateway trusting a fresh IdP; its upstream is never reached by refusals.
async fn setup() -> (Idp, TestGateway, Fixture) {
    let idp = Idp::start().await;
    let fixture = Fixture::new();
    let policy = fixture.policy(POLICY);
    let gw = TestGateway::start(&config(&idp.issuer, "http://127.0.0.1:9/mcp", &policy, "")).await;
    (idp, gw, fixture)
}

/// `tools/call` of `name` with `token` (or none).
async fn call(gw: &TestGateway, token: Option<&str>, name: &str, arguments: Value) -> Resp {
    let mut rb = gw.request(
        "tools/call",
        json!({"name": name, "arguments": arguments, "_meta": meta(json!({}))}),
    );
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    read_resp(gw.send(rb).await).await
}

/// A 401 with the token refused for `reason`, and its challenge.
fn assert_unauthorized(resp: &Resp, reason: &str) -> String {
    assert_error(resp, 401, -32600, reason);
    let c = challenge(resp);
    assert!(c.starts_with("Bearer "), "{c}");
    assert_eq!(param(&c, "error").as_deref(), Some("invalid_token"), "{c}");
    assert_eq!(param(&c, "scope").as_deref(), Some("mcp"), "{c}");
    let metadata = param(&c, "resource_metadata").expect("resource_metadata");
    assert!(
        metadata.ends_with("/.well-known/oauth-protected-resource/mcp"),
        "{c}"
    );
    c
}

fn resource(gw: &TestGateway) -> String {
    gw.url.clone()
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn a_client_discovers_the_idp_through_redmark_and_calls_a_tool_with_no_token_passthrough() {
    let idp = Idp::start().await;
    let fixture = Fixture::new();
    let (_up, upstream_url) = upstream(&fixture).await;
    let policy = fixture.policy(POLICY);
    let gw = TestGateway::start(&config(
        &idp.issuer,
        &upstream_url,
        &policy,
        r#"headers = { "X-Upstream-Credential" = "route-own-secret" }"#,
    ))
    .await;

    // 1. No token: a 401 whose challenge names the metadata and the scope.
    let first = call(&gw, None, "whoami", json!({})).await;
    assert_error(&first, 401, -32600, "unauthenticated");
    let c = challenge(&first);
    assert_eq!(param(&c, "error"), None, "no token was presented: {c}");
    assert_eq!(param(&c, "scope").as_deref(), Some("mcp"));
    let metadata_url = param(&c, "resource_metadata").unwrap();
    assert_eq!(
        metadata_url,
        gw.url
            .replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    );

    // 2. The Protected Resource Metadata (RFC 9728), by path and at the root.
    let prm: Value = gw
        .http
        .get(&metadata_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(prm["resource"], gw.url.as_str());
    assert_eq!(prm["authorization_servers"], json!([idp.issuer]));
    assert_eq!(prm["scopes_supported"], json!(["mcp"]));
    assert_eq!(prm["bearer_methods_supported"], json!(["header"]));
    let root: Value = gw
        .http
        .get(
            gw.url
                .replace("/mcp", "/.well-known/oauth-protected-resource"),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(root, prm, "one route: the root form is its document");

    // 3. A token for the advertised resource, from the advertised issuer.
    assert_eq!(prm["authorization_servers"][0], idp.issuer.as_str());
    let token = idp
        .token(
            "agent",
            &param(&c, "scope").unwrap(),
            prm["resource"].as_str().unwrap(),
        )
        .await;

    // 4. The PyPI `mcp` 2.3.0 client calls a tool with it.
    let out = py_client(
        &gw.url,
        &json!({
            "headers": {"Authorization": format!("Bearer {token}")},
            "steps": [{"op": "call_tool", "name": "whoami", "arguments": {}}],
        }),
    )
    .await;
    let last = out.last().unwrap();
    assert_eq!(last["ok"], true, "{out:?}");
    assert_eq!(last["result"]["content"][0]["text"], "ok", "{out:?}");

    // 5. The server behind redmark saw the route's own credential, never the client's token.
    let seen = fixture
        .log
        .eventually("the upstream to log a request", |e| e["event"] == "headers")
        .await;
    assert_eq!(seen["headers"]["x-upstream-credential"], "route-own-secret");
    let all = fixture.log.events();
    assert!(!all.is_empty());
    for e in &all {
        let h = &e["headers"];
        assert!(
            h.get("authorization").is_none(),
            "the client's Authorization reached the server: {e}"
        );
        assert!(
            !e.to_string().contains(&token),
            "the token reached the server: {e}"
        );
    }
}

#[tokio::test]
async fn the_upstream_credential_comes_from_the_routes_environment_variable() {
    let idp = Idp::start().await;
    let fixture = Fixture::new();
    let (_up, upstream_url) = upstream(&fixture).await;
    let var = "REDMARK_OAUTH_TEST_UPSTREAM_TOKEN";
    let text = config(
        &idp.issuer,
        &upstream_url,
        "",
        &format!(r#"bearer_token_env = "{var}""#),
    );
    // The variable missing: the gateway does not start (nothing is sent without it).
    let parsed = redmark::config::Config::parse(&text, "t.toml", repo()).unwrap();
    let err = redmark::start(parsed)
        .await
        .err()
        .expect("refused to start");
    assert!(err.to_string().contains(var), "{err}");
    // The binary, with the variable set.
    let path = fixture.path("redmark.toml");
    std::fs::write(&path, &text).unwrap();
    let rm = RedmarkProcess::start(&path, false, &[(var, "route-own-token".into())]).await;
    let url = rm.url("/mcp");
    let token = idp.token("agent", "mcp", &url).await;
    let client = McpClient::new(url);
    let rb = client
        .request(
            "tools/call",
            json!({"name": "whoami", "arguments": {}, "_meta": meta(json!({}))}),
        )
        .bearer_auth(&token);
    let resp = read_resp(client.send(rb).await).await;
    assert_eq!(resp.result()["content"][0]["text"], "ok", "{}", resp.raw);
    let events = fixture.log.events();
    assert!(!events.is_empty());
    for e in &events {
        assert_eq!(
            e["headers"]["authorization"], "Bearer route-own-token",
            "{e}"
        );
    }
    rm.stop().await;
}

#[tokio::test]
async fn no_token_is_401_with_the_challenge() {
    let (idp, gw, _f) = setup().await;
    let resp = call(&gw, None, "whoami", json!({})).await;
    assert_error(&resp, 401, -32600, "unauthenticated");
    let c = challenge(&resp);
    assert_eq!(param(&c, "error"), None);
    assert_eq!(param(&c, "scope").as_deref(), Some("mcp"));
    assert!(param(&c, "resource_metadata").is_some());
    // Refused before its body was read, so the connection ends with the
    // response, and the response says so: a client must not send its next
    // request (the metadata fetch) on it.
    assert_eq!(
        resp.headers.get("connection").and_then(|v| v.to_str().ok()),
        Some("close"),
        "{:?}",
        resp.headers
    );
    // A request whose body was read keeps its connection, whatever the
    // answer (this setup's upstream is down: a 502 upstream_unavailable).
    let token = idp.token("agent", "mcp", &resource(&gw)).await;
    let served = call(&gw, Some(&token), "whoami", json!({})).await;
    assert_eq!(served.status, 502, "{}", served.raw);
    assert!(
        served.headers.get("connection").is_none(),
        "{:?}",
        served.headers
    );
}

#[tokio::test]
async fn an_expired_token_is_token_expired() {
    let (idp, gw, _f) = setup().await;
    let token = idp
        .mint(
            json!({"iss": idp.issuer, "sub": "agent", "aud": resource(&gw), "scope": "mcp",
                     "iat": now() - 3600, "exp": now() - 600}),
        )
        .await;
    let resp = call(&gw, Some(&token), "whoami", json!({})).await;
    assert_unauthorized(&resp, "token_expired");
}

#[tokio::test]
async fn a_token_for_another_resource_is_wrong_audience() {
    let (idp, gw, _f) = setup().await;
    // A real token, issued for another MCP server (RFC 8707 resource indicator).
    let token = idp.token("agent", "mcp", "https://other.example/mcp").await;
    let resp = call(&gw, Some(&token), "whoami", json!({})).await;
    assert_unauthorized(&resp, "wrong_audience");
}

#[tokio::test]
async fn a_token_of_another_issuer_is_invalid() {
    let (idp, gw, _f) = setup().await;
    let token = idp
        .mint(
            json!({"iss": "https://evil.example", "sub": "agent", "aud": resource(&gw),
                     "scope": "mcp", "iat": now(), "exp": now() + 300}),
        )
        .await;
    let resp = call(&gw, Some(&token), "whoami", json!({})).await;
    assert_unauthorized(&resp, "invalid_token");
    assert!(resp.error()["message"].as_str().unwrap().contains("issuer"));
}

#[tokio::test]
async fn a_bad_signature_is_invalid() {
    let (idp, gw, _f) = setup().await;
    let token = idp.token("agent", "mcp", &resource(&gw)).await;
    // The same header and signature over a payload that says someone else.
    let parts: Vec<&str> = token.split('.').collect();
    let mut payload: Value = serde_json::from_slice(&B64.decode(parts[1]).unwrap()).unwrap();
    payload["sub"] = json!("mallory");
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        B64.encode(payload.to_string()),
        parts[2]
    );
    let resp = call(&gw, Some(&forged), "whoami", json!({})).await;
    assert_unauthorized(&resp, "invalid_token");
    assert!(
        resp.error()["message"]
            .as_str()
            .unwrap()
            .contains("signature")
    );
}

#[tokio::test]
async fn alg_none_is_invalid() {
    let (idp, gw, _f) = setup().await;
    let token = idp.token("agent", "mcp", &resource(&gw)).await;
    let payload = token.split('.').nth(1).unwrap();
    let none = format!(
        "{}.{payload}.",
        B64.encode(br#"{"alg":"none","typ":"at+jwt"}"#)
    );
    let resp = call(&gw, Some(&none), "whoami", json!({})).await;
    assert_unauthorized(&resp, "invalid_token");
    assert!(resp.error()["message"].as_str().unwrap().contains("`none`"));
}

#[tokio::test]
async fn a_token_without_the_routes_scope_is_403_insufficient_scope() {
    let (idp, gw, _f) = setup().await;
    let token = idp.token("agent", "rooms:book", &resource(&gw)).await;
    let resp = call(&gw, Some(&token), "whoami", json!({})).await;
    assert_error(&resp, 403, -32600, "insufficient_scope");
    let c = challenge(&resp);
    assert_eq!(param(&c, "error").as_deref(), Some("insufficient_scope"));
    assert_eq!(param(&c, "scope").as_deref(), Some("mcp"));
    assert!(param(&c, "resource_metadata").is_some());
}

#[tokio::test]
async fn a_token_without_the_tools_scope_is_403_naming_every_scope_needed() {
    let (idp, gw, fixture) = setup().await;
    let token = idp.token("intern", "mcp", &resource(&gw)).await;
    let resp = call(&gw, Some(&token), "transfer", json!({"amount": 5})).await;
    let refusal = assert_error(&resp, 403, -32600, "insufficient_scope");
    let _ = refusal;
    assert_eq!(resp.error()["data"]["tool"], "transfer");
    assert_eq!(
        resp.error()["data"]["scopes"],
        json!(["mcp", "payments:write"])
    );
    let c = challenge(&resp);
    assert_eq!(param(&c, "error").as_deref(), Some("insufficient_scope"));
    assert_eq!(param(&c, "scope").as_deref(), Some("mcp payments:write"));
    assert!(param(&c, "resource_metadata").is_some());
    // Refused before any upstream session (the upstream here does not exist).
    assert!(fixture.log.events().is_empty());
}

#[tokio::test]
async fn a_rotated_key_is_picked_up_without_a_restart() {
    let idp = Idp::start().await;
    let fixture = Fixture::new();
    let (_up, upstream_url) = upstream(&fixture).await;
    let gw = TestGateway::start(&config(&idp.issuer, &upstream_url, "", "")).await;
    let before = idp.token("agent", "mcp", &resource(&gw)).await;
    assert_eq!(
        call(&gw, Some(&before), "whoami", json!({})).await.result()["content"][0]["text"],
        "ok"
    );
    let kid = idp.rotate().await;
    let after = idp.token("agent", "mcp", &resource(&gw)).await;
    let header: Value =
        serde_json::from_slice(&B64.decode(after.split('.').next().unwrap()).unwrap()).unwrap();
    assert_eq!(
        header["kid"],
        kid.as_str(),
        "the IdP signs with its new key"
    );
    let resp = call(&gw, Some(&after), "whoami", json!({})).await;
    assert_eq!(resp.result()["content"][0]["text"], "ok", "{}", resp.raw);
    // The old key is still published: its tokens still work.
    assert_eq!(
        call(&gw, Some(&before), "whoami", json!({})).await.result()["content"][0]["text"],
        "ok"
    );
}

/// Issue 42: the IdP rotates to a set with one member redmark cannot read
/// (a numeric `kid`) and drops the old key. The refresh keeps the members
/// it can read (RFC 7517 §5): the new key is trusted, and the removed one
/// is not any more.
#[tokio::test]
async fn a_jwks_with_one_bad_member_keeps_the_others_and_forgets_the_removed_key() {
    let idp = Idp::start().await;
    let fixture = Fixture::new();
    let (_up, upstream_url) = upstream(&fixture).await;
    let gw = TestGateway::start(&config(&idp.issuer, &upstream_url, "", "")).await;
    let before = idp.token("agent", "mcp", &resource(&gw)).await;
    assert_eq!(
        call(&gw, Some(&before), "whoami", json!({})).await.result()["content"][0]["text"],
        "ok"
    );
    idp.rotate_with(json!({"drop_old": true, "bad_member": true}))
        .await;
    let after = idp.token("agent", "mcp", &resource(&gw)).await;
    let resp = call(&gw, Some(&after), "whoami", json!({})).await;
    assert_eq!(
        resp.result()["content"][0]["text"],
        "ok",
        "the new key is trusted despite the bad member: {}",
        resp.raw
    );
    let old = call(&gw, Some(&before), "whoami", json!({})).await;
    assert_unauthorized(&old, "invalid_token");
}

#[tokio::test]
async fn api_keys_keep_working_beside_oauth() {
    let (_idp, gw, _f) = setup().await;
    // An API key (not JWT-shaped) is looked up as a key: a wrong one is `invalid_credentials`.
    let resp = call(&gw, Some("not-a-key"), "whoami", json!({})).await;
    assert_error(&resp, 401, -32600, "invalid_credentials");
    // The right key gets past authentication; `transfer` needs a scope no API key here has.
    let resp = call(&gw, Some(API_KEY), "transfer", json!({"amount": 1})).await;
    assert_error(&resp, 403, -32600, "insufficient_scope");
}

#[tokio::test]
async fn the_mcp_client_authorizes_itself_from_redmarks_challenge_and_metadata() {
    let idp = Idp::start().await;
    let fixture = Fixture::new();
    let (_up, upstream_url) = upstream(&fixture).await;
    let gw = TestGateway::start(&config(&idp.issuer, &upstream_url, "", "")).await;
    let out = tokio::process::Command::new(client_python())
        .arg(repo().join("tests/oauth_support/cc_client.py"))
        .args([
            gw.url.as_str(),
            &idp.issuer,
            "agent",
            "agent-secret",
            "mcp",
            "whoami",
        ])
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line: Value = serde_json::from_str(stdout.lines().last().unwrap_or("{}"))
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        line["ok"],
        true,
        "{line}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(line["result"]["content"][0]["text"], "ok", "{line}");
    let requests: Vec<&str> = line["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let seen = requests.join("\n");
    // The spec's flow, through redmark's own documents.
    assert!(seen.contains("/mcp -> 401"), "{seen}");
    assert!(
        seen.contains("/.well-known/oauth-protected-resource/mcp -> 200"),
        "{seen}"
    );
    assert!(seen.contains("/token -> 200"), "{seen}");
    assert!(requests.last().unwrap().ends_with("/mcp -> 200"), "{seen}");
}

#[tokio::test]
async fn unknown_kids_refetch_the_jwks_at_most_once_per_interval() {
    let idp = Idp::start().await;
    let text = config(&idp.issuer, "http://127.0.0.1:9/mcp", "", "")
        .replace(r#"jwks_min_refresh = "0s""#, r#"jwks_min_refresh = "1h""#);
    let gw = TestGateway::start(&text).await;
    let good = idp.token("agent", "mcp", &resource(&gw)).await;
    // Past authentication (the upstream does not exist): the start's fetch served it.
    let resp = call(&gw, Some(&good), "whoami", json!({})).await;
    assert_ne!(resp.status, 401, "{}", resp.raw);
    assert_eq!(idp.jwks_fetches().await, 1);
    // A flood of tokens naming keys the issuer never published.
    let payload = good.split('.').nth(1).unwrap().to_owned();
    for i in 0..5 {
        let header = B64.encode(format!(r#"{{"alg":"RS256","kid":"made-up-{i}"}}"#));
        let forged = format!("{header}.{payload}.c2ln");
        assert_unauthorized(
            &call(&gw, Some(&forged), "whoami", json!({})).await,
            "invalid_token",
        );
    }
    // A real rotation within the interval is not seen yet either: the limit holds.
    idp.rotate().await;
    let rotated = idp.token("agent", "mcp", &resource(&gw)).await;
    assert_unauthorized(
        &call(&gw, Some(&rotated), "whoami", json!({})).await,
        "invalid_token",
    );
    assert_eq!(
        idp.jwks_fetches().await,
        1,
        "unknown kids did not refetch within jwks_min_refresh"
    );
}

#[tokio::test]
async fn request_state_minted_for_a_token_is_refused_for_an_api_key_of_the_same_name() {
    let idp = Idp::start().await;
    let fixture = Fixture::new();
    let (_up, upstream_url) = upstream(&fixture).await;
    // The API key's principal has the display name of the token's subject (`agent`).
    let text = config(&idp.issuer, &upstream_url, "", "")
        .replace(r#"principal = "ci-bot""#, r#"principal = "agent""#);
    let gw = TestGateway::start(&text).await;
    let token = idp.token("agent", "mcp", &resource(&gw)).await;
    let params = |extra: Value| {
        let mut p =
            json!({"name": "ask", "arguments": {}, "_meta": meta(json!({"elicitation": {}}))});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let send = |who: String, p: Value| {
        let rb = gw.request("tools/call", p).bearer_auth(who);
        async { read_resp(gw.send(rb).await).await }
    };
    let first = send(token.clone(), params(json!({}))).await;
    let result = first.result();
    assert_eq!(result["resultType"], "input_required", "{}", first.raw);
    let state = result["requestState"].as_str().unwrap().to_owned();
    let key = result["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let answer = json!({
        "requestState": state,
        "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}},
    });
    // The same display name, another principal: (issuer, subject) is not (none, "agent").
    let stolen = send(API_KEY.to_owned(), params(answer.clone())).await;
    assert_error(&stolen, 200, -32602, "state_wrong_principal");
    // The token's owner retries and completes.
    let done = send(token, params(answer)).await;
    assert_eq!(
        done.result()["content"][0]["text"],
        "hello Ada",
        "{}",
        done.raw
    );
}
