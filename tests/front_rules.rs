//! The rules spec 2026-07-28 puts on a server's HTTP endpoint, one test each,
//! against server-everything over stdio: mirrored headers, `_meta`, removed
//! methods, framing, media types, size, Origin, HTTP methods, notifications.
//! Results, upstream errors, auth and metrics are in `front_results.rs`.

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

async fn gateway() -> TestGateway {
    TestGateway::start(&everything_stdio_config("")).await
}

// --- Mirrored headers (streamable-http.mdx "Request Metadata", "Server Validation") ---

#[tokio::test]
async fn protocol_version_header_missing_is_header_mismatch() {
    let gw = gateway().await;
    let h = without(list_headers(), "mcp-protocol-version");
    let r = post(&gw, &h, list_body(json!(11))).await;
    assert_error(&r, 400, -32020, "header_missing").json_reply_to(Some(json!(11)));
    gw.stop().await;
}

/// A legacy client's first request, exactly as it sends it (no 2026 headers,
/// no `_meta`): a 400 whose message names the one version and how to pin
/// the common clients, with `data.supported` (spec versioning.mdx
/// "Compatibility Matrix", legacy client against a modern server).
#[tokio::test]
async fn a_legacy_initialize_opens_a_2025_era_session() {
    let gw = gateway().await;
    let h: Headers = vec![
        ("content-type", "application/json".to_owned()),
        ("accept", "application/json, text/event-stream".to_owned()),
    ];
    let params = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "legacy", "version": "1"}});
    let r = post(&gw, &h, body(json!(0), "initialize", params)).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.result()["protocolVersion"], "2025-06-18");
    assert!(r.headers.contains_key("mcp-session-id"), "{:?}", r.headers);
    // A request that is neither era's (no session, no 2026 headers) is told both ways in.
    let r = post(&gw, &h, body(json!(1), "tools/list", json!({}))).await;
    let refusal = assert_error(&r, 400, -32020, "header_missing");
    refusal.json_reply_to(Some(json!(1)));
    let error = r.error();
    assert_eq!(error["data"]["supported"], json!(["2026-07-28"]));
    let message = error["message"].as_str().unwrap();
    for needle in [
        "2026-07-28 statelessly",
        "`initialize`",
        "mode=\"2026-07-28\"",
        "--protocol-era modern",
    ] {
        assert!(
            message.contains(needle),
            "{needle:?} missing from {message}"
        );
    }
    gw.stop().await;
}

#[tokio::test]
async fn protocol_version_header_must_match_meta() {
    let gw = gateway().await;
    let mut params = with_meta(json!({}));
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let id = json!("pv-mismatch");
    let r = post(&gw, &list_headers(), body(id.clone(), "tools/list", params)).await;
    assert_error(&r, 400, -32020, "header_mismatch").json_reply_to(Some(id));
    gw.stop().await;
}

#[tokio::test]
async fn mcp_method_header_missing_is_header_mismatch() {
    let gw = gateway().await;
    let r = post(
        &gw,
        &without(list_headers(), "mcp-method"),
        list_body(json!(12)),
    )
    .await;
    assert_error(&r, 400, -32020, "header_missing").json_reply_to(Some(json!(12)));
    gw.stop().await;
}

#[tokio::test]
async fn mcp_method_header_must_match_body() {
    let gw = gateway().await;
    // Header values are case-sensitive (streamable-http.mdx "Case Sensitivity").
    for wrong in ["tools/call", "TOOLS/LIST", "tools/list/"] {
        let id = json!(format!("method-{wrong}"));
        let h = set(list_headers(), "mcp-method", wrong);
        let r = post(&gw, &h, list_body(id.clone())).await;
        assert_error(&r, 400, -32020, "header_mismatch").json_reply_to(Some(id));
    }
    gw.stop().await;
}

const DOC: &str = "demo://resource/static/document/features.md";

/// The methods whose `Mcp-Name` mirrors the body: (method, params, name).
fn named_calls() -> [(&'static str, Value, &'static str); 3] {
    let echo = json!({"name": "echo", "arguments": {"message": "hi"}});
    [
        ("tools/call", echo, "echo"),
        ("resources/read", json!({ "uri": DOC }), DOC),
        (
            "prompts/get",
            json!({"name": "simple-prompt"}),
            "simple-prompt",
        ),
    ]
}

