//! Answers held to the server's own schema and then to the policy's field
//! rules before the server sees them (issue 4): red marks on a re-ask, the
//! seed's -1 and 4e9, `max_reasks`, `on_invalid = "error"`, dropped extra
//! fields, decline and cancel. Every test asserts on what the fixture received.

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
use serde_json::{Value, json};

/// Asks `form` once, answers `bad` (re-asked with a red mark containing
/// every part of `mark`), then `good`, which the server receives.
async fn reask_then_accept(
    fx: &Fixture,
    gw: &TestGateway,
    tag: &str,
    form: Value,
    bad: Value,
    mark: &[&str],
    good: Value,
) {
    let call = ask(&form, "Fill this in", tag);
    let resps = call
        .walk(gw, 2, |round, q| {
            let content = if round == 1 { &bad } else { &good };
            reply(q, accepted(content.clone()))
        })
        .await;
    let first = asked(&resps[0]);
    assert_eq!(first.message(), "Fill this in");
    let again = asked(&resps[1]);
    // The same question, under the same key, with the red mark after the server's words.
    assert_eq!(again.key(), first.key(), "{tag}");
    assert_eq!(
        again.request()["params"]["requestedSchema"],
        first.request()["params"]["requestedSchema"],
        "{tag}"
    );
    let message = again.message();
    assert!(
        message.starts_with("Fill this in\n\n✗ "),
        "{tag}: {message:?}"
    );
    for part in mark {
        assert!(message.contains(part), "{tag}: {part:?} not in {message:?}");
    }
    let out = output(&resps[2]);
    assert_eq!(out["content"], good, "{tag}");
    // The invalid answer never reached the server; the valid one did, once.
    assert_eq!(
        fx.log.answers(tag).iter().map(received).collect::<Vec<_>>(),
        [accepted(good)],
        "{tag}: bad answer was {bad}"
    );
}

/// Tag, properties, required, a bad answer, its red mark's parts, a good answer.
type SchemaCase<'a> = (&'a str, Value, &'a [&'a str], Value, &'a [&'a str], Value);

#[tokio::test]
async fn the_servers_own_schema_is_enforced_on_a_client_that_claims_it_validated() {
    let fx = Fixture::with_policy("");
    let gw = fx.gateway().await;
    let int = json!({"n": {"type": "integer", "minimum": 1, "maximum": 5}});
    let text = json!({"s": {"type": "string", "minLength": 2, "maxLength": 4}});
    let fmt = |f: &str| json!({"v": {"type": "string", "format": f}});
    let tags = json!({"tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y", "z"]}, "minItems": 1, "maxItems": 2}});
    #[rustfmt::skip]
    let cases: Vec<SchemaCase> = vec![
        ("type", int.clone(), &[], json!({"n": "3"}), &["n must be of type", "\"3\" was given"], json!({"n": 3})),
        ("integer", int.clone(), &[], json!({"n": 2.5}), &["n must be of type", "2.5 was given"], json!({"n": 2})),
        ("required", int.clone(), &["n"], json!({}), &["n is required"], json!({"n": 1})),
        ("minimum", int.clone(), &[], json!({"n": 0}), &["n must be at least 1; 0 was given"], json!({"n": 1})),
        ("maximum", int.clone(), &[], json!({"n": 6}), &["n must be at most 5; 6 was given"], json!({"n": 5})),
        ("minLength", text.clone(), &[], json!({"s": "a"}), &["s must be at least 2 characters long", "\"a\" was given"], json!({"s": "ab"})),
        ("maxLength", text, &[], json!({"s": "abcde"}), &["s must be at most 4 characters long"], json!({"s": "abcd"})),
        ("email", fmt("email"), &[], json!({"v": "not-an-email"}), &["v must be a valid email", "\"not-an-email\" was given"], json!({"v": "ada@example.com"})),
        ("uri", fmt("uri"), &[], json!({"v": "no scheme here"}), &["v must be a valid uri"], json!({"v": "https://example.com/x"})),
        ("date", fmt("date"), &[], json!({"v": "2026-13-01"}), &["v must be a valid date"], json!({"v": "2026-09-17"})),
        ("date-time", fmt("date-time"), &[], json!({"v": "tomorrow at 9"}), &["v must be a valid date-time"], json!({"v": "2026-09-17T09:00:00Z"})),
        ("enum", json!({"c": {"type": "string", "enum": ["a", "b"]}}), &[], json!({"c": "z"}), &["c must be one of a, b", "\"z\" was given"], json!({"c": "b"})),
        ("oneOf", json!({"c": {"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]}}), &[], json!({"c": "z"}), &["c must be one of a, b; \"z\" was given"], json!({"c": "a"})),
        ("minItems", tags.clone(), &[], json!({"tags": []}), &["tags must have at least 1 choice(s); [] was given"], json!({"tags": ["x"]})),
        ("maxItems", tags.clone(), &[], json!({"tags": ["x", "y", "z"]}), &["tags must have at most 2 choice(s)", "[\"x\",\"y\",\"z\"] was given"], json!({"tags": ["x", "z"]})),
        ("items", tags, &[], json!({"tags": ["x", "nope"]}), &["tags must be one of x, y, z"], json!({"tags": ["y"]})),
        ("anyOf", json!({"pick": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}, {"const": "y", "title": "Y"}]}}}), &[], json!({"pick": ["x", "q"]}), &["pick must be one of x, y; [\"x\",\"q\"] was given"], json!({"pick": ["y"]})),
        ("boolean", json!({"ok": {"type": "boolean"}}), &[], json!({"ok": "yes"}), &["ok must be of type"], json!({"ok": true})),
    ];
    let n = cases.len();
    for (tag, props, required, bad, mark, good) in cases {
        reask_then_accept(&fx, &gw, tag, schema(props, required), bad, mark, good).await;
    }
    gw.wait_metric(&rejections("ask", "policy_invalid_answer"), n as f64)
        .await;
    gw.stop().await;
}

