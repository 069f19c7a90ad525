//! What the guard lets a server ask: flat forms, no secrets, URL mode's
//! hosts, how many questions at once, and model-owned fields turned into
//! guidance for the model.

use serde_json::json;

use super::super::guard::{Verdict, check, looks_secret};
use super::*;

#[test]
fn flat_forms_pass_and_nested_forms_are_refused() {
    let p = Policy::default();
    let flat = form(json!({
        "name": {"type": "string", "title": "Name", "minLength": 1},
        "n": {"type": "integer", "minimum": 1, "maximum": 5, "default": 3},
        "ok": {"type": "boolean"},
        "pick": {"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]},
        "titled": {"type": "string", "oneOf": [{"const": "a", "title": "A"}]},
        "many": {"type": "array", "items": {"type": "string", "enum": ["x"]}, "minItems": 1},
        "manyTitled": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}]}},
    }));
    assert_eq!(check(&p, "t", "elicitation/create", &flat, 1), Verdict::Ask);
    for nested in [
        json!({"address": {"type": "object", "properties": {"country": {"type": "string"}}}}),
        json!({"tags": {"type": "array", "items": {"type": "object"}}}),
        json!({"maybe": {"type": ["string", "null"]}}),
        json!({"ref": {"$ref": "#/defs/x"}}),
    ] {
        match check(&p, "t", "elicitation/create", &form(nested.clone()), 1) {
            Verdict::Refuse(r) => {
                assert_eq!(r.reason.as_str(), "policy_schema_not_flat", "{nested}");
            }
            other => panic!("{nested} passed: {other:?}"),
        }
    }
}

#[test]
fn secrets_are_refused_in_forms() {
    let p = Policy::default();
    for (name, prop) in [
        ("password", json!({"type": "string"})),
        ("apiKey", json!({"type": "string"})),
        (
            "db",
            json!({"type": "string", "title": "Database password"}),
        ),
        (
            "x",
            json!({"type": "string", "description": "Your API key"}),
        ),
        ("card_number", json!({"type": "string"})),
        ("cvv", json!({"type": "string"})),
        ("ssn", json!({"type": "string"})),
        ("access_token", json!({"type": "string"})),
        ("private_key", json!({"type": "string"})),
        ("pin", json!({"type": "string", "format": "password"})),
    ] {
        let v = check(&p, "t", "elicitation/create", &form(json!({name: prop})), 1);
        assert!(
            matches!(&v, Verdict::Refuse(r) if r.reason.as_str() == "policy_secret_request" && r.field.as_deref() == Some(name)),
            "{name}: {v:?}"
        );
    }
    for (name, prop) in [
        ("priority", json!({"type": "integer"})),
        ("tokens_used", json!({"type": "integer"})),
        ("room_id", json!({"type": "string"})),
    ] {
        assert!(!looks_secret(name, &prop), "{name}");
    }
    let allow = Policy::parse("[defaults]\nsecret_fields = \"allow\"\n", "p.toml").unwrap();
    assert_eq!(
        check(
            &allow,
            "t",
            "elicitation/create",
            &form(json!({"password": {"type": "string"}})),
            1
        ),
        Verdict::Ask
    );
}

#[test]
fn url_mode_needs_https_and_an_allowed_host() {
    let url = |u: &str| json!({"mode": "url", "message": "m", "url": u});
    let p = Policy::default();
    assert_eq!(
        check(
            &p,
            "t",
            "elicitation/create",
            &url("https://auth.example.com/x"),
            1
        ),
        Verdict::Ask
    );
    assert_eq!(
        check(
            &p,
            "t",
            "elicitation/create",
            &url("http://127.0.0.1:8080/x"),
            1
        ),
        Verdict::Ask
    );
    assert!(
        matches!(check(&p, "t", "elicitation/create", &url("http://auth.example.com/x"), 1), Verdict::Refuse(r) if r.reason.as_str() == "policy_url_not_allowed")
    );
    assert!(matches!(
        check(
            &p,
            "t",
            "elicitation/create",
            &url("javascript:alert(1)"),
            1
        ),
        Verdict::Refuse(_)
    ));
    let listed =
        Policy::parse("[defaults]\nurl_hosts = [\"auth.example.com\"]\n", "p.toml").unwrap();
    assert_eq!(
        check(
            &listed,
            "t",
            "elicitation/create",
            &url("https://auth.example.com/x"),
            1
        ),
        Verdict::Ask
    );
    assert!(
        matches!(check(&listed, "t", "elicitation/create", &url("https://evil.example/x"), 1), Verdict::Refuse(r) if r.reason.as_str() == "policy_url_not_allowed")
    );
}

#[test]
fn too_many_questions_are_refused() {
    let p = policy();
    assert_eq!(check(&p, "t", "roots/list", &Value::Null, 5), Verdict::Ask);
    assert!(
        matches!(check(&p, "t", "roots/list", &Value::Null, 6), Verdict::Refuse(r) if r.reason.as_str() == "policy_too_many_questions")
    );
}

#[test]
fn model_owned_fields_become_precise_guidance() {
    let p = policy();
    let q = form(
        json!({"room_id": {"type": "string", "enum": ["atrium", "nook"], "description": "The room."}}),
    );
    let Verdict::ModelOwned { field, guidance } =
        check(&p, "book_meeting", "elicitation/create", &q, 1)
    else {
        panic!("expected model-owned")
    };
    assert_eq!(field, "room_id");
    assert!(
        guidance.contains("`room_id` is required")
            && guidance.contains("atrium, nook")
            && guidance.contains("The room."),
        "{guidance}"
    );
}

#[test]
fn a_field_no_answer_can_satisfy_is_refused_whether_or_not_forms_are_shaped() {
    for off in ["", "shape_questions = false\n"] {
        let p = Policy::parse(
            &format!("[tool.t]\n{off}[tool.t.fields.n]\nminimum = 100\n"),
            "p.toml",
        )
        .unwrap();
        let schema = form(json!({"n": {"type": "integer", "maximum": 10}}));
        match check(&p, "t", "elicitation/create", &schema, 1) {
            Verdict::Refuse(r) => {
                assert_eq!(r.reason.as_str(), "policy_unsatisfiable");
                assert_eq!(r.field.as_deref(), Some("n"));
                assert!(
                    r.message.contains("at least 100 and at most 10"),
                    "{}",
                    r.message
                );
            }
            other => panic!("asked: {other:?}"),
        }
        let fine = form(json!({"n": {"type": "integer", "maximum": 1000}}));
        assert_eq!(check(&p, "t", "elicitation/create", &fine, 1), Verdict::Ask);
    }
}
