//! Slow and greedy clients (docs/src/reference/limits.md, "Slow and greedy clients"): every bound
//! the front puts on a connection, asserted over real sockets with small
//! timeouts: trickled heads and bodies, bodies over `max_body_bytes`, more
//! connections than `max_connections`, and a client that never reads its SSE
//! response while the server behind redmark floods it with notifications.
//! Bodies held in memory across HTTP/2 streams: tests/front_limits_h2.rs.
//!
//! Real sockets cannot use paused time: every wait here is bounded by a
//! deadline, and each timing assertion leaves room for a loaded machine.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod mrtr_support;

use std::time::Duration;

use common::*;
use mrtr_support::*;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

/// The head of a well-formed 2026-07-28 POST to `/mcp` (no blank line yet).
fn head(method: &str, name: Option<&str>) -> String {
    let mut h = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: {VERSION}\r\n\
         mcp-method: {method}\r\n"
    );
    if let Some(name) = name {
        h.push_str(&format!("mcp-name: {name}\r\n"));
    }
    h
}

/// One HTTP/1.1 response read off a raw socket: the head, then a body of its
/// `content-length` (or up to the end of the connection).
async fn read_response(s: &mut (impl AsyncRead + Unpin), within: Duration) -> Resp {
    let deadline = Instant::now() + within;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_len, length) = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let length = head.lines().find_map(|l| {
                l.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            });
            break (end + 4, length);
        }
        let n = tokio::time::timeout_at(deadline, s.read(&mut chunk))
            .await
            .unwrap_or_else(|_| panic!("no response within {within:?}; got {buf:?}"))
            .expect("read");
        assert!(n > 0, "connection closed before a response: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    };
    while length.is_none_or(|l| buf.len() < head_len + l) {
        let n = tokio::time::timeout_at(deadline, s.read(&mut chunk))
            .await
            .unwrap_or_else(|_| panic!("no whole body within {within:?}"))
            .unwrap_or(0);
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf[..head_len]).to_string();
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    for line in head.lines().skip(1).filter(|l| !l.is_empty()) {
        let (k, v) = line.split_once(':').unwrap();
        headers.append(
            reqwest::header::HeaderName::from_bytes(k.trim().as_bytes()).unwrap(),
            v.trim().parse().unwrap(),
        );
    }
    let raw = String::from_utf8_lossy(&buf[head_len..]).to_string();
    let messages = if raw.trim().is_empty() {
        Vec::new()
    } else {
        vec![serde_json::from_str(&raw).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"))]
    };
    Resp {
        status,
        content_type: headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
        headers,
        messages,
        raw,
    }
}

/// Waits (bounded) until the server closes `s`, reading and discarding what
/// it sends; returns the bytes read.
async fn closed_within(s: &mut (impl AsyncRead + Unpin), within: Duration, what: &str) -> Vec<u8> {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
            Err(_) => panic!("{what}: still open after {within:?}"),
            Ok(Ok(0) | Err(_)) => return seen,
            Ok(Ok(n)) => seen.extend_from_slice(&chunk[..n]),
        }
    }
}

// --- Slowloris: heads and bodies trickled ---

#[tokio::test]
async fn a_trickled_request_head_is_cut_off_at_header_read_timeout() {
    let gw = gateway_without_upstream("header_read_timeout = \"1s\"").await;
    let mut s = TcpStream::connect(gw.addr()).await.unwrap();
    let started = Instant::now();
    s.write_all(b"POST /mcp HTTP/1.1\r\nhost: x\r\nx-slow: ")
        .await
        .unwrap();
    // One byte every 200 ms, never the end of the head, until the server closes.
    let (mut rd, mut wr) = s.into_split();
    let trickle = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if wr.write_all(b"a").await.is_err() {
                return;
            }
        }
    });
    let mut chunk = [0u8; 1024];
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match rd.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    trickle.abort();
    assert!(closed.is_ok(), "a trickled head held its connection 10 s");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "closed after {took:?}, before header_read_timeout"
    );
    assert!(took < Duration::from_secs(5), "closed only after {took:?}");
    gw.stop().await;
}

