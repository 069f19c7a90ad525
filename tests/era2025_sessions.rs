//! The 2025-era session rules, spoken by hand (tests/common/era2025.rs):
//! the handshake, what a session needs and whom it belongs to, its end,
//! the standalone stream, and every way a call with a question open ends
//! (spec 2025-11-25 basic/transports.mdx, basic/lifecycle.mdx,
//! basic/utilities/cancellation.mdx). The SDK clients drive the happy paths
//! in tests/era2025_legacy.rs and tests/era2025_native.rs.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const ALICE: &str = "era-alice-key";
const BOB: &str = "era-bob-key";

fn rooms_with_keys(extra: &str) -> String {
    rooms_config(&format!(
        "{}{}{extra}",
        api_key(ALICE, "alice", &["facilities"]),
        api_key(BOB, "bob", &[])
    ))
}

fn elicitation() -> Value {
    json!({"elicitation": {"form": {}}})
}

/// A call that asks one question (rooms: "the big room" is ambiguous).
fn ambiguous_booking() -> Value {
    json!({"name": "book_room", "arguments": {"day": "2026-09-17", "hour": 9, "room_hint": "the big room"}})
}

#[tokio::test]
async fn initialize_negotiates_the_version_and_mints_a_session() {
    let gw = TestGateway::start(&rooms_config("")).await;
    let mut s = Session2025::new(&gw.url);
    let r = s.initialize("2025-06-18", elicitation()).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.result()["protocolVersion"], "2025-06-18");
    assert_eq!(r.result()["serverInfo"]["name"], "rooms-example");
    assert!(r.result()["capabilities"]["tools"].is_object(), "{}", r.raw);
    assert!(r.result()["capabilities"].get("extensions").is_none());
    assert!(r.result().get("resultType").is_none(), "{}", r.raw);
    let id = s.id.clone().expect("Mcp-Session-Id");
    assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{id}");
    // A version redmark does not speak gets the latest it does, never 2026-07-28.
    for asked in ["2026-07-28", "1999-01-01"] {
        let mut other = Session2025::new(&gw.url);
        let r = other.initialize(asked, json!({})).await;
        assert_eq!(r.result()["protocolVersion"], "2025-11-25", "{asked}");
        assert_ne!(other.id, s.id, "each initialize opens its own session");
    }
    // The session's own requests.
    let pong = s.request(json!(1), "ping", json!({})).await;
    assert_eq!(pong.result(), &json!({}));
    let listed = s.request(json!(2), "tools/list", json!({})).await;
    assert_eq!(listed.status, 200);
    assert!(listed.result()["tools"].as_array().unwrap().len() >= 5);
    assert!(
        listed.result().get("resultType").is_none(),
        "{}",
        listed.raw
    );
    let bad = s
        .request(json!(3), "logging/setLevel", json!({"level": "loud"}))
        .await;
    assert_eq!(bad.reason(), "invalid_log_level");
    let gone = s.request(json!(4), "server/discover", json!({})).await;
    assert_eq!(gone.reason(), "method_not_found");
    gw.stop().await;
}

#[tokio::test]
async fn a_request_needs_its_session_and_a_version_the_session_speaks() {
    let gw = TestGateway::start(&rooms_config("")).await;
    let mut s = Session2025::new(&gw.url);
    s.initialize("2025-11-25", json!({})).await;
    // Another id, or one altered by a byte: 404, and nothing said about why.
    let mut forged = Session2025::new(&gw.url);
    forged.id = Some(format!("{}x", s.id.clone().unwrap()));
    let r = forged.request(json!(1), "tools/list", json!({})).await;
    assert_error(&r, 404, -32600, "session_unknown");
    // A 2026-07-28 version on a 2025-era session's request.
    let mut wrong = Session2025::new(&gw.url);
    wrong.id = s.id.clone();
    wrong.version = "2026-07-28".into();
    let r = wrong.request(json!(2), "tools/list", json!({})).await;
    assert_error(&r, 400, -32022, "unsupported_protocol_version");
    // A 2025-era request (its version header says so) without its session.
    let mut lost = Session2025::new(&gw.url);
    lost.version = "2025-11-25".into();
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}});
    let r = read_resp(
        lost.post(&body)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_error(&r, 400, -32600, "session_required").json_reply_to(Some(json!(5)));
    // A POSTed answer that answers nothing.
    let status = s
        .answer(&json!("redmark-nobody-0"), json!({"action": "accept"}))
        .await;
    assert_eq!(status, 400);
    // GET and DELETE without a session are neither era's.
    let resp = gw
        .http
        .get(&gw.url)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    gw.stop().await;
}

