//! The parsing steps (6–9) together, in pipeline order: each kind of mistake
//! gets its own error.

use super::*;
use crate::jsonrpc::Id;
use http::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

#[derive(Debug, PartialEq)]
enum Parsed {
    Request(Box<ClientRequest>),
    Notification { method: String },
}

/// Runs step 6 as the pipeline does, on a request context.
async fn parse(headers: &HeaderMap, body: &[u8]) -> Result<Parsed, Box<Refusal>> {
    let mut head = http::Request::post("/mcp").body(()).unwrap().into_parts().0;
    head.headers = headers.clone();
    let mut cx = RequestCx::new(Route::detached("t"), head, empty_body());
    cx.bytes = bytes::Bytes::copy_from_slice(body);
    match Pipeline::new(vec![Box::new(parse::Parse)])
        .run(&mut cx)
        .await
    {
        Ok(()) => Ok(Parsed::Request(cx.request.unwrap())),
        Err(Halt::Respond { status, .. }) => {
            assert_eq!(status, StatusCode::ACCEPTED);
            Ok(Parsed::Notification {
                method: cx.method_label.unwrap(),
            })
        }
        Err(Halt::Refuse(r)) => Err(r),
    }
}

fn empty_body() -> RequestBody {
    use http_body_util::BodyExt;
    http_body_util::Empty::<bytes::Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, HeaderValue::from_str(v).unwrap());
    }
    h
}

/// Like [`headers`], but a name may repeat (each pair is appended).
fn repeated(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, HeaderValue::from_str(v).unwrap());
    }
    h
}

fn good_headers(method: &str) -> HeaderMap {
    headers(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ])
}

fn body(method: &str, params: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .unwrap()
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}})
}

fn reason(r: Result<Parsed, Box<Refusal>>) -> (&'static str, i64, StatusCode) {
    let Err(r) = r else { panic!("accepted") };
    (r.reject.reason.as_str(), r.reject.code(), r.reject.status())
}

#[tokio::test]
async fn accepts_a_well_formed_request_and_reads_its_context() {
    let mut params = json!({"_meta": meta()});
    params["_meta"]["progressToken"] = json!("p1");
    params["_meta"]["io.modelcontextprotocol/logLevel"] = json!("info");
    let Parsed::Request(req) = parse(&good_headers("tools/list"), &body("tools/list", params))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(req.id, Id::Number(1));
    assert_eq!(req.ctx.progress_token, Some(json!("p1")));
    assert_eq!(req.ctx.log_level.as_deref(), Some("info"));
    assert!(req.ctx.profile.elicitation_form);
    assert!(req.ctx.client_info.is_none(), "clientInfo is optional");
}

#[tokio::test]
async fn malformed_json_and_batches() {
    assert_eq!(
        reason(parse(&good_headers("x"), b"{nope").await),
        ("parse_error", -32700, StatusCode::BAD_REQUEST)
    );
    assert_eq!(
        reason(parse(&good_headers("x"), b"[]").await),
        ("not_a_single_message", -32600, StatusCode::BAD_REQUEST)
    );
    let resp = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "result": {}})).unwrap();
    assert_eq!(
        reason(parse(&good_headers("x"), &resp).await).0,
        "response_not_allowed"
    );
}

#[tokio::test]
async fn notifications_are_recognised() {
    let b = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    )
    .unwrap();
    assert_eq!(
        parse(&HeaderMap::new(), &b).await.unwrap(),
        Parsed::Notification {
            method: "notifications/cancelled".into()
        }
    );
    // The pure entry point (what the fuzz target drives) is the same checks.
    assert_eq!(
        parse_request(&HeaderMap::new(), &b).unwrap(),
        Incoming::Notification("notifications/cancelled".into())
    );
    let refused = parse_request(
        &HeaderMap::new(),
        &body("tools/list", json!({"_meta": meta()})),
    );
    assert_eq!(refused.unwrap_err().reason(), Some(Reason::HeaderMissing));
}

#[tokio::test]
async fn header_rules() {
    let b = body("tools/list", json!({"_meta": meta()}));
    assert_eq!(
        reason(parse(&headers(&[("mcp-method", "tools/list")]), &b).await),
        ("header_missing", -32020, StatusCode::BAD_REQUEST)
    );
    assert_eq!(
        reason(parse(&headers(&[("mcp-protocol-version", "2026-07-28")]), &b).await).0,
        "header_missing"
    );
    assert_eq!(
        reason(parse(&good_headers("tools/call"), &b).await).0,
        "header_mismatch"
    );
    let mut wrong_meta = meta();
    wrong_meta["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-29");
    assert_eq!(
        reason(
            parse(
                &good_headers("tools/list"),
                &body("tools/list", json!({"_meta": wrong_meta}))
            )
            .await
        )
        .0,
        "header_mismatch"
    );
}

