//! How a client's answers are judged: the policy's rules and the
//! server's own schema, per principal, with red marks that never echo a
//! sensitive value.

use serde_json::json;

use super::*;

#[test]
fn the_seed_values_minus_one_and_four_billion_are_rejected() {
    let p = policy();
    let amount = json!({"amount": {"type": "number"}});
    for (v, rule) in [(json!(-1), "minimum"), (json!(4_000_000_000u64), "maximum")] {
        match judged(&p, "transfer", amount.clone(), json!({"amount": v}), &[]) {
            Judgement::Invalid {
                field,
                rule: r,
                mark,
            } => {
                assert_eq!((field.as_str(), r.as_str()), ("amount", rule));
                assert!(mark.contains(&v.to_string()), "{mark}");
            }
            other => panic!("{v} passed: {other:?}"),
        }
    }
    assert!(matches!(
        judged(&p, "transfer", amount, json!({"amount": 250}), &[]),
        Judgement::Valid(_)
    ));
}

#[test]
fn the_red_mark_reads_as_the_issue_says() {
    let p = policy();
    let Judgement::Invalid { mark, .. } = judged(
        &p,
        "transfer",
        json!({"amount": {"type": "number"}}),
        json!({"amount": 4_000_000_000u64}),
        &[],
    ) else {
        panic!()
    };
    assert_eq!(mark, "amount must be at most 100000; 4000000000 was given");
}

#[test]
fn the_servers_own_schema_is_enforced_even_when_the_client_claims_it_validated() {
    let p = Policy::default();
    let props = json!({"priority": {"type": "integer", "minimum": 1, "maximum": 5}, "email": {"type": "string", "format": "email"}});
    assert!(
        matches!(judged(&p, "t", props.clone(), json!({"priority": 9}), &[]), Judgement::Invalid { rule, .. } if rule == "maximum")
    );
    assert!(
        matches!(judged(&p, "t", props.clone(), json!({"priority": "high"}), &[]), Judgement::Invalid { rule, .. } if rule == "type")
    );
    assert!(
        matches!(judged(&p, "t", props.clone(), json!({"email": "not-an-email"}), &[]), Judgement::Invalid { rule, .. } if rule == "format")
    );
    let Judgement::Valid(kept) =
        judged(&p, "t", props, json!({"priority": 2, "injected": "x"}), &[])
    else {
        panic!()
    };
    assert_eq!(
        Value::Object(kept),
        json!({"priority": 2}),
        "fields the server did not ask for are dropped"
    );
}

#[test]
fn authz_is_checked_per_principal() {
    let p = policy();
    let props = json!({"room_id": {"type": "string", "enum": ["atrium", "studio-b", "nook"]}});
    assert!(matches!(
        judged(
            &p,
            "book_room",
            props.clone(),
            json!({"room_id": "atrium"}),
            &["facilities"]
        ),
        Judgement::Valid(_)
    ));
    match judged(
        &p,
        "book_room",
        props.clone(),
        json!({"room_id": "atrium"}),
        &["design"],
    ) {
        Judgement::Denied { field, message } => {
            assert_eq!(field, "room_id");
            assert_eq!(message, "only the facilities group may book the Atrium");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        judged(
            &p,
            "book_room",
            props,
            json!({"room_id": "nook"}),
            &["design"]
        ),
        Judgement::Valid(_)
    ));
}

#[test]
fn policy_rules_only_tighten() {
    let p = Policy::parse("[tool.t.fields.code]\npattern = '^[A-Z]{3}$'\nmax_length = 3\n[tool.t.fields.d]\nformat = \"date\"\nrequired = true\n", "p.toml").unwrap();
    let props = json!({"code": {"type": "string"}, "d": {"type": "string"}});
    assert!(
        matches!(judged(&p, "t", props.clone(), json!({"code": "abc", "d": "2026-01-01"}), &[]), Judgement::Invalid { rule, .. } if rule == "pattern")
    );
    assert!(
        matches!(judged(&p, "t", props.clone(), json!({"code": "ABC", "d": "tomorrow"}), &[]), Judgement::Invalid { rule, .. } if rule == "format")
    );
    assert!(
        matches!(judged(&p, "t", props.clone(), json!({"code": "ABC"}), &[]), Judgement::Invalid { rule, .. } if rule == "required")
    );
    assert!(matches!(
        judged(
            &p,
            "t",
            props,
            json!({"code": "ABC", "d": "2026-01-01"}),
            &[]
        ),
        Judgement::Valid(_)
    ));
}

