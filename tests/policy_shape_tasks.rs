//! The policy shapes a native server's task questions (issue 50): the rmcp
//! conformance fixture's `multi_input` task asks `name` (free text) as its
//! `inputRequests`; `tasks/get` shows the form narrowed to the policy's
//! choices, a red-marked question comes back under its new key in the same
//! narrowed form, and the server hears only an answer from the choices.
//! And a gateway-made task of a legacy server (the rooms example): its
//! pushed question, read through `tasks/get`, shows the narrowed choices.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mrtr_support;
mod tasks_support;

use common::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-key";

async fn gateway(fx: &Fixture, policy: &str) -> TestGateway {
    let config = format!(
        "{}\n[audit]\npath = {}\n\n[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n\
         [[route]]\nname = \"main\"\npath = \"/mcp\"\n{}\n\
         [route.upstream]\nprotocol = \"2026-07-28\"\ncommand = [{}, \"--native\"]\n{}\n\n\
         [route.tasks]\nttl = \"2m\"\n",
        api_key(ALICE, "alice", &[]),
        toml_path(&fx.path("audit.jsonl")),
        fx.policy(policy),
        toml_path(&example_bin("conformance_fixture")),
        fx.log_env(),
    );
    TestGateway::start(&config).await
}

async fn rpc(gw: &TestGateway, method: &str, mut params: Value) -> Resp {
    let name = params["taskId"].as_str().map(str::to_owned);
    params["_meta"] = meta(declaring_tasks());
    let mut rb = gw.request(method, params).bearer_auth(ALICE);
    if let Some(name) = name {
        rb = rb.header("mcp-name", name);
    }
    read_resp(gw.send(rb).await).await
}

async fn get(gw: &TestGateway, id: &str) -> Value {
    let r = rpc(gw, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    r.result().clone()
}

async fn update(gw: &TestGateway, id: &str, answers: Value) {
    let r = rpc(
        gw,
        "tasks/update",
        json!({"taskId": id, "inputResponses": answers}),
    )
    .await;
    assert_eq!(r.result(), &json!({"resultType": "complete"}), "{}", r.raw);
}

async fn until(gw: &TestGateway, id: &str, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || async {
        let t = get(gw, id).await;
        if ready(&t) { Ok(t) } else { Err(t.to_string()) }
    })
    .await
}

fn accept(name: &str) -> Value {
    json!({"action": "accept", "content": {"name": name, "confirm": true}})
}

#[tokio::test]
async fn a_relayed_tasks_questions_are_shown_narrowed_and_re_asked_narrowed() {
    let fx = Fixture::new();
    let gw = gateway(
        &fx,
        "[tool.multi_input.fields.name]\nenum = [\"ada\", \"bob\"]\n",
    )
    .await;
    let r = rpc(
        &gw,
        "tools/call",
        json!({"name": "multi_input", "arguments": {}}),
    )
    .await;
    let id = r.result()["taskId"].as_str().unwrap().to_owned();
    let asked = until(&gw, &id, "two questions", |t| {
        t["inputRequests"].as_object().is_some_and(|r| r.len() == 2)
    })
    .await;
    let name = |t: &Value, key: &str| {
        t["inputRequests"][key]["params"]["requestedSchema"]["properties"]["name"].clone()
    };
    let narrowed = json!({"type": "string", "enum": ["ada", "bob"]});
    assert_eq!(name(&asked, "first"), narrowed, "{asked}");
    assert_eq!(name(&asked, "second"), narrowed, "{asked}");
    // The form's other field is the server's.
    assert_eq!(
        asked["inputRequests"]["first"]["params"]["requestedSchema"]["properties"]["confirm"],
        json!({"type": "boolean"})
    );

    // An answer from outside the choices (a client that skips its form).
    update(&gw, &id, json!({"first": accept("eve")})).await;
    let reasked = until(&gw, &id, "a red mark", |t| {
        t["inputRequests"].get("first.redmark-2").is_some()
    })
    .await;
    assert_eq!(name(&reasked, "first.redmark-2"), narrowed, "{reasked}");
    let message = reasked["inputRequests"]["first.redmark-2"]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.contains("✗ name must be one of ada, bob"),
        "{message}"
    );

    update(
        &gw,
        &id,
        json!({"first.redmark-2": accept("ada"), "second": accept("bob")}),
    )
    .await;
    let done = until(&gw, &id, "completed", |t| t["status"] == "completed").await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        r#"answers: Some(String("ada")) and Some(String("bob"))"#,
        "{done}"
    );
    let lines = eventually("three audit lines", || async {
        let text = std::fs::read_to_string(fx.path("audit.jsonl")).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if lines.len() == 3 {
            Ok(lines)
        } else {
            Err(format!("{lines:?}"))
        }
    })
    .await;
    for l in &lines {
        assert_eq!(l["narrowed"], json!(["name"]), "{l}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn a_gateway_made_tasks_question_shows_the_narrowed_choices() {
    let fx = Fixture::new();
    // The shipped policy's `room_id` enum, without the Atrium.
    let policy = tasks_support::rooms_policy("task = \"required\"").replacen(
        "enum = [\"atrium\", \"studio-b\", \"nook\"]",
        "enum = [\"studio-b\", \"nook\"]",
        1,
    );
    let keys = api_key(ALICE, "alice", &[]);
    let gw = TestGateway::start(&tasks_support::config_with(&fx, &keys, &policy, Some(""))).await;
    let r = tasks_support::rpc_as(
        &gw,
        ALICE,
        "tools/call",
        tasks_support::ambiguous(),
        declaring_tasks(),
    )
    .await;
    let id = tasks_support::created(&r);
    let asked = tasks_support::until(&gw, ALICE, &id, "input_required").await;
    let room =
        &asked["inputRequests"]["room"]["params"]["requestedSchema"]["properties"]["room_id"];
    assert_eq!(room["enum"], json!(["studio-b", "nook"]), "{asked}");
    // The server's own description is kept.
    assert!(
        room["description"]
            .as_str()
            .unwrap()
            .contains("Atrium seats 24"),
        "{room}"
    );
    gw.stop().await;
}
