//! Request bodies held in memory (docs/src/reference/limits.md, "Slow and
//! greedy clients"): unfinished bodies on one HTTP/2 connection are bounded
//! by its share of `max_body_bytes`, and all connections together by
//! `max_body_memory`, over real h2c connections whose bodies never end.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;

use common::*;
use tokio::net::TcpStream;

const BODY_BYTES: &str = "redmark_request_body_bytes";

type Chunk = Result<hyper::body::Frame<bytes::Bytes>, std::convert::Infallible>;

/// A body of one frame that never ends while its sender is kept.
type Held = futures::channel::mpsc::Sender<Chunk>;

/// Requests of one h2c connection, their bodies fed from a channel.
type H2 = hyper::client::conn::http2::SendRequest<
    http_body_util::StreamBody<futures::channel::mpsc::Receiver<Chunk>>,
>;

/// One h2c connection (prior knowledge) to the gateway: its request sender,
/// and the task driving it (aborting it closes the connection).
async fn h2c(gw: &TestGateway) -> (H2, tokio::task::JoinHandle<()>) {
    let tcp = TcpStream::connect(gw.addr()).await.unwrap();
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .unwrap();
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    (send, driver)
}

/// Opens a stream on `send` whose body is `len` bytes and never ends (the
/// returned sender holds it open); the task yields the status and body of
/// the answer, if one comes.
async fn unfinished(
    send: &mut H2,
    len: usize,
) -> (Held, tokio::task::JoinHandle<(u16, serde_json::Value)>) {
    use futures::SinkExt;
    use http_body_util::BodyExt;
    let (mut tx, rx) = futures::channel::mpsc::channel(4);
    tx.send(Ok(hyper::body::Frame::data(bytes::Bytes::from(vec![
        b'x';
        len
    ]))))
    .await
    .unwrap();
    let req = http::Request::post("http://127.0.0.1/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(http_body_util::StreamBody::new(rx))
        .unwrap();
    send.ready().await.unwrap();
    let answer = send.send_request(req);
    let task = tokio::spawn(async move {
        let resp = answer.await.unwrap();
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&body).unwrap_or_default())
    });
    (tx, task)
}

/// A body refused for the memory it would hold: 503 `body_memory_exhausted`
/// (`-32603`), `scope` naming whose budget ran out.
fn assert_memory_exhausted(status: u16, body: &serde_json::Value, scope: &str) {
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], -32603, "{body}");
    assert_eq!(
        body["error"]["data"]["reason"], "body_memory_exhausted",
        "{body}"
    );
    assert_eq!(body["error"]["data"]["scope"], scope, "{body}");
}

/// Issue 42: one HTTP/2 connection's unfinished bodies were each buffered
/// up to `max_body_bytes`, 200 streams at once (one connection pinned
/// ~450 MiB). Now a connection holds at most 4 x `max_body_bytes`: with 12
/// streams of 60 KiB under a 64 KiB limit, at least 8 are refused at once
/// with 503 `body_memory_exhausted` (scope `connection`), the bytes held
/// (`redmark_request_body_bytes`) stay within 256 KiB, other connections
/// are served, and closing the connection gives everything back.
#[tokio::test]
async fn one_h2_connection_holds_at_most_its_share_of_body_memory() {
    let gw = gateway_without_upstream("max_body_bytes = 65536\nbody_read_timeout = \"60s\"").await;
    let (mut send, driver) = h2c(&gw).await;
    let mut held = Vec::new();
    let mut answers = futures::stream::FuturesUnordered::new();
    for _ in 0..12 {
        let (tx, task) = unfinished(&mut send, 60 * 1024).await;
        held.push(tx);
        answers.push(task);
    }
    use futures::StreamExt;
    for _ in 0..8 {
        let (status, body) = tokio::time::timeout(PATIENCE, answers.next())
            .await
            .expect("refused at once, not at body_read_timeout")
            .unwrap()
            .unwrap();
        assert_memory_exhausted(status, &body, "connection");
    }
    let held_now = gw.metric(BODY_BYTES).await.unwrap();
    assert!(
        held_now <= (4 * 65536) as f64,
        "one connection holds {held_now} bytes of bodies"
    );
    // The budget is the connection's: another one is served meanwhile.
    assert_eq!(notify_on_new_connection(&gw.url).await.status, 202);
    driver.abort();
    drop((send, held));
    gw.wait_metric(BODY_BYTES, 0.0).await;
    gw.stop().await;
}

/// The listener's total (`max_body_memory`) bounds all connections
/// together: two connections cannot hold more than it, whatever their own
/// shares allow.
#[tokio::test]
async fn all_connections_together_hold_at_most_max_body_memory() {
    let gw = gateway_without_upstream(
        "max_body_bytes = 65536\nmax_body_memory = 131072\nbody_read_timeout = \"60s\"",
    )
    .await;
    let (mut first, first_driver) = h2c(&gw).await;
    let (a, a_answer) = unfinished(&mut first, 60 * 1024).await;
    let (b, b_answer) = unfinished(&mut first, 60 * 1024).await;
    gw.wait_metric(BODY_BYTES, (120 * 1024) as f64).await;
    let (mut second, second_driver) = h2c(&gw).await;
    let (c, c_answer) = unfinished(&mut second, 60 * 1024).await;
    let (status, body) = tokio::time::timeout(PATIENCE, c_answer)
        .await
        .expect("refused at once")
        .unwrap();
    assert_memory_exhausted(status, &body, "total");
    assert_eq!(gw.metric(BODY_BYTES).await, Some((120 * 1024) as f64));
    assert!(!a_answer.is_finished() && !b_answer.is_finished());
    first_driver.abort();
    second_driver.abort();
    drop((first, second, a, b, c));
    gw.wait_metric(BODY_BYTES, 0.0).await;
    gw.stop().await;
}
