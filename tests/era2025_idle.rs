//! What an idle 2025-era client costs, and what a session keeps (issue 47,
//! items 10, 1 and 2). Every real PyPI `mcp` 1.x client opens the standalone
//! `GET` stream right after `notifications/initialized` and keeps it open:
//! such a stream must hold no upstream session, yet still hear the route's
//! list changes and the updates of the resources its session subscribed to,
//! whose subscriptions are shared per principal and profile and reach the
//! server one change at a time. An `initialize` keeps only the capability
//! members redmark acts on, each bounded.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const WAIT: Duration = Duration::from_secs(15);
const CLIENTS: usize = 100;
const ALICE: &str = "idle-alice-key";

/// 100 real PyPI `mcp` 1.30 `ClientSession`s (one Python process), each with
/// its standalone `GET` stream open, hold no upstream session; then each of
/// them, and a 2026-07-28 client, calls a tool. Before the fix the streams
/// leased 16 sessions (the principal's `max_sessions_per_principal`) for
/// their lives and every later call failed `upstream_busy`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_idle_pypi_clients_hold_no_upstream_session_and_all_still_call() {
    let mut server = tokio::process::Command::new(legacy_python());
    server
        .arg(fixture_file("legacy_server.py"))
        .args(["--http", "0"]);
    let (_server, port) = spawn_listening(server, "Uvicorn running").await;
    let config = http_config(
        &format!("http://127.0.0.1:{port}/mcp"),
        "[sessions]\nmax_per_principal = 200\n",
    ) + "[route.pool]\nlease_timeout = \"10s\"\n";
    let gw = TestGateway::start(&config).await;

    let mut driver = tokio::process::Command::new(legacy_python())
        .arg(repo().join("tests/peers/py_idle_2025.py"))
        .arg(&gw.url)
        .arg(CLIENTS.to_string())
        .arg("whoami")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn py_idle_2025.py");
    let mut stdin = driver.stdin.take().unwrap();
    let mut lines = BufReader::new(driver.stdout.take().unwrap()).lines();
    let mut next_line = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(180), lines.next_line())
            .await
            .expect("the driver spoke in time")
            .unwrap()
            .expect("the driver printed a line");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    };

    let ready = next_line().await;
    assert_eq!(ready["event"], "ready", "{ready}");
    assert_eq!(ready["get_streams"], CLIENTS, "{ready}");
    // Idle and connected, streams open: no upstream session is leased.
    gw.wait_metric(&sessions("leased"), 0.0).await;

    // A 2026-07-28 client calls while they idle.
    let call = gw
        .rpc(
            "tools/call",
            json!({"name": "whoami", "arguments": {}}),
            json!({}),
        )
        .await;
    assert_eq!(call.status, 200, "{}", call.raw);
    assert!(
        call.result()["content"][0]["text"].is_string(),
        "{}",
        call.raw
    );

    // And every idle client calls, streams still open.
    stdin.write_all(b"go\n").await.unwrap();
    let called = next_line().await;
    assert_eq!(called["event"], "called", "{called}");
    assert_eq!(called["ok"], CLIENTS, "{called}");
    let exit = tokio::time::timeout(Duration::from_secs(60), driver.wait())
        .await
        .expect("the driver ended its sessions in time")
        .unwrap();
    assert!(exit.success(), "{exit}");
    gw.wait_metric(&sessions("leased"), 0.0).await;
    gw.stop().await;
}

/// tests/fixtures/subscribe_server.py behind route "main" over stdio,
/// logging each subscribe and unsubscribe it is sent.
fn subscribing(fx: &Fixture, extra: &str) -> String {
    let py = legacy_python();
    let script = fixture_file("subscribe_server.py");
    let mut c = stdio_config(&[py.to_str().unwrap(), script.to_str().unwrap()], extra);
    c.push_str(&fx.log_env());
    c.push('\n');
    c
}

/// How many `event`s the server recorded for `uri` (any URI: `None`).
fn count(fx: &Fixture, event: &str, uri: Option<&str>) -> usize {
    fx.log
        .events()
        .iter()
        .filter(|e| e["event"] == event && uri.is_none_or(|u| e["uri"] == u))
        .count()
}

