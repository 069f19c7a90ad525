//! Replay mode: nothing is held between round trips. Each retry, on any
//! gateway sharing the state key, calls the tool again and answers the
//! server's questions from the answers sealed in `requestState`; the first
//! question without an answer goes to the client. The seed scenario: every
//! round of one operation lands on a different gateway.
//!
//! Drives `tests/fixtures/replay_server.py` (FastMCP from mcp==1.30.0) over stdio.

// A test may panic (that is how it fails) and cast freely.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mrtr_support;

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use common::*;
use mrtr_support::*;
use serde_json::{Value, json};

fn state_key(secret: &str) -> String {
    format!("[[state.keys]]\nid = \"k1\"\nsecret = \"{secret}\"\nsign = true\n")
}

/// A gateway in front of the replay fixture, named `node`, sealing with `secret`,
/// writing its audit log to `audit`.
async fn gateway(
    fx: &Fixture,
    node: &str,
    secret: &str,
    policy: &str,
    audit: &Path,
) -> TestGateway {
    TestGateway::start(
        &fx.cfg()
            .script("replay_server.py")
            // The fixture lingers after its `cancel` (a server busy cleaning
            // up): a short end_grace, then notifications/cancelled.
            .upstream("end_grace = \"1s\"")
            .route(policy)
            .top(&format!("node_id = \"{node}\""))
            .top(&state_key(secret))
            .top(&format!("[audit]\npath = {}\n", toml_path(audit)))
            .build(),
    )
    .await
}

fn name(v: &str) -> Value {
    accepted(json!({"name": v}))
}

fn city(v: &str) -> Value {
    accepted(json!({"city": v}))
}

