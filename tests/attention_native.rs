//! Every question accounted once, for a native 2026-07-28 server's own
//! questions (PyPI `mcp` 2.3.0, tests/fixtures/native_py_server.py): red-mark
//! re-asks, an invalid answer ending the call, an authz denial, an
//! acceptance and a decline are one audit line and one
//! `redmark_questions_total` count each, and the report's totals are the
//! metric's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod native_upstream_support;

use std::collections::BTreeMap;

use common::*;
use native_upstream_support::*;
use redmark::telemetry::report::{By, Format};
use serde_json::{Value, json};

#[tokio::test]
async fn a_native_servers_questions_reconcile_with_the_metrics() {
    let fx = Fixture::new();
    let audit = fx.path("audit.jsonl");
    let top = format!("[audit]\npath = {}\n", toml_path(&audit));
    let gw = TestGateway::start(&config_with(&fx, &top, &stdio_upstream(&fx))).await;
    let ep = McpClient::new(&gw.url);
    let op = book();
    // Two re-asks, then the third invalid answer ends the call: 3 invalid.
    let q = input_required("tools/call", &op.start(&ep).await);
    let r = op.answer(&ep, &q, accepted(json!({"nights": -1}))).await;
    let q = input_required("tools/call", &r);
    let r = op.answer(&ep, &q, accepted(json!({"nights": 4e9}))).await;
    let q = input_required("tools/call", &r);
    let r = op.answer(&ep, &q, accepted(json!({"nights": 0}))).await;
    assert_error(&r, 200, -32602, "policy_invalid_answer");
    // Denied: 1.
    let q = input_required("tools/call", &op.start(&ep).await);
    let r = op.answer(&ep, &q, accepted(json!({"nights": 10}))).await;
    assert_error(&r, 200, -32602, "policy_denied");
    // Accepted and declined: 1 each.
    let q = input_required("tools/call", &op.start(&ep).await);
    complete(
        "tools/call",
        &op.answer(&ep, &q, accepted(json!({"nights": 2}))).await,
    );
    let q = input_required("tools/call", &op.start(&ep).await);
    op.answer(&ep, &q, json!({"action": "decline"})).await;
    let metrics = gw.metrics().await;
    gw.stop().await;

    let mut counted = BTreeMap::new();
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("redmark_questions_total{route=\"main\",tool=\"book\""))
    {
        let (labels, v) = line.rsplit_once(' ').unwrap();
        let outcome = labels
            .split("outcome=\"")
            .nth(1)
            .unwrap()
            .trim_end_matches("\"}");
        counted.insert(outcome.to_owned(), v.parse::<u64>().unwrap());
    }
    let want: BTreeMap<String, u64> = [
        ("accepted", 1),
        ("declined", 1),
        ("denied", 1),
        ("invalid", 3),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(counted, want, "{metrics}");
    let text =
        redmark::telemetry::report::run(std::slice::from_ref(&audit), None, Format::Json, By::Tool)
            .unwrap();
    let report: Value = serde_json::from_str(&text).unwrap();
    let outcomes: BTreeMap<String, u64> = report["total"]["outcomes"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    assert_eq!(outcomes, counted, "{report:#}");
    assert_eq!(report["total"]["native"], 6, "{report:#}");
    assert_eq!(report["total"]["operations"], 4, "{report:#}");
}