#[tokio::test]
async fn a_trickled_or_short_body_gets_408_body_timeout() {
    let gw = gateway_without_upstream("body_read_timeout = \"1s\"").await;
    let body = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    // A body trickled one byte every 200 ms.
    let trickled = async {
        let mut s = TcpStream::connect(gw.addr()).await.unwrap();
        let h = head("notifications/initialized", None);
        s.write_all(format!("{h}content-length: {}\r\n\r\n", body.len()).as_bytes())
            .await
            .unwrap();
        let started = Instant::now();
        let (mut rd, mut wr) = s.into_split();
        let bytes = body.clone().into_bytes();
        let trickle = tokio::spawn(async move {
            for b in bytes {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if wr.write_all(&[b]).await.is_err() {
                    return;
                }
            }
        });
        let r = read_response(&mut rd, Duration::from_secs(10)).await;
        trickle.abort();
        (r, started.elapsed())
    };
    // A `Content-Length` longer than what is sent.
    let short = async {
        let mut s = TcpStream::connect(gw.addr()).await.unwrap();
        let h = head("notifications/initialized", None);
        s.write_all(format!("{h}content-length: {}\r\n\r\n{}", body.len() + 100, body).as_bytes())
            .await
            .unwrap();
        let started = Instant::now();
        let r = read_response(&mut s, Duration::from_secs(10)).await;
        let took = started.elapsed();
        closed_within(
            &mut s,
            Duration::from_secs(5),
            "the short body's connection",
        )
        .await;
        (r, took)
    };
    let ((trickled, t1), (short, t2)) = tokio::join!(trickled, short);
    for (r, took) in [(&trickled, t1), (&short, t2)] {
        assert_error(r, 408, -32600, "body_timeout");
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_secs(5),
            "answered after {took:?}; body_read_timeout is 1 s"
        );
    }
    assert_eq!(
        gw.metric(&requests("-", "body_timeout")).await,
        Some(2.0),
        "{}",
        gw.metrics().await
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_body_over_max_body_bytes_is_refused_while_it_streams() {
    // The body timeout is long: an answer within seconds is the size bound's.
    let gw = gateway_without_upstream("max_body_bytes = 1024\nbody_read_timeout = \"60s\"").await;
    let mut s = TcpStream::connect(gw.addr()).await.unwrap();
    let h = head("notifications/initialized", None);
    s.write_all(format!("{h}transfer-encoding: chunked\r\n\r\n").as_bytes())
        .await
        .unwrap();
    // 3 chunks of 512 bytes cross the bound; the body never ends (no last chunk).
    for _ in 0..3 {
        let chunk = format!("200\r\n{}\r\n", "x".repeat(512));
        s.write_all(chunk.as_bytes()).await.unwrap();
    }
    let started = Instant::now();
    let r = read_response(&mut s, Duration::from_secs(10)).await;
    assert_error(&r, 413, -32600, "body_too_large");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refused only after {:?}",
        started.elapsed()
    );
    closed_within(
        &mut s,
        Duration::from_secs(5),
        "the oversized body's connection",
    )
    .await;

    // A declared length over the bound is refused before any of it is sent.
    let mut s = TcpStream::connect(gw.addr()).await.unwrap();
    s.write_all(format!("{h}content-length: 1048576\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let r = read_response(&mut s, Duration::from_secs(10)).await;
    assert_error(&r, 413, -32600, "body_too_large");
    gw.stop().await;
}

// --- More connections than max_connections ---

const CONNECTIONS: &str = "redmark_client_connections";

#[tokio::test]
async fn connections_over_the_cap_get_503_and_idle_ones_make_room_again() {
    let gw = gateway_without_upstream("max_connections = 8\nheader_read_timeout = \"5s\"").await;
    let to = gw.addr();
    // Eight connections that send nothing fill the cap.
    let mut idle = Vec::new();
    for _ in 0..8 {
        idle.push(TcpStream::connect(to).await.unwrap());
    }
    let opened = Instant::now();
    gw.wait_metric(CONNECTIONS, 8.0).await;
    // Every one beyond is answered at once, 503 with Retry-After, and closed.
    let extra = 32;
    let refused = futures::future::join_all((0..extra).map(|_| async move {
        let mut s = TcpStream::connect(to).await.unwrap();
        let r = read_response(&mut s, Duration::from_secs(5)).await;
        closed_within(&mut s, Duration::from_secs(5), "a refused connection").await;
        r
    }))
    .await;
    for r in &refused {
        assert_error(r, 503, -32603, "too_many_connections");
        assert_eq!(r.headers["retry-after"], "1");
    }
    // A real client meanwhile hears the same, not a hang.
    let r = notify_on_new_connection(&gw.url).await;
    assert_error(&r, 503, -32603, "too_many_connections");
    // The cap holds only while the idle connections live (header_read_timeout
    // from their accept): 5 s leaves a loaded machine room for 32 refusals.
    assert!(
        opened.elapsed() < Duration::from_secs(5),
        "the refusals took {:?}: the idle connections should still hold the cap",
        opened.elapsed()
    );
    assert_eq!(
        gw.metric("redmark_connections_refused_total").await,
        Some(f64::from(extra + 1))
    );
    // The idle ones are closed at header_read_timeout...
    for s in &mut idle {
        closed_within(s, Duration::from_secs(10), "an idle connection").await;
    }
    let took = opened.elapsed();
    assert!(
        took >= Duration::from_millis(4900),
        "idle closed after {took:?}"
    );
    gw.wait_metric(CONNECTIONS, 0.0).await;
    // ...and real clients are served again.
    let r = notify_on_new_connection(&gw.url).await;
    assert_eq!(r.status, 202, "{}", r.raw);
    gw.stop().await;
}

// --- A client that never reads its SSE response ---

const FLOOD_N: u64 = 5000;
const FLOOD_BYTES: u64 = 2000;

/// Metric `sample` of a gateway process's admin listener.
async fn metric(admin: &str, sample: &str) -> Option<f64> {
    let text = reqwest::get(format!("{admin}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix(sample)
            .and_then(|rest| rest.trim().parse().ok())
    })
}

async fn wait_metric(admin: &str, sample: &str, want: impl Fn(f64) -> bool) -> f64 {
    eventually(&format!("{sample} as expected"), || async {
        match metric(admin, sample).await {
            Some(v) if want(v) => Ok(v),
            v => Err(format!("{v:?}")),
        }
    })
    .await
}

/// Starts the redmark binary in front of the mrtr fixture with `cfg`, opens
/// a `flood` call (10 MB of progress notifications) on a socket with a tiny
/// receive buffer, and never reads it. Returns the process and the socket.
async fn flood_unread(fx: &Fixture, cfg: String, tag: &str) -> (RedmarkProcess, TcpStream) {
    let (gw, s) = flood_unread_started(fx, cfg, tag).await;
    fx.log
        .eventually("flooded", |e| e["event"] == "flooded" && e["tag"] == tag)
        .await;
    (gw, s)
}

async fn flood_unread_started(fx: &Fixture, cfg: String, tag: &str) -> (RedmarkProcess, TcpStream) {
    let path = fx.path("redmark.toml");
    std::fs::write(&path, cfg).unwrap();
    let gw = RedmarkProcess::start(&path, false, &[]).await;
    let to: std::net::SocketAddr = gw.base.strip_prefix("http://").unwrap().parse().unwrap();
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut s = socket.connect(to).await.unwrap();
    let mut m = meta(json!({}));
    m["progressToken"] = json!("p");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "flood", "arguments": {"tag": tag, "n": FLOOD_N, "size": FLOOD_BYTES}, "_meta": m}})
    .to_string();
    let h = head("tools/call", Some("flood"));
    s.write_all(format!("{h}content-length: {}\r\n\r\n{body}", body.len()).as_bytes())
        .await
        .unwrap();
    (gw, s)
}

