//! The client side: `Resp` (one answer, every message in it), `McpClient`
//! (2026-07-28 POSTs to one endpoint), `TestGateway` (an in-process gateway
//! on ephemeral ports, with its admin listener), `SseReader` (a stream read
//! one message at a time) and the metric samples tests wait for.

use std::collections::VecDeque;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use super::{PATIENCE, VERSION, eventually, repo};

/// `_meta` of a 2026-07-28 request with these client capabilities.
pub fn meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "redmark-tests", "version": "0"},
    })
}

/// The answer to one POST: every JSON-RPC message in it (one for JSON, all
/// events for SSE), plus status and content type.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub content_type: String,
    pub headers: reqwest::header::HeaderMap,
    pub messages: Vec<Value>,
    pub raw: String,
}

impl Resp {
    /// The final message (the response).
    pub fn last(&self) -> &Value {
        self.messages.last().unwrap_or_else(|| {
            panic!(
                "no message in response: status {} body {:?}",
                self.status, self.raw
            )
        })
    }

    pub fn result(&self) -> &Value {
        let last = self.last();
        assert!(
            last.get("result").is_some(),
            "expected a result, got {last}"
        );
        &last["result"]
    }

    pub fn error(&self) -> &Value {
        let last = self.last();
        assert!(last.get("error").is_some(), "expected an error, got {last}");
        &last["error"]
    }

    pub fn reason(&self) -> String {
        self.error()["data"]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub fn is_sse(&self) -> bool {
        self.content_type.starts_with("text/event-stream")
    }
}

fn content_type(headers: &reqwest::header::HeaderMap) -> String {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

pub async fn read_resp(resp: reqwest::Response) -> Resp {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let content_type = content_type(&headers);
    let raw = resp.text().await.unwrap_or_default();
    let messages = if content_type.starts_with("text/event-stream") {
        let mut d = redmark::sse::Decoder::new(1 << 24);
        d.feed(raw.as_bytes())
            .expect("sse")
            .into_iter()
            .filter(|e| !e.data.is_empty())
            .map(|e| serde_json::from_str(&e.data).expect("SSE event is JSON"))
            .collect()
    } else if raw.trim().is_empty() {
        Vec::new()
    } else {
        vec![serde_json::from_str(&raw).unwrap_or_else(|e| panic!("body is not JSON ({e}): {raw}"))]
    };
    Resp {
        status,
        content_type,
        headers,
        messages,
        raw,
    }
}

/// A 2026-07-28 POST of one request with the headers mirrored from the body
/// (`MCP-Protocol-Version`, `Mcp-Method`, and `Mcp-Name` from `name` or `uri`).
pub fn mcp_post(
    http: &reqwest::Client,
    url: &str,
    id: Value,
    method: &str,
    params: &Value,
) -> reqwest::RequestBuilder {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut rb = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", method);
    if let Some(name) = params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)
    {
        rb = rb.header("mcp-name", name);
    }
    rb.body(body.to_string())
}

/// A gateway whose route's upstream is `false` (a command that exits at
/// once), with `server` added to `[server]`: for tests of the front that
/// never reach an upstream.
pub async fn gateway_without_upstream(server: &str) -> TestGateway {
    TestGateway::start(&super::stdio_config(&["false"], server)).await
}

/// A JSON-RPC notification POSTed on a connection of its own (a new
/// reqwest client): the pipeline's parse step answers it 202 without
/// reaching the server.
pub async fn notify_on_new_connection(url: &str) -> Resp {
    let rb = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let resp = tokio::time::timeout(PATIENCE, rb.send())
        .await
        .expect("answered in time")
        .expect("POST");
    read_resp(resp).await
}

/// A 2026-07-28 client of one endpoint: numbered requests, each sent within
/// a bound (`patience`, 120 s unless told otherwise).
pub struct McpClient {
    pub http: reqwest::Client,
    pub url: String,
    next_id: AtomicI64,
    patience: Duration,
}

impl McpClient {
    pub fn new(url: impl Into<String>) -> McpClient {
        McpClient {
            http: reqwest::Client::new(),
            url: url.into(),
            next_id: AtomicI64::new(1),
            patience: Duration::from_secs(120),
        }
    }

    /// How long a request may take to be answered (its headers, at least).
    pub fn with_patience(mut self, patience: Duration) -> McpClient {
        self.patience = patience;
        self
    }

    pub fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// A well-formed request (headers mirrored from the body) with the next id.
    pub fn request(&self, method: &str, params: Value) -> reqwest::RequestBuilder {
        self.request_with_id(json!(self.next_id()), method, &params)
    }

    /// A well-formed request with a chosen JSON-RPC id (it matters for subscriptions).
    pub fn request_with_id(
        &self,
        id: Value,
        method: &str,
        params: &Value,
    ) -> reqwest::RequestBuilder {
        mcp_post(&self.http, &self.url, id, method, params)
    }

    /// Sends `rb`; the response is left unread (for streams).
    pub async fn send(&self, rb: reqwest::RequestBuilder) -> reqwest::Response {
        tokio::time::timeout(self.patience, rb.send())
            .await
            .unwrap_or_else(|_| panic!("no answer from {} within {:?}", self.url, self.patience))
            .expect("POST")
    }

