//! A client that did not declare a capability is never asked for it: the
//! server learns the client's capabilities (and may take another path), a
//! server that pushes anyway is answered with an error while the client gets
//! `-32021` with `requiredCapabilities` (or the server hears `decline` when the
//! route says so), and a retry must still declare what its questions need.
//!
//! Drives `tests/fixtures/mrtr_server.py` (FastMCP from mcp==1.30.0) and
//! server-everything.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod mrtr_support;

use common::*;
use mrtr_support::*;
use serde_json::{Value, json};

fn tool_names(r: &Resp) -> Vec<String> {
    r.result()["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// Asserts the 400 / -32021 answer and returns its `requiredCapabilities`.
fn missing(r: &Resp) -> Value {
    assert_error(r, 400, -32021, "missing_capability").data()["requiredCapabilities"].clone()
}

#[tokio::test]
async fn server_everything_offers_its_elicitation_tool_only_when_declared() {
    let gw = TestGateway::start(&everything_stdio_config("")).await;
    for (caps, offered) in [
        (json!({}), false),
        (json!({"sampling": {}, "roots": {}}), false),
        (json!({"elicitation": {}}), true),
        (form_caps(), true),
    ] {
        let r = gw.rpc("tools/list", json!({}), caps.clone()).await;
        assert_response_schema("tools/list", r.last());
        let names = tool_names(&r);
        assert!(names.iter().any(|n| n == "echo"), "{names:?}");
        assert_eq!(
            names.iter().any(|n| n == "trigger-elicitation-request"),
            offered,
            "{caps}: {names:?}"
        );
    }
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_server_that_checks_takes_its_other_path() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;
    let op = Op::tool("polite", json!({"tag": "pol-none"})).caps(json!({"sampling": {}}));
    assert_eq!(
        output(&op.start(&gw).await),
        json!({"tag": "pol-none", "path": "fallback"})
    );
    assert_eq!(fx.log.tagged("fallback", "pol-none").len(), 1);
    assert!(fx.log.tagged("asking", "pol-none").is_empty());

    let op = Op::tool("polite", json!({"tag": "pol-form"})).caps(form_caps());
    let asked = input_required("tools/call", &op.start(&gw).await);
    let done = op
        .retry(&gw, &asked.state, json!({"elicitation-1": accept("P")}))
        .await;
    assert_eq!(output(&done)["path"], "asked");
    assert_eq!(gw.metric(&ops("polite", "completed")).await, Some(2.0));
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_push_the_client_cannot_answer_is_refused_both_ways() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;
    let cases = [
        ("push-none", json!({})),
        ("push-sampling", json!({"sampling": {}, "roots": {}})),
        ("push-url-only", json!({"elicitation": {"url": {}}})),
    ];
    for (tag, caps) in &cases {
        let op = Op::tool("pushy", json!({"tag": tag})).caps(caps.clone());
        let r = op.start(&gw).await;
        assert_eq!(
            missing(&r),
            json!({"elicitation": {"form": {}}}),
            "{tag}: {}",
            r.raw
        );
        // The server got an error for its request, not an answer.
        let heard = fx.log.answer(tag).await;
        assert!(heard.get("action").is_none(), "{tag}: {heard}");
        assert_eq!(heard["error"]["code"], -32601, "{tag}: {heard}");
    }
    assert_eq!(
        gw.metric(&ops("pushy", "missing_capability")).await,
        Some(cases.len() as f64)
    );

    // A URL-mode question needs the url mode, which a form-only client lacks.
    let op = Op::tool("url_ask", json!({"tag": "url-form-only"})).caps(form_caps());
    assert_eq!(
        missing(&op.start(&gw).await),
        json!({"elicitation": {"url": {}}})
    );
    for (tool, needs) in [
        ("sample", json!({"sampling": {}})),
        ("roots", json!({"roots": {}})),
    ] {
        let op = Op::tool(tool, json!({"tag": format!("{tool}-none")})).caps(form_caps());
        assert_eq!(missing(&op.start(&gw).await), needs, "{tool}");
    }
    settled(&gw).await;
    gw.stop().await;
}

/// The audit file's lines.
fn audit_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit line is JSON"))
        .collect()
}

#[tokio::test]
async fn on_missing_capability_decline_answers_for_the_user() {
    let fx = Fixture::new();
    let audit = fx.path("audit.jsonl");
    let gw = TestGateway::start(
        &fx.cfg()
            .route("on_missing_capability = \"decline\"")
            .top(&format!("[audit]\npath = {}\n", toml_path(&audit)))
            .build(),
    )
    .await;
    let op = Op::tool("pushy", json!({"tag": "dec-1"})).caps(json!({}));
    assert_eq!(
        output(&op.start(&gw).await),
        json!({"tag": "dec-1", "action": "decline"})
    );
    let heard = fx.log.answer("dec-1").await;
    assert_eq!(heard["action"], "decline");
    assert!(heard.get("content").is_none(), "{heard}");
    assert_eq!(gw.metric(&ops("pushy", "declined")).await, Some(1.0));

    // Only elicitation can be declined on the user's behalf.
    let op = Op::tool("sample", json!({"tag": "dec-2"})).caps(json!({}));
    assert_eq!(missing(&op.start(&gw).await), json!({"sampling": {}}));
    settled(&gw).await;
    gw.stop().await;

    // Both questions are audited, though neither reached a person: `refused`
    // (no one's attention in the report) with the reason.
    let lines = audit_lines(&audit);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    for (line, tool, method) in [
        (&lines[0], "pushy", "elicitation/create"),
        (&lines[1], "sample", "sampling/createMessage"),
    ] {
        assert_eq!(line["tool"], tool, "{line}");
        assert_eq!(line["method"], method, "{line}");
        assert_eq!(line["outcome"], "refused", "{line}");
        assert_eq!(line["verdict"], "missing_capability", "{line}");
        assert!(line.get("answer_ms").is_none_or(Value::is_null), "{line}");
    }
}

#[tokio::test]
async fn a_retry_must_still_declare_what_its_questions_need() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;
    let cases = [
        ("ask", json!({"elicitation": {"form": {}}}), accept("late")),
        (
            "url_ask",
            json!({"elicitation": {"url": {}}}),
            json!({"action": "accept"}),
        ),
        ("sample", json!({"sampling": {}}), sampling_answer("Paris.")),
        ("roots", json!({"roots": {}}), roots_answer()),
    ];
    for (tool, needs, answer) in cases {
        let op = Op::tool(tool, json!({"tag": format!("re-{tool}")}));
        let asked = input_required("tools/call", &op.start(&gw).await);
        let key = asked.keys()[0].to_owned();
        let responses = json!({key: answer});
        // The retry declares every capability except the one its question needs.
        let mut fewer = all_caps();
        let gone = needs.as_object().unwrap().keys().next().unwrap().clone();
        if gone == "elicitation" {
            let mode = needs["elicitation"]
                .as_object()
                .unwrap()
                .keys()
                .next()
                .unwrap();
            fewer["elicitation"].as_object_mut().unwrap().remove(mode);
        } else {
            fewer.as_object_mut().unwrap().remove(&gone);
        }
        let r = op
            .clone()
            .caps(fewer)
            .retry(&gw, &asked.state, responses.clone())
            .await;
        assert_eq!(missing(&r), needs, "{tool}");
        assert!(fx.log.tagged("answer", &format!("re-{tool}")).is_empty());
        // The operation is intact: the retry that declares it goes through.
        output(&op.retry(&gw, &asked.state, responses).await);
    }
    settled(&gw).await;
    gw.stop().await;
}
