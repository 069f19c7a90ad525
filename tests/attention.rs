//! What questions cost people, end to end: every question accounted once
//! (the report's totals agree with the `redmark_questions` and
//! `redmark_operations` metrics over the same traffic), and the suggestions
//! `redmark report` makes from real traffic.
//!
//! Drives `tests/fixtures/mrtr_server.py` (FastMCP from the `mcp` package)
//! with 2026-07-28 and 2025-era clients.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod mrtr_support;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use mrtr_support::*;
use redmark::telemetry::report::{By, Format};
use serde_json::{Value, json};

/// `redmark_<family>_total{route="main",...,outcome="X"}` summed by outcome.
fn by_outcome(metrics: &str, family: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let prefix = format!("redmark_{family}_total{{route=\"main\",");
    for line in metrics.lines().filter(|l| l.starts_with(&prefix)) {
        let (labels, value) = line.rsplit_once(' ').unwrap();
        let outcome = labels
            .split("outcome=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap();
        *out.entry(outcome.to_owned()).or_insert(0.0) += value.parse::<f64>().unwrap();
    }
    out
}

fn json_report(audit: &std::path::Path) -> Value {
    let text =
        redmark::telemetry::report::run(&[audit.to_path_buf()], None, Format::Json, By::Tool)
            .expect("report");
    serde_json::from_str(&text).unwrap()
}

/// Every way a question ends, on both eras: accepted, declined, cancelled,
/// turned into a tool error (model-owned), declined on the user's behalf
/// (`on_missing_capability = "decline"`), refused for a missing capability,
/// and a 2025-era client's pushed question. Each is one audit line and one
/// count of `redmark_questions`, and the report's totals are the metrics'.
#[tokio::test]
async fn the_reports_totals_are_the_metrics_totals() {
    let fx = Fixture::new();
    let audit = fx.path("audit.jsonl");
    let policy = fx.policy("[tool.ctx_ask]\nmodel_owned = [\"name\"]\n");
    let gw = TestGateway::start(
        &fx.cfg()
            .route("on_missing_capability = \"decline\"")
            .route(&policy)
            .top(&format!("[audit]\npath = {}\n", toml_path(&audit)))
            .build(),
    )
    .await;
    let caps = json!({"elicitation": {"form": {}}});
    for (tag, answer) in [("t1", accept("Ada")), ("t2", decline()), ("t3", cancel())] {
        let op = Op::tool("ask", json!({"tag": tag})).caps(caps.clone());
        let resps = op.walk(&gw, 1, |_, q| q.reply_only(answer.clone())).await;
        assert_eq!(
            resps[1].result()["resultType"],
            "complete",
            "{}",
            resps[1].raw
        );
    }
    // Model-owned: a precise tool error, never a dialog.
    let owned = Op::tool("ctx_ask", json!({"tag": "t4"})).caps(caps.clone());
    let r = owned.start(&gw).await;
    assert_eq!(r.result()["isError"], true, "{}", r.raw);
    // Declined for the user, and refused for a capability nobody can decline for.
    let pushy = Op::tool("pushy", json!({"tag": "t5"})).caps(json!({}));
    assert_eq!(output(&pushy.start(&gw).await)["action"], "decline");
    let sample = Op::tool("sample", json!({"tag": "t6"})).caps(json!({}));
    assert_eq!(sample.start(&gw).await.reason(), "missing_capability");
    // A 2025-era client: the question is pushed on the call's stream.
    let mut s = Session2025::new(&gw.url);
    assert_eq!(s.initialize("2025-11-25", caps.clone()).await.status, 200);
    let mut stream = s
        .stream(
            json!(7),
            "tools/call",
            json!({"name": "ask", "arguments": {"tag": "t7"}}),
        )
        .await;
    let q = stream
        .next(Duration::from_secs(60))
        .await
        .expect("a pushed question");
    assert_eq!(q["method"], "elicitation/create", "{q}");
    assert_eq!(s.answer(&q["id"], accept("Grace")).await, 202);
    let done = stream
        .next(Duration::from_secs(60))
        .await
        .expect("the call's answer");
    assert_eq!(done["id"], 7, "{done}");
    settled(&gw).await;

    let metrics = gw.metrics().await;
    gw.stop().await;
    let questions = by_outcome(&metrics, "questions");
    let want: BTreeMap<String, f64> = [
        ("accepted", 2.0),
        ("cancelled", 1.0),
        ("declined", 1.0),
        ("refused", 3.0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(questions, want, "{metrics}");

    let report = json_report(&audit);
    let total = &report["total"];
    let outcomes: BTreeMap<String, f64> = total["outcomes"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
        .collect();
    assert_eq!(outcomes, questions, "{report:#}");
    assert_eq!(total["asked"].as_f64(), Some(questions.values().sum()));
    // Every operation here asked exactly one question, so the report's
    // operations are the metric's.
    let operations: f64 = by_outcome(&metrics, "operations").values().sum();
    assert_eq!(operations, 7.0, "{metrics}");
    assert_eq!(total["operations"].as_f64(), Some(operations), "{report:#}");
    // The model-owned question is accounted with its reason, at no attention.
    let lines: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let owned = lines
        .iter()
        .find(|l| l["tool"] == "ctx_ask")
        .expect("ctx_ask audited");
    assert_eq!(owned["verdict"], "policy_model_owned", "{owned}");
    assert_eq!(owned["outcome"], "refused", "{owned}");
}

fn report_bin(audit: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_redmark"))
        .arg("report")
        .arg("--audit")
        .arg(audit)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Thirty meetings booked through the rooms example whose room was already
/// in the call's arguments (`location: "Nook"`, answered `room_id: "nook"`):
/// `redmark report` suggests `model_owned = ["room_id"]` for `book_meeting`,
/// with the evidence and the attention it would have saved, and no
/// `remember` for the same field (the value was the model's, not the person's).
#[tokio::test]
async fn thirty_redundant_questions_suggest_model_owned() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let gw = TestGateway::start(&rooms_config(&format!(
        "[audit]\npath = {}\n",
        toml_path(&audit)
    )))
    .await;
    for i in 0..30 {
        let op = Op::tool(
            "book_meeting",
            json!({"start": format!("2026-09-{:02}T09:00", 1 + i % 28), "location": "Nook"}),
        )
        .caps(json!({"elicitation": {}}));
        let resps = op
            .walk(&gw, 1, |_, q| {
                q.reply_only(json!({"action": "accept", "content": {"room_id": "nook"}}))
            })
            .await;
        assert_eq!(
            resps[1].result()["resultType"],
            "complete",
            "{}",
            resps[1].raw
        );
    }
    settled(&gw).await;
    gw.stop().await;

    model_owned_suggested(&audit);
}

/// A real client's traffic gives the same suggestion: the PyPI `mcp` 2.x
/// 2026-07-28 `Client` (tests/peers/py_client.py) books the thirty meetings
/// itself, its elicitation callback answering each question.
#[tokio::test]
async fn thirty_redundant_questions_from_a_real_client_suggest_model_owned() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let gw = TestGateway::start(&rooms_config(&format!(
        "[audit]\npath = {}\n",
        toml_path(&audit)
    )))
    .await;
    let steps: Vec<Value> = (0..30)
        .map(|i| {
            json!({"op": "call_tool", "name": "book_meeting", "id": i.to_string(),
                "arguments": {"start": format!("2026-09-{:02}T09:00", 1 + i % 28), "location": "Nook"}})
        })
        .collect();
    let script = json!({
        "steps": steps,
        "elicitation": vec![json!({"action": "accept", "content": {"room_id": "nook"}}); 30],
    });
    let out = py_client(&gw.url, &script).await;
    let done: Vec<&Value> = out.iter().filter(|l| l.get("step").is_some()).collect();
    assert_eq!(done.len(), 30, "{out:#?}");
    for l in done {
        assert_eq!(l["ok"], true, "{l}");
    }
    let asked = out.iter().filter(|l| l["event"] == "elicitation").count();
    assert_eq!(asked, 30, "{out:#?}");
    settled(&gw).await;
    gw.stop().await;
    model_owned_suggested(&audit);
}

/// `redmark report` over thirty redundant `room_id` answers: one suggestion,
/// `model_owned = ["room_id"]` for `book_meeting`, with its evidence and the
/// hours it would have saved; none under a stricter minimum sample.
fn model_owned_suggested(audit: &std::path::Path) {
    let v: Value = serde_json::from_str(&report_bin(audit, &["--format", "json"])).unwrap();
    let s = v["suggestions"].as_array().unwrap();
    assert_eq!(s.len(), 1, "{v:#}");
    assert_eq!(s[0]["kind"], "model_owned");
    assert_eq!(s[0]["tool"], "book_meeting");
    assert_eq!(s[0]["field"], "room_id");
    assert_eq!(
        s[0]["policy"],
        json!(["[tool.book_meeting]", "model_owned = [\"room_id\"]"])
    );
    assert!(
        s[0]["evidence"].as_str().unwrap().starts_with("30 of 30"),
        "{}",
        s[0]["evidence"]
    );
    let saved = s[0]["hours_saved"].as_f64().unwrap();
    let spent = v["total"]["redundant_hours"].as_f64().unwrap();
    assert!((saved - spent).abs() < 1e-9, "{saved} vs {spent}");
    // The same person gave the same room every time, but it was never theirs.
    let lines = std::fs::read_to_string(audit).unwrap();
    assert!(
        lines.contains("\"repeated_fields\":[\"room_id\"]"),
        "{lines}"
    );
    // The table names the lines to add.
    let table = report_bin(audit, &[]);
    assert!(table.contains("model_owned = [\"room_id\"]"), "{table}");
    // A stricter threshold than the traffic: nothing.
    let strict = report_bin(audit, &["--format", "json", "--min-sample", "31"]);
    let v: Value = serde_json::from_str(&strict).unwrap();
    assert_eq!(v["suggestions"], json!([]), "{v:#}");
}
