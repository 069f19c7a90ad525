//! Remembered answers for a native 2026-07-28 server's own questions (PyPI
//! `mcp` 2.3.0, tests/fixtures/native_py_server.py, and the TypeScript SDK
//! v2, tests/fixtures/native_ts_server.mjs, whose `book` asks for `nights`): with `remember = "30d"` on the field, each person's last
//! accepted value comes back as the field's `default` (SEP-1034) in the
//! server's question as redmark relays it, another person never sees it, the
//! audit line says when a default was offered and whether it was kept, and
//! no value reaches the audit log. Answered by real clients: the PyPI `mcp`
//! 2.x 2026-07-28 `Client` and the 2025-era `ClientSession` (pushed
//! questions, the same engine path), and by the harness for a red-mark
//! re-ask, which still offers the default.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod native_upstream_support;

use common::*;
use native_upstream_support::{received, stdio_upstream, ts_stdio_upstream};
use serde_json::{Value, json};

const POLICY: &str = "[tool.book.fields.nights]\nminimum = 1\nmaximum = 30\nremember = \"30d\"\n";

/// One route in front of `upstream` (a `[route.upstream]` body), with an audit log and two people.
fn config(fx: &Fixture, upstream: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[audit]\npath = {}\n{}\n{}\n\
         [[route]]\nname = \"main\"\npath = \"/mcp\"\n{}\n[route.upstream]\n{}\ninit_timeout = \"120s\"\n",
        toml_path(&fx.path("audit.jsonl")),
        api_key("alice-key", "alice", &[]),
        api_key("bob-key", "bob", &[]),
        fx.policy(POLICY),
        upstream,
    )
}

/// Calls `book` once per answer (`nights`), as `key`'s principal, from the
/// 2026 client, or the 2025-era one when `era2025`; returns the `nights`
/// property of each question the client was shown.
async fn book(gw: &TestGateway, key: &str, nights: &[u64], era2025: bool) -> Vec<Value> {
    let steps: Vec<Value> = nights
        .iter()
        .map(|n| json!({"op": "call_tool", "name": "book", "arguments": {"hotel": "the Ritz"}, "id": n.to_string()}))
        .collect();
    let answers: Vec<Value> = nights
        .iter()
        .map(|n| json!({"action": "accept", "content": {"nights": n}}))
        .collect();
    let script = json!({
        "steps": steps,
        "elicitation": answers,
        "headers": {"Authorization": format!("Bearer {key}")},
    });
    let out = if era2025 {
        py_client_2025(&gw.url, &script).await
    } else {
        py_client(&gw.url, &script).await
    };
    for l in out.iter().filter(|l| l.get("step").is_some()) {
        assert_eq!(l["ok"], true, "{out:#?}");
    }
    let shown: Vec<Value> = out
        .iter()
        .filter(|l| l["event"] == "elicitation")
        .map(|l| l["requestedSchema"]["properties"]["nights"].clone())
        .collect();
    assert_eq!(shown.len(), nights.len(), "{out:#?}");
    shown
}