fn get(gw: &TestGateway, s: &Session2025) -> reqwest::RequestBuilder {
    gw.http
        .get(&gw.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", s.id.clone().unwrap())
        .header("mcp-protocol-version", "2025-11-25")
        .header("authorization", format!("Bearer {ALICE}"))
}

async fn subscribe(s: &Session2025, id: u64, uri: &str, on: bool) -> Resp {
    let method = if on {
        "resources/subscribe"
    } else {
        "resources/unsubscribe"
    };
    s.request(json!(id), method, json!({"uri": uri})).await
}

async fn touch(s: &Session2025, id: u64, uri: &str) {
    let r = s
        .request(
            json!(id),
            "tools/call",
            json!({"name": "touch", "arguments": {"uri": uri}}),
        )
        .await;
    assert_eq!(
        r.last()["result"]["content"][0]["text"],
        format!("touched {uri}"),
        "{}",
        r.raw
    );
}

/// An idle session's stream hears list changes and the updates of what it
/// subscribed to, holding nothing upstream until it subscribes; two sessions
/// of one principal share one upstream subscription per URI; each change
/// reaches the server alone (never the whole set again); the bounds on
/// count and URI length answer precisely; the session's end releases its
/// subscriptions and, with them, the one session they held.
#[tokio::test]
async fn subscriptions_are_shared_sent_one_change_at_a_time_and_bounded() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&subscribing(&fx, &api_key(ALICE, "alice", &[]))).await;
    let mut s1 = Session2025::new(&gw.url).with_key(ALICE);
    let init = s1.initialize("2025-11-25", json!({})).await;
    assert_eq!(
        init.result()["capabilities"]["resources"]["subscribe"],
        true,
        "{}",
        init.raw
    );
    let mut s2 = Session2025::new(&gw.url).with_key(ALICE);
    s2.initialize("2025-11-25", json!({})).await;
    let open = get(&gw, &s1).send().await.unwrap();
    assert_eq!(open.status().as_u16(), 200);
    let mut stream = SseReader::new(open);
    // The open stream holds no upstream session.
    gw.wait_metric(&sessions("leased"), 0.0).await;

    // A list change made through the other session reaches the idle stream.
    let added = s2
        .request(
            json!(1),
            "tools/call",
            json!({"name": "add_tool", "arguments": {"name": "fresh"}}),
        )
        .await;
    assert_eq!(
        added.last()["result"]["content"][0]["text"],
        "added fresh",
        "{}",
        added.raw
    );
    let changed = stream.next(WAIT).await.expect("list_changed");
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );

    // Subscribing holds one session for the principal's subscriptions.
    assert_eq!(
        subscribe(&s1, 2, "note://a", true).await.result(),
        &json!({})
    );
    assert_eq!(count(&fx, "subscribe", Some("note://a")), 1);
    assert_eq!(gw.metric(&sessions("leased")).await, Some(1.0));
    // The same URI from another session of the principal: shared.
    assert_eq!(
        subscribe(&s2, 3, "note://a", true).await.result(),
        &json!({})
    );
    assert_eq!(count(&fx, "subscribe", Some("note://a")), 1);
    // A second URI: only it reaches the server.
    assert_eq!(
        subscribe(&s1, 4, "note://b", true).await.result(),
        &json!({})
    );
    assert_eq!(count(&fx, "subscribe", None), 2);
    assert_eq!(count(&fx, "unsubscribe", None), 0);
    assert_eq!(gw.metric(&sessions("leased")).await, Some(1.0));

    // Updates: of a subscribed URI reach the stream; of another do not.
    touch(&s2, 5, "note://a").await;
    let updated = stream.next(WAIT).await.expect("resources/updated");
    assert_eq!(
        updated["method"], "notifications/resources/updated",
        "{updated}"
    );
    assert_eq!(updated["params"]["uri"], "note://a", "{updated}");
    touch(&s2, 6, "note://elsewhere").await;
    touch(&s2, 7, "note://b").await;
    let next = stream.next(WAIT).await.expect("resources/updated");
    assert_eq!(
        next["params"]["uri"], "note://b",
        "not for this session: {next}"
    );

    // Unsubscribing: the server hears it only from the URI's last subscriber.
    assert_eq!(
        subscribe(&s1, 8, "note://a", false).await.result(),
        &json!({})
    );
    assert_eq!(count(&fx, "unsubscribe", None), 0);
    assert_eq!(
        subscribe(&s2, 9, "note://a", false).await.result(),
        &json!({})
    );
    assert_eq!(count(&fx, "unsubscribe", Some("note://a")), 1);

    // Bounds: a URI over 1024 bytes, a 33rd subscription.
    let long = format!("note://{}", "x".repeat(1100));
    let refused = subscribe(&s1, 10, &long, true).await;
    assert_error(&refused, 200, -32602, "uri_too_long");
    for n in 0..31 {
        let r = subscribe(&s1, 100 + n, &format!("note://n{n}"), true).await;
        assert_eq!(r.result(), &json!({}), "{}", r.raw);
    }
    let refused = subscribe(&s1, 200, "note://one-too-many", true).await;
    assert_error(&refused, 200, -32602, "too_many_subscriptions");
    assert!(
        refused.error()["message"].as_str().unwrap().contains("32"),
        "{}",
        refused.raw
    );
    // Every subscription reached the server once, nothing was sent again.
    assert_eq!(count(&fx, "subscribe", None), 33);
    assert_eq!(count(&fx, "unsubscribe", None), 1);

    // The session's end releases its 32 subscriptions and the held session.
    assert_eq!(s1.delete().await, 200);
    eventually(
        "the ended session's subscriptions released upstream",
        || async {
            match count(&fx, "unsubscribe", None) {
                33 => Ok(()),
                n => Err(n),
            }
        },
    )
    .await;
    gw.wait_metric(&sessions("leased"), 0.0).await;
    assert_eq!(count(&fx, "subscribe", None), 33);
    drop(stream);
    gw.stop().await;
}