const TRANSFER: &str = "[tool.transfer.fields.amount]\nminimum = 0\nmaximum = 100000\n";

#[tokio::test]
async fn the_seeds_minus_one_and_four_billion_get_red_marks() {
    let fx = Fixture::with_policy(TRANSFER);
    let gw = fx.gateway().await;
    let call = tool("transfer", json!({"tag": "seed"}));
    let amounts = [json!(-1), json!(4_000_000_000u64), json!(250)];
    let resps = call
        .walk(&gw, 3, |round, q| {
            reply(q, accepted(json!({"amount": amounts[round - 1]})))
        })
        .await;
    assert_eq!(
        asked(&resps[1]).message(),
        "How much?\n\n✗ amount must be at least 0; -1 was given."
    );
    // The red mark replaces the previous one.
    assert_eq!(
        asked(&resps[2]).message(),
        "How much?\n\n✗ amount must be at most 100000; 4000000000 was given."
    );
    let out = output(&resps[3]);
    assert_eq!(out["content"], json!({"amount": 250}));
    assert_eq!(
        fx.log
            .answers("seed")
            .iter()
            .map(received)
            .collect::<Vec<_>>(),
        [accepted(json!({"amount": 250}))]
    );
    gw.wait_metric(&rejections("transfer", "policy_invalid_answer"), 2.0)
        .await;
    gw.stop().await;
}

#[tokio::test]
async fn after_max_reasks_the_call_fails_and_the_server_hears_cancel() {
    let fx = Fixture::with_policy(&format!("[defaults]\nmax_reasks = 1\n{TRANSFER}"));
    let gw = fx.gateway().await;
    let call = tool("transfer", json!({"tag": "twice"}));
    let amounts = [json!(-1), json!(4_000_000_000u64)];
    let resps = call
        .walk(&gw, 2, |round, q| {
            reply(q, accepted(json!({"amount": amounts[round - 1]})))
        })
        .await;
    let r = &resps[2];
    let data = assert_error(r, 200, -32602, "policy_invalid_answer").data();
    assert_eq!(r.error()["code"], -32602, "{}", r.raw);
    assert_eq!(
        (&data["field"], &data["rule"]),
        (&json!("amount"), &json!("maximum"))
    );
    assert_eq!(
        r.error()["message"],
        "amount must be at most 100000; 4000000000 was given"
    );
    assert_eq!(
        received(&fx.log.only_answer("twice").await),
        json!({"action": "cancel"})
    );
    // One rejection per invalid answer: the re-ask and the final one.
    gw.wait_metric(&rejections("transfer", "policy_invalid_answer"), 2.0)
        .await;
    gw.stop().await;
}

