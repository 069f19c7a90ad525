//! The session's unit tests over an in-process link: a silent `initialize`,
//! an abandoned request, a flood of notifications on one call.

use super::call::CALL_QUEUE_DEPTH;
use super::*;
use crate::upstream::transport::memory;

#[tokio::test(start_paused = true)]
async fn a_silent_initialize_is_unavailable_and_never_cancelled() {
    let (link, mut peer) = memory::pair();
    let notices = crate::upstream::notices::Notices::new(4);
    let start = tokio::spawn(Session::start(
        link,
        "r".into(),
        Profile::default(),
        notices,
        Timeouts {
            init: Duration::from_secs(3),
            write: Duration::from_secs(3),
        },
        crate::upstream::mode::RouteMode::new(
            "r".into(),
            crate::upstream::mode::Mode::Learning,
            Arc::new(crate::telemetry::metrics::Metrics::new()),
        ),
    ));
    let Some(Message::Request { method, .. }) = peer.recv().await else {
        panic!("initialize first")
    };
    assert_eq!(method, "initialize");
    let began = tokio::time::Instant::now();
    let outcome = start.await.unwrap_or_else(|e| panic!("join: {e}"));
    assert_eq!(began.elapsed(), Duration::from_secs(3), "init_timeout");
    match outcome {
        Err(UpstreamError::Unavailable(why)) => assert!(why.contains("initialize"), "{why}"),
        other => panic!("expected upstream_unavailable, got {other:?}"),
    }
    // The session is closed and nothing else was sent: no `notifications/cancelled`.
    assert!(peer.recv().await.is_none(), "nothing after initialize");
}

/// A session past its handshake over an in-process link, and its server's end.
async fn started() -> (Arc<Session>, memory::Peer) {
    let (link, mut peer) = memory::pair();
    let notices = crate::upstream::notices::Notices::new(4);
    let timeouts = Timeouts {
        init: Duration::from_secs(5),
        write: Duration::from_secs(5),
    };
    let mode = crate::upstream::mode::RouteMode::new(
        "r".into(),
        crate::upstream::mode::Mode::Learning,
        Arc::new(crate::telemetry::metrics::Metrics::new()),
    );
    let start = tokio::spawn(Session::start(
        link,
        "r".into(),
        Profile::default(),
        notices,
        timeouts,
        mode,
    ));
    let Some(Message::Request { id, .. }) = peer.recv().await else {
        panic!("initialize first")
    };
    let init = json!({"protocolVersion": LEGACY_VERSIONS[0], "capabilities": {},
        "serverInfo": {"name": "s", "version": "1"}});
    assert!(
        peer.send(Message::Response {
            id,
            outcome: Ok(init)
        })
        .await
    );
    let session = start
        .await
        .unwrap_or_else(|e| panic!("join: {e}"))
        .unwrap_or_else(|e| panic!("start: {e}"));
    let Some(Message::Notification { method, .. }) = peer.recv().await else {
        panic!("initialized")
    };
    assert_eq!(method, "notifications/initialized");
    (session, peer)
}

/// A request whose caller goes away (its future dropped: the client
/// left while redmark listed tools) leaves no waiter behind, and the
/// server hears that nobody wants the answer any more.
#[tokio::test]
async fn an_abandoned_request_is_forgotten_and_cancelled_upstream() {
    let (session, mut peer) = started().await;
    let asking = {
        let session = session.clone();
        tokio::spawn(async move {
            session
                .request("tools/list", None, Duration::from_secs(60))
                .await
        })
    };
    let Some(Message::Request { id, method, .. }) = peer.recv().await else {
        panic!("the request")
    };
    assert_eq!(method, "tools/list");
    assert_eq!(lock(&session.state.pending).len(), 1);
    asking.abort();
    assert!(asking.await.is_err_and(|e| e.is_cancelled()));
    assert!(
        lock(&session.state.pending).is_empty(),
        "the waiter went with its caller"
    );
    match peer.recv().await {
        Some(Message::Notification { method, params }) => {
            assert_eq!(method, "notifications/cancelled");
            let params = params.unwrap_or_default();
            assert_eq!(params["requestId"], serde_json::to_value(&id).unwrap());
            assert_eq!(params["reason"], "redmark: the client went away");
        }
        other => panic!("expected notifications/cancelled, got {other:?}"),
    }
}

/// A call that does not read its events while the server floods it holds
/// at most the queue's depth (plus the one message a sender may park); the
/// rest is dropped and counted, and the answer still arrives.
#[tokio::test]
async fn a_notification_flood_is_bounded_by_the_call_queue() {
    let (session, mut peer) = started().await;
    let mut call = session
        .call("tools/call", Some(json!({"name": "t"}).into()))
        .await
        .unwrap_or_else(|e| panic!("call: {e}"));
    let Some(Message::Request { id, .. }) = peer.recv().await else {
        panic!("the call")
    };
    let flood = CALL_QUEUE_DEPTH * 3;
    for i in 0..flood {
        let progress = Message::Notification {
            method: "notifications/progress".into(),
            params: Some(json!({"progressToken": 1, "progress": i})),
        };
        assert!(peer.send_on(id.clone(), progress).await);
    }
    // The session answers a ping after everything before it (in order):
    // once answered, the whole flood has met the call's queue.
    let ping = Message::Request {
        id: Id::Number(999),
        method: "ping".into(),
        params: None,
    };
    assert!(peer.send(ping).await);
    let Some(Message::Response { id: pong, .. }) = peer.recv().await else {
        panic!("the ping's answer")
    };
    assert_eq!(pong, Id::Number(999));
    let done = Message::Response {
        id: id.clone(),
        outcome: Ok(json!({"content": []})),
    };
    assert!(peer.send_on(id.clone(), done).await);
    let mut events = 0;
    let answer = loop {
        match call.next().await {
            CallStep::Event(_) => events += 1,
            CallStep::Done(outcome) => break outcome,
            CallStep::Lost(e) | CallStep::NotSent(e) => panic!("lost: {e}"),
        }
    };
    assert_eq!(answer, Ok(Payload::Tree(json!({"content": []}))));
    assert!(
        (1..=CALL_QUEUE_DEPTH + 1).contains(&events),
        "{events} events queued for a call that did not read (depth {CALL_QUEUE_DEPTH}), dropped {}",
        call.dropped()
    );
    assert_eq!(
        call.dropped(),
        u64::try_from(flood - events).unwrap_or(u64::MAX),
        "every notification not queued is counted"
    );
}
