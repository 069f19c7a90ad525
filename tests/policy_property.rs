//! The property of issue 4: no answer that violates a policy ever reaches
//! the upstream. Generated answers (numbers on both sides of the bounds,
//! wrong types, strings failing patterns and formats, values outside enums,
//! answers only one principal may give, extra fields) go through one running
//! gateway to the fixture server; an oracle written here, independently of
//! redmark's own checks, says which must pass. Every answer the fixture
//! received must satisfy it, and every other answer must have been refused.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod policy_support;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use policy_support::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Map, Value, json};

const FRAN: &str = "property-key-fran";
const DANA: &str = "property-key-dana";

/// The policy: tighter than the server's schema on every field it names.
const POLICY: &str = r#"
[defaults]
on_invalid = "error"
[tool.ask.fields.amount]
minimum = 0
maximum = 100000
[tool.ask.fields.code]
pattern = '^[A-Z]{3}-[0-9]{2}$'
required = true
[tool.ask.fields.room]
enum = ["studio-b", "nook"]
authz = 'value != "nook" || "facilities" in principal.groups'
authz_message = "the Nook is for facilities"
"#;

/// The server's own schema.
fn form() -> Value {
    schema(
        json!({
            "amount": {"type": "number", "minimum": -50, "maximum": 1_000_000_000},
            "code": {"type": "string", "maxLength": 6},
            "room": {"type": "string", "enum": ["atrium", "studio-b", "nook"]},
            "when": {"type": "string", "format": "date"},
            "count": {"type": "integer", "minimum": 1, "maximum": 9},
        }),
        &["amount", "room"],
    )
}

const FIELDS: [&str; 5] = ["amount", "code", "room", "when", "count"];

/// Whether `content` (as the server would receive it) satisfies schema and
/// policy, apart from authorization.
fn valid(content: &Map<String, Value>) -> bool {
    let amount = content.get("amount").and_then(Value::as_f64);
    let code = content.get("code").and_then(Value::as_str);
    let room = content.get("room").and_then(Value::as_str);
    amount.is_some_and(|a| (0.0..=100_000.0).contains(&a))
        && code.is_some_and(|c| {
            let b = c.as_bytes();
            b.len() == 6
                && b[..3].iter().all(u8::is_ascii_uppercase)
                && b[3] == b'-'
                && b[4..].iter().all(u8::is_ascii_digit)
        })
        && room.is_some_and(|r| r == "studio-b" || r == "nook")
        && content.get("when").is_none_or(|w| {
            w.as_str()
                .is_some_and(|w| ["2026-09-17", "2024-02-29"].contains(&w))
        })
        && content
            .get("count")
            .is_none_or(|c| c.as_i64().is_some_and(|c| (1..=9).contains(&c)))
}

/// Whether `principal` may give `content` (which is otherwise valid).
fn allowed(principal: &str, content: &Map<String, Value>) -> bool {
    content.get("room") != Some(&json!("nook")) || principal == "fran"
}

/// One generated answer.
#[derive(Debug, Clone)]
struct Case {
    principal: &'static str,
    action: &'static str,
    content: Map<String, Value>,
}

/// Values that pass, and values that break the schema or the policy, per field.
fn pools() -> [(Vec<Value>, Vec<Value>); 5] {
    [
        (
            vec![
                json!(0),
                json!(1),
                json!(250),
                json!(99_999.5),
                json!(100_000),
            ],
            vec![
                json!(-1),
                json!(100_000.01),
                json!(100_001),
                json!(4_000_000_000u64),
                json!(-50),
                json!(-50.5),
                json!("250"),
                json!(true),
            ],
        ),
        (
            vec![json!("ABC-12"), json!("XYZ-99")],
            vec![
                json!("abc-12"),
                json!("ABC-123"),
                json!("AB-12"),
                json!("ABC-1x"),
                json!(""),
                json!(12),
                json!(["ABC-12"]),
            ],
        ),
        (
            vec![json!("studio-b"), json!("nook")],
            vec![json!("atrium"), json!("gym"), json!("Nook"), json!(1)],
        ),
        (
            vec![json!("2026-09-17"), json!("2024-02-29")],
            vec![
                json!("2026-13-01"),
                json!("17/09/2026"),
                json!(""),
                json!(20_260_917),
            ],
        ),
        (
            vec![json!(1), json!(5), json!(9)],
            vec![json!(0), json!(10), json!(2.5), json!("3")],
        ),
    ]
}

