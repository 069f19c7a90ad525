//! The JSON samples of the book's tour (docs/src/tour.md: "A round trip with
//! curl" and "The round trip") and of the README's five-minute tour against
//! what the code prints, so they cannot drift. They show the answers to the
//! requests `scripts/example.sh --demo` sends to the rooms example; this test
//! sends the same requests to the shipped example config and compares each
//! sample with the answer of the same JSON-RPC id: the same keys at every
//! level, the same array lengths, the same values, except where a sample
//! elides (`…` inside a string: any string; `{…}`: any value).

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;

use std::collections::BTreeMap;

use base64::Engine as _;
use common::*;
use serde_json::{Value, json};

const ELIDED: char = '…';

/// The text of `page` from the heading `from` to the next `to` after it.
fn section<'a>(page: &'a str, from: &str, to: &str) -> &'a str {
    let start = page
        .find(from)
        .unwrap_or_else(|| panic!("no {from:?} in the page"));
    let body = start + from.len();
    let len = page[body..]
        .find(to)
        .unwrap_or_else(|| panic!("no {to:?} after {from:?}"));
    &page[start..body + len]
}

/// The ```json blocks of `text`, parsed; `{…}` (an elided object) becomes
/// the string "…", which matches anything.
fn json_blocks(text: &str) -> Vec<Value> {
    text.split("```json\n")
        .skip(1)
        .map(|block| {
            let body = &block[..block.find("```").expect("a closed ```json block")];
            let body = body.replace("{…}", "\"…\"");
            serde_json::from_str(&body)
                .unwrap_or_else(|e| panic!("a sample is not JSON ({e}):\n{body}"))
        })
        .collect()
}

/// Where `sample` (from the docs) differs from `actual` (what the code
/// printed), as `path: what` lines.
fn differences(sample: &Value, actual: &Value, path: &str, out: &mut Vec<String>) {
    match (sample, actual) {
        (Value::String(s), _) if s == "…" => {}
        (Value::String(s), Value::String(_)) if s.contains(ELIDED) => {}
        (Value::Object(s), Value::Object(a)) => {
            for key in s.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!("{path}.{key}: in the sample, not printed"));
            }
            for key in a.keys().filter(|k| !s.contains_key(*k)) {
                out.push(format!("{path}.{key}: printed, not in the sample"));
            }
            for (key, s) in s {
                if let Some(a) = a.get(key) {
                    differences(s, a, &format!("{path}.{key}"), out);
                }
            }
        }
        (Value::Array(s), Value::Array(a)) if s.len() == a.len() => {
            for (i, (s, a)) in s.iter().zip(a).enumerate() {
                differences(s, a, &format!("{path}[{i}]"), out);
            }
        }
        (s, a) if s == a => {}
        (s, a) => out.push(format!("{path}: sample {s}, printed {a}")),
    }
}

/// Whether a requestState token reads as anything but noise: its part after
/// the key id base64url-decodes to JSON or to printable text. A sealed token
/// decodes to random bytes.
fn readable(token: &str) -> bool {
    let body = token.split_once('.').map_or(token, |(_, b)| b);
    let body = body.trim_end_matches(ELIDED);
    // base64url of `{"` is `eyJ`: what a signed-but-not-sealed token starts with.
    if body.starts_with("eyJ") {
        return true;
    }
    let usable = &body[..body.len() / 4 * 4];
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(usable)
        .is_ok_and(|bytes| {
            bytes.len() >= 16
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_graphic() || *b == b' ' || *b == b'\n')
        })
}

/// Every `requestState` string in `v`.
fn request_states(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, v) in o {
                match v {
                    Value::String(s) if k == "requestState" => out.push(s.clone()),
                    _ => request_states(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| request_states(v, out)),
        _ => {}
    }
}

/// The requests of `scripts/example.sh --demo`, in order: (Mcp-Method,
/// Mcp-Name, body); `STATE` stands for the previous answer's requestState.
fn demo_requests() -> Vec<(&'static str, Option<&'static str>, Value)> {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let emeta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                       "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let big = json!({"day": "2026-09-17", "hour": 9, "room_hint": "the big room"});
    vec![
        (
            "server/discover",
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}),
        ),
        (
            "tools/list",
            None,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}}),
        ),
        (
            "tools/call",
            Some("book_room"),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "book_room",
                "arguments": {"day": "2026-09-18", "hour": 11, "room_hint": "nook"},
                "_meta": meta}}),
        ),
        (
            "tools/call",
            Some("book_room"),
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "book_room", "arguments": big, "_meta": emeta}}),
        ),
        (
            "tools/call",
            Some("book_room"),
            json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
                "name": "book_room", "arguments": big,
                "inputResponses": {"room": {"action": "accept", "content": {"room_id": "studio-b"}}},
                "requestState": "STATE", "_meta": emeta}}),
        ),
        (
            "tools/call",
            Some("book_room"),
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
                "name": "book_room", "arguments": big,
                "inputResponses": {"alternative": {"action": "accept", "content": {"choice": "nook"}}},
                "requestState": "STATE", "_meta": emeta}}),
        ),
    ]
}