fn audit_lines(fx: &Fixture) -> Vec<Value> {
    std::fs::read_to_string(fx.path("audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn a_native_python_servers_question_offers_a_persons_last_answer_to_them_alone() {
    let fx = Fixture::new();
    offered_to_them_alone(&fx, &stdio_upstream(&fx)).await;
}

/// The same with the TypeScript SDK v2 server (npm `@modelcontextprotocol/server`
/// 2.4.0), whose own `requestState` rides sealed beside the offered fields.
#[tokio::test]
async fn a_native_typescript_v2_servers_question_offers_a_persons_last_answer_to_them_alone() {
    let fx = Fixture::new();
    offered_to_them_alone(&fx, &ts_stdio_upstream(&fx)).await;
}

/// Alice and bob book through the server at `upstream`, from both clients.
async fn offered_to_them_alone(fx: &Fixture, upstream: &str) {
    let gw = TestGateway::start(&config(fx, upstream)).await;
    // Alice's first answer is remembered; her second question offers it.
    let alice = book(&gw, "alice-key", &[3, 3], false).await;
    assert!(alice[0].get("default").is_none(), "{alice:?}");
    assert_eq!(alice[1]["default"], 3, "{alice:?}");
    assert_eq!(alice[1]["type"], "integer", "the server's schema, kept");
    // Bob never sees alice's.
    let bob = book(&gw, "bob-key", &[5], false).await;
    assert!(bob[0].get("default").is_none(), "{bob:?}");
    // Alice changes her mind: 3 offered, not kept; 4 offered next.
    let alice = book(&gw, "alice-key", &[4, 4], false).await;
    assert_eq!(alice[0]["default"], 3, "{alice:?}");
    assert_eq!(alice[1]["default"], 4, "{alice:?}");
    // A 2025-era client's pushed question: the same engine path.
    let bob = book(&gw, "bob-key", &[6], true).await;
    assert_eq!(bob[0]["default"], 5, "{bob:?}");
    let alice = book(&gw, "alice-key", &[4], true).await;
    assert_eq!(alice[0]["default"], 4, "{alice:?}");
    gw.stop().await;

    // The server received what each person answered, never a default.
    let got: Vec<Value> = received(fx)
        .iter()
        .map(|r| r["data"]["nights"].clone())
        .collect();
    assert_eq!(got, [3, 3, 5, 4, 4, 6, 4]);
    let lines = audit_lines(fx);
    let seen: Vec<(&str, &str, Value, Value)> = lines
        .iter()
        .map(|l| {
            (
                l["principal"].as_str().unwrap(),
                l["origin"].as_str().unwrap(),
                l["default_offered"].clone(),
                l["default_kept"].clone(),
            )
        })
        .collect();
    let n = || json!(["nights"]);
    let none = Value::Null;
    assert_eq!(
        seen,
        [
            ("alice", "native", none.clone(), none.clone()),
            ("alice", "native", n(), n()),
            ("bob", "native", none.clone(), none.clone()),
            ("alice", "native", n(), none.clone()),
            ("alice", "native", n(), n()),
            ("bob", "native", n(), none.clone()),
            ("alice", "native", n(), n()),
        ],
        "{lines:#?}"
    );
    // Field names only: no answer and no offered value in the log.
    let text = std::fs::read_to_string(fx.path("audit.jsonl")).unwrap();
    for l in &lines {
        for (k, v) in l.as_object().unwrap() {
            assert!(
                !matches!(v, Value::Number(_)) || k == "answer_ms",
                "a number in the audit line's {k}: {l}"
            );
        }
    }
    assert!(!text.contains("\"default\""), "{text}");
}

/// An invalid answer to a question with a remembered default is asked again
/// by redmark with its red mark and the same default; the audit lines of the
/// attempt and of the answer both say it was offered, and only the answer
/// that keeps it says kept.
#[tokio::test]
async fn a_red_mark_re_ask_still_offers_the_default() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&config(&fx, &stdio_upstream(&fx))).await;
    let ep = McpClient::new(&gw.url);
    let op = Op::tool("book", json!({"hotel": "the Ritz"}))
        .caps(json!({"elicitation": {"form": {}}}))
        .key("alice-key");
    let q = input_required("tools/call", &op.start(&ep).await);
    complete(
        "tools/call",
        &op.answer(&ep, &q, accepted(json!({"nights": 2}))).await,
    );
    let q = input_required("tools/call", &op.start(&ep).await);
    let ask = q.request();
    assert_eq!(
        ask["params"]["requestedSchema"]["properties"]["nights"]["default"],
        2
    );
    // Another principal cannot use alice's state (it is bound to her).
    let r = Op::tool("book", json!({"hotel": "the Ritz"}))
        .caps(json!({"elicitation": {"form": {}}}))
        .key("bob-key")
        .answer(&ep, &q, accepted(json!({"nights": 2})))
        .await;
    assert_error(&r, 200, -32602, "state_wrong_principal");
    let r = op.answer(&ep, &q, accepted(json!({"nights": 0}))).await;
    let again = input_required("tools/call", &r);
    let ask = again.request();
    assert!(
        ask["params"]["message"].as_str().unwrap().contains('✗'),
        "{ask}"
    );
    assert_eq!(
        ask["params"]["requestedSchema"]["properties"]["nights"]["default"], 2,
        "{ask}"
    );
    complete(
        "tools/call",
        &op.answer(&ep, &again, accepted(json!({"nights": 2}))).await,
    );
    gw.stop().await;
    let lines = audit_lines(&fx);
    let seen: Vec<(&str, Value, Value)> = lines
        .iter()
        .map(|l| {
            (
                l["outcome"].as_str().unwrap(),
                l["default_offered"].clone(),
                l["default_kept"].clone(),
            )
        })
        .collect();
    let n = || json!(["nights"]);
    assert_eq!(
        seen,
        [
            ("accepted", Value::Null, Value::Null),
            ("invalid", n(), Value::Null),
            ("accepted", n(), n()),
        ],
        "{lines:#?}"
    );
}