#[tokio::test]
async fn on_invalid_error_fails_at_once_and_the_server_hears_cancel() {
    let fx = Fixture::with_policy(&format!(
        "[defaults]\nmax_reasks = 5\n[tool.transfer]\non_invalid = \"error\"\n{TRANSFER}"
    ));
    let gw = fx.gateway().await;
    let call = tool("transfer", json!({"tag": "err"}));
    let q = asked(&call.start(&gw).await);
    let r = call.answer(&gw, &q, accepted(json!({"amount": -1}))).await;
    let data = assert_error(&r, 200, -32602, "policy_invalid_answer").data();
    assert_eq!(
        (&data["field"], &data["rule"]),
        (&json!("amount"), &json!("minimum"))
    );
    assert_eq!(
        received(&fx.log.only_answer("err").await),
        json!({"action": "cancel"})
    );
    // Another tool keeps the default (re-ask).
    let call = ask(
        &schema(json!({"n": {"type": "integer", "maximum": 3}}), &[]),
        "n?",
        "other",
    );
    let q = asked(&call.start(&gw).await);
    let q = asked(&call.answer(&gw, &q, accepted(json!({"n": 4}))).await);
    assert!(
        q.message().contains("n must be at most 3"),
        "{}",
        q.message()
    );
    call.answer(&gw, &q, json!({"action": "cancel"})).await;
    gw.stop().await;
}

#[tokio::test]
async fn fields_the_server_did_not_ask_for_never_reach_it() {
    let fx = Fixture::with_policy(TRANSFER);
    let gw = fx.gateway().await;
    let call = tool("transfer", json!({"tag": "extra"}));
    let q = asked(&call.start(&gw).await);
    let sent = json!({"amount": 5, "injected": "DROP TABLE", "role": "admin", "list": ["a"], "flag": true});
    let out = output(&call.answer(&gw, &q, accepted(sent)).await);
    assert_eq!(out["content"], json!({"amount": 5}));
    let got = fx.log.only_answer("extra").await;
    assert_eq!(received(&got), accepted(json!({"amount": 5})));
    let raw = std::fs::read_to_string(&fx.log.path).unwrap();
    assert!(!raw.contains("injected") && !raw.contains("admin"), "{raw}");
    gw.stop().await;
}

#[tokio::test]
async fn decline_and_cancel_pass_unvalidated() {
    let fx = Fixture::with_policy(&format!(
        "{TRANSFER}[tool.ask.fields.code]\nrequired = true\npattern = '^[A-Z]{{3}}$'\n"
    ));
    let gw = fx.gateway().await;
    for action in ["decline", "cancel"] {
        let call = tool("transfer", json!({"tag": action}));
        let q = asked(&call.start(&gw).await);
        let out = output(&call.answer(&gw, &q, json!({"action": action})).await);
        assert_eq!(out["action"], action);
        assert_eq!(
            received(&fx.log.only_answer(action).await),
            json!({"action": action})
        );
        // A field the policy requires is not required of a refusal.
        let tag = format!("{action}-required");
        let call = ask(
            &schema(json!({"code": {"type": "string"}}), &["code"]),
            "Code?",
            &tag,
        );
        let q = asked(&call.start(&gw).await);
        let out = output(&call.answer(&gw, &q, json!({"action": action})).await);
        assert_eq!(out["action"], action);
    }
    gw.stop().await;
}

#[tokio::test]
async fn policy_field_rules_tighten_the_servers_schema() {
    let policy = r#"
[tool.ask.fields.code]
pattern = '^[A-Z]{3}$'
[tool.ask.fields.day]
format = "date"
required = true
[tool.ask.fields.room]
enum = ["studio-b", "nook"]
[tool.ask.fields.note]
min_length = 2
max_length = 5
[tool.ask.fields.size]
minimum = 2
maximum = 12
[tool.ask.fields.mail]
format = "email"
"#;
    let fx = Fixture::with_policy(policy);
    let gw = fx.gateway().await;
    let props = json!({
        "code": {"type": "string"}, "day": {"type": "string"}, "room": {"type": "string", "enum": ["atrium", "studio-b", "nook"]},
        "note": {"type": "string"}, "size": {"type": "integer"}, "mail": {"type": "string"},
    });
    let base = json!({"day": "2026-09-17"});
    let with = |k: &str, v: Value| {
        let mut c = base.clone();
        c[k] = v;
        c
    };
    #[rustfmt::skip]
    let cases: Vec<(&str, Value, &[&str], Value)> = vec![
        ("pattern", with("code", json!("abc")), &["code must match ^[A-Z]{3}$", "\"abc\" was given"], with("code", json!("ABC"))),
        ("required", json!({"code": "ABC"}), &["day is required"], base.clone()),
        ("format", with("day", json!("next friday")), &["day must be a valid date (YYYY-MM-DD)"], with("day", json!("2026-10-02"))),
        ("enum", with("room", json!("atrium")), &["room must be one of studio-b, nook", "\"atrium\" was given"], with("room", json!("nook"))),
        ("min_length", with("note", json!("x")), &["note must be at least 2 characters long"], with("note", json!("xy"))),
        ("max_length", with("note", json!("toolong")), &["note must be at most 5 characters long"], with("note", json!("short"))),
        ("minimum", with("size", json!(1)), &["size must be at least 2; 1 was given"], with("size", json!(2))),
        ("maximum", with("size", json!(13)), &["size must be at most 12; 13 was given"], with("size", json!(12))),
        ("email", with("mail", json!("a@")), &["mail must be a valid email address"], with("mail", json!("a@example.com"))),
    ];
    for (tag, bad, mark, good) in cases {
        reask_then_accept(&fx, &gw, tag, schema(props.clone(), &[]), bad, mark, good).await;
    }
    gw.stop().await;
}

