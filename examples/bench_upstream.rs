//! A fast legacy MCP server (2025-11-25) for benchmarks, on hyper: what
//! redmark costs is only visible in front of an upstream that costs little.
//!
//!     bench_upstream --http PORT   # Streamable HTTP on 127.0.0.1:PORT/mcp (0: any free port)
//!     bench_upstream --stdio       # newline-delimited JSON-RPC on stdin/stdout
//!
//! Over HTTP it prints "bench-upstream listening on port N" once ready. It
//! speaks HTTP/1.1 and HTTP/2 with prior knowledge (h2c) on the same port,
//! and allows [`H2_MAX_STREAMS`] streams per HTTP/2 connection, so ten
//! thousand waiting calls fit on a few connections. The tests drive it in
//! process ([`run_http`], [`Stats`]: which HTTP versions it was spoken to,
//! over how many connections).
//!
//! Tools:
//! - `echo {message}`: answered at once (a JSON body over HTTP), text `Echo: <message>`;
//! - `ask`: pushes one `elicitation/create` on the call's own stream (an SSE
//!   answer over HTTP, related to the call), answers after the reply with the
//!   name it got;
//! - `ask2`: pushes two questions at once, answers after both replies.
//!
//! Sessions are numbered and never checked: a benchmark server keeps nothing
//! per session but what a call in flight needs.

// An example may panic on what it cannot do: it is not on a request path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

const VERSION: &str = "2025-11-25";
const NAME: &str =
    r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#;

/// Streams one HTTP/2 connection may carry at once (hyper's default is 200).
pub const H2_MAX_STREAMS: u32 = 20_000;

/// What the HTTP side has seen: connections accepted, requests per version.
#[derive(Default)]
pub struct Stats {
    pub connections: AtomicUsize,
    pub http1_requests: AtomicUsize,
    pub http2_requests: AtomicUsize,
}

#[derive(Default)]
struct Server {
    next: AtomicU64,
    /// Questions pushed and not yet answered: push id -> the call waiting for it.
    waiting: Mutex<HashMap<String, oneshot::Sender<Value>>>,
}

type Body = BoxBody<Bytes, Infallible>;

fn full(v: &Value) -> Body {
    Full::new(Bytes::from(v.to_string())).boxed()
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::new()).boxed());
    *r.status_mut() = status;
    r
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn text(id: &Value, text: &str) -> Value {
    result(id, json!({"content": [{"type": "text", "text": text}]}))
}

/// What a call does.
enum Answer {
    Now(Value),
    /// Push these questions, then answer with what came back.
    Ask(Vec<(String, Value)>, Value),
}

impl Server {
    fn tools() -> Value {
        let schema = json!({"type": "object"});
        json!({"tools": [
            {"name": "echo", "description": "answers at once", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}},
            {"name": "ask", "description": "asks one question", "inputSchema": schema},
            {"name": "ask2", "description": "asks two questions at once", "inputSchema": schema},
        ]})
    }

    /// A question, registered so its answer reaches the call.
    fn question(&self, n: usize) -> (String, Value, oneshot::Receiver<Value>) {
        let id = format!("q-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap().insert(id.clone(), tx);
        let push = json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": {
            "mode": "form", "message": format!("Question {n}: what is your name?"),
            "requestedSchema": serde_json::from_str::<Value>(NAME).unwrap()}});
        (id, push, rx)
    }

    /// Handles one request; `None` for notifications and responses.
    fn handle(&self, msg: &Value) -> Option<(Answer, Vec<oneshot::Receiver<Value>>)> {
        let method = msg.get("method").and_then(Value::as_str);
        let id = msg.get("id")?;
        let Some(method) = method else {
            // An answer to one of our questions.
            if let Some(key) = id.as_str()
                && let Some(tx) = self.waiting.lock().unwrap().remove(key)
            {
                let _ = tx.send(msg.clone());
            }
            return None;
        };
        let reply = match method {
            "initialize" => result(
                id,
                json!({"protocolVersion": VERSION, "capabilities": {"tools": {}},
                       "serverInfo": {"name": "bench-upstream", "version": "1"}}),
            ),
            "tools/list" => result(id, Self::tools()),
            "tools/call" => {
                let params = &msg["params"];
                match params["name"].as_str().unwrap_or_default() {
                    "echo" => {
                        let m = params["arguments"]["message"].as_str().unwrap_or_default();
                        text(id, &format!("Echo: {m}"))
                    }
                    tool @ ("ask" | "ask2") => {
                        let n = if tool == "ask" { 1 } else { 2 };
                        let (pushes, rxs): (Vec<_>, Vec<_>) = (1..=n)
                            .map(|i| {
                                let (qid, push, rx) = self.question(i);
                                ((qid, push), rx)
                            })
                            .unzip();
                        return Some((Answer::Ask(pushes, id.clone()), rxs));
                    }
                    other => {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": format!("unknown tool {other}")}})
                    }
                }
            }
            "ping" => result(id, json!({})),
            other => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("no method {other}")}})
            }
        };
        Some((Answer::Now(reply), Vec::new()))
    }
}