#[tokio::test]
async fn header_values_are_case_sensitive() {
    let b = body("tools/list", json!({"_meta": meta()}));
    assert_eq!(
        reason(parse(&good_headers("TOOLS/LIST"), &b).await).0,
        "header_mismatch"
    );
}

#[tokio::test]
async fn mcp_name_must_match_and_may_be_base64() {
    let b = body(
        "tools/call",
        json!({"_meta": meta(), "name": "héllo", "arguments": {}}),
    );
    let mut h = good_headers("tools/call");
    assert_eq!(reason(parse(&h, &b).await).0, "header_missing");
    h.insert("mcp-name", HeaderValue::from_static("=?base64?aMOpbGxv?="));
    assert!(parse(&h, &b).await.is_ok());
    h.insert("mcp-name", HeaderValue::from_static("other"));
    assert_eq!(reason(parse(&h, &b).await).0, "header_mismatch");
    h.insert("mcp-name", HeaderValue::from_static("=?base64?!!!?="));
    assert_eq!(reason(parse(&h, &b).await).0, "header_invalid");
    let uri = body(
        "resources/read",
        json!({"_meta": meta(), "uri": "file:///a b"}),
    );
    let mut h = good_headers("resources/read");
    h.insert("mcp-name", HeaderValue::from_static("file:///a b"));
    assert!(parse(&h, &uri).await.is_ok());
}

#[tokio::test]
async fn conflicting_duplicate_mcp_name_is_a_mismatch() {
    // A proxy that routes or authorizes on the last `Mcp-Name` would see
    // `read_file`, while `delete_everything` runs: refused (-32020).
    let b = body(
        "tools/call",
        json!({"_meta": meta(), "name": "delete_everything", "arguments": {}}),
    );
    let h = repeated(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "delete_everything"),
        ("mcp-name", "read_file"),
    ]);
    let r = parse(&h, &b).await.unwrap_err();
    assert_eq!(
        (r.reject.reason.as_str(), r.reject.code(), r.reject.status()),
        ("header_mismatch", -32020, StatusCode::BAD_REQUEST)
    );
    assert!(
        r.reject.message.contains("Mcp-Name"),
        "{}",
        r.reject.message
    );
    assert_eq!(r.id, Some(Id::Number(1)));
    // Either order: the first value matching the body is not enough.
    let h = repeated(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "read_file"),
        ("mcp-name", "delete_everything"),
    ]);
    assert_eq!(reason(parse(&h, &b).await).0, "header_mismatch");
    // An encoded and a plain spelling of the same name are still two values.
    let h = repeated(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "delete_everything"),
        ("mcp-name", "=?base64?ZGVsZXRlX2V2ZXJ5dGhpbmc=?="),
    ]);
    assert_eq!(reason(parse(&h, &b).await).0, "header_mismatch");
}

#[tokio::test]
async fn identical_duplicate_headers_pass() {
    let b = body(
        "tools/call",
        json!({"_meta": meta(), "name": "book_room", "arguments": {}}),
    );
    let h = repeated(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "book_room"),
        ("mcp-name", " book_room "),
    ]);
    let Parsed::Request(req) = parse(&h, &b).await.unwrap() else {
        panic!("a notification")
    };
    assert_eq!(req.target(), "book_room");
}

#[tokio::test]
async fn conflicting_duplicate_method_or_version_is_a_mismatch() {
    let b = body("tools/list", json!({"_meta": meta()}));
    let method = repeated(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
        ("mcp-method", "tools/call"),
    ]);
    let r = parse(&method, &b).await.unwrap_err();
    assert_eq!(
        (r.reject.reason.as_str(), r.reject.code()),
        ("header_mismatch", -32020)
    );
    assert!(
        r.reject.message.contains("Mcp-Method"),
        "{}",
        r.reject.message
    );
    let version = repeated(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-protocol-version", "2025-06-18"),
        ("mcp-method", "tools/list"),
    ]);
    let r = parse(&version, &b).await.unwrap_err();
    assert_eq!(
        (r.reject.reason.as_str(), r.reject.code()),
        ("header_mismatch", -32020)
    );
    assert!(
        r.reject.message.contains("MCP-Protocol-Version"),
        "{}",
        r.reject.message
    );
    // A second value that is not visible ASCII is invalid, not ignored.
    let mut bad = good_headers("tools/list");
    bad.append(
        "mcp-method",
        HeaderValue::from_bytes("tools/lïst".as_bytes()).unwrap(),
    );
    assert_eq!(reason(parse(&bad, &b).await).0, "header_invalid");
}