fn replay_rounds(tool: &str) -> String {
    format!(r#"redmark_replay_rounds_total{{route="main",tool="{tool}"}}"#)
}

fn audit_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit line is JSON"))
        .collect()
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The seed: two gateways with one `[[state.keys]]` key; round 1 on A, the
/// retry on B, the last retry on A again. Neither holds anything between
/// rounds, the server saw each unfinished run cancelled, and each question
/// is audited once although the server heard the first answer twice.
#[tokio::test]
async fn a_two_question_tool_completes_with_each_round_on_another_gateway() {
    let fx = Fixture::new();
    let k = secret();
    let policy = fx.policy("[defaults]\nmode = \"replay\"\n");
    let (audit_a, audit_b) = (fx.path("audit-a.jsonl"), fx.path("audit-b.jsonl"));
    let a = gateway(&fx, "gw-a", &k, &policy, &audit_a).await;
    let b = gateway(&fx, "gw-b", &k, &policy, &audit_b).await;
    let op = Op::tool("two_questions", json!({"tag": "seed"})).caps(form_caps());

    // Round 1, on A.
    let first = input_required("tools/call", &op.start(&a).await);
    assert_eq!(first.keys(), ["elicitation-1"]);
    assert_eq!(first.message(), "Your name?");
    let c1 = claims_of(&first.state, "k1", &k);
    assert_eq!(
        (c1.m.as_str(), c1.rd, c1.node.as_str()),
        ("replay", 1, "gw-a")
    );
    assert!(c1.ans.is_empty());
    // Nothing is held: no pending operation, no leased session; the server
    // heard `cancel` for its question and notifications/cancelled for the call.
    settled(&a).await;
    fx.log
        .eventually("the first run cancelled", |e| {
            e["event"] == "cancelled" && e["tag"] == "seed"
        })
        .await;
    assert_eq!(fx.log.answer("seed").await["action"], "cancel");
    assert_eq!(a.metric(&replay_rounds("two_questions")).await, Some(1.0));

    // A malformed answer is refused before the round is used...
    let r = op
        .retry(&b, &first.state, json!({"elicitation-1": "Ada"}))
        .await;
    assert_eq!(
        assert_error(&r, 200, -32602, "malformed_input_response")["data"]["key"],
        "elicitation-1"
    );
    // ...so the corrected retry, on B, still works: B runs the call again and
    // answers the first question; the second goes to the client.
    let second = input_required(
        "tools/call",
        &op.retry(
            &b,
            &first.state,
            json!({"elicitation-1": name("Ada Lovelace")}),
        )
        .await,
    );
    assert_eq!(second.keys(), ["elicitation-2"]);
    assert_eq!(second.message(), "Your city?");
    let c2 = claims_of(&second.state, "k1", &k);
    assert_eq!((c2.rd, c2.node.as_str(), c2.ans.len()), (2, "gw-b", 1));
    assert_eq!(c2.op, c1.op, "one operation across gateways");
    // The answer rides in the state, encrypted: the token shows none of it.
    let sealed = sealed_bytes(&second.state);
    assert!(!second.state.contains("Lovelace"));
    assert!(!sealed.windows(8).any(|w| w == b"Lovelace"));
    settled(&b).await;
    assert_eq!(b.metric(&replay_rounds("two_questions")).await, Some(1.0));

    // The state of round 1 is spent on B.
    let r = op
        .retry(&b, &first.state, json!({"elicitation-1": name("Eve")}))
        .await;
    assert_error(&r, 200, -32602, "state_replayed");

    // Round 3, on A: the first answer is given again, the second from the retry.
    let done = op
        .retry(&a, &second.state, json!({"elicitation-2": city("Paris")}))
        .await;
    assert_eq!(output(&done)["answers"], json!(["Ada Lovelace", "Paris"]));
    assert_eq!(
        a.metric(&ops("two_questions", "completed")).await,
        Some(1.0)
    );
    let r = op
        .retry(&a, &second.state, json!({"elicitation-2": city("Rome")}))
        .await;
    assert_error(&r, 200, -32602, "state_replayed");

    // The server ran the tool three times and finished once, with both answers.
    assert_eq!(fx.log.tagged("run", "seed").len(), 3, "{}", fx.log.seen());
    let done_events = fx.log.tagged("done", "seed");
    assert_eq!(done_events.len(), 1);
    assert_eq!(done_events[0]["answers"], json!(["Ada Lovelace", "Paris"]));
    // B's `cancel` for its question is sent after B replied, by B's own
    // server process, so it may be logged before, between or after A's
    // round-3 answers: wait for all five, and check its place only within B.
    let heard: Vec<(Value, Value)> = fx
        .log
        .answers_at_least("seed", 5)
        .await
        .iter()
        .map(|e| (e["message"].clone(), e["action"].clone()))
        .collect();
    let (name_q, city_q) = (json!("Your name?"), json!("Your city?"));
    let (accept, cancel) = (json!("accept"), json!("cancel"));
    assert_eq!(heard.len(), 5, "{heard:?}");
    assert_eq!(
        heard[..2],
        [
            (name_q.clone(), cancel.clone()),
            (name_q.clone(), accept.clone())
        ],
        "A's round 1 cancelled, then B's run answered: {heard:?}"
    );
    let b_cancel = (city_q.clone(), cancel);
    assert_eq!(
        heard[2..].iter().filter(|h| **h == b_cancel).count(),
        1,
        "{heard:?}"
    );
    let round_3: Vec<_> = heard[2..].iter().filter(|h| **h != b_cancel).collect();
    assert_eq!(
        round_3,
        [&(name_q, accept.clone()), &(city_q, accept)],
        "A's round 3: {heard:?}"
    );
    fx.log
        .eventually("both unfinished runs cancelled", |_| {
            fx.log.tagged("cancelled", "seed").len() == 2
        })
        .await;
    for gw in [&a, &b] {
        settled(gw).await;
    }
    a.stop().await;
    b.stop().await;
    // Each question is audited once, where its answer arrived: a replayed
    // answer is not a new question.
    let (la, lb) = (audit_lines(&audit_a), audit_lines(&audit_b));
    assert_eq!(lb.len(), 1, "{lb:?}");
    assert_eq!(
        (&lb[0]["key"], &lb[0]["outcome"]),
        (&json!("elicitation-1"), &json!("accepted"))
    );
    assert_eq!(la.len(), 1, "{la:?}");
    assert_eq!(
        (&la[0]["key"], &la[0]["outcome"]),
        (&json!("elicitation-2"), &json!("accepted"))
    );
    assert_eq!(la[0]["operation"], lb[0]["operation"]);
}

/// A question whose text changed between runs is not given the old answer:
/// it goes back to the client, and its new answer is the one delivered.
#[tokio::test]
async fn a_question_that_changed_between_runs_is_asked_again() {
    let fx = Fixture::new();
    let k = secret();
    let policy = fx.policy("[tool.changing]\nmode = \"replay\"\n");
    let gw = gateway(&fx, "gw-a", &k, &policy, &fx.path("audit.jsonl")).await;
    let op = Op::tool("changing", json!({"tag": "chg"})).caps(form_caps());
    let first = input_required("tools/call", &op.start(&gw).await);
    assert_eq!(first.message(), "Your name? (version 1)");
    let again = input_required(
        "tools/call",
        &op.retry(&gw, &first.state, json!({"elicitation-1": name("old")}))
            .await,
    );
    assert_eq!(again.keys(), ["elicitation-1"]);
    assert_eq!(again.message(), "Your name? (version 2)");
    assert!(claims_of(&again.state, "k1", &k).ans.is_empty());
    let done = op
        .retry(&gw, &again.state, json!({"elicitation-1": name("new")}))
        .await;
    assert_eq!(output(&done)["answers"], json!(["new"]));
    let accepted: Vec<Value> = fx
        .log
        .answers("chg")
        .into_iter()
        .filter(|e| e["action"] == "accept")
        .map(|e| e["content"]["name"].clone())
        .collect();
    assert_eq!(
        accepted,
        [json!("new")],
        "the old answer never reached the server"
    );
    settled(&gw).await;
    gw.stop().await;
}

/// A tampered, expired or oversized state is refused with its own reason; an
/// operation whose state would outgrow `[state] max_bytes` ends with
/// `state_too_large` and the server is not left waiting.
#[tokio::test]
async fn bad_states_are_refused_and_a_state_past_the_bound_ends_the_operation() {
    let fx = Fixture::new();
    let k = secret();
    let gw = TestGateway::start(
        &fx.cfg()
            .script("replay_server.py")
            // The fixture lingers after its `cancel` (a server busy cleaning
            // up): a short end_grace, then notifications/cancelled.
            .upstream("end_grace = \"1s\"")
            .route(&fx.policy("[defaults]\nmode = \"replay\"\n"))
            .top(&state_key(&k))
            .top("[state]\nmax_bytes = 1024\n")
            .build(),
    )
    .await;
    let op = Op::tool("two_questions", json!({"tag": "big"})).caps(form_caps());
    let first = input_required("tools/call", &op.start(&gw).await);
    // Tampered: one bit of the ciphertext.
    let mut bytes = sealed_bytes(&first.state);
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    let tampered = format!("k1.{}", base64_url(&bytes));
    let r = op
        .retry(&gw, &tampered, json!({"elicitation-1": name("x")}))
        .await;
    assert_error(&r, 200, -32602, "state_bad_signature");
    // Expired: sealed with the right key, past its time.
    let mut old = claims_of(&first.state, "k1", &k);
    old.exp = now_secs() - 1;
    let expired = keyring("k1", &k).seal(&old);
    let r = op
        .retry(&gw, &expired, json!({"elicitation-1": name("x")}))
        .await;
    assert_error(&r, 200, -32602, "state_expired");
    // Longer than the bound: refused before any work.
    let long = format!("k1.{}", "A".repeat(1100));
    let r = op
        .retry(&gw, &long, json!({"elicitation-1": name("x")}))
        .await;
    assert_error(&r, 200, -32602, "state_too_large");
    // None of these used the round: an answer too long to carry ends the operation.
    let r = op
        .retry(
            &gw,
            &first.state,
            json!({"elicitation-1": name(&"n".repeat(900))}),
        )
        .await;
    let err = assert_error(&r, 200, -32602, "state_too_large");
    assert_eq!(err["data"]["max_bytes"], 1024);
    assert_eq!(
        gw.metric(&ops("two_questions", "state_too_large")).await,
        Some(1.0)
    );
    // The run that could not carry its answers asked the city and heard `cancel`.
    let last = fx.log.answers_at_least("big", 3).await;
    assert_eq!(
        (&last[2]["message"], &last[2]["action"]),
        (&json!("Your city?"), &json!("cancel"))
    );
    settled(&gw).await;
    gw.stop().await;
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// `replay_when_annotated`: the tool the server annotates `readOnlyHint` runs
/// in replay mode, the other holds its call (and its session) while it waits.
#[tokio::test]
async fn replay_when_annotated_replays_the_read_only_tool_and_holds_the_other() {
    let fx = Fixture::new();
    let k = secret();
    let policy = fx.policy("[defaults]\nmode = \"replay_when_annotated\"\n");
    let gw = gateway(&fx, "gw-a", &k, &policy, &fx.path("audit.jsonl")).await;

    let lookup = Op::tool("lookup", json!({"tag": "ro"})).caps(form_caps());
    let asked = input_required("tools/call", &lookup.start(&gw).await);
    assert_eq!(claims_of(&asked.state, "k1", &k).m, "replay");
    settled(&gw).await;
    assert_eq!(gw.metric(&replay_rounds("lookup")).await, Some(1.0));
    let done = lookup.answer(&gw, &asked, name("r-1")).await;
    assert_eq!(output(&done)["answers"], json!(["r-1"]));

    let book = Op::tool("book", json!({"tag": "rw"})).caps(form_caps());
    let asked = input_required("tools/call", &book.start(&gw).await);
    assert_eq!(claims_of(&asked.state, "k1", &k).m, "hold");
    // Held: one operation pending, its session leased, the server's call open.
    gw.wait_metric(PENDING, 1.0).await;
    gw.wait_metric(&sessions("leased"), 1.0).await;
    assert_eq!(gw.metric(&replay_rounds("book")).await, None);
    let done = book.answer(&gw, &asked, name("atrium")).await;
    assert_eq!(output(&done)["answers"], json!(["atrium"]));
    assert_eq!(
        fx.log.tagged("run", "rw").len(),
        1,
        "hold mode runs the tool once"
    );
    settled(&gw).await;
    gw.stop().await;
}

/// A replay-mode answer is held to the policy exactly as in hold mode: an
/// invalid value is re-asked with a red mark under the same key (and the
/// re-ask count survives the round), then fails with the same error.
#[tokio::test]
async fn replay_mode_answers_are_held_to_the_policy() {
    let fx = Fixture::new();
    let k = secret();
    let policy = fx.policy(
        "[defaults]\nmode = \"replay\"\nmax_reasks = 1\n\
         [tool.two_questions.fields.name]\nmax_length = 5\n\
         [tool.lookup]\non_invalid = \"error\"\n[tool.lookup.fields.name]\nmax_length = 5\n",
    );
    let gw = gateway(&fx, "gw-a", &k, &policy, &fx.path("audit.jsonl")).await;

    let op = Op::tool("two_questions", json!({"tag": "pol"})).caps(form_caps());
    let first = input_required("tools/call", &op.start(&gw).await);
    let reasked = input_required(
        "tools/call",
        &op.retry(&gw, &first.state, json!({"elicitation-1": name("toolong")}))
            .await,
    );
    assert_eq!(reasked.keys(), ["elicitation-1"]);
    assert!(
        reasked.message().starts_with("Your name?") && reasked.message().contains("at most 5"),
        "{}",
        reasked.message()
    );
    assert_eq!(claims_of(&reasked.state, "k1", &k).ask[0].rk, 1);
    // The re-asks are used up: the next invalid answer is the error hold mode gives.
    let r = op
        .retry(
            &gw,
            &reasked.state,
            json!({"elicitation-1": name("stilltoolong")}),
        )
        .await;
    let data = assert_error(&r, 200, -32602, "policy_invalid_answer")["data"].clone();
    assert_eq!(
        (&data["field"], &data["rule"]),
        (&json!("name"), &json!("max_length"))
    );

    let op = Op::tool("lookup", json!({"tag": "pol-err"})).caps(form_caps());
    let first = input_required("tools/call", &op.start(&gw).await);
    let r = op
        .retry(&gw, &first.state, json!({"elicitation-1": name("toolong")}))
        .await;
    assert_error(&r, 200, -32602, "policy_invalid_answer");
    // No invalid value ever reached the server.
    for tag in ["pol", "pol-err"] {
        assert!(
            fx.log.answers(tag).iter().all(|e| e["action"] == "cancel"),
            "{}",
            fx.log.seen()
        );
    }
    settled(&gw).await;
    gw.stop().await;
    let audit = audit_lines(&fx.path("audit.jsonl"));
    let outcomes: Vec<&Value> = audit.iter().map(|l| &l["outcome"]).collect();
    assert_eq!(
        outcomes,
        [&json!("invalid"), &json!("invalid")],
        "{audit:?}"
    );
}

/// `[mrtr] max_rounds` counts every round of a replay-mode operation, on
/// whichever run it was asked.
#[tokio::test]
async fn max_rounds_counts_the_rounds_of_every_run() {
    let fx = Fixture::new();
    let gw = TestGateway::start(
        &fx.cfg()
            .script("replay_server.py")
            // The fixture lingers after its `cancel` (a server busy cleaning
            // up): a short end_grace, then notifications/cancelled.
            .upstream("end_grace = \"1s\"")
            .route(&fx.policy("[defaults]\nmode = \"replay\"\n"))
            .mrtr("max_rounds = 1")
            .build(),
    )
    .await;
    let op = Op::tool("two_questions", json!({"tag": "max"})).caps(form_caps());
    let first = input_required("tools/call", &op.start(&gw).await);
    let r = op.answer(&gw, &first, name("Ada")).await;
    assert_error(&r, 200, -32603, "rounds_exhausted");
    assert_eq!(
        gw.metric(&ops("two_questions", "rounds_exhausted")).await,
        Some(1.0)
    );
    settled(&gw).await;
    gw.stop().await;
}

/// 20 three-round operations at once over stdio, in replay mode and in hold
/// mode, then plain calls: all complete and nothing stays pending or leased.
/// In replay mode each run of `plain_two` ends itself when told `cancel`,
/// so its process is used again for the next call instead of a new one.
#[tokio::test]
async fn twenty_concurrent_three_round_operations_over_stdio_complete_in_both_modes() {
    for mode in ["replay", "hold"] {
        let fx = Fixture::new();
        let gw = TestGateway::start(
            &fx.cfg()
                .script("replay_server.py")
                .route(&fx.policy(&format!("[defaults]\nmode = \"{mode}\"\n")))
                .pool("max_sessions_per_principal = 24")
                .build(),
        )
        .await;
        let walks = (0..20).map(|i| {
            let gw = &gw;
            async move {
                let tag = format!("{mode}-{i}");
                let op = Op::tool("plain_two", json!({"tag": tag})).caps(form_caps());
                let first = input_required("tools/call", &op.start(gw).await);
                let second = input_required("tools/call", &op.answer(gw, &first, name(&tag)).await);
                (tag, output(&op.answer(gw, &second, city("Paris")).await))
            }
        });
        for (tag, out) in futures::future::join_all(walks).await {
            assert_eq!(out["answers"], json!([tag, "Paris"]), "{mode}: {out}");
        }
        let plain = (0..20).map(|i| {
            let op = Op::tool("echo", json!({"tag": format!("{mode}-plain-{i}")}));
            let gw = &gw;
            async move { output(&op.start(gw).await) }
        });
        for out in futures::future::join_all(plain).await {
            assert_eq!(out["echo"], true, "{mode}: {out}");
        }
        settled(&gw).await;
        assert_eq!(
            gw.metric(&ops("plain_two", "completed")).await,
            Some(20.0),
            "{mode}"
        );
        gw.stop().await;
    }
}