    /// Sends a well-formed request with `_meta` for `capabilities` added to `params`.
    pub async fn rpc(&self, method: &str, mut params: Value, capabilities: Value) -> Resp {
        params
            .as_object_mut()
            .expect("params object")
            .entry("_meta")
            .or_insert_with(|| meta(capabilities));
        read_resp(self.send(self.request(method, params)).await).await
    }
}

/// An in-process gateway on ephemeral ports; a client of its `/mcp` (by `Deref`).
pub struct TestGateway {
    client: McpClient,
    pub admin: String,
    /// `http://<addr>` of the internal endpoint, with `[cluster]`.
    pub cluster: Option<String>,
    running: Option<redmark::Running>,
}

impl Deref for TestGateway {
    type Target = McpClient;

    fn deref(&self) -> &McpClient {
        &self.client
    }
}

impl TestGateway {
    pub async fn start(config_toml: &str) -> TestGateway {
        let config = redmark::config::Config::parse(config_toml, "test.toml", repo())
            .unwrap_or_else(|e| panic!("config: {e}\n{config_toml}"));
        let running = redmark::start(config).await.expect("gateway starts");
        TestGateway {
            client: McpClient::new(format!("http://{}/mcp", running.addr)),
            admin: format!("http://{}", running.admin_addr.expect("admin listener")),
            cluster: running.cluster_addr.map(|a| format!("http://{a}")),
            running: Some(running),
        }
    }

    /// A gateway whose client listener serves HTTPS (`[server.tls]` in the
    /// config), driven by `http` at `https://127.0.0.1:PORT/mcp`.
    pub async fn start_https(config_toml: &str, http: reqwest::Client) -> TestGateway {
        let mut gw = TestGateway::start(config_toml).await;
        let addr = gw.running.as_ref().expect("running").addr;
        gw.client.url = format!("https://{addr}/mcp");
        gw.client.http = http;
        gw
    }

    /// The client listener's address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.running.as_ref().expect("running").addr
    }

    pub async fn metrics(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.admin))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text")
    }

    /// The value of one sample in /metrics, e.g. `redmark_upstream_sessions{route="main",state="leased"}`.
    pub async fn metric(&self, sample: &str) -> Option<f64> {
        let text = self.metrics().await;
        text.lines().find_map(|l| {
            l.strip_prefix(sample)
                .and_then(|rest| rest.trim().parse().ok())
        })
    }

    /// Waits (bounded) until `sample` equals `want`; panics with the last value.
    pub async fn wait_metric(&self, sample: &str, want: f64) {
        eventually(&format!("{sample} to be {want}"), move || async move {
            match self.metric(sample).await {
                Some(got) if got == want => Ok(()),
                got => Err(format!("{got:?}")),
            }
        })
        .await;
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
    }
}

/// The sample of `redmark_operations_total` of route "main" for one tool (or
/// prompt, or URI) and outcome.
pub fn ops(tool: &str, outcome: &str) -> String {
    format!(r#"redmark_operations_total{{route="main",tool="{tool}",outcome="{outcome}"}}"#)
}

/// The sample of `redmark_requests_total` of route "main" for one method and outcome.
pub fn requests(method: &str, outcome: &str) -> String {
    format!(r#"redmark_requests_total{{route="main",method="{method}",outcome="{outcome}"}}"#)
}

/// The gauge of route "main"'s upstream sessions in `state` (`idle`, `leased`).
pub fn sessions(state: &str) -> String {
    format!(r#"redmark_upstream_sessions{{route="main",state="{state}"}}"#)
}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// An SSE response read incrementally, one JSON-RPC message at a time.
pub struct SseReader {
    body: ByteStream,
    decoder: redmark::sse::Decoder,
    ready: VecDeque<Value>,
}

impl SseReader {
    /// [`SseReader::new`], but a response that is not SSE fails the test
    /// with its body, which says why (an error's `data.reason`).
    pub async fn open(resp: reqwest::Response) -> Self {
        let ct = content_type(resp.headers());
        if !ct.starts_with("text/event-stream") {
            let status = resp.status();
            let body = resp.text().await.unwrap_or_default();
            panic!("expected SSE, got {ct:?} (status {status}): {body}");
        }
        Self::new(resp)
    }

    pub fn new(resp: reqwest::Response) -> Self {
        let ct = content_type(resp.headers());
        assert!(
            ct.starts_with("text/event-stream"),
            "expected SSE, got {ct:?} (status {})",
            resp.status()
        );
        Self {
            body: Box::pin(resp.bytes_stream()),
            decoder: redmark::sse::Decoder::new(1 << 24),
            ready: VecDeque::new(),
        }
    }

    /// The next message; `None` when the stream ended. Panics after `within`.
    pub async fn next(&mut self, within: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(v) = self.ready.pop_front() {
                return Some(v);
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .unwrap_or_else(|_| panic!("no SSE message within {within:?}"));
            let chunk = match chunk {
                None => return None,
                Some(c) => c.expect("SSE body"),
            };
            for ev in self.decoder.feed(&chunk).expect("SSE event size") {
                if !ev.data.is_empty() {
                    self.ready
                        .push_back(serde_json::from_str(&ev.data).expect("SSE event is JSON"));
                }
            }
        }
    }
}