#[tokio::test]
async fn unsupported_version_names_supported_and_requested() {
    let h = headers(&[
        ("mcp-protocol-version", "2025-06-18"),
        ("mcp-method", "tools/list"),
    ]);
    let r = parse(&h, &body("tools/list", json!({"_meta": meta()})))
        .await
        .unwrap_err();
    assert_eq!(r.reject.code(), -32022);
    assert_eq!(r.reject.data["supported"], json!(["2026-07-28"]));
    assert_eq!(r.reject.data["requested"], json!("2025-06-18"));
    assert_eq!(r.id, Some(Id::Number(1)));
}

/// What an unpinned client needs to act on: the one version, and the switch of
/// each common client.
fn assert_newcomer_hint(r: &Refusal) {
    let m = &r.reject.message;
    for needle in [
        "speaks MCP 2026-07-28 statelessly",
        "in a session a client opens with `initialize`",
        "pin: '2026-07-28'",
        "mode=\"2026-07-28\"",
        "--transport http --protocol-era modern",
    ] {
        assert!(m.contains(needle), "{needle:?} missing from {m}");
    }
    assert_eq!(r.reject.data["supported"], json!(["2026-07-28"]));
}

#[tokio::test]
async fn a_missing_version_header_says_how_to_pin_the_client() {
    let h = headers(&[("mcp-method", "tools/list")]);
    let r = parse(&h, &body("tools/list", json!({"_meta": meta()})))
        .await
        .unwrap_err();
    assert_eq!(
        (r.reject.reason.as_str(), r.reject.code(), r.reject.status()),
        ("header_missing", -32020, StatusCode::BAD_REQUEST)
    );
    assert!(
        r.reject
            .message
            .starts_with("the MCP-Protocol-Version header is required")
    );
    assert_newcomer_hint(&r);
    // A bare legacy `initialize` (no headers at all, as a legacy client
    // sends it) is a 2025-era handshake, served by `front::era2025`.
    let legacy = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}});
    let incoming =
        crate::front::pipeline::parse_request(&HeaderMap::new(), &body("initialize", legacy));
    assert!(
        matches!(&incoming, Ok(crate::front::pipeline::Incoming::Era2025(m))
            if matches!(&**m, crate::front::era2025::Message2025::Request(e) if e.method == "initialize")),
        "{incoming:?}"
    );
    // The Mcp-Method header is another mistake: no hint there.
    let r = parse(
        &headers(&[("mcp-protocol-version", "2026-07-28")]),
        &body("tools/list", json!({"_meta": meta()})),
    )
    .await
    .unwrap_err();
    assert_eq!(r.reject.reason.as_str(), "header_missing");
    assert!(!r.reject.data.contains_key("supported"));
}

#[tokio::test]
async fn an_initialize_with_modern_headers_says_how_to_pin_the_client() {
    let r = parse(
        &good_headers("initialize"),
        &body("initialize", json!({"_meta": meta()})),
    )
    .await
    .unwrap_err();
    assert_eq!(r.reject.reason.as_str(), "method_removed");
    assert_newcomer_hint(&r);
}

#[tokio::test]
async fn removed_and_unknown_methods_are_404() {
    for m in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    ] {
        assert_eq!(
            reason(parse(&good_headers(m), &body(m, json!({"_meta": meta()}))).await),
            ("method_removed", -32601, StatusCode::NOT_FOUND),
            "{m}"
        );
    }
    assert_eq!(
        reason(
            parse(
                &good_headers("foo/bar"),
                &body("foo/bar", json!({"_meta": meta()}))
            )
            .await
        )
        .0,
        "method_not_found"
    );
}

#[tokio::test]
async fn missing_meta_fields_are_invalid_params() {
    let h = good_headers("tools/list");
    assert_eq!(
        reason(parse(&h, &body("tools/list", json!({}))).await),
        ("missing_meta", -32602, StatusCode::BAD_REQUEST)
    );
    let no_caps = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
    assert_eq!(
        reason(parse(&h, &body("tools/list", no_caps)).await).0,
        "missing_meta"
    );
    let no_version = json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}});
    assert_eq!(
        reason(parse(&h, &body("tools/list", no_version)).await).0,
        "missing_meta"
    );
    let b =
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": "s", "method": "tools/list"})).unwrap();
    let r = parse(&h, &b).await.unwrap_err();
    assert_eq!(r.id, Some(Id::String("s".into())));
}