/// ~3 MiB of capabilities at `initialize`: members redmark does not act on
/// are dropped (a short id), and an oversized member it keeps is refused
/// with a 400 naming the member and the limit.
#[tokio::test]
async fn an_initialize_with_megabytes_of_capabilities_keeps_a_short_id_or_gets_a_precise_400() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&subscribing(&fx, "")).await;
    let blob = "x".repeat(3 << 20);

    let mut s = Session2025::new(&gw.url);
    let r = s
        .initialize(
            "2025-11-25",
            json!({"experimental": {"blob": blob}, "elicitation": {"form": {}}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", &r.raw[..r.raw.len().min(300)]);
    let id = s.id.clone().expect("a session id");
    assert!(id.len() <= 1024, "an id of {} bytes", id.len());
    assert_eq!(
        s.request(json!(1), "ping", json!({})).await.result(),
        &json!({})
    );

    let mut s = Session2025::new(&gw.url);
    let r = s
        .initialize(
            "2025-11-25",
            json!({"elicitation": {"form": {"blob": blob}}}),
        )
        .await;
    let refused = assert_error(&r, 400, -32602, "capabilities_too_large");
    let message = refused.error["message"].as_str().unwrap();
    assert!(message.contains("`capabilities.elicitation`"), "{message}");
    assert!(message.contains("256 bytes"), "{message}");
    assert!(s.id.is_none(), "no session for a refused initialize");
    gw.stop().await;
}

/// A 2026-07-28 `subscriptions/listen` naming `resourceSubscriptions` on a
/// legacy route shares the principal's upstream subscriptions with its
/// 2025-era sessions (one upstream subscribe for both), hears the updates
/// tagged with its subscription id, and releases its URIs when it ends;
/// more than 32 URIs is refused.
#[tokio::test]
async fn a_2026_listen_shares_the_principals_subscriptions() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&subscribing(&fx, &api_key(ALICE, "alice", &[]))).await;
    let mut s = Session2025::new(&gw.url).with_key(ALICE);
    s.initialize("2025-11-25", json!({})).await;
    assert_eq!(
        subscribe(&s, 1, "note://a", true).await.result(),
        &json!({})
    );

    let listen = |uris: Vec<String>| {
        let params = json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": uris}, "_meta": meta(json!({}))});
        gw.request_with_id(json!("listen-1"), "subscriptions/listen", &params)
            .header("authorization", format!("Bearer {ALICE}"))
    };
    let open = listen(vec!["note://a".into(), "note://b".into()])
        .send()
        .await
        .unwrap();
    assert_eq!(open.status().as_u16(), 200);
    let mut stream = SseReader::new(open);
    let ack = stream.next(WAIT).await.expect("acknowledgement");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["note://a", "note://b"]),
        "{ack}"
    );
    // note://a was held already: only note://b reached the server.
    assert_eq!(count(&fx, "subscribe", Some("note://a")), 1);
    assert_eq!(count(&fx, "subscribe", Some("note://b")), 1);
    assert_eq!(gw.metric(&sessions("leased")).await, Some(1.0));

    touch(&s, 2, "note://b").await;
    let updated = stream.next(WAIT).await.expect("resources/updated");
    assert_eq!(
        updated["method"], "notifications/resources/updated",
        "{updated}"
    );
    assert_eq!(updated["params"]["uri"], "note://b", "{updated}");
    assert_eq!(
        updated["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );

    // The listen ends: note://b (its alone) is unsubscribed, note://a (shared) is not.
    drop(stream);
    eventually("the listen's own URI unsubscribed", || async {
        match count(&fx, "unsubscribe", Some("note://b")) {
            1 => Ok(()),
            n => Err(n),
        }
    })
    .await;
    assert_eq!(count(&fx, "unsubscribe", Some("note://a")), 0);

    let too_many: Vec<String> = (0..33).map(|n| format!("note://m{n}")).collect();
    let refused = read_resp(listen(too_many).send().await.unwrap()).await;
    assert_error(&refused, 400, -32602, "too_many_subscriptions");
    assert_eq!(count(&fx, "subscribe", None), 2);
    gw.stop().await;
}
