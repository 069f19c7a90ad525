//! The pool's unit tests: leases on sessions to a scripted in-process server
//! that pushes on each call's stream or on the standalone one.

use super::*;
use crate::jsonrpc::{Id, Message};
use crate::upstream::session::{CallEvent, CallStep};
use crate::upstream::transport::memory::{self, Peer};
use serde_json::json;

/// Where the scripted server sends its push for each call.
#[derive(Clone, Copy)]
enum PushOn {
    CallStream,
    Standalone,
}

/// A server that answers `initialize` and pushes one question per `tools/call`.
async fn serve(mut peer: Peer, push_on: PushOn) {
    while let Some(msg) = peer.recv().await {
        let Message::Request { id, method, .. } = msg else {
            continue;
        };
        let out = if method == "initialize" {
            Message::Response {
                id,
                outcome: Ok(json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "serverInfo": {"name": "scripted", "version": "0"},
                })),
            }
        } else {
            let Id::Number(n) = id else { continue };
            let push = Message::Request {
                id: Id::String(format!("push-{n}")),
                method: "elicitation/create".into(),
                params: Some(json!({"message": format!("for {n}")}).into()),
            };
            let sent = match push_on {
                PushOn::CallStream => peer.send_on(id, push).await,
                PushOn::Standalone => peer.send(push).await,
            };
            if !sent {
                return;
            }
            continue;
        };
        if !peer.send(out).await {
            return;
        }
    }
}

fn pool(push_on: PushOn, max_ops: usize) -> Arc<RoutePool> {
    let connect: Connector = Arc::new(move || {
        let (link, peer) = memory::pair();
        tokio::spawn(serve(peer, push_on));
        Ok(link)
    });
    let upstream: UpstreamConfig = toml::from_str("url = \"http://127.0.0.1:9/mcp\"")
        .unwrap_or_else(|e| panic!("upstream config: {e}"));
    let limits = PoolConfig {
        max_operations_per_session: max_ops,
        lease_timeout: Duration::from_millis(200),
        max_sessions_per_principal: 2,
        ..PoolConfig::default()
    };
    RoutePool::new(
        "r".into(),
        Connect::Custom(connect),
        upstream,
        limits,
        crate::upstream::client::for_tests(),
        Arc::new(Metrics::new()),
    )
}

/// Leases a place and starts a call; returns the question's message.
async fn ask(pool: &Arc<RoutePool>) -> (Lease, crate::upstream::session::Call, String) {
    let who: Arc<str> = "alice".into();
    let lease = pool
        .acquire(&who, Profile::default())
        .await
        .unwrap_or_else(|e| panic!("lease: {e}"));
    let mut call = lease
        .session()
        .call("tools/call", Some(json!({"name": "t"}).into()))
        .await
        .unwrap_or_else(|e| panic!("call: {e}"));
    let CallStep::Event(CallEvent::ServerRequest { params, .. }) = call.next().await else {
        panic!("a push for the call")
    };
    let message = params
        .and_then(|p| p.get("message").and_then(|m| m.as_str().map(str::to_owned)))
        .unwrap_or_default();
    assert_eq!(message, format!("for {}", call.upstream_id));
    (lease, call, message)
}

#[tokio::test]
async fn a_push_on_the_call_stream_lets_operations_share_up_to_the_limit() {
    let pool = pool(PushOn::CallStream, 2);
    assert_eq!(pool.mode(), Mode::Learning);
    let a = ask(&pool).await;
    assert_eq!(pool.mode(), Mode::Multiplexed);
    let b = ask(&pool).await;
    assert!(Arc::ptr_eq(a.0.session(), b.0.session()), "shared");
    let c = ask(&pool).await;
    assert!(!Arc::ptr_eq(a.0.session(), c.0.session()), "past the limit");
    assert_eq!(pool.counts(), (0, 2));
    let d = ask(&pool).await;
    assert!(Arc::ptr_eq(c.0.session(), d.0.session()));
    // Two sessions per principal, two operations each: the next one waits, then is busy.
    let who: Arc<str> = "alice".into();
    assert!(matches!(
        pool.acquire(&who, Profile::default()).await,
        Err(UpstreamError::Busy(_))
    ));
    // A cancelled call (dropped unfinished) frees its place and leaves the
    // shared session usable.
    let (lease, call, _) = b;
    drop(call);
    drop(lease);
    assert!(a.0.session().is_reusable());
    let e = ask(&pool).await;
    assert!(Arc::ptr_eq(a.0.session(), e.0.session()));
    drop((a, c, d, e));
    assert_eq!(pool.counts(), (2, 0));
}

async fn lease(pool: &Arc<RoutePool>) -> Result<Lease, UpstreamError> {
    let who: Arc<str> = "alice".into();
    pool.acquire(&who, Profile::default()).await
}

#[tokio::test]
async fn a_lease_that_waits_gets_the_session_given_back_meanwhile() {
    // Learning: one operation per session, two sessions for alice.
    let pool = pool(PushOn::Standalone, 8);
    let a = lease(&pool).await.unwrap_or_else(|e| panic!("a: {e}"));
    let b = lease(&pool).await.unwrap_or_else(|e| panic!("b: {e}"));
    assert_eq!(pool.counts(), (0, 2));
    let waiting = tokio::spawn({
        let pool = pool.clone();
        async move { lease(&pool).await.map(|l| l.session().clone()) }
    });
    // Whether the waiter has registered yet or not, the session given
    // back is the one it gets: never a new one, never `Busy`.
    tokio::task::yield_now().await;
    let given_back = a.session().clone();
    drop(a);
    let got = waiting
        .await
        .unwrap_or_else(|e| panic!("join: {e}"))
        .unwrap_or_else(|e| panic!("the waiting lease: {e}"));
    assert!(Arc::ptr_eq(&got, &given_back));
    assert_eq!(
        pool.counts(),
        (1, 1),
        "the waiter's lease dropped with its task"
    );
    drop(b);
    assert_eq!(pool.counts(), (2, 0));
}

#[tokio::test]
async fn an_idle_session_that_died_is_retired_not_leased() {
    let pool = pool(PushOn::Standalone, 8);
    let a = lease(&pool).await.unwrap_or_else(|e| panic!("a: {e}"));
    let dead = a.session().clone();
    drop(a);
    assert_eq!(pool.counts(), (1, 0));
    dead.close();
    assert!(!dead.is_reusable());
    let b = lease(&pool).await.unwrap_or_else(|e| panic!("b: {e}"));
    assert!(
        !Arc::ptr_eq(b.session(), &dead),
        "a live session, started anew"
    );
    // The dead one is gone from the counts and from alice's allowance:
    // a second session still fits under her limit of two.
    assert_eq!(pool.counts(), (0, 1));
    let c = lease(&pool).await.unwrap_or_else(|e| panic!("c: {e}"));
    assert_eq!(pool.counts(), (0, 2));
    drop((b, c));
    assert_eq!(pool.counts(), (2, 0));
}

#[tokio::test]
async fn a_push_on_the_standalone_stream_keeps_sessions_exclusive() {
    let pool = pool(PushOn::Standalone, 8);
    let a = ask(&pool).await;
    assert_eq!(pool.mode(), Mode::Exclusive);
    let b = ask(&pool).await;
    assert!(!Arc::ptr_eq(a.0.session(), b.0.session()));
    assert_eq!(pool.counts(), (0, 2));
}
