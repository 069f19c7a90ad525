//! Call-level rules (docs/src/guides/policy-cookbook.md, "Authorise a call"): a policy's
//! `[tool.NAME] allow` rule over the principal and the call's arguments,
//! `[defaults] tools = "deny"`, `tools/list` showing only what a principal
//! may call, and a rule that fails at run time refusing with `policy_error`.
//! The rooms example is the real server: a call refused here never reaches it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod policy_support;

use common::*;
use policy_support::*;
use serde_json::{Value, json};

const FAY: &str = "key-fay-facilities-0123456789";
const BOB: &str = "key-bob-nobody-0123456789";

fn principals() -> String {
    api_key(FAY, "fay", &["facilities"]) + &api_key(BOB, "bob", &[])
}

/// The rooms example behind the shipped rooms policy.
async fn rooms_gateway() -> TestGateway {
    let policy = repo().join("policies/rooms.toml");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{}\n[[route]]\nname = \"main\"\npath = \"/mcp\"\npolicy = {}\n[route.upstream]\ncommand = [{}]\n",
        principals(),
        toml_path(&policy),
        toml_path(&rooms_bin()),
    );
    TestGateway::start(&config).await
}

fn booking(hint: &str) -> Value {
    json!({"day": "2026-09-18", "hour": 15, "room_hint": hint})
}

#[tokio::test]
async fn the_atrium_booked_by_argument_is_refused_outside_facilities() {
    let gw = rooms_gateway().await;
    // An exact hint books without a question: the answer rule never runs,
    // the call's rule does.
    let refused = Op::tool("book_room", booking("atrium"))
        .key(BOB)
        .start(&gw)
        .await;
    let data = assert_error(&refused, 200, -32602, "policy_denied").data();
    assert_eq!(data["tool"], "book_room");
    assert_eq!(
        refused.error()["message"],
        "only the facilities group may book the Atrium"
    );
    // The server never saw it: the slot is still free for someone allowed.
    let booked = Op::tool("book_room", booking("Atrium"))
        .key(FAY)
        .start(&gw)
        .await;
    let booked = booked.result();
    assert_eq!(booked["structuredContent"]["room_id"], "atrium", "{booked}");
    // Other rooms by argument are anyone's.
    let nook = Op::tool("book_room", booking("nook"))
        .key(BOB)
        .start(&gw)
        .await;
    assert_eq!(nook.result()["structuredContent"]["room_id"], "nook");
    gw.stop().await;
}

fn names(r: &Resp) -> Vec<String> {
    let mut names: Vec<String> = r.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

async fn list(gw: &TestGateway, key: &str) -> Resp {
    let rb = gw
        .request("tools/list", json!({"_meta": meta(json!({}))}))
        .bearer_auth(key);
    read_resp(gw.send(rb).await).await
}

#[tokio::test]
async fn default_deny_lists_and_allows_only_the_named_tools() {
    let fx = Fixture::with_policy(
        "[defaults]\ntools = \"deny\"\n\n[tool.ask]\n\n[tool.transfer]\nallow = '\"facilities\" in principal.groups'\n",
    );
    let gw = TestGateway::start(&fx.config(&principals())).await;
    assert_eq!(names(&list(&gw, FAY).await), ["ask", "transfer"]);
    assert_eq!(names(&list(&gw, BOB).await), ["ask"]);

    let refused = tool("book_room", json!({"tag": "b1"}))
        .key(FAY)
        .start(&gw)
        .await;
    let data = assert_error(&refused, 200, -32602, "policy_denied").data();
    assert_eq!(data["tool"], "book_room");
    let refused = tool("transfer", json!({"tag": "b2"}))
        .key(BOB)
        .start(&gw)
        .await;
    assert_error(&refused, 200, -32602, "policy_denied");
    // Neither call reached the server; an allowed one does.
    let allowed = tool("transfer", json!({"tag": "f1"}))
        .key(FAY)
        .start(&gw)
        .await;
    asked(&allowed);
    let events = fx.log.events();
    let asked_tags: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "asking")
        .filter_map(|e| e["tag"].as_str())
        .collect();
    assert_eq!(asked_tags, ["f1"], "{events:?}");
    gw.stop().await;
}

#[tokio::test]
async fn a_rule_that_fails_at_run_time_refuses_with_policy_error() {
    let fx = Fixture::with_policy("[tool.transfer]\nallow = 'principal.grups.size() > 0'\n");
    let gw = TestGateway::start(&fx.config(&principals())).await;
    let r = tool("transfer", json!({"tag": "x"}))
        .key(FAY)
        .start(&gw)
        .await;
    let data = assert_error(&r, 200, -32603, "policy_error").data();
    assert_eq!(data["tool"], "transfer");
    // Failing closed is not failing open elsewhere: the other tools still work.
    let question = schema(json!({"n": {"type": "integer"}}), &["n"]);
    let ok = ask(&question, "How many?", "y").key(FAY).start(&gw).await;
    asked(&ok);
    gw.stop().await;
}