#[tokio::test]
async fn sensitive_values_are_never_echoed() {
    let fx = Fixture::with_policy(
        "[defaults]\nsecret_fields = \"allow\"\non_invalid = \"reask\"\nmax_reasks = 1\n\
         [tool.ask.fields.pin]\nmin_length = 6\nsensitive = true\n\
         [tool.ask.fields.password]\nmin_length = 8\n",
    );
    let gw = fx.gateway().await;
    for (tag, field, value) in [("pin", "pin", "1234"), ("pw", "password", "hunter2")] {
        let call = ask(
            &schema(json!({field: {"type": "string"}}), &[]),
            "Secret?",
            tag,
        );
        let q = asked(&call.start(&gw).await);
        let q = asked(&call.answer(&gw, &q, accepted(json!({field: value}))).await);
        assert!(q.message().contains(field), "{}", q.message());
        assert!(!q.message().contains(value), "{}", q.message());
        let r = call.answer(&gw, &q, accepted(json!({field: value}))).await;
        assert_error(&r, 200, -32602, "policy_invalid_answer");
        assert!(!r.raw.contains(value), "{}", r.raw);
        assert_eq!(
            received(&fx.log.only_answer(tag).await),
            json!({"action": "cancel"})
        );
    }
    gw.stop().await;
}

#[tokio::test]
async fn answers_given_in_advance_are_held_to_the_same_rules() {
    let fx = Fixture::with_policy(&format!("[tool.transfer]\nkeys = [\"amount\"]\n{TRANSFER}"));
    let gw = fx.gateway().await;
    // inputResponses on the first request, without requestState: checked like any answer.
    let call = tool("transfer", json!({"tag": "adv-bad"}));
    let r = call
        .send(
            &gw,
            json!({"inputResponses": {"amount": accepted(json!({"amount": 4_000_000_000u64}))}}),
        )
        .await;
    let q = asked(&r);
    assert_eq!(q.key(), "amount");
    assert!(
        q.message()
            .ends_with("✗ amount must be at most 100000; 4000000000 was given."),
        "{}",
        q.message()
    );
    gw.wait_metric(&rejections("transfer", "policy_invalid_answer"), 1.0)
        .await;
    let out = output(&call.answer(&gw, &q, accepted(json!({"amount": 7}))).await);
    assert_eq!(out["content"], json!({"amount": 7}));
    assert_eq!(
        fx.log
            .answers("adv-bad")
            .iter()
            .map(received)
            .collect::<Vec<_>>(),
        [accepted(json!({"amount": 7}))]
    );
    // A valid answer in advance goes straight through.
    let call = tool("transfer", json!({"tag": "adv-ok"}));
    let r = call
        .send(
            &gw,
            json!({"inputResponses": {"amount": accepted(json!({"amount": 99, "x": 1}))}}),
        )
        .await;
    assert_eq!(output(&r)["content"], json!({"amount": 99}));
    gw.stop().await;
}

#[tokio::test]
async fn a_required_rule_binds_only_questions_that_ask_for_the_field() {
    // One tool, two questions: only the one whose form has `code` must carry it.
    let fx = Fixture::with_policy("[tool.ask.fields.code]\nrequired = true\n");
    let gw = fx.gateway().await;
    let call = ask(
        &schema(json!({"note": {"type": "string"}}), &[]),
        "Note?",
        "no-code",
    );
    let q = asked(&call.start(&gw).await);
    let out = output(&call.answer(&gw, &q, accepted(json!({"note": "hi"}))).await);
    assert_eq!(out["content"], json!({"note": "hi"}));
    let call = ask(
        &schema(
            json!({"code": {"type": "string"}, "note": {"type": "string"}}),
            &[],
        ),
        "Code?",
        "code",
    );
    let q = asked(&call.start(&gw).await);
    let q = asked(&call.answer(&gw, &q, accepted(json!({"note": "hi"}))).await);
    assert!(
        q.message().ends_with("✗ code is required."),
        "{}",
        q.message()
    );
    call.answer(&gw, &q, json!({"action": "decline"})).await;
    gw.stop().await;
}
