//! What the observability tests share beyond tests/common: the rooms
//! example's config as a user runs it, the caller's trace context, and an
//! OTLP trace receiver (HTTP/protobuf, or gRPC framed by hand over HTTP/2)
//! that decodes what redmark exports with the `opentelemetry-proto` messages.
#![allow(dead_code)]

pub mod leaks;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::ready;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::common::{
    Asked, McpClient, Op, PATIENCE, accepted, eventually, repo, rooms_bin, toml_str,
};

/// The client's trace: `traceparent` = `00-{CLIENT_TRACE}-{CLIENT_SPAN}-01`.
pub const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// A ticket title no span, event or log line may contain.
pub const TITLE: &str = "zebra-quokka printer fire 4417";

/// The environment that points redmark's OTLP export at `receiver`,
/// batches flushed every 100 ms.
pub fn otel_env(receiver: &Receiver) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
        ("OTEL_SERVICE_NAME", "redmark-traces-test".into()),
    ]
}

pub fn client_traceparent() -> String {
    format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01")
}

/// A client of `url` whose requests are answered within [`PATIENCE`].
pub fn client(url: String) -> McpClient {
    McpClient::new(url).with_patience(PATIENCE)
}

/// A `tools/call` of `tool` by a client that declares elicitation, with
/// request ids `{id_prefix}-a`, `{id_prefix}-b`, ...
pub fn tool_call(tool: &str, arguments: Value, id_prefix: &str) -> Op {
    Op::tool(tool, arguments)
        .caps(json!({"elicitation": {}}))
        .ids(id_prefix)
}

/// `inputResponses` accepting `content` for question `key` (which `asked` must ask).
pub fn accept(asked: &Asked, key: &str, content: Value) -> Value {
    asked.reply(key, accepted(content))
}

/// examples/rooms/redmark.toml as a user runs it, written to `dir` with its
/// two relative paths (the rooms binary, policies/rooms.toml) made absolute
/// so it works wherever the target directory is; `extra` is appended.
pub fn rooms_example_config(dir: &Path, extra: &str) -> PathBuf {
    let example = repo().join("examples/rooms/redmark.toml");
    let text = std::fs::read_to_string(&example).expect("examples/rooms/redmark.toml");
    let policy = repo().join("policies/rooms.toml");
    let mut out = text.clone();
    for (from, to) in [
        ("\"../../target/debug/examples/rooms\"", rooms_bin()),
        ("\"../../policies/rooms.toml\"", policy),
        (
            "\"../../target/rooms-audit.jsonl\"",
            dir.join("audit.jsonl"),
        ),
        (
            "\"../../target/rooms-state.json\"",
            dir.join("rooms-state.json"),
        ),
    ] {
        assert!(
            out.contains(from),
            "{} no longer has {from}",
            example.display()
        );
        out = out.replace(from, &toml_str(to.to_str().unwrap()));
    }
    out.push('\n');
    out.push_str(extra);
    let path = dir.join("redmark.toml");
    std::fs::write(&path, out).unwrap();
    path
}

// ---------------------------------------------------------------- OTLP ----

/// One exported span, flattened: ids in lowercase hex, attributes as JSON.
#[derive(Debug, Clone)]
pub struct SpanRec {
    pub service: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a span without a parent.
    pub parent: String,
    pub name: String,
    pub kind: i32,
    /// `opentelemetry.proto.trace.v1.Status.StatusCode`: 0 unset, 1 ok, 2 error.
    pub status: i32,
    pub attrs: BTreeMap<String, Value>,
    pub events: Vec<(String, BTreeMap<String, Value>)>,
}

pub const KIND_SERVER: i32 = 2;
pub const KIND_CLIENT: i32 = 3;
pub const STATUS_ERROR: i32 = 2;

impl SpanRec {
    pub fn attr(&self, key: &str) -> &Value {
        self.attrs
            .get(key)
            .unwrap_or_else(|| panic!("span {:?} has no {key}: {:#?}", self.name, self.attrs))
    }

    pub fn str(&self, key: &str) -> &str {
        self.attr(key)
            .as_str()
            .unwrap_or_else(|| panic!("{key} of {:?} is not a string", self.name))
    }

