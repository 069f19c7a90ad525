//! CEL authorization rules on answers (issue 4): two API-key principals on
//! one route, one allowed and one denied the same answer; every CEL variable
//! (principal, tool, field, value, content); fail-closed evaluation.

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

const FRAN: &str = "key-fran-facilities-0123456789";
const DANA: &str = "key-dana-design-0123456789";

/// Two principals: fran (facilities) and dana (design).
fn principals() -> String {
    api_key(FRAN, "fran", &["facilities"]) + &api_key(DANA, "dana", &["design", "staff"])
}

#[tokio::test]
async fn the_atrium_is_for_facilities_only() {
    // The shipped policy, as written.
    let rooms = std::fs::read_to_string(repo().join("policies/rooms.toml")).unwrap();
    let fx = Fixture::with_policy(&rooms);
    let gw = TestGateway::start(&fx.config(&principals())).await;

    let call = tool("book_room", json!({"tag": "fran"})).key(FRAN);
    let q = asked(&call.start(&gw).await);
    assert_eq!(q.key(), "room", "the policy's key name");
    let out = output(
        &call
            .answer(&gw, &q, accepted(json!({"room_id": "atrium"})))
            .await,
    );
    assert_eq!(out["content"], json!({"room_id": "atrium"}));
    assert_eq!(
        received(&fx.log.only_answer("fran").await),
        accepted(json!({"room_id": "atrium"}))
    );

    // Same route, same question, same answer; another principal.
    let call = tool("book_room", json!({"tag": "dana"})).key(DANA);
    let q = asked(&call.start(&gw).await);
    let r = call
        .answer(&gw, &q, accepted(json!({"room_id": "atrium"})))
        .await;
    // Denied for good, although re-asks are left (on_invalid = "reask", max_reasks = 2).
    let data = assert_error(&r, 200, -32602, "policy_denied").data();
    assert_eq!(data["field"], "room_id");
    assert_eq!(
        r.error()["message"],
        "only the facilities group may book the Atrium"
    );
    assert_eq!(r.error()["code"], -32602);
    assert_eq!(
        received(&fx.log.only_answer("dana").await),
        json!({"action": "cancel"})
    );
    gw.wait_metric(&rejections("book_room", "policy_denied"), 1.0)
        .await;

    // dana may book another room.
    let call = tool("book_room", json!({"tag": "dana-nook"})).key(DANA);
    let q = asked(&call.start(&gw).await);
    let out = output(
        &call
            .answer(&gw, &q, accepted(json!({"room_id": "nook"})))
            .await,
    );
    assert_eq!(out["content"], json!({"room_id": "nook"}));

    // No key at all: nobody is asked anything.
    let r = tool("book_room", json!({"tag": "nobody"})).start(&gw).await;
    assert_eq!(r.status, 401, "{}", r.raw);
    assert!(fx.log.answers("nobody").is_empty());
    gw.stop().await;
}

/// The field and message of an expected `policy_denied`, or `None` for allowed.
type Denial<'a> = Option<(&'a str, &'a str)>;

#[tokio::test]
async fn every_cel_variable_is_bound() {
    let policy = r#"
[tool.ask.fields.amount]
authz = 'value <= 1000 || principal.name == "fran"'
authz_message = "above 1000 needs fran"
[tool.ask.fields.team]
authz = '(value in principal.groups) && size(principal.claims) == 0'
authz_message = "only your own team"
[tool.ask.fields.note]
authz = 'field == "note" && tool.name == "ask" && tool.arguments.tag != "locked" && content.team == "staff"'
"#;
    let fx = Fixture::with_policy(policy);
    let gw = TestGateway::start(&fx.config(&principals())).await;
    let form = schema(
        json!({"amount": {"type": "number"}, "team": {"type": "string"}, "note": {"type": "string"}}),
        &[],
    );
    #[rustfmt::skip]
    let cases: Vec<(&str, &str, Value, Denial)> = vec![
        ("a1", DANA, json!({"amount": 999.5}), None),
        ("a2", DANA, json!({"amount": 1000}), None),
        ("a3", DANA, json!({"amount": 1000.5}), Some(("amount", "above 1000 needs fran"))),
        ("a4", FRAN, json!({"amount": 50000}), None),
        ("t1", DANA, json!({"team": "staff"}), None),
        ("t2", DANA, json!({"team": "facilities"}), Some(("team", "only your own team"))),
        ("t3", FRAN, json!({"team": "facilities"}), None),
        ("n1", DANA, json!({"team": "staff", "note": "hi"}), None),
        ("n2", FRAN, json!({"team": "facilities", "note": "hi"}), Some(("note", "this answer for note is not allowed"))),
        ("locked", DANA, json!({"team": "staff", "note": "hi"}), Some(("note", "this answer for note is not allowed"))),
    ];
    let denied = cases.iter().filter(|c| c.3.is_some()).count();
    for (tag, key, content, verdict) in cases {
        let call = ask(&form, "Details?", tag).key(key);
        let q = asked(&call.start(&gw).await);
        let r = call.answer(&gw, &q, accepted(content.clone())).await;
        match verdict {
            None => {
                assert_eq!(output(&r)["content"], content, "{tag}");
                assert_eq!(
                    received(&fx.log.only_answer(tag).await),
                    accepted(content),
                    "{tag}"
                );
            }
            Some((field, message)) => {
                let data = assert_error(&r, 200, -32602, "policy_denied").data();
                assert_eq!(data["field"], field, "{tag}");
                assert_eq!(r.error()["message"], message, "{tag}");
                assert_eq!(
                    received(&fx.log.only_answer(tag).await),
                    json!({"action": "cancel"}),
                    "{tag}"
                );
            }
        }
    }
    gw.wait_metric(&rejections("ask", "policy_denied"), denied as f64)
        .await;
    gw.stop().await;
}

#[tokio::test]
async fn a_rule_that_cannot_evaluate_refuses_with_policy_error() {
    // `content.missing` is an error at run time, not false: fail closed, with
    // a reason of its own (the policy is broken, not the answer).
    let fx = Fixture::with_policy(
        "[tool.ask.fields.x]\nauthz = 'content.missing == 1 || value == \"never\"'\n",
    );
    let gw = fx.gateway().await;
    let call = ask(&schema(json!({"x": {"type": "string"}}), &[]), "x?", "err");
    let q = asked(&call.start(&gw).await);
    let r = call.answer(&gw, &q, accepted(json!({"x": "a"}))).await;
    assert_eq!(
        assert_error(&r, 200, -32603, "policy_error").data()["field"],
        "x"
    );
    assert_eq!(
        received(&fx.log.only_answer("err").await),
        json!({"action": "cancel"})
    );
    gw.wait_metric(&rejections("ask", "policy_error"), 1.0)
        .await;
    // Anonymous callers are a principal too, with no groups.
    let fx = Fixture::with_policy(
        "[tool.ask.fields.x]\nauthz = 'principal.name == \"anonymous\" && size(principal.groups) == 0'\n",
    );
    let gw2 = fx.gateway().await;
    let call = ask(&schema(json!({"x": {"type": "string"}}), &[]), "x?", "anon");
    let q = asked(&call.start(&gw2).await);
    let out = output(&call.answer(&gw2, &q, accepted(json!({"x": "a"}))).await);
    assert_eq!(out["content"], json!({"x": "a"}));
    gw.stop().await;
    gw2.stop().await;
}