#[tokio::test]
async fn mcp_name_header_missing_is_header_mismatch() {
    let gw = gateway().await;
    for (i, (method, params, _)) in named_calls().into_iter().enumerate() {
        let id = json!(20 + i);
        let r = post(
            &gw,
            &headers(method, None),
            body(id.clone(), method, with_meta(params)),
        )
        .await;
        assert_error(&r, 400, -32020, "header_missing").json_reply_to(Some(id));
    }
    gw.stop().await;
}

#[tokio::test]
async fn mcp_name_header_must_match_body() {
    let gw = gateway().await;
    for (method, params, name) in named_calls() {
        let id = json!(format!("name-{method}"));
        for wrong in [format!("{name}x"), name.to_uppercase()] {
            let h = headers(method, Some(&wrong));
            let r = post(&gw, &h, body(id.clone(), method, with_meta(params.clone()))).await;
            assert_error(&r, 400, -32020, "header_mismatch").json_reply_to(Some(id.clone()));
        }
    }
    gw.stop().await;
}

fn sentinel(value: &str) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(value);
    format!("=?base64?{encoded}?=")
}

#[tokio::test]
async fn mcp_name_base64_sentinel_is_decoded_before_comparing() {
    let gw = gateway().await;
    for (i, (method, params, name)) in named_calls().into_iter().enumerate() {
        let id = json!(30 + i);
        let h = headers(method, Some(&sentinel(name)));
        let r = post(&gw, &h, body(id.clone(), method, with_meta(params))).await;
        assert_eq!(r.status, 200, "{method}, encoded Mcp-Name: {}", r.raw);
        assert_response_schema(method, r.last());
        assert_eq!(r.last()["id"], id);
    }
    let echo = |id: i64| {
        body(
            json!(id),
            "tools/call",
            with_meta(named_calls()[0].1.clone()),
        )
    };
    // The encoding of another value is still a mismatch.
    let r = post(
        &gw,
        &headers("tools/call", Some(&sentinel("get-sum"))),
        echo(40),
    )
    .await;
    assert_error(&r, 400, -32020, "header_mismatch").json_reply_to(Some(json!(40)));
    // Invalid base64 inside the sentinel is malformed.
    let r = post(
        &gw,
        &headers("tools/call", Some("=?base64?***?=")),
        echo(41),
    )
    .await;
    assert_error(&r, 400, -32020, "header_invalid").json_reply_to(Some(json!(41)));
    // The markers are case-sensitive: `=?BASE64?...?=` is a literal value.
    let upper = sentinel("echo").replace("base64", "BASE64");
    let r = post(&gw, &headers("tools/call", Some(&upper)), echo(42)).await;
    assert_error(&r, 400, -32020, "header_mismatch").json_reply_to(Some(json!(42)));
    gw.stop().await;
}

// --- Versions and `_meta` (basic/index.mdx "_meta", versioning.mdx) ---

#[tokio::test]
async fn unsupported_protocol_version_lists_supported_versions() {
    let gw = gateway().await;
    let mut params = with_meta(json!({}));
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let h = set(list_headers(), "mcp-protocol-version", "2099-01-01");
    let r = post(&gw, &h, body(json!("future"), "tools/list", params)).await;
    assert_error(&r, 400, -32022, "unsupported_protocol_version")
        .json_reply_to(Some(json!("future")));
    assert_eq!(r.error()["data"]["supported"], json!(["2026-07-28"]));
    assert_eq!(r.error()["data"]["requested"], "2099-01-01");
    gw.stop().await;
}

#[tokio::test]
async fn missing_required_meta_fields_are_invalid_params() {
    let gw = gateway().await;
    let full = with_meta(json!({}));
    let cases = [
        json!({}),
        drop_meta(full.clone(), "protocolVersion"),
        drop_meta(full, "clientCapabilities"),
    ];
    for (i, params) in cases.into_iter().enumerate() {
        let id = json!(50 + i);
        let r = post(&gw, &list_headers(), body(id.clone(), "tools/list", params)).await;
        assert_error(&r, 400, -32602, "missing_meta").json_reply_to(Some(id));
    }
    // `params` itself is required on every request.
    let no_params = json!({"jsonrpc": "2.0", "id": "bare", "method": "tools/list"});
    let r = post(&gw, &list_headers(), no_params.to_string()).await;
    assert_error(&r, 400, -32602, "missing_meta").json_reply_to(Some(json!("bare")));
    gw.stop().await;
}