    /// `redmark.round` and the like: exported as OTLP int values.
    pub fn int(&self, key: &str) -> i64 {
        let v = self.attr(key);
        v.as_i64()
            .unwrap_or_else(|| panic!("{key} of {:?} is not an int attribute: {v}", self.name))
    }

    /// Its name, attributes and event attributes as `(where, key, value)`.
    pub fn all_values(&self) -> Vec<(String, String, Value)> {
        let own = [("span.name".to_owned(), json!(self.name))];
        let own = own.into_iter().chain(self.attrs.clone());
        let mut out: Vec<_> = own.map(|(k, v)| (self.name.clone(), k, v)).collect();
        for (event, attrs) in &self.events {
            let place = format!("{} / event {event:?}", self.name);
            let all = [("event.name".to_owned(), json!(event))];
            let all = all.into_iter().chain(attrs.clone());
            out.extend(all.map(|(k, v)| (place.clone(), k, v)));
        }
        out
    }
}

fn any_to_json(v: Option<&AnyValue>) -> Value {
    use any_value::Value as V;
    match v.and_then(|a| a.value.as_ref()) {
        None => Value::Null,
        Some(V::StringValue(s)) => Value::String(s.clone()),
        Some(V::BoolValue(b)) => Value::Bool(*b),
        Some(V::IntValue(i)) => json!(i),
        Some(V::DoubleValue(d)) => json!(d),
        Some(V::BytesValue(b)) => Value::String(hex::encode(b)),
        Some(V::ArrayValue(a)) => a.values.iter().map(|x| any_to_json(Some(x))).collect(),
        Some(V::KvlistValue(kv)) => Value::Object(kv_map(&kv.values).into_iter().collect()),
        #[allow(unreachable_patterns)]
        Some(_) => Value::Null,
    }
}

fn kv_map(kvs: &[KeyValue]) -> BTreeMap<String, Value> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), any_to_json(kv.value.as_ref())))
        .collect()
}

#[derive(Default)]
struct Store {
    requests: Vec<ExportTraceServiceRequest>,
    /// `"{path} {content-type}"` of every export call.
    calls: Vec<String>,
}

/// An OTLP trace receiver on 127.0.0.1:<ephemeral>.
pub struct Receiver {
    pub addr: SocketAddr,
    store: Arc<Mutex<Store>>,
    task: JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

impl Receiver {
    /// OTLP/HTTP (`POST /v1/traces` with a protobuf `ExportTraceServiceRequest`)
    /// or, with `grpc`, OTLP/gRPC over h2c: the unary `TraceService/Export`,
    /// framed by hand (5-byte length prefix, `grpc-status` trailer).
    pub async fn start(grpc: bool) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let store = Arc::new(Mutex::new(Store::default()));
        let shared = store.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let store = shared.clone();
                tokio::spawn(async move {
                    let io = TokioIo::new(stream);
                    if grpc {
                        let svc =
                            hyper::service::service_fn(move |req| grpc_export(req, store.clone()));
                        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .serve_connection(io, svc)
                            .await;
                    } else {
                        let svc =
                            hyper::service::service_fn(move |req| http_export(req, store.clone()));
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(io, svc)
                            .await;
                    }
                });
            }
        });
        Receiver { addr, store, task }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn calls(&self) -> Vec<String> {
        self.store.lock().unwrap().calls.clone()
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<SpanRec> {
        let store = self.store.lock().unwrap();
        let mut out = Vec::new();
        for req in &store.requests {
            for rs in &req.resource_spans {
                let resource = rs
                    .resource
                    .as_ref()
                    .map(|r| kv_map(&r.attributes))
                    .unwrap_or_default();
                let service = resource
                    .get("service.name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                for ss in &rs.scope_spans {
                    for s in &ss.spans {
                        out.push(SpanRec {
                            service: service.clone(),
                            trace_id: hex::encode(&s.trace_id),
                            span_id: hex::encode(&s.span_id),
                            parent: hex::encode(&s.parent_span_id),
                            name: s.name.clone(),
                            kind: s.kind,
                            status: s.status.as_ref().map_or(0, |st| st.code),
                            attrs: kv_map(&s.attributes),
                            events: s
                                .events
                                .iter()
                                .map(|e| (e.name.clone(), kv_map(&e.attributes)))
                                .collect(),
                        });
                    }
                }
            }
        }
        out
    }

    /// Waits (bounded) until `done` holds for the spans received.
    pub async fn wait_for(&self, what: &str, done: impl Fn(&[SpanRec]) -> bool) -> Vec<SpanRec> {
        eventually(what, || {
            let spans = self.spans();
            ready(if done(&spans) {
                Ok(spans)
            } else {
                let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
                Err(format!("received {names:?} via {:?}", self.calls()))
            })
        })
        .await
    }
}

