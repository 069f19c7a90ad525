use serde_json::{Value, json};

use super::answer::{Judgement, Subject, judge};
use super::guard::{Verdict, check, looks_secret};
use super::*;
use crate::protocol::Principal;

const ISSUE_EXAMPLE: &str = r#"
[defaults]
on_invalid = "reask"      # or "error"
max_reasks = 2
max_questions = 5         # per operation
secret_fields = "deny"

[tool.create_ticket]
keys = ["priority"]       # names of this tool's inputRequests keys, in order
mode = "hold"             # or "replay"

[tool.create_ticket.fields.priority]
minimum = 1
maximum = 5

[tool.transfer.fields.amount]
minimum = 0
maximum = 100000

[tool.book_room.fields.room_id]
enum = ["atrium", "studio-b", "nook"]
authz = 'value != "atrium" || "facilities" in principal.groups'
authz_message = "only the facilities group may book the Atrium"

[tool.book_meeting]
model_owned = ["room_id"]     # value ownership: see below
"#;

fn policy() -> Policy {
    Policy::parse(ISSUE_EXAMPLE, "p.toml").unwrap()
}

fn principal(groups: &[&str]) -> Principal {
    Principal::new(
        "alice",
        groups
            .iter()
            .map(std::string::ToString::to_string)
            .collect(),
    )
}

fn form(props: Value) -> Value {
    json!({"message": "m", "requestedSchema": {"type": "object", "properties": props}})
}

fn judged(p: &Policy, tool: &str, props: Value, content: Value, groups: &[&str]) -> Judgement {
    let who = principal(groups);
    let subject = Subject {
        principal: &who,
        tool,
        arguments: &json!({}),
    };
    let schema = json!({"type": "object", "properties": props});
    judge(p, &subject, &schema, content.as_object().unwrap())
}

#[test]
fn the_issue_example_parses_as_written() {
    let p = policy();
    assert_eq!(
        p.keys("create_ticket"),
        KeyNames::InOrder(vec!["priority".into()])
    );
    assert_eq!(
        p.keys("a_tool_the_policy_does_not_name"),
        KeyNames::InOrder(vec![])
    );
    assert_eq!(p.max_questions("anything"), 5);
    assert_eq!(p.on_invalid("create_ticket"), (OnInvalid::Reask, 2));
    assert!(
        p.tool("book_meeting")
            .unwrap()
            .model_owned
            .contains("room_id")
    );
}

#[test]
fn check_errors_name_the_line() {
    let e = Policy::parse("[tool.x.fields.a]\nminimum = 5\nmaximum = 1\n", "p.toml").unwrap_err();
    assert_eq!(e.0[0].line, 1, "{e}");
    assert!(
        e.0[0]
            .message
            .contains("minimum 5 is greater than maximum 1"),
        "{e}"
    );
    let e = Policy::parse("\n\n[tool.x.fields.a]\nauthz = 'value >'\n", "p.toml").unwrap_err();
    assert_eq!(e.0[0].line, 3, "{e}");
    assert!(e.0[0].message.contains("not valid CEL"), "{e}");
    let e = Policy::parse("[tool.x.fields.a]\nminimum = 1\npattern = 'x'\n", "p.toml").unwrap_err();
    assert!(
        e.0[0].message.contains("cannot apply to the same field"),
        "{e}"
    );
    let e = Policy::parse("[tool.x.fields.a]\nmaximum = 3\nenum = ['a']\n", "p.toml").unwrap_err();
    assert!(e.0[0].message.contains("enum values"), "{e}");
    let e = Policy::parse("[defaults]\non_invalid = \"retry\"\n", "p.toml").unwrap_err();
    assert_eq!(e.0[0].line, 2, "{e}");
    let e = Policy::parse("[tool.x]\nmaximum = 1\n", "p.toml").unwrap_err();
    assert!(e.0[0].message.contains("maximum"), "{e}");
    let e = Policy::parse("[tool.x.fields.a]\npattern = '('\n", "p.toml").unwrap_err();
    assert!(e.0[0].message.contains("pattern does not compile"), "{e}");
    let e = Policy::parse("[tool.x]\n\nrate = \"0/s\"\n", "p.toml").unwrap_err();
    assert_eq!(e.0[0].line, 3, "{e}");
    assert!(e.0[0].message.contains("COUNT/UNIT"), "{e}");
}

