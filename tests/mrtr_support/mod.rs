//! Helpers shared by the `mrtr_*.rs` tests: a gateway config in front of
//! `tests/fixtures/mrtr_server.py`, its event log, an operation a test drives
//! round by round, and assertions on `InputRequiredResult`s and refusals.
//! Include with `mod mrtr_support;` after `mod common;`.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use redmark::mrtr::state::{Claims, Key, Keyring};
use serde_json::{Map, Value, json};

use crate::common::*;

pub const PENDING: &str = "redmark_pending_operations";
pub const LEASED: &str = r#"redmark_upstream_sessions{route="main",state="leased"}"#;

/// The sample of `redmark_operations_total` for one tool (or prompt, or URI) and outcome.
pub fn ops(tool: &str, outcome: &str) -> String {
    format!(r#"redmark_operations_total{{route="main",tool="{tool}",outcome="{outcome}"}}"#)
}

/// Waits until no operation is pending and no upstream session is leased.
pub async fn settled(gw: &TestGateway) {
    gw.wait_metric(PENDING, 0.0).await;
    gw.wait_metric(LEASED, 0.0).await;
}

/// Every capability an input request can need.
pub fn all_caps() -> Value {
    json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}})
}

pub fn form_caps() -> Value {
    json!({"elicitation": {"form": {}}})
}

/// A fresh random state key secret, base64url.
pub fn secret() -> String {
    redmark::mrtr::state::generate_secret()
}

/// A keyring that signs with `id` and `secret` (base64url).
pub fn keyring(id: &str, secret: &str) -> Keyring {
    let bytes = redmark::mrtr::state::decode_secret(secret).expect("secret");
    Keyring::new(Key::new(id, bytes), Vec::new())
}

/// The claims inside a `requestState` (read without verifying).
pub fn claims(state: &str) -> Claims {
    let payload = state.split('.').nth(1).expect("state has three parts");
    serde_json::from_slice(&B64.decode(payload).expect("base64url claims")).expect("claims JSON")
}

/// The hex SHA-256 of an API key, as `[[auth.api_key]]` wants it.
pub fn sha256_hex(key: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(key.as_bytes()))
}

/// `[[auth.api_key]]` tables for `(key, principal)` pairs.
pub fn api_keys(keys: &[(&str, &str)]) -> String {
    keys.iter()
        .map(|(key, principal)| {
            format!(
                "[[auth.api_key]]\nsha256 = \"{}\"\nprincipal = \"{principal}\"\n",
                sha256_hex(key)
            )
        })
        .collect()
}

/// The fixture server behind route "main", logging to a private file.
pub struct Fixture {
    dir: tempfile::TempDir,
    pub log: PathBuf,
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("fixture.jsonl");
        Self { dir, log }
    }

    /// A path in this fixture's private directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a policy file and returns the `policy = ...` line for `route`.
    pub fn policy(&self, text: &str) -> String {
        let path = self.path("policy.toml");
        std::fs::write(&path, text).expect("write policy");
        format!("policy = {}", toml_str(path.to_str().unwrap()))
    }

    /// A config builder; `[mrtr] gather` defaults to 300 ms so that pushes
    /// sent back to back land in one round even on a loaded machine.
    pub fn cfg(&self) -> Cfg<'_> {
        Cfg {
            fx: self,
            top: Vec::new(),
            mrtr: Vec::new(),
            route: Vec::new(),
            upstream: Vec::new(),
            pool: Vec::new(),
        }
    }

    pub async fn gateway(&self) -> TestGateway {
        TestGateway::start(&self.cfg().build()).await
    }

    /// Every complete line of the log so far.
    pub fn events(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Events `event` of one call (`tag`).
    pub fn tagged(&self, event: &str, tag: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["event"] == event && e["tag"] == tag)
            .collect()
    }

    /// Waits (bounded, 15 s) for an event matching `pred` and returns it.
    pub async fn wait_event(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..600 {
            if let Some(e) = self.events().into_iter().find(|e| pred(e)) {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the fixture never logged {what}; log: {:?}", self.events());
    }

    /// Waits for the answer the server received in call `tag` (the first one).
    pub async fn answer(&self, tag: &str) -> Value {
        self.wait_event(&format!("an answer for {tag}"), |e| {
            e["event"] == "answer" && e["tag"] == tag
        })
        .await
    }
}

pub struct Cfg<'a> {
    fx: &'a Fixture,
    top: Vec<String>,
    mrtr: Vec<String>,
    route: Vec<String>,
    upstream: Vec<String>,
    pool: Vec<String>,
}