/// A valid answer (optional fields present or not), then up to two fields
/// replaced by any value (valid or not) or removed, plus extra fields.
fn cases() -> impl Strategy<Value = Case> {
    let [a, c, r, w, n] = pools().map(|(good, _)| prop::sample::select(good));
    let base = (a, c, r, prop::option::of(w), prop::option::of(n));
    let any: Vec<Option<Value>> = pools()
        .into_iter()
        .flat_map(|(good, bad)| good.into_iter().chain(bad))
        .map(Some)
        .chain([None])
        .collect();
    let mutation = (0..FIELDS.len(), prop::sample::select(any));
    let mutations = prop::collection::vec(mutation, 0..=2);
    let extras = prop::collection::vec(
        prop::sample::select(vec![
            ("injected", json!("DROP TABLE rooms")),
            ("admin", json!(true)),
            ("amount_override", json!(4_000_000_000u64)),
            ("tags", json!(["a", "b"])),
        ]),
        0..3,
    );
    let mut actions = vec!["accept"; 18];
    actions.extend(["decline", "cancel"]);
    (
        prop::sample::select(vec!["fran", "dana"]),
        prop::sample::select(actions),
        base,
        mutations,
        extras,
    )
        .prop_map(|(principal, action, (a, c, r, w, n), mutations, extras)| {
            let mut content = Map::new();
            for (k, v) in extras {
                content.insert(k.to_owned(), v);
            }
            for (k, v) in FIELDS.into_iter().zip([Some(a), Some(c), Some(r), w, n]) {
                if let Some(v) = v {
                    content.insert(k.to_owned(), v);
                }
            }
            for (i, v) in mutations {
                match v {
                    Some(v) => content.insert(FIELDS[i].to_owned(), v),
                    None => content.remove(FIELDS[i]),
                };
            }
            Case {
                principal,
                action,
                content,
            }
        })
}

/// The fields the server asked for.
fn asked_for(content: &Map<String, Value>) -> Map<String, Value> {
    content
        .iter()
        .filter(|(k, _)| FIELDS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Runs one case, checks the gateway's verdict against the oracle, and says which it was.
async fn run(fx: &Fixture, gw: &TestGateway, tag: &str, case: &Case) -> &'static str {
    let key = if case.principal == "fran" { FRAN } else { DANA };
    let call = ask(&form(), "Book it", tag).key(key);
    let q = asked(&call.start(gw).await);
    let answer = match case.action {
        "accept" => json!({"action": "accept", "content": case.content}),
        other => json!({"action": other}),
    };
    let r = call.answer(gw, &q, answer).await;
    let kept = asked_for(&case.content);
    let got = received(&fx.log.only_answer(tag).await);
    if case.action != "accept" {
        assert_eq!(output(&r)["action"], case.action);
        assert_eq!(got, json!({"action": case.action}), "{case:?}");
        "unanswered"
    } else if !valid(&kept) {
        let data = assert_error(&r, 200, -32602, "policy_invalid_answer").data();
        assert!(
            FIELDS.contains(&data["field"].as_str().unwrap_or_default()),
            "{data}"
        );
        assert_eq!(got, json!({"action": "cancel"}), "{case:?}");
        "invalid"
    } else if !allowed(case.principal, &kept) {
        assert_eq!(
            assert_error(&r, 200, -32602, "policy_denied").data()["field"],
            "room",
            "{case:?}"
        );
        assert_eq!(got, json!({"action": "cancel"}), "{case:?}");
        "denied"
    } else {
        assert_eq!(output(&r)["content"], Value::Object(kept.clone()));
        assert_eq!(
            got,
            json!({"action": "accept", "content": kept}),
            "{case:?}"
        );
        "accepted"
    }
}

#[test]
fn no_answer_that_violates_the_policy_reaches_the_server() {
    let fx = Fixture::with_policy(POLICY);
    let top = api_key(FRAN, "fran", &["facilities"]) + &api_key(DANA, "dana", &["design"]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let gw = rt.block_on(TestGateway::start(&fx.config(&top)));
    let config = Config {
        cases: 100,
        failure_persistence: None,
        max_shrink_iters: 200,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let n = AtomicUsize::new(0);
    let seen = Mutex::new(BTreeMap::<&str, usize>::new());
    let result = runner.run(&cases(), |case| {
        let tag = format!("{}-{}", n.fetch_add(1, Ordering::Relaxed), case.principal);
        let outcome = rt.block_on(run(&fx, &gw, &tag, &case));
        *seen.lock().unwrap().entry(outcome).or_default() += 1;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Over the whole run: every accept the server received passes the oracle
    // for the principal who gave it, and carries only fields it asked for.
    let answers = fx
        .log
        .events()
        .into_iter()
        .filter(|e| e["event"] == "answer");
    for a in answers {
        let principal = a["tag"].as_str().unwrap().split('-').nth(1).unwrap();
        match a["action"].as_str() {
            Some("accept") => {
                let content = a["content"].as_object().expect("content");
                assert!(valid(content) && allowed(principal, content), "{a}");
                assert_eq!(content, &asked_for(content), "{a}");
            }
            Some("decline" | "cancel") => {}
            _ => panic!("unexpected answer {a}"),
        }
    }
    // The generator reaches every side of the line.
    let seen = seen.into_inner().unwrap();
    for outcome in ["accepted", "invalid", "denied", "unanswered"] {
        assert!(seen.get(outcome).is_some_and(|n| *n >= 3), "{seen:?}");
    }
    rt.block_on(gw.stop());
}