#[tokio::test]
async fn missing_client_info_is_still_served() {
    let gw = gateway().await;
    let params = drop_meta(with_meta(json!({})), "clientInfo");
    let r = post(
        &gw,
        &list_headers(),
        body(json!("no-info"), "tools/list", params),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.last()["id"], "no-info");
    assert_response_schema("tools/list", r.last());
    gw.stop().await;
}

#[tokio::test]
async fn removed_and_unknown_methods_are_not_found() {
    let gw = gateway().await;
    let info = json!({"name": "c", "version": "1"});
    let cases = [
        (
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info}),
        ),
        ("ping", json!({})),
        ("logging/setLevel", json!({"level": "info"})),
        ("resources/subscribe", json!({ "uri": DOC })),
        ("resources/unsubscribe", json!({ "uri": DOC })),
        ("tools/frobnicate", json!({})),
    ];
    for (i, (method, params)) in cases.into_iter().enumerate() {
        let id = if i % 2 == 0 {
            json!(60 + i)
        } else {
            json!(format!("gone-{i}"))
        };
        let reason = if method == "tools/frobnicate" {
            "method_not_found"
        } else {
            "method_removed"
        };
        let r = post(
            &gw,
            &headers(method, None),
            body(id.clone(), method, with_meta(params)),
        )
        .await;
        assert_error(&r, 404, -32601, reason).json_reply_to(Some(id));
    }
    gw.stop().await;
}

// --- Framing (basic/index.mdx, streamable-http.mdx "Sending Messages") ---

#[tokio::test]
async fn malformed_json_is_a_parse_error_without_id() {
    let gw = gateway().await;
    let truncated = r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list""#;
    let r = post(&gw, &list_headers(), truncated).await;
    assert_error(&r, 400, -32700, "parse_error").json_reply_to(None);
    gw.stop().await;
}

#[tokio::test]
async fn a_batch_array_is_an_invalid_request() {
    let gw = gateway().await;
    let r = post(&gw, &list_headers(), format!("[{}]", list_body(json!(1)))).await;
    assert_error(&r, 400, -32600, "not_a_single_message").json_reply_to(None);
    gw.stop().await;
}

#[tokio::test]
async fn a_response_object_is_an_invalid_request() {
    let gw = gateway().await;
    let response = json!({"jsonrpc": "2.0", "id": "resp-1", "result": {}});
    let r = post(&gw, &list_headers(), response.to_string()).await;
    assert_error(&r, 400, -32600, "response_not_allowed").json_reply_to(Some(json!("resp-1")));
    gw.stop().await;
}

#[tokio::test]
async fn a_null_id_is_an_invalid_request() {
    let gw = gateway().await;
    let r = post(&gw, &list_headers(), list_body(Value::Null)).await;
    assert_error(&r, 400, -32600, "invalid_request").json_reply_to(None);
    gw.stop().await;
}

#[tokio::test]
async fn a_notification_is_accepted_with_202_and_no_body() {
    let gw = gateway().await;
    let method = "notifications/cancelled";
    let note = json!({"jsonrpc": "2.0", "method": method, "params": {"requestId": 1}});
    let r = post(&gw, &headers(method, None), note.to_string()).await;
    assert_eq!(r.status, 202, "{}", r.raw);
    assert!(r.raw.is_empty(), "202 must have no body: {:?}", r.raw);
    gw.stop().await;
}

// --- Media types and size ---

#[tokio::test]
async fn wrong_content_type_is_415() {
    let gw = gateway().await;
    let r = post(
        &gw,
        &set(list_headers(), "content-type", "text/plain"),
        list_body(json!(70)),
    )
    .await;
    assert_error(&r, 415, -32600, "unsupported_media_type").json_reply_to(None);
    let r = post(
        &gw,
        &without(list_headers(), "content-type"),
        list_body(json!(71)),
    )
    .await;
    assert_error(&r, 415, -32600, "unsupported_media_type").json_reply_to(None);
    gw.stop().await;
}

