//! Guarding the server's question (issue 4): non-flat forms, secrets in
//! forms, URL-mode hosts and schemes, too many questions and model-owned
//! values are refused before any client sees them, and the server is never
//! left waiting: the tests assert on what the fixture server received.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod policy_support;

use common::*;
use policy_support::*;
use serde_json::{Value, json};

/// Asserts a refusal reached the server as an error carrying `reason`.
fn server_heard_error(answer: &Value, reason: &str) {
    let err = &answer["error"];
    assert_eq!(err["data"]["reason"], reason, "{answer}");
    assert!(
        answer.get("action").is_none() && answer.get("content").is_none(),
        "{answer}"
    );
}

#[tokio::test]
async fn non_flat_forms_are_refused_and_the_server_hears_an_error() {
    let fx = Fixture::with_policy("");
    let gw = fx.gateway().await;
    let cases = [
        (
            "nested",
            json!({"address": {"type": "object", "properties": {"country": {"type": "string"}}}}),
            "address",
        ),
        (
            "objects",
            json!({"ok": {"type": "string"}, "tags": {"type": "array", "items": {"type": "object"}}}),
            "tags",
        ),
        (
            "nullable",
            json!({"maybe": {"type": ["string", "null"]}}),
            "maybe",
        ),
        ("ref", json!({"r": {"$ref": "#/$defs/x"}}), "r"),
    ];
    for (tag, props, field) in cases {
        let r = ask(&schema(props, &[]), "Nested?", tag).start(&gw).await;
        // Never an InputRequiredResult: the question does not reach the client.
        let data = assert_error(&r, 200, -32603, "policy_schema_not_flat").data();
        assert_eq!(data["field"], field, "{}", r.raw);
        assert!(
            r.messages.iter().all(|m| m.get("result").is_none()),
            "{}",
            r.raw
        );
        server_heard_error(&fx.log.only_answer(tag).await, "policy_schema_not_flat");
    }
    gw.wait_metric(&rejections("ask", "policy_schema_not_flat"), 4.0)
        .await;
    gw.stop().await;
}

#[tokio::test]
async fn on_refused_decline_answers_the_server_decline() {
    let fx = Fixture::with_policy("[defaults]\non_refused = \"decline\"\n");
    let gw = fx.gateway().await;
    let nested = schema(
        json!({"a": {"type": "object", "properties": {"b": {"type": "string"}}}}),
        &[],
    );
    let r = ask(&nested, "Nested?", "n1").start(&gw).await;
    assert_eq!(
        assert_error(&r, 200, -32603, "policy_schema_not_flat").data()["field"],
        "a"
    );
    assert_eq!(
        received(&fx.log.only_answer("n1").await),
        json!({"action": "decline"})
    );
    let r = tool(
        "ask_url",
        json!({"url": "http://auth.example.com/login", "tag": "u1"}),
    )
    .start(&gw)
    .await;
    assert_error(&r, 200, -32603, "policy_url_not_allowed");
    assert_eq!(
        received(&fx.log.only_answer("u1").await),
        json!({"action": "decline"})
    );
    gw.stop().await;
}

#[tokio::test]
async fn secrets_in_forms_are_refused_with_a_pointer_to_url_mode() {
    let fx = Fixture::with_policy("");
    let gw = fx.gateway().await;
    let cases = [
        ("s1", json!({"password": {"type": "string"}}), "password"),
        (
            "s2",
            json!({"user": {"type": "string"}, "apiKey": {"type": "string"}}),
            "apiKey",
        ),
        (
            "s3",
            json!({"db": {"type": "string", "title": "Database password"}}),
            "db",
        ),
        (
            "s4",
            json!({"pin": {"type": "string", "format": "password"}}),
            "pin",
        ),
        (
            "s5",
            json!({"card_number": {"type": "string"}}),
            "card_number",
        ),
    ];
    for (tag, props, field) in cases {
        let r = ask(&schema(props, &[]), "Credentials?", tag)
            .start(&gw)
            .await;
        let data = assert_error(&r, 200, -32603, "policy_secret_request").data();
        assert_eq!(data["field"], field, "{}", r.raw);
        let message = r.error()["message"].as_str().unwrap_or_default();
        assert!(message.contains("URL mode"), "{message}");
        server_heard_error(&fx.log.only_answer(tag).await, "policy_secret_request");
    }
    // Words that merely contain a secret word are not secrets.
    let fine = schema(json!({"tokens_used": {"type": "integer"}}), &[]);
    let call = ask(&fine, "How many tokens?", "fine");
    let q = asked(&call.start(&gw).await);
    let out = output(
        &call
            .answer(
                &gw,
                &q,
                json!({"action": "accept", "content": {"tokens_used": 3}}),
            )
            .await,
    );
    assert_eq!(out["content"], json!({"tokens_used": 3}));
    gw.wait_metric(&rejections("ask", "policy_secret_request"), 5.0)
        .await;
    gw.stop().await;
}

#[tokio::test]
async fn secret_fields_allow_lets_the_question_through() {
    let fx = Fixture::with_policy("[defaults]\nsecret_fields = \"allow\"\n");
    let gw = fx.gateway().await;
    let call = ask(
        &schema(json!({"password": {"type": "string"}}), &[]),
        "Password?",
        "a1",
    );
    let q = asked(&call.start(&gw).await);
    let r = call.answer(&gw, &q, json!({"action": "decline"})).await;
    assert_eq!(output(&r)["action"], "decline");
    gw.stop().await;
}

