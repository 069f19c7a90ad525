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

/// A call that asked a question and is then given up: the question is
/// answered (an error, as for a capability the client lacks), and the call
/// runs on for `slow` before the server ends it.
async fn asked_then_given_up(
    slow: Duration,
    settle: Duration,
) -> (bool, Vec<Message>, tokio::time::Instant) {
    let (session, mut peer) = started().await;
    let mut call = session
        .call("tools/call", Some(json!({"name": "t"}).into()))
        .await
        .unwrap_or_else(|e| panic!("call: {e}"));
    let Some(Message::Request { id, .. }) = peer.recv().await else {
        panic!("the call")
    };
    let push = Message::Request {
        id: Id::String("q1".into()),
        method: "elicitation/create".into(),
        params: Some(json!({"message": "?", "requestedSchema": {"type": "object"}}).into()),
    };
    assert!(peer.send_on(id.clone(), push).await);
    let CallStep::Event(CallEvent::ServerRequest { id: asked, .. }) = call.next().await else {
        panic!("the question")
    };
    let refused = ErrorObject::new(-32601, "the client did not declare the capability");
    session
        .respond(asked, Err(refused))
        .await
        .unwrap_or_else(|e| panic!("respond: {e}"));
    // The server takes its answer, works on for `slow`, then ends the call;
    // everything else it hears is collected.
    let server = tokio::spawn(async move {
        let mut heard = Vec::new();
        let finish = tokio::time::sleep(slow);
        tokio::pin!(finish);
        let mut done = false;
        loop {
            tokio::select! {
                () = &mut finish, if !done => {
                    done = true;
                    let end = Message::Response { id: id.clone(), outcome: Ok(json!({"isError": true, "content": []})) };
                    assert!(peer.send_on(id.clone(), end).await);
                }
                got = peer.recv() => match got {
                    Some(m) => heard.push(m),
                    None => return heard,
                },
                () = tokio::time::sleep(Duration::from_secs(3600)) => return heard,
            }
        }
    });
    let began = tokio::time::Instant::now();
    let ended = call.end("redmark: missing_capability", settle).await;
    let ended_at = tokio::time::Instant::now();
    drop(call);
    session.close();
    let heard = server.await.unwrap_or_else(|e| panic!("join: {e}"));
    assert!(ended_at >= began);
    (ended, heard, ended_at)
}

fn cancels(heard: &[Message]) -> usize {
    heard
        .iter()
        .filter(|m| matches!(m, Message::Notification { method, .. } if method == "notifications/cancelled"))
        .count()
}

/// A server still finishing a call well past the short grace after its
/// question was answered hears no `notifications/cancelled`: the answer
/// reached it first, and the call ends on its own within `end_grace`.
#[tokio::test(start_paused = true)]
async fn a_call_given_up_after_its_question_was_answered_ends_on_its_own() {
    let began = tokio::time::Instant::now();
    let (ended, heard, at) = asked_then_given_up(END_GRACE * 5, Duration::from_secs(30)).await;
    assert!(ended, "the server ended the call itself");
    assert_eq!(at - began, END_GRACE * 5, "read until the server ended it");
    assert!(
        matches!(&heard[0], Message::Response { outcome: Err(e), .. } if e.code == -32601),
        "the answer first: {heard:?}"
    );
    assert_eq!(cancels(&heard), 0, "no cancellation: {heard:?}");
}

/// Only a call still running after `end_grace` hears `notifications/cancelled`.
#[tokio::test(start_paused = true)]
async fn a_call_still_running_after_end_grace_is_cancelled() {
    let began = tokio::time::Instant::now();
    let (ended, heard, _) =
        asked_then_given_up(Duration::from_secs(3600), Duration::from_secs(3)).await;
    assert!(!ended, "the server never ended it");
    assert_eq!(cancels(&heard), 1, "{heard:?}");
    assert!(tokio::time::Instant::now() - began >= Duration::from_secs(3));
}