#[test]
fn sensitive_values_are_not_echoed() {
    let p = Policy::parse(
        "[tool.t.fields.pin]\nmin_length = 6\nsensitive = true\n",
        "p.toml",
    )
    .unwrap();
    let Judgement::Invalid { mark, .. } = judged(
        &p,
        "t",
        json!({"pin": {"type": "string"}}),
        json!({"pin": "1234"}),
        &[],
    ) else {
        panic!()
    };
    assert!(!mark.contains("1234"), "{mark}");
}

#[test]
fn a_required_rule_binds_only_forms_that_ask_for_the_field() {
    let p = Policy::parse("[tool.t.fields.code]\nrequired = true\n", "p.toml").unwrap();
    assert!(matches!(
        judged(
            &p,
            "t",
            json!({"note": {"type": "string"}}),
            json!({"note": "x"}),
            &[]
        ),
        Judgement::Valid(_)
    ));
    assert!(
        matches!(judged(&p, "t", json!({"code": {"type": "string"}, "note": {"type": "string"}}), json!({"note": "x"}), &[]), Judgement::Invalid { rule, .. } if rule == "required")
    );
}

#[test]
fn red_marks_list_the_options_of_selects() {
    let p = Policy::default();
    let mark = |props: Value, content: Value| match judged(&p, "t", props, content, &[]) {
        Judgement::Invalid { mark, .. } => mark,
        other => panic!("{other:?}"),
    };
    let multi = json!({"tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "maxItems": 2}});
    assert_eq!(
        mark(multi.clone(), json!({"tags": ["x", "q"]})),
        r#"tags must be one of x, y; ["x","q"] was given"#
    );
    assert_eq!(
        mark(multi, json!({"tags": ["x", "y", "x"]})),
        r#"tags must have at most 2 choice(s); ["x","y","x"] was given"#
    );
    let titled = json!({"c": {"type": "string", "oneOf": [{"const": "a", "title": "A"}]}});
    assert_eq!(
        mark(titled, json!({"c": "z"})),
        r#"c must be one of a; "z" was given"#
    );
}

#[test]
fn authz_sees_a_tokens_issuer_subject_scopes_and_claims() {
    let p = Policy::parse(
        r#"
[tool.book_room.fields.room_id]
authz = 'principal.issuer == "https://idp.example" && principal.subject == "alice" && "rooms:book" in principal.scopes && principal.claims.tenant == "acme"'
authz_message = "no"
"#,
        "p.toml",
    )
    .unwrap();
    let schema = json!({"type": "object", "properties": {"room_id": {"type": "string"}}});
    let content = json!({"room_id": "atrium"});
    let judge_as = |who: &Principal| {
        let subject = Subject {
            principal: who,
            tool: "book_room",
            arguments: &json!({}),
        };
        judge(&p, &subject, &schema, content.as_object().unwrap())
    };
    let mut claims = serde_json::Map::new();
    claims.insert("tenant".into(), json!("acme"));
    let token = |iss: &str, scopes: &[&str]| {
        Principal::from_token(
            iss,
            "alice",
            vec![],
            scopes.iter().map(|s| (*s).to_owned()).collect(),
            claims.clone(),
        )
    };
    assert!(matches!(
        judge_as(&token("https://idp.example", &["mcp", "rooms:book"])),
        Judgement::Valid(_)
    ));
    assert!(matches!(
        judge_as(&token("https://idp.example", &["mcp"])),
        Judgement::Denied { .. }
    ));
    assert!(matches!(
        judge_as(&token("https://other.example", &["mcp", "rooms:book"])),
        Judgement::Denied { .. }
    ));
}

#[test]
fn an_authz_rule_failing_at_run_time_is_an_error_naming_the_rule_and_line() {
    let p = Policy::parse(
        "[defaults]\nmax_questions = 3\n\n[tool.t.fields.x]\nauthz = 'principal.grups.size() > 0'\n",
        "rooms.toml",
    )
    .unwrap();
    let judgement = judged(
        &p,
        "t",
        json!({"x": {"type": "string"}}),
        json!({"x": "a"}),
        &[],
    );
    let Judgement::Error {
        field, rule, at, ..
    } = judgement
    else {
        panic!("not an error: {judgement:?}");
    };
    assert_eq!(field, "x");
    assert_eq!(rule, "principal.grups.size() > 0");
    assert!(at.starts_with("rooms.toml:"), "{at}");
}
