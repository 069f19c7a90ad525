//! The HTTP transport's unit tests against an in-process legacy server:
//! direct requests answered with JSON or on a stream, with the standalone
//! stream open or refused, the link closed mid-call, and cached header values.

use super::*;
use http_body_util::BodyExt;
use serde_json::{Value, json};

/// A legacy server in the test: `initialize` gives a session id, the
/// standalone GET is refused (or, with `standalone`, kept open and
/// silent), and `tools/call` answers by its tool's name: `json` with its
/// JSON body, `other` with another request's answer, `sse` with a
/// notification and then its answer on a stream, `hang` with a stream
/// that never answers, `gone` with 404 (the server ended the session).
async fn server(standalone: bool) -> String {
    server_with(standalone, false).await
}

/// [`server`]; with `ends_session`, its standalone stream ends at once and
/// every GET after the first is answered 404, as a server that ended the
/// session answers.
async fn server_with(standalone: bool, ends_session: bool) -> String {
    let gets = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    use http_body_util::combinators::BoxBody;
    use http_body_util::{Full, StreamBody};
    type Body = BoxBody<Bytes, std::convert::Infallible>;
    fn full(text: String) -> Body {
        BodyExt::boxed(Full::new(Bytes::from(text)))
    }
    fn open_forever() -> Body {
        let never = futures::stream::pending::<
            Result<hyper::body::Frame<Bytes>, std::convert::Infallible>,
        >();
        BodyExt::boxed(StreamBody::new(never))
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let gets = gets.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: http::Request<hyper::body::Incoming>| {
                        let gets = gets.clone();
                        async move {
                            let method = req.method().clone();
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let mut resp = http::Response::new(full(String::new()));
                            if method == Method::GET && ends_session {
                                if gets.fetch_add(1, Ordering::SeqCst) == 0 {
                                    resp.headers_mut().insert(
                                        CONTENT_TYPE,
                                        HeaderValue::from_static("text/event-stream"),
                                    );
                                } else {
                                    *resp.status_mut() = StatusCode::NOT_FOUND;
                                }
                                return Ok::<_, std::convert::Infallible>(resp);
                            }
                            if method == Method::GET || method == Method::DELETE {
                                if method == Method::GET && standalone {
                                    resp.headers_mut().insert(
                                        CONTENT_TYPE,
                                        HeaderValue::from_static("text/event-stream"),
                                    );
                                    *resp.body_mut() = open_forever();
                                } else {
                                    *resp.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
                                }
                                return Ok::<_, std::convert::Infallible>(resp);
                            }
                            let msg: Value = serde_json::from_slice(&body).unwrap();
                            let id = msg["id"].clone();
                            let answer = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
                            let (kind, text) = match (
                                msg["method"].as_str(),
                                msg["params"]["name"].as_str(),
                            ) {
                                (Some("initialize"), _) => {
                                    resp.headers_mut()
                                        .insert("mcp-session-id", HeaderValue::from_static("s-1"));
                                    (
                                        "application/json",
                                        answer(json!({"protocolVersion": "2025-11-25"}))
                                            .to_string(),
                                    )
                                }
                                (Some("tools/call"), Some("json")) => (
                                    "application/json",
                                    answer(json!({"content": []})).to_string(),
                                ),
                                (Some("tools/call"), Some("other")) => (
                                    "application/json",
                                    json!({"jsonrpc": "2.0", "id": 999, "result": {}}).to_string(),
                                ),
                                (Some("tools/call"), Some("sse")) => (
                                    "text/event-stream",
                                    format!(
                                        "data: {}\n\ndata: {}\n\n",
                                        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}),
                                        answer(json!({"content": []})),
                                    ),
                                ),
                                (Some("tools/call"), Some("gone")) => {
                                    *resp.status_mut() = StatusCode::NOT_FOUND;
                                    return Ok(resp);
                                }
                                (Some("tools/call"), Some("hang")) => {
                                    resp.headers_mut().insert(
                                        CONTENT_TYPE,
                                        HeaderValue::from_static("text/event-stream"),
                                    );
                                    *resp.body_mut() = open_forever();
                                    return Ok(resp);
                                }
                                _ => {
                                    *resp.status_mut() = StatusCode::ACCEPTED;
                                    return Ok(resp);
                                }
                            };
                            resp.headers_mut()
                                .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
                            *resp.body_mut() = full(text);
                            Ok(resp)
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{addr}/mcp")
}

fn call(id: i64, tool: &str) -> Message {
    Message::Request {
        id: Id::Number(id),
        method: "tools/call".into(),
        params: Some(json!({"name": tool}).into()),
    }
}

/// A link past its handshake, and its direct requests.
async fn ready_link(standalone: bool) -> (Link, Direct) {
    ready_link_to(server(standalone).await).await
}

async fn ready_link_to(url: String) -> (Link, Direct) {
    let mut link = connect(
        client::for_tests(),
        &url,
        &BTreeMap::new(),
        "r".into(),
        1 << 20,
    )
    .unwrap();
    let direct = link.direct.clone().unwrap();
    link.outbound
        .send(Message::Request {
            id: Id::Number(0),
            method: "initialize".into(),
            params: None,
        })
        .await
        .unwrap();
    assert!(matches!(
        link.inbound.recv().await,
        Some(Inbound::Message(Message::Response { .. }))
    ));
    assert!(!direct.ready(), "requests wait behind the handshake");
    link.outbound
        .send(Message::Notification {
            method: "notifications/initialized".into(),
            params: None,
        })
        .await
        .unwrap();
    // Bounded: a `ready` that never turns fails the test instead of hanging it.
    tokio::time::timeout(Duration::from_secs(10), async {
        while !direct.ready() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("ready once initialized is sent");
    (link, direct)
}

#[tokio::test]
async fn a_json_answer_to_a_direct_request_comes_back_to_its_caller() {
    let (mut link, direct) = ready_link(false).await;
    let outcome = direct.request(call(7, "json"), 7).await;
    let Posted::Answered(outcome) = outcome else {
        panic!("answered on the POST: {outcome:?}");
    };
    assert!(
        matches!(&outcome, Ok(Payload::Text(_))),
        "kept as the server's text: {outcome:?}"
    );
    assert_eq!(outcome.map(Payload::into_value), Ok(json!({"content": []})));
    assert!(
        link.inbound.try_recv().is_err(),
        "nothing else is handed up"
    );
}

#[tokio::test]
async fn any_other_json_answer_is_handed_up_to_the_session() {
    let (mut link, direct) = ready_link(false).await;
    assert!(matches!(
        direct.request(call(7, "other"), 7).await,
        Posted::Elsewhere
    ));
    match link.inbound.recv().await {
        Some(Inbound::Answer(id, _)) => assert_eq!(id, Id::Number(999)),
        other => panic!("expected the stray answer handed up, got {other:?}"),
    }
}

#[tokio::test]
async fn a_streamed_answer_reaches_the_session_on_its_requests_stream() {
    let (mut link, direct) = ready_link(false).await;
    assert!(matches!(
        direct.request(call(7, "sse"), 7).await,
        Posted::Elsewhere
    ));
    match link.inbound.recv().await {
        Some(Inbound::OnStream(id, Message::Notification { method, .. })) => {
            assert_eq!(
                (id, method.as_str()),
                (Id::Number(7), "notifications/progress")
            );
        }
        other => panic!("expected the notification on call 7's stream, got {other:?}"),
    }
    match link.inbound.recv().await {
        Some(Inbound::Answer(answered, Ok(Payload::Text(result)))) => {
            assert_eq!(answered, Id::Number(7));
            assert_eq!(result.get(), r#"{"content":[]}"#, "as the server sent it");
        }
        other => panic!("expected call 7's answer, kept as text, got {other:?}"),
    }
}

/// Whatever the standalone stream handed up for a call is dispatched
/// before the call's own answer: the answer goes the same way.
#[tokio::test]
async fn with_a_standalone_stream_open_a_json_answer_goes_through_the_session() {
    let (mut link, direct) = ready_link(true).await;
    assert!(matches!(
        direct.request(call(7, "json"), 7).await,
        Posted::Elsewhere
    ));
    match link.inbound.recv().await {
        Some(Inbound::Answer(id, Ok(Payload::Text(result)))) => {
            assert_eq!(id, Id::Number(7));
            assert_eq!(result.get(), r#"{"content":[]}"#, "as the server sent it");
        }
        other => panic!("expected call 7's answer handed up, got {other:?}"),
    }
}

/// The session keeps a `Direct` (and so a sender of `inbound`) for as
/// long as it lives: closing the link must still tell its dispatcher,
/// or a call in flight would wait for its timeout.
#[tokio::test]
async fn closing_the_link_tells_the_session_while_a_call_waits() {
    let (mut link, direct) = ready_link(false).await;
    assert!(matches!(
        direct.request(call(7, "hang"), 7).await,
        Posted::Elsewhere
    ));
    let _ = link.shutdown.send(());
    let closed = tokio::time::timeout(Duration::from_secs(10), link.inbound.recv())
        .await
        .expect("the link hands up its end without waiting for the call");
    match closed {
        Some(Inbound::Closed(why)) => assert!(why.contains("closed"), "{why}"),
        other => panic!("expected Closed, got {other:?}"),
    }
    drop(direct);
}

#[test]
fn a_cached_header_value_follows_its_text() {
    let cached = CachedValue::default();
    assert_eq!(cached.of(None), None);
    assert_eq!(
        cached.of(Some("abc")),
        Some(HeaderValue::from_static("abc"))
    );
    assert_eq!(
        cached.of(Some("abc")),
        Some(HeaderValue::from_static("abc"))
    );
    assert_eq!(
        cached.of(Some("def")),
        Some(HeaderValue::from_static("def"))
    );
    // A session id no header can carry is left off, as before.
    assert_eq!(cached.of(Some("bad\nid")), None);
    assert_eq!(
        cached.of(Some("def")),
        Some(HeaderValue::from_static("def"))
    );
}

/// A 404 for a request carrying the session id: the session is gone (its
/// dispatcher is told) and the request was never processed, so its caller
/// may send it on another session (spec 2025-06-18 transports.mdx
/// "Session Management").
#[tokio::test]
async fn a_404_for_a_request_says_it_was_not_sent_and_ends_the_session() {
    let (mut link, direct) = ready_link(false).await;
    assert!(!direct.is_gone());
    assert!(matches!(
        direct.request(call(7, "gone"), 7).await,
        Posted::NotSent
    ));
    // Gone at once, before anything reads `inbound`: no lease takes the
    // session between the 404 and its dispatcher hearing of it.
    assert!(direct.is_gone());
    match link.inbound.recv().await {
        Some(Inbound::Closed(why)) => assert!(why.contains("404"), "{why}"),
        other => panic!("expected Closed, got {other:?}"),
    }
}

/// A server that ended the session ends its standalone stream and answers
/// the GET that reopens it 404: the session is lost then, not when a call
/// next meets the 404.
#[tokio::test]
async fn a_404_for_the_reopened_standalone_stream_ends_the_session() {
    let (mut link, _direct) = ready_link_to(server_with(true, true).await).await;
    let closed = tokio::time::timeout(Duration::from_secs(10), link.inbound.recv())
        .await
        .expect("the link hands up the end of the session");
    match closed {
        Some(Inbound::Closed(why)) => assert!(why.contains("404"), "{why}"),
        other => panic!("expected Closed, got {other:?}"),
    }
}