#[test]
fn keys_are_a_list_or_a_table_by_kind_with_unique_names() {
    let p = Policy::parse(
        "[tool.t]\nkeys = { elicitation = [\"name\", \"email\"], roots = [\"client_roots\"] }\n",
        "p.toml",
    )
    .unwrap();
    assert_eq!(
        p.keys("t"),
        KeyNames::ByKind {
            elicitation: vec!["name".into(), "email".into()],
            sampling: vec![],
            roots: vec!["client_roots".into()],
        }
    );
    // A name used under two kinds would make two questions one key.
    let e = Policy::parse(
        "[tool.t]\nkeys = { elicitation = [\"x\"], sampling = [\"x\"] }\n",
        "p.toml",
    )
    .unwrap_err();
    assert!(e.0[0].message.contains("unique (`x`)"), "{e}");
    let e = Policy::parse("\n[tool.t]\nkeys = { elicitations = [\"x\"] }\n", "p.toml").unwrap_err();
    assert_eq!(e.0[0].line, 3, "{e}");
    assert!(
        e.0[0].message.contains("unknown field `elicitations`"),
        "{e}"
    );
    assert!(e.0[0].message.contains("sampling"), "{e}");
    let e = Policy::parse("[tool.t]\nkeys = \"name\"\n", "p.toml").unwrap_err();
    assert!(
        e.0[0]
            .message
            .contains("a list of key names, or a table of lists by kind"),
        "{e}"
    );
}

#[test]
fn a_tool_rate_is_read() {
    let p = Policy::parse("[tool.transfer]\nrate = \"1/s\"\n", "p.toml").unwrap();
    let rate = p.tool("transfer").and_then(|t| t.rate).unwrap();
    assert_eq!(rate.to_string(), "1/s");
}

#[test]
fn a_bad_mode_is_named_with_its_line() {
    let e = Policy::parse(
        "[defaults]\nmax_reasks = 1\nmode = \"sometimes\"\n",
        "p.toml",
    )
    .unwrap_err();
    assert_eq!(e.0[0].line, 3, "{e}");
    assert!(e.0[0].message.contains("replay_when_annotated"), "{e}");
    let e = Policy::parse("\n[tool.x]\nmode = \"replay_when_annotated\"\n", "p.toml").unwrap_err();
    assert_eq!(e.0[0].line, 3, "{e}");
    assert!(e.0[0].message.contains("replay"), "{e}");
}

#[test]
fn a_tools_mode_wins_over_the_route_default_which_may_follow_annotations() {
    let read_only = json!({"name": "t", "annotations": {"readOnlyHint": true}});
    let idempotent =
        json!({"name": "t", "annotations": {"idempotentHint": true, "readOnlyHint": false}});
    let plain = json!({"name": "t", "annotations": {"readOnlyHint": false}});
    let p = Policy::parse(
        "[defaults]\nmode = \"replay_when_annotated\"\n[tool.held]\nmode = \"hold\"\n",
        "p.toml",
    )
    .unwrap();
    assert_eq!(p.mode("any", Some(&read_only)), Mode::Replay);
    assert_eq!(p.mode("any", Some(&idempotent)), Mode::Replay);
    assert_eq!(p.mode("any", Some(&plain)), Mode::Hold);
    assert_eq!(p.mode("any", None), Mode::Hold, "unknown annotations: hold");
    assert_eq!(p.mode("held", Some(&read_only)), Mode::Hold);
    let p = Policy::parse("[defaults]\nmode = \"replay\"\n", "p.toml").unwrap();
    assert_eq!(p.mode("any", None), Mode::Replay);
    let p = Policy::parse("[tool.r]\nmode = \"replay\"\n", "p.toml").unwrap();
    assert_eq!(p.mode("r", None), Mode::Replay);
    assert_eq!(
        p.mode("other", Some(&read_only)),
        Mode::Hold,
        "the default is hold"
    );
}

