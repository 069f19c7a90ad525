//! The policy shapes the question (issue 50): the form a client receives is
//! narrowed by the route's field rules (bounds, lengths, choices, format,
//! `required`), on every path; the server asks and hears as before; a field
//! nobody can answer is refused (`policy_unsatisfiable`); `shape_questions =
//! false` turns it off; and a person who answers only within the form
//! collects no red marks. Every test asserts on what the fixture received.

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
use serde_json::{Map, Value, json};

const POLICY: &str = r#"
[tool.ask.fields.amount]
minimum = 0
maximum = 100000
[tool.ask.fields.room]
enum = ["atrium", "nook"]
[tool.ask.fields.size]
maximum = 50
[tool.ask.fields.note]
max_length = 10
[tool.ask.fields.mail]
format = "email"
required = true
"#;

/// The server's form: no limits of its own but `size`'s.
fn server_form() -> Value {
    schema(
        json!({
            "amount": {"type": "number", "title": "Amount"},
            "room": {"type": "string", "title": "Room"},
            "size": {"type": "integer", "minimum": 1, "maximum": 1000},
            "note": {"type": "string"},
            "mail": {"type": "string"},
            "free": {"type": "string"},
        }),
        &[],
    )
}

/// The same form, as the policy narrows it.
fn narrowed_form() -> Value {
    json!({
        "type": "object",
        "properties": {
            "amount": {"type": "number", "title": "Amount", "minimum": 0, "maximum": 100000},
            "room": {"type": "string", "title": "Room", "enum": ["atrium", "nook"]},
            "size": {"type": "integer", "minimum": 1, "maximum": 50},
            "note": {"type": "string", "maxLength": 10},
            "mail": {"type": "string", "format": "email"},
            "free": {"type": "string"},
        },
        "required": ["mail"],
    })
}

fn valid(schema: &Value, content: &Value) -> bool {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .unwrap()
        .is_valid(content)
}

/// A person at a form UI: picks from choices, stays within the bounds and
/// lengths it shows, types an email where it asks for one, and otherwise
/// answers as people do (large amounts, long notes, free-text rooms).
fn person(schema: &Value) -> Value {
    let mut content = Map::new();
    for (field, p) in schema["properties"].as_object().unwrap() {
        let v = match p["type"].as_str().unwrap() {
            "number" | "integer" => p.get("maximum").cloned().unwrap_or(json!(5_000_000)),
            _ if p.get("enum").is_some() => p["enum"].as_array().unwrap().last().cloned().unwrap(),
            _ if p["format"] == "email" => json!("pat@example.com"),
            _ => {
                let text = "the blue room by the lift, please";
                let max = p.get("maxLength").and_then(Value::as_u64).unwrap_or(99) as usize;
                json!(text.chars().take(max).collect::<String>())
            }
        };
        // Where a field is named like an email the person types one.
        let v = if field == "mail" {
            json!("pat@example.com")
        } else {
            v
        };
        content.insert(field.clone(), v);
    }
    Value::Object(content)
}

#[tokio::test]
async fn a_2026_client_sees_the_narrowed_form_and_the_server_hears_a_valid_answer() {
    let fx = Fixture::with_policy(POLICY);
    let gw = fx.gateway().await;
    let call = ask(&server_form(), "Transfer?", "shaped");
    let r = call.start(&gw).await;
    let q = asked(&r);
    assert_eq!(q.request()["params"]["requestedSchema"], narrowed_form());
    // The server's words are unchanged: the form itself carries the rules.
    assert_eq!(q.message(), "Transfer?");
    let answer = person(&q.request()["params"]["requestedSchema"]);
    assert!(valid(&narrowed_form(), &answer));
    let out = output(&call.answer(&gw, &q, accepted(answer.clone())).await);
    assert_eq!(out["content"], answer);
    // What reached the server is valid under the form it asked, unchanged.
    let got = fx.log.answers("shaped");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(valid(&server_form(), &got[0]["content"]), "{got:?}");
    gw.stop().await;
}