#[tokio::test]
async fn bad_log_level_is_invalid_params() {
    let mut m = meta();
    m["io.modelcontextprotocol/logLevel"] = json!("loud");
    assert_eq!(
        reason(
            parse(
                &good_headers("tools/list"),
                &body("tools/list", json!({"_meta": m}))
            )
            .await
        )
        .0,
        "invalid_log_level"
    );
}

/// The typed read of `params` gives the verdicts a tree did: what a
/// `Value` refuses inside `arguments` or `_meta` is a parse error, a
/// `_meta` that is not an object is a missing one, and an escaped member
/// name is read as the name it spells.
#[tokio::test]
async fn params_read_typed_keep_the_trees_verdicts() {
    let mut h = good_headers("tools/call");
    h.insert("mcp-name", HeaderValue::from_static("t"));
    let call = |params: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{params}}}"#)
    };
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    for bad in [
        format!(r#"{{"name":"t","arguments":{{"a":"\ud800"}},{meta}}}"#),
        format!(r#"{{"name":"t","arguments":{{"n":1e400}},{meta}}}"#),
        format!(r#"{{"name":"t",{meta},"_meta":{{"x":"\udfff"}}}}"#),
    ] {
        let r = parse(&h, call(&bad).as_bytes()).await;
        assert_eq!(reason(r).0, "parse_error", "{bad}");
    }
    for not_an_object in ["[]", "null", "\"m\""] {
        let params = format!(r#"{{"name":"t","_meta":{not_an_object}}}"#);
        let r = parse(&h, call(&params).as_bytes()).await.unwrap_err();
        assert_eq!(r.reject.reason.as_str(), "missing_meta", "{params}");
        assert_eq!(r.id, Some(Id::Number(7)));
    }
    // `\u0069o.` spells `io.`: the protocol member, read as such.
    let escaped = r#"{"name":"t","arguments":{"k":[1, "v"]},"_meta":{"\u0069o.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"progressToken":5,"x.example/k":true}}"#;
    let Parsed::Request(req) = parse(&h, call(escaped).as_bytes()).await.unwrap() else {
        panic!("not a request")
    };
    assert_eq!(req.ctx.protocol_version, "2026-07-28");
    assert!(req.ctx.profile.elicitation_form);
    assert_eq!(req.ctx.progress_token, Some(json!(5)));
    assert_eq!(req.target(), "t");
    // The request keeps `_meta`'s other members, and the arguments as sent.
    assert_eq!(
        Value::Object(req.meta.clone()),
        json!({"progressToken": 5, "x.example/k": true})
    );
    assert_eq!(
        req.arguments.text().map(serde_json::value::RawValue::get),
        Some(r#"{"k":[1, "v"]}"#)
    );
    assert_eq!(req.arguments(), json!({"k": [1, "v"]}).as_object().unwrap());
}

/// A `requestState` makes a retry only on the three methods that have one
/// (issue 42: on a list it took the request out of the call limits); on
/// any other it is refused with its own reason, before the rate limits.
#[tokio::test]
async fn a_request_state_is_a_retry_only_where_a_retry_exists() {
    for method in [
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "completion/complete",
    ] {
        let params = json!({"_meta": meta(), "requestState": "x"});
        let got = parse(&good_headers(method), &body(method, params)).await;
        assert_eq!(
            reason(got),
            ("state_not_allowed", -32602, StatusCode::BAD_REQUEST),
            "{method}"
        );
    }
    // Without one, the same requests are plain new requests.
    let plain = parse(
        &good_headers("prompts/list"),
        &body("prompts/list", json!({"_meta": meta()})),
    )
    .await;
    let Ok(Parsed::Request(r)) = plain else {
        panic!("{plain:?}")
    };
    assert!(!r.is_retry() && !r.has_state());
    // On tools/call it is a retry (the owner step opens it, or refuses it).
    let mut h = good_headers("tools/call");
    h.insert("mcp-name", HeaderValue::from_static("t"));
    let params = json!({"_meta": meta(), "name": "t", "requestState": "x"});
    let Ok(Parsed::Request(r)) = parse(&h, &body("tools/call", params)).await else {
        panic!("a tools/call with a state is parsed")
    };
    assert!(r.is_retry());
}
