//! `requestState` as an attacker-controlled input: every way a retry's state
//! can be wrong is refused with `-32602` and its own `data.reason`, and a
//! refused retry leaves the operation untouched (the legitimate retry after
//! each refusal still works); expiry; replay; key rotation.
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

use std::time::{SystemTime, UNIX_EPOCH};

use common::*;
use mrtr_support::*;
use serde_json::{Value, json};

const NODE: &str = "node_id = \"n1\"";

fn state_key(id: &str, secret: &str, sign: bool) -> String {
    format!("[[state.keys]]\nid = \"{id}\"\nsecret = \"{secret}\"\nsign = {sign}\n")
}

/// `state` with the first character of its sealed blob (the nonce) changed
/// (still valid base64url): the AEAD tag no longer verifies.
fn flip_mac(state: &str) -> String {
    let (signed, mac) = state.rsplit_once('.').expect("three parts");
    let first = if mac.starts_with('A') { "B" } else { "A" };
    format!("{signed}.{first}{}", &mac[1..])
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Each case is tried in its own round, with that round's state; what it is refused as.
const CASES: [(&str, &str); 15] = [
    ("garbage", "state_malformed"),
    ("null", "state_malformed"),
    ("two_parts", "state_malformed"),
    ("unknown_key", "state_unknown_key"),
    ("replayed", "state_replayed"),
    ("other_secret", "state_bad_signature"),
    ("flipped_mac", "state_bad_signature"),
    ("expired", "state_expired"),
    ("wrong_principal", "state_wrong_principal"),
    ("wrong_request", "state_wrong_request"),
    ("unknown_operation", "operation_unknown"),
    ("answer_not_an_object", "malformed_input_response"),
    ("unknown_action", "malformed_input_response"),
    ("content_on_decline", "malformed_input_response"),
    ("responses_not_an_object", "malformed_input_response"),
];

/// One round of `every_refusal_leaves_the_operation_untouched`: the
/// operation, this round's state and key, the answer that would be right,
/// and the state the round before consumed.
struct Round<'a> {
    gw: &'a TestGateway,
    op: &'a Op,
    k1: &'a str,
    state: &'a str,
    previous: Option<&'a str>,
    key: &'a str,
    good: &'a Value,
    n: usize,
}

/// The retry of this round that `case` (one of [`CASES`]) spoils.
async fn spoiled_retry(case: &str, r: &Round<'_>) -> Resp {
    let state = r.state;
    let mut claims = claims_of(state, "k1", r.k1);
    match case {
        "garbage" => r.op.retry(r.gw, "not-a-state", r.good.clone()).await,
        "null" => {
            r.op.send(
                r.gw,
                json!({"inputResponses": r.good.clone(), "requestState": null}),
            )
            .await
        }
        "two_parts" => {
            let (signed, _) = state.rsplit_once('.').unwrap();
            r.op.retry(r.gw, signed, r.good.clone()).await
        }
        "unknown_key" => {
            let forged = keyring("k9", &secret()).seal(&claims);
            r.op.retry(r.gw, &forged, r.good.clone()).await
        }
        "replayed" => {
            let old = r.previous.expect("a consumed state");
            r.op.retry(r.gw, old, r.good.clone()).await
        }
        "other_secret" => {
            let forged = keyring("k1", &secret()).seal(&claims);
            r.op.retry(r.gw, &forged, r.good.clone()).await
        }
        "flipped_mac" => r.op.retry(r.gw, &flip_mac(state), r.good.clone()).await,
        "expired" => {
            claims.exp = now_secs() - 1;
            let forged = keyring("k1", r.k1).seal(&claims);
            r.op.retry(r.gw, &forged, r.good.clone()).await
        }
        "wrong_principal" => {
            r.op.clone()
                .key("bob-key")
                .retry(r.gw, state, r.good.clone())
                .await
        }
        "wrong_request" => {
            let other = Op::tool("rounds", json!({"tag": "st-other", "n": r.n}))
                .caps(form_caps())
                .key("alice-key");
            other.retry(r.gw, state, r.good.clone()).await
        }
        "unknown_operation" => {
            claims.op = "0".repeat(32);
            let forged = keyring("k1", r.k1).seal(&claims);
            r.op.retry(r.gw, &forged, r.good.clone()).await
        }
        "answer_not_an_object" => r.op.retry(r.gw, state, json!({r.key: "yes"})).await,
        "unknown_action" => {
            r.op.retry(r.gw, state, json!({r.key: {"action": "maybe"}}))
                .await
        }
        "content_on_decline" => {
            let bad = json!({"action": "decline", "content": {"name": "x"}});
            r.op.retry(r.gw, state, json!({r.key: bad})).await
        }
        "responses_not_an_object" => {
            r.op.send(
                r.gw,
                json!({"inputResponses": [r.good.clone()], "requestState": state}),
            )
            .await
        }
        other => unreachable!("{other}"),
    }
}