#[tokio::test]
async fn the_round_trip_samples_are_what_the_rooms_example_prints() {
    let tour = std::fs::read_to_string(repo().join("docs/src/tour.md")).unwrap();
    let mut samples = json_blocks(section(
        &tour,
        "\n## A round trip with curl\n",
        "\n## The round trip: ",
    ));
    samples.extend(json_blocks(section(
        &tour,
        "\n## The round trip: ",
        "\n## ",
    )));
    let samples: BTreeMap<i64, Value> = samples
        .into_iter()
        .map(|s| (s["id"].as_i64().expect("a sample answers an id"), s))
        .collect();
    // The samples this test stands behind; a new one needs a request here.
    assert_eq!(
        samples.keys().copied().collect::<Vec<_>>(),
        [1, 3, 7, 8, 9],
        "the tour's samples by id"
    );
    // The README's short tour shows some of the same answers: each is held
    // to what is printed too (and so to the book's).
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let front_door: Vec<Value> =
        json_blocks(section(&readme, "\n## Five minutes with curl\n", "\n## "));
    let front_door: Vec<(i64, Value)> = front_door
        .into_iter()
        .map(|s| (s["id"].as_i64().expect("a README sample answers an id"), s))
        .collect();
    assert!(!front_door.is_empty(), "the README's tour shows no answer");

    let dir = tempfile::tempdir().unwrap();
    let gw = RedmarkProcess::start(&rooms_example(dir.path()), false, &[]).await;
    let url = gw.url("/mcp/rooms");
    let http = reqwest::Client::new();
    let mut printed = BTreeMap::new();
    let mut state = String::new();
    for (method, name, mut body) in demo_requests() {
        if body["params"]["requestState"] == "STATE" {
            body["params"]["requestState"] = json!(state);
        }
        let mut req = http
            .post(&url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", method);
        if let Some(name) = name {
            req = req.header("Mcp-Name", name);
        }
        let answer: Value = req.json(&body).send().await.unwrap().json().await.unwrap();
        if let Some(s) = answer["result"]["requestState"].as_str() {
            state = s.to_owned();
        }
        printed.insert(body["id"].as_i64().unwrap(), answer);
    }
    gw.stop().await;

    let mut diffs = Vec::new();
    for (id, sample) in &samples {
        differences(sample, &printed[id], &format!("tour id {id}"), &mut diffs);
    }
    for (id, sample) in &front_door {
        let Some(actual) = printed.get(id) else {
            diffs.push(format!("README id {id}: no such request in the demo"));
            continue;
        };
        differences(sample, actual, &format!("README id {id}"), &mut diffs);
    }
    assert!(
        diffs.is_empty(),
        "samples differ from what redmark prints:\n{}\nprinted: {printed:#?}",
        diffs.join("\n")
    );

    // Tokens are sealed: neither the tour's samples nor the real ones read
    // as anything, and the samples carry the key id the example really uses.
    let (mut shown, mut real) = (Vec::new(), Vec::new());
    samples.values().for_each(|s| request_states(s, &mut shown));
    printed.values().for_each(|p| request_states(p, &mut real));
    assert_eq!((shown.len(), real.len()), (2, 2), "{shown:?} {real:?}");
    let mut front_door_states = Vec::new();
    front_door
        .iter()
        .for_each(|(_, s)| request_states(s, &mut front_door_states));
    for token in shown.iter().chain(&real).chain(&front_door_states) {
        assert!(!readable(token), "a readable requestState: {token}");
    }
    for (shown, real) in shown.iter().zip(&real) {
        let kind = |t: &str| t.split(['-', '.']).next().unwrap_or_default().to_owned();
        assert_eq!(kind(shown), kind(real), "key id of {shown} vs {real}");
    }
}

/// The detector above is not vacuous: an old sample of the docs, a token
/// whose payload was base64url JSON, reads as readable.
#[test]
fn a_base64_json_token_is_readable_and_a_sealed_one_is_not() {
    assert!(readable("k1.eyJ2IjoxLCJvcCI6IjNi…In0.UtL7Jcgq…"));
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(br#"operation 3b, round 2, mode hold, principal anonymous"#);
    assert!(readable(&format!("k1.{payload}")));
    assert!(!readable(
        "ephemeral-55b84931.-4YyCiReJsn7uaRxwLKf_Q1Rnztlu2EA5GKKqYPNb0_Owejit…"
    ));
}
