//! Hold mode across replicas, in process: two gateways share a state key and
//! a cluster secret, each in front of its own `tests/fixtures/mrtr_server.py`
//! (FastMCP from mcp==1.30.0, `elicit_form` over stdio). A retry that lands
//! on the replica that does not hold the operation is checked there and
//! forwarded to the owner; the internal endpoint refuses what the cluster
//! secret did not sign; a stopped owner is `owner_unreachable` at once; a
//! state pointed at another address fails its seal; a draining replica
//! refuses new operations and serves its waiting one to the end.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod mrtr_support;

use std::time::{Duration, Instant, SystemTime};

use common::*;
use mrtr_support::*;
use redmark::front::cluster::Secret;
use redmark::protocol::Principal;
use serde_json::{Value, json};

const FORWARDED: &str = r#"redmark_forwarded_retries_total{route="main",outcome="forwarded"}"#;
const UNREACHABLE: &str =
    r#"redmark_forwarded_retries_total{route="main",outcome="owner_unreachable"}"#;
const RECEIVED: &str = r#"redmark_forwards_received_total{route="main"}"#;

/// Two replicas' shared secrets.
struct Shared {
    state: String,
    cluster: String,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            // The harness's default key, so `claims` can read the states.
            state: TEST_SECRET.to_owned(),
            cluster: secret(),
        }
    }

    /// Replica `node`'s config: the shared key and secret, its own server.
    fn config(&self, fx: &Fixture, node: &str, drain: &str) -> String {
        fx.cfg()
            .top(&format!("node_id = \"{node}\""))
            .top(&format!(
                "[[state.keys]]\nid = \"k1\"\nsecret = \"{}\"\nsign = true\n",
                self.state
            ))
            .top(&format!(
                "[cluster]\nlisten = \"127.0.0.1:0\"\nsecret = \"{}\"\ndrain = \"{drain}\"\n",
                self.cluster
            ))
            .build()
    }

    async fn pair(&self, fx: &Fixture, drain: &str) -> (TestGateway, TestGateway) {
        let a = TestGateway::start(&self.config(fx, "n1", drain)).await;
        let b = TestGateway::start(&self.config(fx, "n2", drain)).await;
        (a, b)
    }
}

fn answers(out: &Value) -> Vec<String> {
    out["answers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["content"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_retry_on_another_replica_is_forwarded_to_its_owner_and_completes() {
    let fx = Fixture::new();
    let shared = Shared::new();
    let (a, b) = shared.pair(&fx, "5s").await;
    let op = Op::tool("rounds", json!({"tag": "across", "n": 3}));
    let first = op.start(&a).await;
    let asked = input_required(op.method, &first);
    let c = claims(&asked.state);
    assert_eq!(c.node, "n1");
    assert_eq!(c.addr.as_deref(), a.cluster.as_deref(), "{c:?}");
    // Round 1 answered on the other replica, round 2 on the owner, round 3 on the other again.
    let r1 = op.answer(&b, &asked, accept("one")).await;
    let asked = input_required(op.method, &r1);
    let r2 = op.answer(&a, &asked, accept("two")).await;
    let asked = input_required(op.method, &r2);
    let r3 = op.answer(&b, &asked, accept("three")).await;
    assert_eq!(answers(&output(&r3)), ["one", "two", "three"]);
    // One upstream call on the owner served all rounds; the other replica's server saw none.
    let pids: std::collections::HashSet<String> = fx
        .log
        .tagged("answer", "across")
        .iter()
        .map(|e| e["pid"].to_string())
        .collect();
    assert_eq!(pids.len(), 1, "{pids:?}");
    assert_eq!(b.metric(FORWARDED).await, Some(2.0));
    assert_eq!(a.metric(RECEIVED).await, Some(2.0));
    assert_eq!(a.metric(FORWARDED).await, None);
    assert_eq!(a.metric(&ops("rounds", "completed")).await, Some(1.0));
    settled(&a).await;
    settled(&b).await;
    // A consumed round's state is refused on either replica, as on one node.
    let again = op
        .retry(&b, &asked.state, asked.reply_only(accept("x")))
        .await;
    assert_error(&again, 200, -32602, "state_replayed");
    a.stop().await;
    b.stop().await;
}

/// A POST of `body` to the internal endpoint with the headers the owner's
/// parse step wants, and `signed`.
fn internal_post(url: &str, body: &[u8], signed: &[(&str, String)]) -> reqwest::RequestBuilder {
    let mut rb = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "ask")
        .body(body.to_vec());
    for (k, v) in signed {
        rb = rb.header(*k, v);
    }
    rb
}