impl Cfg<'_> {
    /// Keys of `[server]` (before any table) or whole tables (`[[state.keys]]`, `[auth]`).
    pub fn top(mut self, text: &str) -> Self {
        self.top.push(text.to_owned());
        self
    }

    /// A key of `[mrtr]`.
    pub fn mrtr(mut self, line: &str) -> Self {
        self.mrtr.push(line.to_owned());
        self
    }

    /// A key of the `[[route]]` table.
    pub fn route(mut self, line: &str) -> Self {
        self.route.push(line.to_owned());
        self
    }

    /// A key of `[route.upstream]`.
    pub fn upstream(mut self, line: &str) -> Self {
        self.upstream.push(line.to_owned());
        self
    }

    /// A key of `[route.pool]`.
    pub fn pool(mut self, line: &str) -> Self {
        self.pool.push(line.to_owned());
        self
    }

    pub fn build(self) -> String {
        let (server, tables): (Vec<String>, Vec<String>) = self
            .top
            .into_iter()
            .partition(|t| !t.trim_start().starts_with('['));
        let mut mrtr = self.mrtr;
        if !mrtr.iter().any(|l| l.trim_start().starts_with("gather")) {
            mrtr.push("gather = \"300ms\"".into());
        }
        let py = legacy_python();
        let script = repo().join("tests/fixtures/mrtr_server.py");
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{}\n{}\n[mrtr]\n{}\n\
             [[route]]\nname = \"main\"\npath = \"/mcp\"\n{}\n\
             [route.upstream]\ncommand = [{}, {}]\nenv = {{ FIXTURE_LOG = {} }}\ninit_timeout = \"120s\"\n{}\n\
             [route.pool]\n{}\n",
            server.join("\n"),
            tables.join("\n"),
            mrtr.join("\n"),
            self.route.join("\n"),
            toml_str(py.to_str().unwrap()),
            toml_str(script.to_str().unwrap()),
            toml_str(self.fx.log.to_str().unwrap()),
            self.upstream.join("\n"),
            self.pool.join("\n"),
        )
    }
}

/// One logical operation as the client sends it: the method, its params
/// (without `_meta`), the capabilities it declares and the API key it uses.
#[derive(Debug, Clone)]
pub struct Op {
    pub method: &'static str,
    pub params: Value,
    pub caps: Value,
    pub bearer: Option<String>,
    /// Extra `_meta` keys (`progressToken`, `io.modelcontextprotocol/logLevel`).
    pub meta: Value,
}

impl Op {
    pub fn tool(name: &str, arguments: Value) -> Op {
        Op::new("tools/call", json!({"name": name, "arguments": arguments}))
    }

    pub fn prompt(name: &str, arguments: Value) -> Op {
        Op::new("prompts/get", json!({"name": name, "arguments": arguments}))
    }

    pub fn resource(uri: &str) -> Op {
        Op::new("resources/read", json!({"uri": uri}))
    }

    fn new(method: &'static str, params: Value) -> Op {
        Op {
            method,
            params,
            caps: all_caps(),
            bearer: None,
            meta: json!({}),
        }
    }

    pub fn caps(mut self, caps: Value) -> Op {
        self.caps = caps;
        self
    }

    pub fn key(mut self, key: &str) -> Op {
        self.bearer = Some(key.to_owned());
        self
    }

    pub fn meta(mut self, extra: Value) -> Op {
        self.meta = extra;
        self
    }

    /// The params the request digest is computed over.
    pub fn params_map(&self) -> Map<String, Value> {
        self.params.as_object().expect("params object").clone()
    }

    /// Sends the request and returns the response unread (for streams).
    pub async fn open(&self, gw: &TestGateway, extra: Value) -> reqwest::Response {
        let mut params = self.params_map();
        for (k, v) in extra.as_object().expect("extra params object") {
            params.insert(k.clone(), v.clone());
        }
        let mut m = meta(self.caps.clone());
        for (k, v) in self.meta.as_object().expect("meta object") {
            m[k] = v.clone();
        }
        params.insert("_meta".into(), m);
        let mut rb = gw.request(self.method, Value::Object(params));
        if let Some(key) = &self.bearer {
            rb = rb.header("authorization", format!("Bearer {key}"));
        }
        rb.send().await.expect("POST")
    }

    /// Sends the request with `extra` params (`inputResponses`, `requestState`) added.
    pub async fn send(&self, gw: &TestGateway, extra: Value) -> Resp {
        read_resp(self.open(gw, extra).await).await
    }

    /// The first request: no `requestState`.
    pub async fn start(&self, gw: &TestGateway) -> Resp {
        self.send(gw, json!({})).await
    }

    /// A retry carrying `responses` and `state`.
    pub async fn retry(&self, gw: &TestGateway, state: &str, responses: Value) -> Resp {
        self.send(
            gw,
            json!({"inputResponses": responses, "requestState": state}),
        )
        .await
    }
}

/// The first JSON-RPC message of an SSE response (bounded, 15 s); the rest is left unread.
pub async fn first_event(resp: &mut reqwest::Response) -> Value {
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        ct.starts_with("text/event-stream"),
        "expected SSE, got {ct:?}"
    );
    let mut decoder = redmark::sse::Decoder::new(1 << 24);
    let read = async {
        while let Some(chunk) = resp.chunk().await.expect("SSE body") {
            let events = decoder.feed(&chunk).expect("SSE event size");
            if let Some(ev) = events.into_iter().find(|e| !e.data.is_empty()) {
                return serde_json::from_str(&ev.data).expect("SSE event is JSON");
            }
        }
        panic!("the stream ended before its first message");
    };
    tokio::time::timeout(Duration::from_secs(15), read)
        .await
        .expect("a first SSE message within 15 s")
}