/// The final answer of an `ask` call, once every question came back.
async fn gathered(id: &Value, rxs: Vec<oneshot::Receiver<Value>>) -> Value {
    let mut names = Vec::new();
    for rx in rxs {
        let got = rx.await.unwrap_or(Value::Null);
        names.push(
            got["result"]["content"]["name"]
                .as_str()
                .unwrap_or("?")
                .to_owned(),
        );
    }
    text(id, &names.join(","))
}

// --- Streamable HTTP ---------------------------------------------------------

fn sse(v: &Value) -> Frame<Bytes> {
    Frame::data(Bytes::from(format!("event: message\ndata: {v}\n\n")))
}

async fn serve_http(
    server: Arc<Server>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    match *req.method() {
        Method::POST => {}
        Method::DELETE => return Ok(empty(StatusCode::OK)),
        _ => return Ok(empty(StatusCode::METHOD_NOT_ALLOWED)),
    }
    let Ok(body) = req.into_body().collect().await else {
        return Ok(empty(StatusCode::BAD_REQUEST));
    };
    let Ok(msg) = serde_json::from_slice::<Value>(&body.to_bytes()) else {
        return Ok(empty(StatusCode::BAD_REQUEST));
    };
    let Some((answer, rxs)) = server.handle(&msg) else {
        return Ok(empty(StatusCode::ACCEPTED));
    };
    match answer {
        Answer::Now(reply) => {
            let mut r = Response::new(full(&reply));
            r.headers_mut()
                .insert("content-type", "application/json".parse().unwrap());
            if msg["method"] == "initialize" {
                let sid = format!("s-{}", server.next.fetch_add(1, Ordering::Relaxed));
                r.headers_mut()
                    .insert("mcp-session-id", sid.parse().unwrap());
            }
            Ok(r)
        }
        Answer::Ask(pushes, id) => {
            let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
            tokio::spawn(async move {
                for (_, push) in &pushes {
                    if tx.send(Ok(sse(push))).await.is_err() {
                        return;
                    }
                }
                let done = gathered(&id, rxs).await;
                let _ = tx.send(Ok(sse(&done))).await;
            });
            let stream =
                futures::stream::unfold(
                    rx,
                    |mut rx| async move { rx.recv().await.map(|f| (f, rx)) },
                );
            let mut r = Response::new(BodyExt::boxed(StreamBody::new(stream)));
            r.headers_mut()
                .insert("content-type", "text/event-stream".parse().unwrap());
            r.headers_mut()
                .insert("cache-control", "no-cache".parse().unwrap());
            Ok(r)
        }
    }
}

/// Serves Streamable HTTP on `listener` until the task is dropped; `ready`
/// gets the server's [`Stats`] once it accepts.
pub async fn run_http(listener: tokio::net::TcpListener, ready: oneshot::Sender<Arc<Stats>>) {
    let server = Arc::new(Server::default());
    let stats = Arc::new(Stats::default());
    let _ = ready.send(stats.clone());
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        stats.connections.fetch_add(1, Ordering::Relaxed);
        let server = server.clone();
        let stats = stats.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let (server, stats) = (server.clone(), stats.clone());
                async move {
                    let counter = if req.version() == hyper::Version::HTTP_2 {
                        &stats.http2_requests
                    } else {
                        &stats.http1_requests
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    serve_http(server, req).await
                }
            });
            let mut builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            builder
                .http2()
                .max_concurrent_streams(H2_MAX_STREAMS)
                .max_pending_accept_reset_streams(Some(1024));
            let _ = builder
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
        });
    }
}

// --- stdio -----------------------------------------------------------------

async fn run_stdio() {
    let server = Arc::new(Server::default());
    let (out_tx, mut out_rx) = mpsc::channel::<Value>(256);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(v) = out_rx.recv().await {
            let mut line = v.to_string().into_bytes();
            line.push(b'\n');
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                return;
            }
        }
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some((answer, rxs)) = server.handle(&msg) else {
            continue;
        };
        let out = out_tx.clone();
        match answer {
            Answer::Now(reply) => {
                let _ = out.send(reply).await;
            }
            Answer::Ask(pushes, id) => {
                tokio::spawn(async move {
                    for (_, push) in pushes {
                        let _ = out.send(push).await;
                    }
                    let _ = out.send(gathered(&id, rxs).await).await;
                });
            }
        }
    }
    drop(out_tx);
    let _ = writer.await;
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Some(i) = args.iter().position(|a| a == "--http") {
        let port = args.get(i + 1).and_then(|p| p.parse().ok()).unwrap_or(0);
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .expect("bind");
            let port = listener.local_addr().unwrap().port();
            println!("bench-upstream listening on port {port}");
            let (ready, _) = oneshot::channel();
            run_http(listener, ready).await;
        });
    } else if args.iter().any(|a| a == "--stdio") {
        rt.block_on(run_stdio());
    } else {
        eprintln!("usage: bench_upstream --http PORT | --stdio");
        std::process::exit(2);
    }
}
