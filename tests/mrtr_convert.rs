//! Pushed questions as a 2026-07-28 client sees them: form and URL
//! elicitation, sampling and roots, pushed during `tools/call`, `prompts/get`
//! and `resources/read`, each turned into a schema-valid `InputRequiredResult`
//! under the policy's keys or `elicitation-1`, `sampling-1`, `roots-1`; pushes
//! that arrive together asked in one round; answers given in advance; a
//! question left unanswered asked again.
//!
//! Drives `tests/fixtures/mrtr_server.py` (FastMCP from mcp==1.30.0).

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod mrtr_support;

use common::*;
use mrtr_support::*;
use serde_json::json;

#[tokio::test]
async fn form_elicitation_during_a_tool_call_round_trips() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;
    let op = Op::tool("ask", json!({"tag": "form-1"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    assert_eq!(asked.keys(), ["elicitation-1"]);
    let q = &asked.requests["elicitation-1"];
    assert_eq!(q["method"], "elicitation/create");
    assert_eq!(q["params"]["message"], "What is your name?");
    assert_eq!(
        q["params"]["requestedSchema"],
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
    );
    assert_ne!(q["params"]["mode"], "url");
    // The state is a sealed token (key id, then the encrypted claims), not
    // something the client can read as JSON.
    assert_eq!(asked.state.split('.').count(), 2, "{}", asked.state);

    let done = op
        .retry(
            &gw,
            &asked.state,
            json!({"elicitation-1": accept("Ada Lovelace")}),
        )
        .await;
    assert_eq!(
        output(&done),
        json!({"tag": "form-1", "action": "accept", "content": {"name": "Ada Lovelace"}})
    );
    let seen = fx.log.answer("form-1").await;
    assert_eq!(seen["action"], "accept");
    assert_eq!(seen["content"], json!({"name": "Ada Lovelace"}));
    assert_eq!(gw.metric(&ops("ask", "completed")).await, Some(1.0));
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn prompts_get_and_resources_read_ask_too() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;

    let prompt = Op::prompt("greeting", json!({"tag": "p-1"}));
    let asked = input_required("prompts/get", &prompt.start(&gw).await);
    assert_eq!(asked.keys(), ["elicitation-1"]);
    let done = prompt
        .retry(&gw, &asked.state, json!({"elicitation-1": accept("Grace")}))
        .await;
    let result = complete("prompts/get", &done);
    assert_eq!(
        result["messages"][0]["content"]["text"],
        "Hello Grace (p-1, accept)"
    );

    let resource = Op::resource("fixture://secret");
    let asked = input_required("resources/read", &resource.start(&gw).await);
    assert_eq!(asked.keys(), ["elicitation-1"]);
    let done = resource
        .retry(&gw, &asked.state, json!({"elicitation-1": accept("Linus")}))
        .await;
    let result = complete("resources/read", &done);
    assert_eq!(result["contents"][0]["uri"], "fixture://secret");
    let text = result["contents"][0]["text"].as_str().expect("text");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(text).unwrap(),
        json!({"action": "accept", "content": {"name": "Linus"}})
    );

    assert_eq!(gw.metric(&ops("greeting", "completed")).await, Some(1.0));
    assert_eq!(
        gw.metric(&ops("fixture://secret", "completed")).await,
        Some(1.0)
    );
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn sampling_and_roots_are_asked_and_answered_in_their_own_shapes() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;

    let op = Op::tool("sample", json!({"tag": "s-1"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    assert_eq!(asked.keys(), ["sampling-1"]);
    let q = &asked.requests["sampling-1"];
    assert_eq!(q["method"], "sampling/createMessage");
    assert_eq!(q["params"]["maxTokens"], 50);
    assert_eq!(q["params"]["systemPrompt"], "Answer in one word.");
    assert_eq!(
        q["params"]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Capital of France? (s-1)"}}])
    );
    let answer = sampling_answer("Paris.");
    let done = op
        .retry(&gw, &asked.state, json!({"sampling-1": answer}))
        .await;
    assert_eq!(output(&done)["sampling"], answer);
    assert_eq!(fx.log.answer("s-1").await["result"], answer);

    let op = Op::tool("roots", json!({"tag": "r-1"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    assert_eq!(asked.keys(), ["roots-1"]);
    assert_eq!(asked.requests["roots-1"]["method"], "roots/list");
    let answer = roots_answer();
    let done = op
        .retry(&gw, &asked.state, json!({"roots-1": answer}))
        .await;
    assert_eq!(output(&done)["roots"], answer);
    assert_eq!(fx.log.answer("r-1").await["result"], answer);

    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn pushes_that_arrive_together_are_asked_in_one_round() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;

    // An elicitation, a sampling and a roots request at once: one result, one key each.
    let op = Op::tool("mixed", json!({"tag": "m-1"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    assert_eq!(asked.keys(), ["elicitation-1", "roots-1", "sampling-1"]);
    let done = op
        .retry(
            &gw,
            &asked.state,
            json!({
                "elicitation-1": accept("Mixed"),
                "sampling-1": sampling_answer("Paris."),
                "roots-1": roots_answer(),
            }),
        )
        .await;
    let out = output(&done);
    assert_eq!(
        out["elicitation"],
        json!({"action": "accept", "content": {"name": "Mixed"}})
    );
    assert_eq!(out["sampling"], sampling_answer("Paris."));
    assert_eq!(out["roots"], roots_answer());

    // Two questions at once: each answer reaches the question it answers.
    let op = Op::tool("pair", json!({"tag": "pair-1"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    assert_eq!(asked.keys(), ["elicitation-1", "elicitation-2"]);
    let (first, second) = (asked.key_of("First?"), asked.key_of("Second?"));
    let done = op
        .retry(
            &gw,
            &asked.state,
            json!({first: accept("one"), second: accept("two")}),
        )
        .await;
    let out = output(&done);
    assert_eq!(out["first"]["content"]["name"], "one");
    assert_eq!(out["second"]["content"]["name"], "two");

    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn keys_by_kind_name_a_gathered_round_whatever_order_the_pushes_arrive_in() {
    let fx = Fixture::new();
    let policy = fx.policy(
        "[tool.mixed]\nkeys = { elicitation = [\"who\"], sampling = [\"capital\"], roots = [\"where\"] }\n",
    );
    let gw = TestGateway::start(&fx.cfg().route(&policy).build()).await;
    // asyncio.gather sends the three pushes in an order the server's event
    // loop picks; each must still carry its kind's name, every time.
    for n in 0..3 {
        let op = Op::tool("mixed", json!({"tag": format!("kind-{n}")}));
        let asked = input_required("tools/call", &op.start(&gw).await);
        let mut methods: Vec<(&str, &str)> = asked
            .requests
            .iter()
            .map(|(k, r)| (k.as_str(), r["method"].as_str().unwrap_or_default()))
            .collect();
        methods.sort();
        assert_eq!(
            methods,
            [
                ("capital", "sampling/createMessage"),
                ("where", "roots/list"),
                ("who", "elicitation/create"),
            ],
            "{:?}",
            asked.requests
        );
        let done = op
            .retry(
                &gw,
                &asked.state,
                json!({
                    "who": accept("Kind"),
                    "capital": sampling_answer("Paris."),
                    "where": roots_answer(),
                }),
            )
            .await;
        let out = output(&done);
        assert_eq!(out["elicitation"]["content"]["name"], "Kind");
        assert_eq!(out["sampling"], sampling_answer("Paris."));
        assert_eq!(out["roots"], roots_answer());
    }
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn the_policy_file_names_the_keys_per_tool() {
    let fx = Fixture::new();
    let policy = fx.policy(
        "[tool.pair]\nkeys = [\"first_name\", \"second_name\"]\n\
         [tool.mixed]\nkeys = [\"who\"]\n\
         [tool.greeting]\nkeys = [\"visitor\"]\n\
         [tool.\"fixture://secret\"]\nkeys = [\"reader\"]\n",
    );
    let gw = TestGateway::start(&fx.cfg().route(&policy).build()).await;

    let op = Op::tool("pair", json!({"tag": "pol-1"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    assert_eq!(asked.keys(), ["first_name", "second_name"]);
    let done = op
        .retry(
            &gw,
            &asked.state,
            json!({"first_name": accept("a"), "second_name": accept("b")}),
        )
        .await;
    output(&done);

    // Named keys first, in the order asked; then the defaults.
    let op = Op::tool("mixed", json!({"tag": "pol-2"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    assert_eq!(asked.keys().len(), 3, "{:?}", asked.requests);
    assert!(asked.requests.contains_key("who"), "{:?}", asked.requests);
    let mut answers = serde_json::Map::new();
    for (key, req) in &asked.requests {
        let a = match req["method"].as_str().unwrap() {
            "elicitation/create" => accept("w"),
            "sampling/createMessage" => sampling_answer("Paris."),
            _ => roots_answer(),
        };
        if key != "who" {
            let kind = req["method"].as_str().unwrap().split('/').next().unwrap();
            assert_eq!(key, &format!("{kind}-1"), "{:?}", asked.requests);
        }
        answers.insert(key.clone(), a);
    }
    output(&op.retry(&gw, &asked.state, answers.into()).await);

    let prompt = Op::prompt("greeting", json!({"tag": "pol-3"}));
    let asked = input_required("prompts/get", &prompt.start(&gw).await);
    assert_eq!(asked.keys(), ["visitor"]);
    complete(
        "prompts/get",
        &prompt
            .retry(&gw, &asked.state, json!({"visitor": accept("v")}))
            .await,
    );

    let resource = Op::resource("fixture://secret");
    let asked = input_required("resources/read", &resource.start(&gw).await);
    assert_eq!(asked.keys(), ["reader"]);
    complete(
        "resources/read",
        &resource
            .retry(&gw, &asked.state, json!({"reader": accept("r")}))
            .await,
    );

    // A tool the policy does not name gets the defaults.
    let op = Op::tool("ask", json!({"tag": "pol-4"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    assert_eq!(asked.keys(), ["elicitation-1"]);
    output(
        &op.retry(&gw, &asked.state, json!({"elicitation-1": accept("x")}))
            .await,
    );
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn url_mode_stays_url_mode_and_its_completion_notice_stays_upstream() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;
    let op = Op::tool("url_ask", json!({"tag": "url-1"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    assert_eq!(asked.keys(), ["elicitation-1"]);
    let q = &asked.requests["elicitation-1"];
    assert_schema("ElicitRequestURLParams", &q["params"]);
    assert_eq!(
        q["params"],
        json!({"mode": "url", "message": "Sign in to continue", "url": "https://example.com/login?tag=url-1"})
    );

    // The retry asks for log messages, so what the server sends after the
    // accept is streamed: its log message arrives, its completion notice does not.
    let retry = op
        .clone()
        .meta(json!({"io.modelcontextprotocol/logLevel": "info"}));
    let done = retry
        .retry(
            &gw,
            &asked.state,
            json!({"elicitation-1": {"action": "accept"}}),
        )
        .await;
    assert_eq!(output(&done), json!({"tag": "url-1", "action": "accept"}));
    fx.log
        .eventually("sent_complete", |e| {
            e["event"] == "sent_complete" && e["tag"] == "url-1"
        })
        .await;
    let methods: Vec<&str> = done
        .messages
        .iter()
        .filter_map(|m| m["method"].as_str())
        .collect();
    assert!(
        !methods.contains(&"notifications/elicitation/complete"),
        "{methods:?}"
    );
    assert!(
        !done.raw.contains("elicitationId") && !done.raw.contains("eid-url-1"),
        "{}",
        done.raw
    );
    assert!(
        methods.contains(&"notifications/message"),
        "the log message should be relayed: {}",
        done.raw
    );
    assert_eq!(fx.log.answer("url-1").await["action"], "accept");
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn answers_given_in_advance_are_used_without_asking() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;

    // No requestState: a fresh call whose question is answered at once; keys never asked are ignored.
    let op = Op::tool("ask", json!({"tag": "adv-1"}));
    let done = op
        .send(
            &gw,
            json!({"inputResponses": {"elicitation-1": accept("Early"), "never-asked": accept("x")}}),
        )
        .await;
    assert_eq!(
        output(&done),
        json!({"tag": "adv-1", "action": "accept", "content": {"name": "Early"}})
    );
    assert_eq!(fx.log.tagged("answer", "adv-1").len(), 1);

    // Of two questions asked together, only the one not answered in advance is asked.
    let op = Op::tool("pair", json!({"tag": "adv-2"}));
    let first = op
        .send(
            &gw,
            json!({"inputResponses": {"elicitation-1": accept("given")}}),
        )
        .await;
    let asked = input_required("tools/call", &first);
    assert_eq!(asked.keys(), ["elicitation-2"]);
    let done = op
        .retry(&gw, &asked.state, json!({"elicitation-2": accept("later")}))
        .await;
    let out = output(&done);
    let mut names = [
        out["first"]["content"]["name"].as_str().unwrap(),
        out["second"]["content"]["name"].as_str().unwrap(),
    ];
    names.sort_unstable();
    assert_eq!(names, ["given", "later"]);

    // A malformed answer in advance is not an error: the question is asked instead.
    let op = Op::tool("ask", json!({"tag": "adv-3"}));
    let asked = input_required(
        "tools/call",
        &op.send(&gw, json!({"inputResponses": {"elicitation-1": "yes"}}))
            .await,
    );
    assert_eq!(asked.keys(), ["elicitation-1"]);
    output(
        &op.retry(&gw, &asked.state, json!({"elicitation-1": accept("ok")}))
            .await,
    );
    settled(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_question_left_unanswered_is_asked_again() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;
    let op = Op::tool("pair", json!({"tag": "again-1"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    let (first, second) = (asked.key_of("First?"), asked.key_of("Second?"));

    // Answering nothing: both asked again, under the same keys.
    let again = input_required("tools/call", &op.retry(&gw, &asked.state, json!({})).await);
    assert_eq!(again.requests, asked.requests);
    assert_ne!(again.state, asked.state);

    // Answering one: only the other is asked again.
    let again2 = input_required(
        "tools/call",
        &op.retry(&gw, &again.state, json!({first.clone(): accept("one")}))
            .await,
    );
    assert_eq!(again2.keys(), [second.as_str()]);
    assert_eq!(again2.requests[&second], asked.requests[&second]);

    let done = op
        .retry(&gw, &again2.state, json!({second: accept("two")}))
        .await;
    let out = output(&done);
    assert_eq!(out["first"]["content"]["name"], "one");
    assert_eq!(out["second"]["content"]["name"], "two");
    assert_eq!(gw.metric(&ops("pair", "completed")).await, Some(1.0));
    settled(&gw).await;
    gw.stop().await;
}