#[tokio::test]
async fn every_refusal_leaves_the_operation_untouched() {
    let fx = Fixture::new();
    let k1 = secret();
    // One question per case: more than the policy's default limit per operation.
    let policy = fx.policy("[defaults]\nmax_questions = 20\n");
    let gw = TestGateway::start(
        &fx.cfg()
            .route(&policy)
            .top(NODE)
            .top(&state_key("k1", &k1, true))
            .top(&api_key("alice-key", "alice", &[]))
            .top(&api_key("bob-key", "bob", &[]))
            .mrtr("max_rounds = 20")
            .mrtr("gather = \"50ms\"")
            .build(),
    )
    .await;
    let n = CASES.len();
    let op = Op::tool("rounds", json!({"tag": "st-1", "n": n}))
        .caps(form_caps())
        .key("alice-key");
    let mut asked = input_required("tools/call", &op.start(&gw).await);
    let mut previous: Option<String> = None;
    for (i, (case, reason)) in CASES.iter().enumerate() {
        let round = i + 1;
        let key = format!("elicitation-{round}");
        assert_eq!(asked.keys(), [key.as_str()], "round {round}");
        let good = json!({key.clone(): accept(&format!("answer-{round}"))});
        let state = asked.state.as_str();
        let this = Round {
            gw: &gw,
            op: &op,
            k1: &k1,
            state,
            previous: previous.as_deref(),
            key: &key,
            good: &good,
            n,
        };
        let r = spoiled_retry(case, &this).await;
        let err = assert_error(&r, 200, -32602, reason);
        if matches!(
            *case,
            "answer_not_an_object" | "unknown_action" | "content_on_decline"
        ) {
            assert_eq!(err["data"]["key"], key.as_str(), "{case}: {err}");
        }
        // Nothing reached the server: it has heard exactly the answers of earlier rounds.
        let heard = fx.log.tagged("answer", "st-1");
        assert_eq!(heard.len(), i, "{case}: {heard:?}");
        // The legitimate retry still works.
        let next = op.retry(&gw, state, good).await;
        previous = Some(asked.state.clone());
        if round < n {
            asked = input_required("tools/call", &next);
        } else {
            let out = output(&next);
            let names: Vec<Value> = (1..=n)
                .map(|k| json!({"action": "accept", "content": {"name": format!("answer-{k}")}}))
                .collect();
            assert_eq!(out["answers"], Value::Array(names));
        }
    }
    // The operation is over: its last state is spent.
    let last = previous.expect("a state");
    let r = op
        .retry(
            &gw,
            &last,
            json!({format!("elicitation-{n}"): accept("again")}),
        )
        .await;
    assert_error(&r, 200, -32602, "state_replayed");
    assert_eq!(gw.metric(&ops("rounds", "completed")).await, Some(1.0));
    settled(&gw).await;
    gw.stop().await;
}

// A state past its TTL (operation_expired within the grace minute, then
// state_expired) is tested on paused time in src/mrtr/engine_tests.rs.

