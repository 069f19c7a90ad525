//! One logical operation as a 2026-07-28 client drives it through its rounds
//! (call, `input_required`, retry with `requestState` and `inputResponses`,
//! ..., complete), and the checks of what each round answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use serde_json::{Map, Value, json};

use super::{McpClient, Resp, assert_response_schema, assert_schema, meta, read_resp};

/// Every capability an input request can need.
pub fn all_caps() -> Value {
    json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}})
}

/// One logical operation as the client sends it: the method, its params
/// (without `_meta`), the capabilities it declares, the API key it uses, and
/// extra `_meta` entries and HTTP headers on every request.
#[derive(Debug, Clone)]
pub struct Op {
    pub method: &'static str,
    pub params: Value,
    pub caps: Value,
    pub bearer: Option<String>,
    /// Extra `_meta` keys (`progressToken`, `io.modelcontextprotocol/logLevel`, `traceparent`).
    pub meta: Value,
    pub headers: Vec<(String, String)>,
    ids: Option<Ids>,
}

/// Request ids `{prefix}-a`, `{prefix}-b`, ... in the order sent.
#[derive(Debug, Clone)]
struct Ids {
    prefix: String,
    sent: Arc<AtomicU8>,
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

    /// An operation that declares [`all_caps`].
    fn new(method: &'static str, params: Value) -> Op {
        Op {
            method,
            params,
            caps: all_caps(),
            bearer: None,
            meta: json!({}),
            headers: Vec::new(),
            ids: None,
        }
    }

    pub fn caps(mut self, caps: Value) -> Op {
        self.caps = caps;
        self
    }

    /// Sends `Authorization: Bearer {key}`.
    pub fn key(mut self, key: &str) -> Op {
        self.bearer = Some(key.to_owned());
        self
    }

    pub fn meta(mut self, extra: Value) -> Op {
        self.meta = extra;
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Op {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Request ids `{prefix}-a`, `{prefix}-b`, ... (letters, no digits to
    /// mistake for answers) instead of the client's numbers.
    pub fn ids(mut self, prefix: &str) -> Op {
        self.ids = Some(Ids {
            prefix: prefix.to_owned(),
            sent: Arc::new(AtomicU8::new(0)),
        });
        self
    }

    fn id(&self, ep: &McpClient) -> Value {
        match &self.ids {
            None => json!(ep.next_id()),
            Some(ids) => {
                let n = ids.sent.fetch_add(1, Ordering::Relaxed);
                json!(format!("{}-{}", ids.prefix, char::from(b'a' + n)))
            }
        }
    }

    /// Sends the request with `extra` params added and returns the response unread (for streams).
    pub async fn open(&self, ep: &McpClient, extra: Value) -> reqwest::Response {
        let mut params = self.params.as_object().expect("params object").clone();
        for (k, v) in extra.as_object().expect("extra params object") {
            params.insert(k.clone(), v.clone());
        }
        let mut m = meta(self.caps.clone());
        for (k, v) in self.meta.as_object().expect("meta object") {
            m[k] = v.clone();
        }
        params.insert("_meta".into(), m);
        let mut rb = ep.request_with_id(self.id(ep), self.method, &Value::Object(params));
        if let Some(key) = &self.bearer {
            rb = rb.header("authorization", format!("Bearer {key}"));
        }
        for (k, v) in &self.headers {
            rb = rb.header(k, v);
        }
        ep.send(rb).await
    }

    /// Sends the request with `extra` params (`inputResponses`, `requestState`) added.
    pub async fn send(&self, ep: &McpClient, extra: Value) -> Resp {
        read_resp(self.open(ep, extra).await).await
    }

    /// The first request: no `requestState`.
    pub async fn start(&self, ep: &McpClient) -> Resp {
        self.send(ep, json!({})).await
    }

    /// A retry carrying `responses` and `state`.
    pub async fn retry(&self, ep: &McpClient, state: &str, responses: Value) -> Resp {
        self.send(
            ep,
            json!({"inputResponses": responses, "requestState": state}),
        )
        .await
    }

    /// A retry answering the only question of `asked` with `answer`.
    pub async fn answer(&self, ep: &McpClient, asked: &Asked, answer: Value) -> Resp {
        self.retry(ep, &asked.state, asked.reply_only(answer)).await
    }

    /// Walks the operation: the first request, then `rounds` retries. Before
    /// each retry the latest response must be an `InputRequiredResult`
    /// (checked by [`input_required`]); `reply(round, &asked)` gives that
    /// retry's `inputResponses` (round 1 is the first retry) and may assert on
    /// the question. Returns every response, the first one included.
    pub async fn walk(
        &self,
        ep: &McpClient,
        rounds: usize,
        reply: impl FnMut(usize, &Asked) -> Value,
    ) -> Vec<Resp> {
        let first = self.start(ep).await;
        self.walk_on(ep, first, rounds, reply).await
    }

    /// [`Op::walk`] from a first response the test already has.
    pub async fn walk_on(
        &self,
        ep: &McpClient,
        first: Resp,
        rounds: usize,
        mut reply: impl FnMut(usize, &Asked) -> Value,
    ) -> Vec<Resp> {
        let mut out = vec![first];
        for round in 1..=rounds {
            let asked = input_required(self.method, out.last().expect("a response"));
            let responses = reply(round, &asked);
            out.push(self.retry(ep, &asked.state, responses).await);
        }
        out
    }
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

    /// The only question's key and request.
    fn only(&self) -> (&String, &Value) {
        assert_eq!(self.requests.len(), 1, "one question: {:?}", self.requests);
        self.requests.iter().next().unwrap()
    }

    /// The key of the only question.
    pub fn key(&self) -> &str {
        self.only().0
    }

    /// The only question's request.
    pub fn request(&self) -> &Value {
        self.only().1
    }

    /// The only question's message.
    pub fn message(&self) -> &str {
        self.request()["params"]["message"]
            .as_str()
            .unwrap_or_default()
    }

    /// `inputResponses` answering question `key` (which must have been asked).
    pub fn reply(&self, key: &str, answer: Value) -> Value {
        assert!(
            self.requests.contains_key(key),
            "no {key} in {:?}",
            self.requests
        );
        json!({key: answer})
    }

    /// `inputResponses` answering the only question.
    pub fn reply_only(&self, answer: Value) -> Value {
        json!({self.key(): answer})
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

/// The JSON a fixture tool returned (its first text block), from a complete,
/// successful `tools/call`.
pub fn output(r: &Resp) -> Value {
    let result = complete("tools/call", r);
    assert_ne!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("text content: {result}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// An accepting answer with `content`.
pub fn accepted(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}