/// What both non-reader tests check once the call ended: no lease, nothing
/// pending, notifications dropped (the client really stalled), the server
/// cancelled, and a log that did not grow per notification.
async fn released_and_quiet(fx: &Fixture, gw: RedmarkProcess, tag: &str, outcome: &str) {
    wait_metric(&gw.admin, &ops("flood", outcome), |v| v == 1.0).await;
    wait_metric(&gw.admin, &sessions("leased"), |v| v == 0.0).await;
    wait_metric(&gw.admin, PENDING, |v| v == 0.0).await;
    let dropped = wait_metric(
        &gw.admin,
        r#"redmark_notifications_dropped_total{route="main"}"#,
        |v| v > 0.0,
    )
    .await;
    fx.log
        .eventually("the flood cancelled", |e| {
            (e["event"] == "cancelled" && e["tag"] == tag) || e["event"] == "cancel_requested"
        })
        .await;
    let lines = gw.stop().await;
    let drops: Vec<&String> = lines.iter().filter(|l| l.contains("dropping")).collect();
    assert!(drops.len() <= 2, "one line per drop: {drops:#?}");
    assert!(
        lines.len() < 100,
        "{} log lines for one call ({dropped} notifications dropped): {:#?}",
        lines.len(),
        &lines[..20]
    );
}

#[tokio::test]
async fn a_client_that_never_reads_its_stream_does_not_hold_the_call_past_call_timeout() {
    let fx = Fixture::new();
    let cfg = fx
        .cfg()
        .top("send_timeout = \"120s\"")
        .upstream("call_timeout = \"2s\"")
        .build();
    let (gw, s) = flood_unread(&fx, cfg, "unread-1").await;
    let flooded = Instant::now();
    wait_metric(&gw.admin, &ops("flood", "upstream_timeout"), |v| v == 1.0).await;
    assert!(
        flooded.elapsed() < Duration::from_secs(20),
        "the call ended {:?} after the server fell silent; call_timeout is 2 s",
        flooded.elapsed()
    );
    released_and_quiet(&fx, gw, "unread-1", "upstream_timeout").await;
    drop(s);
}

#[tokio::test]
async fn a_client_that_never_reads_is_cut_off_at_send_timeout() {
    let fx = Fixture::new();
    let cfg = fx
        .cfg()
        .top("send_timeout = \"2s\"")
        .upstream("call_timeout = \"120s\"")
        .build();
    // The stall cuts the connection (and cancels the call) before the flood is through.
    let (gw, mut s) = flood_unread_started(&fx, cfg, "unread-2").await;
    // Not call_timeout (120 s): the stalled write ends the connection and so the call.
    wait_metric(&gw.admin, &ops("flood", "client_disconnected"), |v| {
        v == 1.0
    })
    .await;
    // The socket was closed by redmark (what it had buffered can still be read).
    let drain = tokio::time::timeout(PATIENCE, async {
        let mut chunk = vec![0u8; 65536];
        loop {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(drain.is_ok(), "the stalled connection stayed open");
    released_and_quiet(&fx, gw, "unread-2", "client_disconnected").await;
}