/// An `InputRequiredResult`, checked.
#[derive(Debug, Clone)]
pub struct Asked {
    pub requests: Map<String, Value>,
    pub state: String,
}

impl Asked {
    pub fn keys(&self) -> Vec<&str> {
        let mut k: Vec<&str> = self.requests.keys().map(String::as_str).collect();
        k.sort_unstable();
        k
    }

    /// The key whose request's message is `message`.
    pub fn key_of(&self, message: &str) -> String {
        self.requests
            .iter()
            .find(|(_, r)| r["params"]["message"] == message)
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| panic!("no question {message:?} in {:?}", self.requests))
    }
}

/// The `$defs` name an input request is validated against.
fn input_request_def(method: &str) -> &'static str {
    match method {
        "elicitation/create" => "ElicitRequest",
        "sampling/createMessage" => "CreateMessageRequest",
        "roots/list" => "ListRootsRequest",
        other => panic!("not an input request method: {other}"),
    }
}

/// Asserts `r` is a schema-valid `InputRequiredResult` for `method` and returns it.
pub fn input_required(method: &str, r: &Resp) -> Asked {
    assert_eq!(r.status, 200, "HTTP status; body: {}", r.raw);
    let msg = r.last();
    assert_response_schema(method, msg);
    let result = r.result();
    assert_eq!(result["resultType"], "input_required", "{msg}");
    // spec caching.mdx: interim results carry no caching hints.
    assert!(result.get("ttlMs").is_none() && result.get("cacheScope").is_none());
    let state = result["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("requestState: {msg}"));
    assert!(!state.is_empty());
    let requests = result["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("inputRequests: {msg}"))
        .clone();
    assert!(!requests.is_empty(), "{msg}");
    for (key, req) in &requests {
        let method = req["method"].as_str().unwrap_or_default();
        assert_schema(input_request_def(method), req);
        let obj = req.as_object().unwrap();
        assert!(
            !obj.contains_key("jsonrpc") && !obj.contains_key("id"),
            "{key}: {req}"
        );
        if let Some(p) = req.get("params") {
            for legacy in ["elicitationId", "task", "_meta"] {
                assert!(p.get(legacy).is_none(), "{key} carries {legacy}: {req}");
            }
        }
    }
    Asked {
        requests,
        state: state.to_owned(),
    }
}

/// Asserts `r` is a schema-valid complete result for `method` and returns it.
pub fn complete(method: &str, r: &Resp) -> Value {
    assert_eq!(r.status, 200, "HTTP status; body: {}", r.raw);
    assert_response_schema(method, r.last());
    let result = r.result().clone();
    assert_eq!(result["resultType"], "complete", "{}", r.raw);
    result
}

/// The JSON a fixture tool returned (its first text block), from a complete `tools/call`.
pub fn output(r: &Resp) -> Value {
    let result = complete("tools/call", r);
    assert_ne!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("text content: {result}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Asserts an error answer with HTTP `status`, JSON-RPC `code` and `data.reason`.
pub fn refused<'r>(r: &'r Resp, status: u16, code: i64, reason: &str) -> &'r Value {
    assert_eq!(r.status, status, "HTTP status; body: {}", r.raw);
    let msg = r.last();
    assert_schema("JSONRPCErrorResponse", msg);
    let err = r.error();
    assert_eq!(err["code"], code, "code; body: {msg}");
    assert_eq!(err["data"]["reason"], reason, "data.reason; body: {msg}");
    match code {
        -32602 => assert_schema("InvalidParamsError", err),
        -32603 => assert_schema("InternalError", err),
        -32021 => assert_schema("MissingRequiredClientCapabilityError", msg),
        _ => {}
    }
    err
}

/// A `-32602` refusal of a retry with this `data.reason`.
pub fn invalid<'r>(r: &'r Resp, reason: &str) -> &'r Value {
    refused(r, 200, -32602, reason)
}

pub fn accept(name: &str) -> Value {
    let a = json!({"action": "accept", "content": {"name": name}});
    assert_schema("ElicitResult", &a);
    a
}

pub fn decline() -> Value {
    json!({"action": "decline"})
}

pub fn cancel() -> Value {
    json!({"action": "cancel"})
}

pub fn sampling_answer(text: &str) -> Value {
    let a = json!({
        "role": "assistant",
        "content": {"type": "text", "text": text},
        "model": "test-model-1",
        "stopReason": "endTurn",
    });
    assert_schema("CreateMessageResult", &a);
    a
}

pub fn roots_answer() -> Value {
    let a = json!({"roots": [
        {"uri": "file:///work/project", "name": "Project"},
        {"uri": "file:///work/notes"},
    ]});
    assert_schema("ListRootsResult", &a);
    a
}