/// Starts `ask_url` for `url`: `Ok` with the question, or `Err` with the response.
async fn url_question(gw: &TestGateway, url: &str, tag: &str) -> (Op, Result<Asked, Resp>) {
    let call = tool("ask_url", json!({"url": url, "tag": tag}));
    let r = call.start(gw).await;
    let out = if r.last().get("result").is_some() {
        Ok(asked(&r))
    } else {
        Err(r)
    };
    (call, out)
}

#[tokio::test]
async fn url_mode_needs_https_except_on_loopback() {
    let fx = Fixture::with_policy("");
    let gw = fx.gateway().await;
    for (tag, url) in [
        ("ok-https", "https://auth.example.com/login"),
        ("ok-loop4", "http://127.0.0.1:9/login"),
        ("ok-loop6", "http://[::1]:9/login"),
        ("ok-localhost", "http://localhost:9/login"),
    ] {
        let (call, q) = url_question(&gw, url, tag).await;
        let q = q.unwrap_or_else(|r| panic!("{url} refused: {}", r.raw));
        assert_eq!(q.request()["params"]["mode"], "url");
        assert_eq!(q.request()["params"]["url"], url);
        let r = call.answer(&gw, &q, json!({"action": "accept"})).await;
        assert_eq!(output(&r)["action"], "accept");
    }
    for (tag, url) in [
        ("bad-http", "http://auth.example.com/login"),
        ("bad-js", "javascript:alert(1)"),
        ("bad-file", "file:///etc/passwd"),
    ] {
        let (_, q) = url_question(&gw, url, tag).await;
        let r = q.expect_err(url);
        assert_error(&r, 200, -32603, "policy_url_not_allowed");
        server_heard_error(&fx.log.only_answer(tag).await, "policy_url_not_allowed");
    }
    gw.wait_metric(&rejections("ask_url", "policy_url_not_allowed"), 3.0)
        .await;
    gw.stop().await;
}

#[tokio::test]
async fn url_mode_hosts_must_be_on_the_allow_list() {
    let fx =
        Fixture::with_policy("[defaults]\nurl_hosts = [\"auth.example.com\", \"127.0.0.1\"]\n");
    let gw = fx.gateway().await;
    for url in [
        "https://auth.example.com/x",
        "https://AUTH.example.com/y",
        "http://127.0.0.1:9/z",
    ] {
        let (_, q) = url_question(&gw, url, url).await;
        q.unwrap_or_else(|r| panic!("{url} refused: {}", r.raw));
    }
    for url in [
        "https://evil.example/x",
        "https://auth.example.com.evil.example/x",
        "https://auth.example.com@evil.example/x",
        "http://localhost:9/x",
    ] {
        let (_, q) = url_question(&gw, url, url).await;
        let r = q.expect_err(url);
        assert_error(&r, 200, -32603, "policy_url_not_allowed");
        server_heard_error(&fx.log.only_answer(url).await, "policy_url_not_allowed");
    }
    gw.stop().await;
}

#[tokio::test]
async fn more_than_max_questions_per_operation_are_refused() {
    let fx =
        Fixture::with_policy("[defaults]\nmax_questions = 5\n[tool.ask_many]\nmax_questions = 2\n");
    let gw = fx.gateway().await;
    let call = tool("ask_many", json!({"n": 3, "tag": "m3"}));
    let names = ["first", "second"];
    let resps = call
        .walk(&gw, 2, |round, q| {
            reply(q, accepted(json!({"name": names[round - 1]})))
        })
        .await;
    // The third question is refused: the retry that answered the second hears why.
    let data = assert_error(&resps[2], 200, -32603, "policy_too_many_questions").data();
    assert!(data.get("field").is_none(), "{data}");
    let got = fx.log.answers_at_least("m3", 3).await;
    assert_eq!(
        got.iter().map(received).collect::<Vec<_>>()[..2],
        [
            json!({"action": "accept", "content": {"name": "first"}}),
            json!({"action": "accept", "content": {"name": "second"}}),
        ]
    );
    server_heard_error(&got[2], "policy_too_many_questions");
    // Within the limit a call completes.
    let call = tool("ask_many", json!({"n": 2, "tag": "m2"}));
    let resps = call
        .walk(&gw, 2, |_, q| reply(q, accepted(json!({"name": "x"}))))
        .await;
    assert_eq!(
        output(&resps[2])["answers"].as_array().map(Vec::len),
        Some(2)
    );
    gw.wait_metric(&rejections("ask_many", "policy_too_many_questions"), 1.0)
        .await;
    gw.stop().await;
}

#[tokio::test]
async fn model_owned_values_become_a_precise_tool_error() {
    let fx = Fixture::with_policy("[tool.book_meeting]\nmodel_owned = [\"room_id\"]\n");
    let gw = fx.gateway().await;
    let r = tool("book_meeting", json!({"tag": "mo"})).start(&gw).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_response_schema("tools/call", r.last());
    let result = r.result();
    assert_eq!(result["resultType"], "complete", "{}", r.raw);
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    for part in [
        "`room_id`",
        "string",
        "atrium, studio-b, nook",
        "The Atrium seats 24, Studio B 12, The Nook 4.",
        "book_meeting",
    ] {
        assert!(text.contains(part), "{part:?} missing from {text:?}");
    }
    assert_eq!(
        received(&fx.log.only_answer("mo").await),
        json!({"action": "cancel"})
    );
    gw.wait_metric(&rejections("book_meeting", "policy_model_owned"), 1.0)
        .await;
    // The same question from another tool is for a person.
    let call = tool("book_room", json!({"tag": "br"}));
    let q = asked(&call.start(&gw).await);
    let r = call.answer(&gw, &q, json!({"action": "decline"})).await;
    assert_eq!(output(&r)["action"], "decline");
    gw.stop().await;
}
