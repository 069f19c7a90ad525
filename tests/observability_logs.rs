//! The JSON logs of the real `redmark` binary (`--log-format json`): every
//! line about an operation carries its operation id and the trace id its
//! spans were exported under, and no answered or argument value appears in
//! any log line (nor in the spans of the same traffic).

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod observability_support;

use std::collections::BTreeSet;

use common::{McpClient, RedmarkProcess, accepted};
use observability_support::leaks::assert_no_leak;
use observability_support::*;
use serde_json::{Value, json};

/// The JSON log lines of one stderr, each parsed.
fn json_lines(stderr: &[String]) -> Vec<Value> {
    stderr
        .iter()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {l}"))
        })
        .collect()
}

/// A booking whose hint names people and places (Studio B is taken at 09:00
/// that day: the server asks `room`, then `alternative`), and a ticket whose
/// priority, given in advance without `requestState`, breaks a rule: red-marked,
/// then 2.
async fn booking_and_an_advance_answer(client: &McpClient) {
    let hint = "the big room for the okapi-lantern offsite";
    let op = tool_call(
        "book_room",
        json!({"day": "2026-09-17", "hour": 9, "room_hint": hint}),
        "log",
    );
    let answers = [
        ("room", json!({"room_id": "studio-b"})),
        ("alternative", json!({"choice": "nook"})),
    ];
    let resps = op
        .walk(client, 2, |round, q| {
            let (key, content) = &answers[round - 1];
            accept(q, key, content.clone())
        })
        .await;
    let done = resps.last().unwrap().result();
    assert_eq!(done["structuredContent"]["room_id"], "nook", "{done}");
    let advance = tool_call("create_ticket", json!({"title": TITLE}), "adv");
    let first = advance
        .send(
            client,
            json!({"inputResponses": {"priority": accepted(json!({"priority": 9000009}))}}),
        )
        .await;
    let done = advance
        .walk_on(client, first, 1, |_, q| {
            accept(q, "priority", json!({"priority": 2}))
        })
        .await;
    assert_eq!(done[1].result()["structuredContent"]["priority"], 2);
}

#[tokio::test]
async fn json_logs_carry_the_operation_and_trace_ids_and_no_values() {
    let receiver = Receiver::start(false).await;
    let dir = tempfile::tempdir().unwrap();
    let config = rooms_example_config(dir.path(), "");
    let gw = RedmarkProcess::start(&config, true, &otel_env(&receiver)).await;
    let client = client(gw.url("/mcp/rooms"));
    booking_and_an_advance_answer(&client).await;

    let stderr = gw.stop().await;
    let spans = receiver.spans();
    let roots = root_of(&spans, "book_room");
    assert_eq!(roots.len(), 1, "{spans:#?}");
    let root = roots[0];
    assert!(
        root.parent.is_empty(),
        "no caller context: the root starts a trace"
    );
    let op_id = root.str("redmark.operation.id").to_owned();

    let lines = json_lines(&stderr);
    let about: Vec<&Value> = lines
        .iter()
        .filter(|l| l.to_string().contains(&op_id))
        .collect();
    let messages: BTreeSet<&str> = about.iter().filter_map(|l| l["message"].as_str()).collect();
    assert!(about.len() >= 5, "too few lines about {op_id}: {about:#?}");
    for want in [
        "asking the client",
        "answer delivered to the server",
        "operation ended",
    ] {
        assert!(messages.contains(want), "no {want:?} line in {messages:?}");
    }
    for line in &about {
        assert_eq!(line["operation"], op_id.as_str(), "{line}");
        assert_eq!(line["trace_id"], root.trace_id.as_str(), "{line}");
    }
    // Any line that names an operation names its trace too.
    let named: Vec<&Value> = lines
        .iter()
        .filter(|l| l.get("operation").is_some())
        .collect();
    for line in &named {
        assert!(
            line["trace_id"].as_str().is_some_and(|t| t.len() == 32),
            "operation line without trace_id: {line}"
        );
    }
    let advance = "an answer given in advance broke a rule; asking with a red mark";
    assert!(named.iter().any(|l| l["message"] == advance), "{named:#?}");
    let all = stderr.join("\n");
    for value in ["studio-b", "nook", "okapi-lantern", "9000009", TITLE] {
        assert!(!all.contains(value), "{value:?} appears in the log:\n{all}");
    }
    let needles = [
        "studio-b",
        "nook",
        "okapi-lantern",
        "2026-09-17",
        "9000009",
        TITLE,
    ];
    assert_no_leak(&spans, &needles, &[]);
}