fn body_of(state: &str, key: &str) -> Vec<u8> {
    let params = json!({
        "name": "ask",
        "arguments": {"tag": "internal"},
        "requestState": state,
        "inputResponses": {key: accept("direct")},
        "_meta": meta(form_caps()),
    });
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
        .to_string()
        .into_bytes()
}

/// Signature headers, as [`Secret::sign`] makes them.
type Signed = Vec<(&'static str, String)>;

fn sign(secret: &str, at: SystemTime, body: &[u8]) -> Signed {
    let s = Secret::new(redmark::config::decode_secret(secret).unwrap());
    s.sign(at, "/mcp", &Principal::anonymous(), body)
        .unwrap()
        .to_vec()
}

#[tokio::test]
async fn the_internal_endpoint_refuses_unsigned_wrongly_signed_and_stale_forwards() {
    let fx = Fixture::new();
    let shared = Shared::new();
    let (a, b) = shared.pair(&fx, "5s").await;
    let op = Op::tool("ask", json!({"tag": "internal"})).caps(form_caps());
    let asked = input_required(op.method, &op.start(&a).await);
    let url = format!("{}/mcp", a.cluster.as_deref().unwrap());
    let body = body_of(&asked.state, asked.key());
    let now = SystemTime::now();
    let cases: Vec<(&str, Signed, u16, i64, &str)> = vec![
        ("unsigned", vec![], 401, -32600, "forward_unsigned"),
        (
            "another secret",
            sign(&secret(), now, &body),
            401,
            -32600,
            "forward_bad_signature",
        ),
        (
            "another body",
            sign(&shared.cluster, now, b"{}"),
            401,
            -32600,
            "forward_bad_signature",
        ),
        (
            "signed a minute ago",
            sign(&shared.cluster, now - Duration::from_secs(60), &body),
            401,
            -32600,
            "forward_stale",
        ),
    ];
    for (what, headers, status, code, reason) in cases {
        let resp = read_resp(internal_post(&url, &body, &headers).send().await.unwrap()).await;
        assert_eq!(resp.status, status, "{what}: {}", resp.raw);
        assert_eq!(resp.error()["code"], code, "{what}: {}", resp.raw);
        assert_eq!(resp.reason(), reason, "{what}: {}", resp.raw);
    }
    // Signed right, but not a retry: the endpoint serves nothing else.
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
        "name": "ask", "arguments": {"tag": "new"}, "_meta": meta(form_caps())}})
    .to_string();
    let rb = internal_post(
        &url,
        call.as_bytes(),
        &sign(&shared.cluster, now, call.as_bytes()),
    );
    let resp = read_resp(rb.send().await.unwrap()).await;
    assert_error(&resp, 400, -32600, "forward_not_retry");
    // None of it touched the operation: the retry through the other replica completes it.
    let done = op.answer(&b, &asked, accept("real")).await;
    assert_eq!(output(&done)["content"]["name"], "real");
    settled(&a).await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_stopped_owner_is_owner_unreachable_at_once() {
    let fx = Fixture::new();
    let shared = Shared::new();
    let (a, b) = shared.pair(&fx, "100ms").await;
    let op = Op::tool("ask", json!({"tag": "orphan"})).caps(form_caps());
    let asked = input_required(op.method, &op.start(&a).await);
    // B knows the tool list already, so what is timed is the forward alone.
    let listed = b.rpc("tools/list", json!({}), form_caps()).await;
    assert_eq!(listed.status, 200, "{}", listed.raw);
    a.stop().await;
    let started = Instant::now();
    let resp = op.answer(&b, &asked, accept("late")).await;
    let took = started.elapsed();
    let refusal = assert_error(&resp, 503, -32603, "owner_unreachable");
    assert_eq!(refusal.data()["node"], "n1", "{refusal}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(b.metric(UNREACHABLE).await, Some(1.0));
    assert_eq!(b.metric(PENDING).await, Some(0.0));
    b.stop().await;
}

#[tokio::test]
async fn a_state_pointed_at_another_address_fails_its_seal() {
    let fx = Fixture::new();
    let shared = Shared::new();
    let (a, b) = shared.pair(&fx, "5s").await;
    let op = Op::tool("ask", json!({"tag": "forged"})).caps(form_caps());
    let asked = input_required(op.method, &op.start(&a).await);
    let mut c = claims(&asked.state);
    c.addr = Some("http://127.0.0.1:1".into());
    // Sealed again under the same key id by someone without the key.
    let forged = keyring("k1", &secret()).seal(&c);
    let resp = op
        .retry(&b, &forged, asked.reply_only(accept("mallory")))
        .await;
    assert_error(&resp, 200, -32602, "state_bad_signature");
    assert_eq!(b.metric(FORWARDED).await, None);
    assert_eq!(b.metric(UNREACHABLE).await, None);
    // The real state still reaches the owner.
    let done = op.answer(&b, &asked, accept("real")).await;
    assert_eq!(output(&done)["content"]["name"], "real");
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_draining_replica_refuses_new_operations_and_serves_its_waiting_one() {
    let fx = Fixture::new();
    let shared = Shared::new();
    let (a, b) = shared.pair(&fx, "60s").await;
    let op = Op::tool("ask", json!({"tag": "drained"})).caps(form_caps());
    let asked = input_required(op.method, &op.start(&a).await);
    let a_client = McpClient::new(a.url.clone());
    let a_admin = a.admin.clone();
    let http = reqwest::Client::new();
    let started = Instant::now();
    let stopping = tokio::spawn(a.stop());
    eventually("A's /readyz to turn 503", || async {
        match http.get(format!("{a_admin}/readyz")).send().await {
            Ok(r) if r.status() == 503 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let fresh = Op::tool("ask", json!({"tag": "new"})).caps(form_caps());
    let refused = fresh.start(&a_client).await;
    assert_error(&refused, 503, -32603, "draining");
    assert!(!stopping.is_finished(), "A must wait for its operation");
    // The waiting operation is answered through the other replica, forwarded to A.
    let done = op.answer(&b, &asked, accept("before restart")).await;
    assert_eq!(output(&done)["content"]["name"], "before restart");
    tokio::time::timeout(Duration::from_secs(30), stopping)
        .await
        .expect("A exits once its operation ended")
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(40));
    assert_eq!(b.metric(FORWARDED).await, Some(1.0));
    b.stop().await;
}

#[tokio::test]
async fn the_owner_serves_the_principal_the_receiving_replica_authenticated() {
    let fx = Fixture::new();
    let shared = Shared::new();
    let auth = api_key("alice-key", "alice", &["facilities"]) + &api_key("bob-key", "bob", &[]);
    let config = |node: &str| {
        fx.cfg()
            .top(&format!("node_id = \"{node}\""))
            .top(&format!(
                "[[state.keys]]\nid = \"k1\"\nsecret = \"{}\"\nsign = true\n",
                shared.state
            ))
            .top(&format!(
                "[cluster]\nlisten = \"127.0.0.1:0\"\nsecret = \"{}\"\ndrain = \"1s\"\n",
                shared.cluster
            ))
            .top(&auth)
            .build()
    };
    let a = TestGateway::start(&config("n1")).await;
    let b = TestGateway::start(&config("n2")).await;
    let op = Op::tool("ask", json!({"tag": "alice"}))
        .caps(form_caps())
        .key("alice-key");
    let asked = input_required(op.method, &op.start(&a).await);
    // The receiving replica authenticates: no key, or bob's, never reaches the owner.
    let anonymous = Op::tool("ask", json!({"tag": "alice"})).caps(form_caps());
    let resp = anonymous.answer(&b, &asked, accept("x")).await;
    assert_error(&resp, 401, -32600, "unauthenticated");
    let bob = Op::tool("ask", json!({"tag": "alice"}))
        .caps(form_caps())
        .key("bob-key");
    let resp = bob.answer(&b, &asked, accept("x")).await;
    assert_error(&resp, 200, -32602, "state_wrong_principal");
    assert_eq!(b.metric(FORWARDED).await, None);
    // Alice's retry is forwarded and served on the owner as alice.
    let done = op.answer(&b, &asked, accept("alice")).await;
    assert_eq!(output(&done)["content"]["name"], "alice");
    assert_eq!(a.metric(RECEIVED).await, Some(1.0));
    a.stop().await;
    b.stop().await;
}