/// Found with the `policy` fuzz target (input `[tool.a.fields.b]` with
/// `authz = "1 + 1 + ... + 1 == 1"`, 3000 terms): the rule compiled, and
/// judging the first answer overflowed the stack and aborted the process.
/// With 20000 terms the CEL parser itself overflowed while the policy loaded.
/// Long and deep rules are now refused at load, with their line, and rules
/// compile on a thread of their own with a large stack.
#[test]
fn deep_or_long_authz_rules_are_refused_at_load() {
    let rule = |source: String| format!("\n[tool.a.fields.b]\nauthz = '{source}'\n");
    for terms in [3000, 20000] {
        let e =
            Policy::parse(&rule(format!("{}1 == 1", "1 + ".repeat(terms))), "p.toml").unwrap_err();
        assert_eq!(e.0[0].line, 2, "{e}");
        assert!(e.0[0].message.contains("at most 4096 are allowed"), "{e}");
    }
    // Short enough to compile, too deep to evaluate on a worker's stack.
    let deep = format!("{}1 == 1", "1+".repeat(40));
    let e = Policy::parse(&rule(deep), "p.toml").unwrap_err();
    assert!(
        e.0[0].message.contains("nests deeper than 24 levels"),
        "{e}"
    );
    // On this 2 MiB test thread, in a debug build, 20 nested parentheses
    // overflowed the CEL parser; parentheses add no depth, so this loads.
    let parens = format!("{}1{} == 1", "(".repeat(30), ")".repeat(30));
    assert!(Policy::parse(&rule(parens), "p.toml").is_ok());
    let chain = format!("value{} == 1", ".a".repeat(40));
    let e = Policy::parse(&rule(chain), "p.toml").unwrap_err();
    assert!(e.0[0].message.contains("nests deeper"), "{e}");
    // Every kind of node counts: lists, maps, calls, comprehensions.
    let nested_list = format!("{}1{} == []", "[".repeat(40), "]".repeat(40));
    assert!(Policy::parse(&rule(nested_list), "p.toml").is_err());
    // What a policy really says still loads, the rooms rule and a long flat list included.
    let options: Vec<String> = (0..60).map(|i| format!("\"r{i}\"")).collect();
    for fine in [
        r#"value != "atrium" || "facilities" in principal.groups"#.to_owned(),
        format!("value in [{}]", options.join(", ")),
        "content.all(k, k != \"\") && size(value) < 10 && tool.arguments.n <= 3".to_owned(),
    ] {
        assert!(
            Policy::parse(&rule(fine.clone()), "p.toml").is_ok(),
            "{fine}"
        );
    }
}

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
fn tool_scopes_are_read_and_checked_with_their_line() {
    let p = Policy::parse("[tool.transfer]\nscopes = [\"payments:write\"]\n", "p.toml").unwrap();
    assert_eq!(p.tool_scopes("transfer"), ["payments:write"]);
    assert!(p.tool_scopes("other").is_empty());
    let e = Policy::parse("\n[tool.transfer]\nscopes = []\n", "p.toml").unwrap_err();
    assert_eq!(e.0[0].line, 3, "{e}");
    assert!(e.0[0].message.contains("scopes is empty"), "{e}");
    let e = Policy::parse("[tool.t]\nscopes = [\"a b\"]\n", "p.toml").unwrap_err();
    assert!(e.0[0].message.contains("not a scope token"), "{e}");
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