#[tokio::test]
async fn a_session_belongs_to_its_principal_and_ends_on_delete() {
    let gw = TestGateway::start(&rooms_with_keys("")).await;
    let mut alice = Session2025::new(&gw.url).with_key(ALICE);
    alice.initialize("2025-11-25", json!({})).await;
    let mut bob = Session2025::new(&gw.url).with_key(BOB);
    bob.id = alice.id.clone();
    let r = bob.request(json!(1), "tools/list", json!({})).await;
    assert_error(&r, 404, -32600, "session_unknown");
    assert_eq!(bob.delete().await, 404, "bob cannot end alice's session");
    let r = alice.request(json!(2), "ping", json!({})).await;
    assert_eq!(r.result(), &json!({}));
    assert_eq!(alice.delete().await, 200);
    let r = alice.request(json!(3), "ping", json!({})).await;
    assert_error(&r, 404, -32600, "session_unknown");
    assert_eq!(alice.delete().await, 404);
    gw.stop().await;
}

#[tokio::test]
async fn at_max_per_principal_the_least_recently_used_idle_session_makes_room() {
    let gw = TestGateway::start(&rooms_with_keys("[sessions]\nmax_per_principal = 1\n")).await;
    let mut first = Session2025::new(&gw.url).with_key(ALICE);
    assert_eq!(first.initialize("2025-11-25", json!({})).await.status, 200);
    let mut bobs = Session2025::new(&gw.url).with_key(BOB);
    assert_eq!(bobs.initialize("2025-11-25", json!({})).await.status, 200);
    // Alice never ended her first session: her second ends it, not refuses.
    let mut second = Session2025::new(&gw.url).with_key(ALICE);
    assert_eq!(
        second.initialize("2025-11-25", elicitation()).await.status,
        200
    );
    let r = first.request(json!(1), "ping", json!({})).await;
    assert_error(&r, 404, -32600, "session_unknown");
    // Bob's session is another principal's: untouched.
    assert_eq!(
        bobs.request(json!(1), "ping", json!({})).await.result(),
        &json!({})
    );

    // With a call in flight on her one session, there is no idle one to end:
    // 429 with Retry-After, and the call goes on.
    let mut call = second
        .stream(json!("busy"), "tools/call", ambiguous_booking())
        .await;
    let asked = call.next(WAIT).await.expect("the pushed question");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let mut third = Session2025::new(&gw.url).with_key(ALICE);
    let r = third.initialize("2025-11-25", json!({})).await;
    assert_error(&r, 429, -32603, "too_many_sessions");
    let retry_after = r.headers.get("retry-after").expect("Retry-After");
    assert!(retry_after.to_str().unwrap().parse::<u64>().unwrap() > 0);
    let status = second
        .answer(
            &asked["id"],
            json!({"action": "accept", "content": {"room_id": "atrium"}}),
        )
        .await;
    assert_eq!(status, 202);
    let done = call.next(WAIT).await.expect("the call's answer");
    assert_eq!(done["id"], "busy", "{done}");
    assert!(done.get("result").is_some(), "{done}");
    // The call is over: the session is idle again and makes room.
    assert_eq!(third.initialize("2025-11-25", json!({})).await.status, 200);
    gw.stop().await;
}

/// Opens `n` sessions (with API key `key`, or anonymously) that list tools
/// and are never deleted.
async fn never_deleted(gw: &TestGateway, n: usize, key: Option<&str>) -> Vec<Session2025> {
    let mut sessions = Vec::new();
    for i in 0..n {
        let mut s = Session2025::new(&gw.url);
        if let Some(key) = key {
            s = s.with_key(key);
        }
        let r = s.initialize("2025-11-25", json!({})).await;
        assert_eq!(r.status, 200, "session {i}: {}", r.raw);
        let listed = s.request(json!(i), "tools/list", json!({})).await;
        assert!(
            listed.result()["tools"].is_array(),
            "session {i}: {}",
            listed.raw
        );
        sessions.push(s);
    }
    sessions
}

