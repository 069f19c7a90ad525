//! One trace per operation across replicas: a two-round hold-mode operation
//! started on one `redmark` process and answered through the other. The
//! receiving replica's forward is a span of its own (`redmark.forward`, with
//! `redmark.forwarded_to`) in the operation's trace, under its root, which
//! lives on the owner: the trace context rides in the sealed state.
//!
//! Drives `tests/fixtures/mrtr_server.py` (FastMCP from mcp==1.30.0) and the
//! OTLP receiver of tests/observability_support.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod mrtr_support;
mod observability_support;

use std::collections::HashSet;

use common::*;
use mrtr_support::{accept, form_caps, secret};
use observability_support::{KIND_CLIENT, Receiver, root_of, trace_of};
use serde_json::json;

#[tokio::test]
async fn a_forwarded_round_is_a_span_in_the_operations_one_trace() {
    let receiver = Receiver::start(false).await;
    let fx = Fixture::new();
    let (state, cluster) = (secret(), secret());
    let mut replicas = Vec::new();
    for node in ["n1", "n2"] {
        let config = fx
            .cfg()
            .top(&format!("node_id = \"{node}\""))
            .top(&format!(
                "[[state.keys]]\nid = \"k1\"\nsecret = \"{state}\"\nsign = true\n"
            ))
            .top(&format!(
                "[cluster]\nlisten = \"127.0.0.1:0\"\nsecret = \"{cluster}\"\ndrain = \"1s\"\n"
            ))
            .build();
        let path = fx.path(&format!("{node}.toml"));
        std::fs::write(&path, config).unwrap();
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
            ("OTEL_SERVICE_NAME", format!("redmark-{node}")),
        ];
        replicas.push(RedmarkProcess::start(&path, false, &env).await);
    }
    let a = McpClient::new(replicas[0].url("/mcp"));
    let b = McpClient::new(replicas[1].url("/mcp"));
    let op = Op::tool("rounds", json!({"tag": "traced", "n": 2})).caps(form_caps());
    let asked = input_required(op.method, &op.start(&a).await);
    let r1 = op.answer(&b, &asked, accept("one")).await;
    let asked = input_required(op.method, &r1);
    let done = op.answer(&a, &asked, accept("two")).await;
    assert_eq!(output(&done)["tag"], "traced");
    receiver
        .wait_for("the root and the forward", |s| {
            root_of(s, "rounds").len() == 1 && s.iter().any(|s| s.name == "redmark.forward")
        })
        .await;
    for r in replicas {
        r.stop().await;
    }
    let spans = receiver.spans();
    let root = root_of(&spans, "rounds")[0];
    assert_eq!(root.service, "redmark-n1");
    let forward = spans.iter().find(|s| s.name == "redmark.forward").unwrap();
    assert_eq!(forward.service, "redmark-n2");
    assert_eq!(forward.str("redmark.forwarded_to"), "n1");
    assert_eq!(forward.kind, KIND_CLIENT);
    assert_eq!(forward.trace_id, root.trace_id, "one trace");
    assert_eq!(forward.parent, root.span_id, "under the operation's root");
    // One tree: every span of the trace but the root has its parent in it.
    let trace = trace_of(&spans, &root.trace_id);
    let ids: HashSet<&str> = trace.iter().map(|s| s.span_id.as_str()).collect();
    let tops: Vec<&str> = trace
        .iter()
        .filter(|s| !ids.contains(s.parent.as_str()))
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(tops.len(), 1, "one root: {tops:?}");
    let services: HashSet<&str> = trace.iter().map(|s| s.service.as_str()).collect();
    assert_eq!(services.len(), 2, "{services:?}");
}