/// An export call: `"{path} {content-type}"`, whether it is a POST to
/// `path`, and its whole body.
async fn read_call(req: Request<Incoming>, path: &str) -> (String, bool, Bytes) {
    let ct = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let call = format!("{} {ct}", req.uri().path());
    let ok = req.method() == Method::POST && req.uri().path() == path;
    let body = req
        .into_body()
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes);
    (call, ok, body.unwrap_or_default())
}

fn record(store: &Mutex<Store>, call: &str, request: ExportTraceServiceRequest) {
    let mut s = store.lock().unwrap();
    s.calls.push(call.to_owned());
    s.requests.push(request);
}

async fn http_export(
    req: Request<Incoming>,
    store: Arc<Mutex<Store>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (call, ok, body) = read_call(req, "/v1/traces").await;
    let status = match ExportTraceServiceRequest::decode(body) {
        Ok(r) if ok => {
            record(&store, &call, r);
            StatusCode::OK
        }
        _ => StatusCode::BAD_REQUEST,
    };
    let mut resp = Response::new(Full::new(Bytes::from(
        ExportTraceServiceResponse::default().encode_to_vec(),
    )));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert("content-type", "application/x-protobuf".parse().unwrap());
    Ok(resp)
}

type GrpcBody =
    StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

async fn grpc_export(
    req: Request<Incoming>,
    store: Arc<Mutex<Store>>,
) -> Result<Response<GrpcBody>, Infallible> {
    let (call, right_path, body) = read_call(req, GRPC_PATH).await;
    // Length-prefixed messages: 1 byte compressed flag, 4 bytes big-endian length.
    let mut rest = &body[..];
    let mut grpc_status = if right_path { "0" } else { "12" }; // 12: UNIMPLEMENTED
    while right_path && rest.len() >= 5 {
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        let Some(msg) = rest.get(5..5 + len).filter(|_| rest[0] == 0) else {
            grpc_status = "3"; // INVALID_ARGUMENT (truncated or compressed)
            break;
        };
        match ExportTraceServiceRequest::decode(msg) {
            Ok(r) => record(&store, &call, r),
            Err(_) => grpc_status = "3",
        }
        rest = &rest[5 + len..];
    }
    let reply = ExportTraceServiceResponse::default().encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&u32::try_from(reply.len()).unwrap().to_be_bytes());
    framed.extend_from_slice(&reply);
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", grpc_status.parse().unwrap());
    let frames = vec![
        Ok(Frame::data(Bytes::from(framed))),
        Ok(Frame::trailers(trailers)),
    ];
    let mut resp = Response::new(StreamBody::new(futures::stream::iter(frames)));
    resp.headers_mut()
        .insert("content-type", "application/grpc".parse().unwrap());
    Ok(resp)
}

/// The spans of one trace.
pub fn trace_of<'a>(spans: &'a [SpanRec], trace_id: &str) -> Vec<&'a SpanRec> {
    spans.iter().filter(|s| s.trace_id == trace_id).collect()
}

/// The operation roots (spans with `redmark.operation.id`) of calls to `tool`.
pub fn root_of<'a>(spans: &'a [SpanRec], tool: &str) -> Vec<&'a SpanRec> {
    spans
        .iter()
        .filter(|s| s.attrs.contains_key("redmark.operation.id"))
        .filter(|s| s.attrs.get("gen_ai.tool.name").and_then(Value::as_str) == Some(tool))
        .collect()
}