async fn pings(s: &Session2025) -> bool {
    s.request(json!("p"), "ping", json!({})).await.status == 200
}

/// Clients that never `DELETE` (npm SDK 1.x `close()`, mcp-remote, the
/// Inspector CLI: a SHOULD in the spec) open sessions past the bound and
/// every one of them gets in.
#[tokio::test]
async fn seventy_sessions_never_deleted_all_get_in() {
    let gw = TestGateway::start(&rooms_with_keys("")).await;
    // One principal, past max_per_principal (64): the oldest six made room.
    let alices = never_deleted(&gw, 70, Some(ALICE)).await;
    for s in &alices[6..] {
        assert!(pings(s).await);
    }
    for s in &alices[..6] {
        let r = s.request(json!("p"), "ping", json!({})).await;
        assert_error(&r, 404, -32600, "session_unknown");
    }
    gw.stop().await;
    // Without [auth] every caller is the one anonymous principal, bounded
    // by max_total only: seventy clients, seventy live sessions.
    let gw = TestGateway::start(&rooms_config("")).await;
    let anonymous = never_deleted(&gw, 70, None).await;
    for s in &anonymous {
        assert!(pings(s).await);
    }
    gw.stop().await;
}

#[tokio::test]
async fn the_standalone_stream_opens_once_per_session() {
    let gw = TestGateway::start(&rooms_config("")).await;
    let mut s = Session2025::new(&gw.url);
    s.initialize("2025-11-25", json!({})).await;
    let get = || {
        gw.http
            .get(&gw.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", s.id.clone().unwrap())
            .header("mcp-protocol-version", "2025-11-25")
    };
    let open = get().send().await.unwrap();
    assert_eq!(open.status().as_u16(), 200);
    assert!(
        open.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let again = read_resp(get().send().await.unwrap()).await;
    assert_error(&again, 409, -32600, "stream_already_open");
    drop(open);
    // Once the first stream is gone a new one opens.
    eventually("a second GET after the first stream closed", || async {
        let status = get().send().await.unwrap().status().as_u16();
        if status == 200 { Ok(()) } else { Err(status) }
    })
    .await;
    gw.stop().await;
}

/// A pushed question on the call's stream: its id, and the request.
async fn pushed(stream: &mut SseReader) -> (Value, Value) {
    let q = stream.next(WAIT).await.expect("a pushed question");
    assert_eq!(q["method"], "elicitation/create", "{q}");
    assert!(q["id"].as_str().unwrap().starts_with("redmark."), "{q}");
    (q["id"].clone(), q)
}

#[tokio::test]
async fn a_2026_client_and_a_2025_client_share_the_route_at_once() {
    let gw = TestGateway::start(&rooms_config("")).await;
    let mut s = Session2025::new(&gw.url);
    s.initialize("2025-11-25", elicitation()).await;
    let mut stream = s.stream(json!(10), "tools/call", ambiguous_booking()).await;
    let (qid, q) = pushed(&mut stream).await;
    assert_eq!(q["params"]["mode"], "form");
    // While the 2025-era call waits, a 2026 client does its own round trip.
    let modern = McpClient::new(&gw.url);
    let listed = modern.rpc("tools/list", json!({}), json!({})).await;
    assert_eq!(listed.result()["resultType"], "complete");
    let asked = modern
        .rpc("tools/call", ambiguous_booking(), elicitation())
        .await;
    assert_eq!(
        asked.result()["resultType"],
        "input_required",
        "{}",
        asked.raw
    );
    // The 2025-era client answers; its call ends with the server's result.
    let answer = json!({"action": "accept", "content": {"room_id": "nook"}});
    assert_eq!(s.answer(&qid, answer.clone()).await, 202);
    let done = stream.next(WAIT).await.expect("the call's response");
    assert_eq!(done["id"], 10, "{done}");
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("The Nook"),
        "{done}"
    );
    assert!(done["result"].get("resultType").is_none(), "{done}");
    assert!(
        stream.next(WAIT).await.is_none(),
        "the stream ends after the response"
    );
    // The same answer again answers nothing.
    assert_eq!(s.answer(&qid, answer).await, 400);
    gw.wait_metric(&ops("book_room", "completed"), 1.0).await;
    gw.stop().await;
}

#[tokio::test]
async fn two_principals_each_answer_only_their_own_question() {
    let gw = TestGateway::start(&rooms_with_keys("")).await;
    let mut alice = Session2025::new(&gw.url).with_key(ALICE);
    alice.initialize("2025-11-25", elicitation()).await;
    let mut bob = Session2025::new(&gw.url).with_key(BOB);
    bob.initialize("2025-11-25", elicitation()).await;
    let mut a_stream = alice
        .stream(json!(1), "tools/call", ambiguous_booking())
        .await;
    let mut b_stream = bob
        .stream(json!(1), "tools/call", ambiguous_booking())
        .await;
    let (a_q, _) = pushed(&mut a_stream).await;
    let (b_q, _) = pushed(&mut b_stream).await;
    assert_ne!(a_q, b_q);
    let nook = json!({"action": "accept", "content": {"room_id": "nook"}});
    // bob's session cannot answer alice's question.
    assert_eq!(bob.answer(&a_q, nook.clone()).await, 400);
    assert_eq!(alice.answer(&a_q, nook.clone()).await, 202);
    assert_eq!(bob.answer(&b_q, json!({"action": "decline"})).await, 202);
    let a_done = a_stream.next(WAIT).await.unwrap();
    assert!(
        a_done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Booked"),
        "{a_done}"
    );
    let b_done = b_stream.next(WAIT).await.unwrap();
    assert_eq!(
        b_done["result"]["content"][0]["text"], "No room chosen; nothing booked.",
        "the server heard decline: {b_done}"
    );
    gw.wait_metric(&ops("book_room", "completed"), 1.0).await;
    gw.wait_metric(&ops("book_room", "declined"), 1.0).await;
    gw.stop().await;
}

/// Every way a call with a question open ends without an answer: the server
/// hears `cancel`, and nothing is left waiting.
#[tokio::test]
async fn a_call_abandoned_any_way_cancels_its_question_upstream() {
    let gw = TestGateway::start(&rooms_config("")).await;
    let mut s = Session2025::new(&gw.url);
    s.initialize("2025-11-25", elicitation()).await;

    // 1. The client goes away with the question open.
    let mut stream = s.stream(json!(1), "tools/call", ambiguous_booking()).await;
    pushed(&mut stream).await;
    drop(stream);
    gw.wait_metric(&ops("book_room", "cancelled"), 1.0).await;

    // 2. notifications/cancelled names the call: its stream ends without a response.
    let mut stream = s
        .stream(json!("two"), "tools/call", ambiguous_booking())
        .await;
    pushed(&mut stream).await;
    assert_eq!(
        s.notify(
            "notifications/cancelled",
            json!({"requestId": "two", "reason": "changed my mind"})
        )
        .await,
        202
    );
    assert!(
        stream.next(WAIT).await.is_none(),
        "no response to a cancelled request"
    );
    gw.wait_metric(&ops("book_room", "cancelled"), 2.0).await;

    // 3. The session is deleted with the call in flight.
    let mut stream = s.stream(json!(3), "tools/call", ambiguous_booking()).await;
    pushed(&mut stream).await;
    assert_eq!(s.delete().await, 200);
    assert!(stream.next(WAIT).await.is_none());
    gw.wait_metric(&ops("book_room", "cancelled"), 3.0).await;
    gw.wait_metric("redmark_pending_operations", 0.0).await;
    gw.wait_metric(&sessions("leased"), 0.0).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_question_nobody_answers_within_the_ttl_ends_the_call_precisely() {
    let gw = TestGateway::start(&rooms_config("[mrtr]\nttl = \"2s\"\n")).await;
    let mut s = Session2025::new(&gw.url);
    s.initialize("2025-11-25", elicitation()).await;
    let mut stream = s.stream(json!(1), "tools/call", ambiguous_booking()).await;
    let (qid, _) = pushed(&mut stream).await;
    let ended = stream
        .next(WAIT)
        .await
        .expect("an error once the TTL passed");
    assert_eq!(ended["id"], 1);
    assert_eq!(
        ended["error"]["data"]["reason"], "operation_expired",
        "{ended}"
    );
    // A late answer answers nothing.
    assert_eq!(
        s.answer(
            &qid,
            json!({"action": "accept", "content": {"room_id": "nook"}})
        )
        .await,
        400
    );
    gw.wait_metric("redmark_pending_operations", 0.0).await;
    gw.wait_metric(&sessions("leased"), 0.0).await;
    gw.stop().await;
}