#[tokio::test]
async fn a_rotated_out_signing_key_still_verifies() {
    let fx = Fixture::new();
    let (k1, k2) = (secret(), secret());
    // B signs with k2 and still accepts k1 (the key A signed with).
    let a = TestGateway::start(&fx.cfg().top(NODE).top(&state_key("k1", &k1, true)).build()).await;
    let b = TestGateway::start(
        &fx.cfg()
            .top(NODE)
            .top(&state_key("k2", &k2, true))
            .top(&state_key("k1", &k1, false))
            .build(),
    )
    .await;

    let op = Op::tool("ask", json!({"tag": "rot-1"}));
    let asked_b = input_required("tools/call", &op.start(&b).await);
    assert!(asked_b.state.starts_with("k2."), "{}", asked_b.state);
    // B's own operation, its state sealed with k1: accepted and resumed.
    let resealed = keyring("k1", &k1).seal(&claims_of(&asked_b.state, "k2", &k2));
    let done = op
        .retry(&b, &resealed, json!({"elicitation-1": accept("rotated")}))
        .await;
    assert_eq!(output(&done)["content"]["name"], "rotated");

    // A state A sealed with k1: B verifies it, and only then finds no such operation.
    let op = Op::tool("ask", json!({"tag": "rot-2"}));
    let asked_a = input_required("tools/call", &op.start(&a).await);
    assert!(asked_a.state.starts_with("k1."), "{}", asked_a.state);
    let r = op
        .retry(
            &b,
            &asked_a.state,
            json!({"elicitation-1": accept("wrong gateway")}),
        )
        .await;
    let err = assert_error(&r, 200, -32602, "operation_unknown");
    assert_eq!(
        err["data"]["operation"],
        claims_of(&asked_a.state, "k1", &k1).op.as_str()
    );
    // ...and A's operation was not disturbed.
    let done = op
        .retry(
            &a,
            &asked_a.state,
            json!({"elicitation-1": accept("right gateway")}),
        )
        .await;
    assert_eq!(output(&done)["content"]["name"], "right gateway");

    for gw in [&a, &b] {
        assert_eq!(gw.metric(&ops("ask", "completed")).await, Some(1.0));
        settled(gw).await;
    }
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn two_retries_with_one_state_resume_the_operation_once() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;
    let op = Op::tool("ask", json!({"tag": "twice-1"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    let (a, b) = tokio::join!(
        op.retry(&gw, &asked.state, json!({"elicitation-1": accept("a")})),
        op.retry(&gw, &asked.state, json!({"elicitation-1": accept("b")})),
    );
    let (done, other) = if a.last().get("result").is_some() {
        (a, b)
    } else {
        (b, a)
    };
    let name = output(&done)["content"]["name"].clone();
    assert_error(&other, 200, -32602, "state_replayed");
    let heard = fx.log.tagged("answer", "twice-1");
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0]["content"]["name"], name);
    assert_eq!(gw.metric(&ops("ask", "completed")).await, Some(1.0));
    settled(&gw).await;
    gw.stop().await;
}

/// Replicas of two versions share states mid-upgrade: a state carrying a
/// field this build does not know (as a newer build might add) is read
/// without it and resumes the operation; one in a newer claims format is
/// refused with `state_newer_format`, and the operation waits untouched
/// for its own state.
#[tokio::test]
async fn a_state_from_a_newer_replica_is_read_when_it_can_be_and_refused_when_not() {
    let fx = Fixture::new();
    let gw = fx.gateway().await;
    let op = Op::tool("ask", json!({"tag": "newer-1"}));
    let asked = input_required("tools/call", &op.start(&gw).await);
    let reseal = |edit: &dyn Fn(&mut Value)| {
        let mut claims = serde_json::to_value(claims(&asked.state)).unwrap();
        edit(&mut claims);
        keyring("k1", TEST_SECRET).seal_payload(&serde_json::to_vec(&claims).unwrap())
    };

    let newer = reseal(&|c| c["v"] = json!(redmark::mrtr::state::CLAIMS_VERSION + 1));
    let r = op
        .retry(&gw, &newer, json!({"elicitation-1": accept("too new")}))
        .await;
    let err = assert_error(&r, 200, -32602, "state_newer_format");
    assert!(
        err["message"]
            .as_str()
            .unwrap_or_default()
            .contains("newer"),
        "{err}"
    );

    let extended = reseal(&|c| c["zz_added_later"] = json!({"any": ["shape"]}));
    let done = op
        .retry(&gw, &extended, json!({"elicitation-1": accept("extended")}))
        .await;
    assert_eq!(output(&done)["content"]["name"], "extended");
    settled(&gw).await;
    gw.stop().await;
}