#[tokio::test]
async fn accept_without_event_stream_is_406() {
    let gw = gateway().await;
    // (Without an Accept header reqwest sends `*/*`, which lists both.)
    for accept in [
        "application/json",
        "application/json, text/html",
        "text/event-stream",
    ] {
        let r = post(
            &gw,
            &set(list_headers(), "accept", accept),
            list_body(json!(72)),
        )
        .await;
        assert_error(&r, 406, -32600, "not_acceptable").json_reply_to(None);
    }
    gw.stop().await;
}

/// A valid `tools/list` body of about `len` bytes (padding in `_meta`).
fn padded_body(id: Value, len: usize) -> String {
    let mut params = with_meta(json!({}));
    params["_meta"]["pad"] = json!("");
    let base = body(id.clone(), "tools/list", params.clone()).len();
    params["_meta"]["pad"] = json!("x".repeat(len.saturating_sub(base)));
    body(id, "tools/list", params)
}

#[tokio::test]
async fn a_body_over_max_body_bytes_is_413() {
    let gw = TestGateway::start(&everything_stdio_config("max_body_bytes = 1024")).await;
    // Under the limit: served.
    let small = padded_body(json!(80), 1000);
    assert!(small.len() <= 1024);
    let r = post(&gw, &list_headers(), small).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    // Over the limit, with a correct Content-Length.
    let big = padded_body(json!(81), 4096);
    let r = post(&gw, &list_headers(), big.clone()).await;
    assert_error(&r, 413, -32600, "body_too_large").json_reply_to(None);
    // Over the limit, chunked: no Content-Length to go by.
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = big
        .as_bytes()
        .chunks(500)
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    let stream = reqwest::Body::wrap_stream(futures::stream::iter(chunks));
    let r = post(&gw, &list_headers(), stream).await;
    assert_error(&r, 413, -32600, "body_too_large").json_reply_to(None);
    gw.stop().await;
}

// --- Origin (streamable-http.mdx "Security & Endpoint") ---

#[tokio::test]
async fn a_foreign_origin_is_403() {
    let gw = gateway().await;
    let h = set(list_headers(), "origin", "http://evil.example");
    let r = post(&gw, &h, list_body(json!(90))).await;
    assert_error(&r, 403, -32600, "origin_not_allowed").json_reply_to(None);
    gw.stop().await;
}

#[tokio::test]
async fn a_loopback_origin_is_served_by_default() {
    let gw = gateway().await;
    let h = set(list_headers(), "origin", "http://localhost:1234");
    let r = post(&gw, &h, list_body(json!(91))).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.last()["id"], 91);
    gw.stop().await;
}

#[tokio::test]
async fn allowed_origins_replace_the_loopback_default() {
    let config = everything_stdio_config("allowed_origins = [\"https://app.example.com\"]");
    let gw = TestGateway::start(&config).await;
    let h = set(list_headers(), "origin", "https://app.example.com");
    let r = post(&gw, &h, list_body(json!("app"))).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.last()["id"], "app");
    let h = set(list_headers(), "origin", "http://localhost:1234");
    let r = post(&gw, &h, list_body(json!("local"))).await;
    assert_error(&r, 403, -32600, "origin_not_allowed").json_reply_to(None);
    gw.stop().await;
}

// --- HTTP methods and paths ---

#[tokio::test]
async fn get_and_delete_are_405_with_allow_post() {
    let gw = gateway().await;
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let rb = gw
            .http
            .request(method.clone(), &gw.url)
            .header("accept", "text/event-stream");
        let resp = rb.send().await.expect("send");
        assert_eq!(resp.status().as_u16(), 405, "{method}");
        let allow = resp.headers().get("allow").and_then(|v| v.to_str().ok());
        assert_eq!(allow, Some("POST"), "{method}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn an_unknown_path_is_404() {
    let gw = gateway().await;
    let mut rb = gw.http.post(gw.url.replace("/mcp", "/not-mcp"));
    for (k, v) in list_headers() {
        rb = rb.header(k, v);
    }
    let resp = rb.body(list_body(json!(1))).send().await.expect("POST");
    assert_eq!(resp.status().as_u16(), 404);
    gw.stop().await;
}
