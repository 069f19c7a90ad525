//! The policy shapes a native 2026-07-28 server's own questions (issue 50):
//! PyPI `mcp` 2.3.0 `MCPServer` (tests/fixtures/native_py_server.py, whose
//! `book` asks for `nights`), its `inputRequests` relayed with the form
//! narrowed to the policy's bounds, to real clients of both eras and to the
//! harness (whose out-of-bounds answer is re-asked in the same narrowed
//! form); the audit line names the narrowed field; the server receives only
//! answers its own form accepts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod native_upstream_support;

use common::*;
use native_upstream_support::{received, stdio_upstream};
use serde_json::{Value, json};

const POLICY: &str = "[tool.book.fields.nights]\nminimum = 1\nmaximum = 30\n";

fn config(fx: &Fixture, route: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[audit]\npath = {}\n\
         [[route]]\nname = \"main\"\npath = \"/mcp\"\n{route}{}\n[route.upstream]\n{}\ninit_timeout = \"120s\"\n",
        toml_path(&fx.path("audit.jsonl")),
        fx.policy(POLICY),
        stdio_upstream(fx),
    )
}

fn audit_lines(fx: &Fixture) -> Vec<Value> {
    std::fs::read_to_string(fx.path("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `nights` property each question showed, calling `book` from the
/// 2026 client or the 2025-era one, answering `nights`.
async fn book(gw: &TestGateway, nights: u64, era2025: bool) -> Value {
    let script = json!({
        "steps": [{"op": "call_tool", "name": "book", "arguments": {"hotel": "the Ritz"}}],
        "elicitation": [{"action": "accept", "content": {"nights": nights}}],
    });
    let out = if era2025 {
        py_client_2025(&gw.url, &script).await
    } else {
        py_client(&gw.url, &script).await
    };
    let done = out.iter().find(|l| l["step"] == 0).unwrap();
    assert_eq!(done["ok"], true, "{out:#?}");
    let shown: Vec<Value> = out
        .iter()
        .filter(|l| l["event"] == "elicitation")
        .map(|l| l["requestedSchema"]["properties"]["nights"].clone())
        .collect();
    assert_eq!(shown.len(), 1, "{out:#?}");
    shown[0].clone()
}

#[tokio::test]
async fn a_native_servers_question_reaches_both_eras_narrowed() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&config(&fx, "")).await;
    for era2025 in [false, true] {
        let nights = book(&gw, 30, era2025).await;
        assert_eq!(nights["type"], "integer", "{nights}");
        assert_eq!(
            nights["description"], "How many nights",
            "the server's own words kept"
        );
        assert_eq!(
            (&nights["minimum"], &nights["maximum"]),
            (&json!(1), &json!(30)),
            "{nights}"
        );
    }

    // The harness answers outside the form: a red mark, and the same narrowed form again.
    let call = Op::tool("book", json!({"hotel": "the Ritz"})).caps(all_caps());
    let resps = call
        .walk(&gw, 2, |round, q| {
            let n = if round == 1 { 31 } else { 2 };
            q.reply_only(accepted(json!({"nights": n})))
        })
        .await;
    let first = input_required("tools/call", &resps[0]);
    let again = input_required("tools/call", &resps[1]);
    let schema =
        |a: &Asked| a.request()["params"]["requestedSchema"]["properties"]["nights"].clone();
    assert_eq!(schema(&first)["maximum"], 30);
    assert_eq!(schema(&again), schema(&first));
    assert!(
        again.message().contains("✗ nights must be at most 30"),
        "{}",
        again.message()
    );
    complete("tools/call", &resps[2]);
    gw.stop().await;

    let got: Vec<Value> = received(&fx)
        .iter()
        .map(|r| r["data"]["nights"].clone())
        .collect();
    assert_eq!(got, [30, 30, 2], "31 never reached the server");
    let lines = audit_lines(&fx);
    assert!(!lines.is_empty());
    for l in &lines {
        assert_eq!(l["narrowed"], json!(["nights"]), "{l}");
    }
}

#[tokio::test]
async fn shape_questions_false_relays_the_native_servers_form_as_it_is() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&config(&fx, "shape_questions = false\n")).await;
    let nights = book(&gw, 3, false).await;
    assert!(
        nights.get("minimum").is_none() && nights.get("maximum").is_none(),
        "{nights}"
    );
    gw.stop().await;
    for l in audit_lines(&fx) {
        assert!(l.get("narrowed").is_none(), "{l}");
    }
}