#[tokio::test]
async fn a_field_nobody_can_answer_is_refused_and_never_shown() {
    let fx = Fixture::with_policy("[tool.ask.fields.size]\nminimum = 2000\n");
    let gw = fx.gateway().await;
    let r = ask(&server_form(), "Size?", "unsat").start(&gw).await;
    let data = assert_error(&r, 200, -32603, "policy_unsatisfiable").data();
    assert_eq!(data["field"], "size", "{}", r.raw);
    let message = r.error()["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("at least 2000 and at most 1000"),
        "{message}"
    );
    // The server is not left waiting: it hears the refusal.
    let heard = fx.log.only_answer("unsat").await;
    assert_eq!(
        heard["error"]["data"]["reason"], "policy_unsatisfiable",
        "{heard}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn shape_questions_false_sends_the_servers_form_per_route_and_per_tool() {
    // Per tool (the policy).
    let fx = Fixture::with_policy(&format!("[tool.ask]\nshape_questions = false\n{POLICY}"));
    let gw = fx.gateway().await;
    let q = asked(&ask(&server_form(), "m", "tool-off").start(&gw).await);
    assert_eq!(q.request()["params"]["requestedSchema"], server_form());
    gw.stop().await;
    // Per route (the config); the policy's rules still judge the answer.
    let fx = Fixture::with_policy(POLICY);
    let config = fx.config("").replacen(
        "path = \"/mcp\"\n",
        "path = \"/mcp\"\nshape_questions = false\n",
        1,
    );
    let gw = TestGateway::start(&config).await;
    let call = ask(&server_form(), "m", "route-off");
    let q = asked(&call.start(&gw).await);
    assert_eq!(q.request()["params"]["requestedSchema"], server_form());
    let again = asked(&call.answer(&gw, &q, accepted(person(&server_form()))).await);
    assert!(
        again.message().contains("✗ amount must be at most 100000"),
        "{}",
        again.message()
    );
    gw.stop().await;
}

/// Item 5 of the issue: the same 30 questions, a person who answers only
/// within what the form shows. Narrowed: no red mark. The server's form:
/// a red mark for every question, the one its bounds catch.
#[tokio::test]
async fn thirty_questions_answered_within_the_form_need_no_red_mark_when_narrowed() {
    let forms = [
        json!({"amount": {"type": "number"}}),
        json!({"room": {"type": "string"}}),
        json!({"note": {"type": "string"}, "size": {"type": "integer", "maximum": 40}}),
    ];
    let mut counts = Vec::new();
    for shaped in [true, false] {
        let policy = if shaped {
            POLICY.to_owned()
        } else {
            format!("[defaults]\nshape_questions = false\n{POLICY}")
        };
        let fx = Fixture::with_policy(&policy);
        let gw = fx.gateway().await;
        let mut marks = 0;
        for i in 0..30 {
            let tag = format!("q{i}");
            let form = schema(forms[i % 3].clone(), &[]);
            let call = ask(&form, "Please answer", &tag);
            let mut r = call.start(&gw).await;
            loop {
                if r.last()["result"]["resultType"] != "input_required" {
                    break;
                }
                let q = asked(&r);
                if q.message().contains('✗') {
                    marks += 1;
                    assert!(marks <= 60, "a person who never learns: {}", q.message());
                }
                let shown = &q.request()["params"]["requestedSchema"];
                let mut answer = person(shown);
                if q.message().contains('✗') {
                    // Told by the red mark, the person corrects it.
                    answer = json!({"amount": 100, "room": "nook", "note": "ok", "size": 3});
                    answer
                        .as_object_mut()
                        .unwrap()
                        .retain(|k, _| shown["properties"].get(k).is_some());
                }
                r = call.answer(&gw, &q, accepted(answer)).await;
            }
            let out = output(&r);
            assert_eq!(out["action"], "accept", "{out}");
            let got = fx.log.answers(&tag);
            assert!(valid(&form, &got[0]["content"]), "{got:?}");
        }
        counts.push(marks);
        gw.stop().await;
    }
    assert_eq!(counts, [0, 30], "red marks with narrowing, then without");
}

#[tokio::test]
async fn real_clients_of_both_eras_receive_the_narrowed_form() {
    let fx = Fixture::with_policy(POLICY);
    let gw = fx.gateway().await;
    let answer = person(&narrowed_form());
    for (era, tag) in [("2026", "py2026"), ("2025", "py2025")] {
        let script = json!({
            "steps": [{"op": "call_tool", "name": "ask", "arguments": {
                "schema": server_form().to_string(), "message": "Transfer?", "tag": tag}}],
            "elicitation": [{"action": "accept", "content": answer}],
        });
        let out = if era == "2026" {
            py_client(&gw.url, &script).await
        } else {
            py_client_2025(&gw.url, &script).await
        };
        let shown: Vec<&Value> = out
            .iter()
            .filter(|l| l["event"] == "elicitation")
            .map(|l| &l["requestedSchema"])
            .collect();
        // The SDK parsed the narrowed form into its own types, and it is the narrowed form.
        assert_eq!(shown, [&narrowed_form()], "{era}: {out:#?}");
        assert!(valid(shown[0], &answer), "{era}");
        let done = out.iter().find(|l| l["step"] == 0).unwrap();
        assert_eq!(done["ok"], true, "{era}: {out:#?}");
        let got = fx.log.answers(tag);
        assert_eq!(got.len(), 1, "{era}: {got:?}");
        assert_eq!(got[0]["content"], answer, "{era}");
        assert!(valid(&server_form(), &got[0]["content"]), "{era}");
    }
    gw.stop().await;
}
