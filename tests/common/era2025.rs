//! A 2025-era client spoken by hand (no SDK): `initialize`, the session id
//! on every later request, answers POSTed as JSON-RPC responses, DELETE. For
//! the rules an SDK never breaks (no session, another principal's, an answer
//! to nothing); the SDKs themselves drive the happy paths (tests/peers/).

use serde_json::{Value, json};

use super::gateway::{Resp, SseReader, read_resp};

/// One session on one endpoint, as a 2025-era client holds it.
pub struct Session2025 {
    pub http: reqwest::Client,
    pub url: String,
    /// Set by [`Session2025::initialize`].
    pub id: Option<String>,
    /// Sent as `Authorization: Bearer` when set.
    pub key: Option<String>,
    pub version: String,
}

impl Session2025 {
    pub fn new(url: &str) -> Session2025 {
        Session2025 {
            http: reqwest::Client::new(),
            url: url.to_owned(),
            id: None,
            key: None,
            version: "2025-11-25".into(),
        }
    }

    pub fn with_key(mut self, key: &str) -> Session2025 {
        self.key = Some(key.to_owned());
        self
    }

    /// A POST of `body` with what a 2025-era client sends: its session id
    /// (once it has one) and the negotiated `MCP-Protocol-Version`.
    pub fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut rb = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(id) = &self.id {
            rb = rb
                .header("mcp-session-id", id)
                .header("mcp-protocol-version", &self.version);
        }
        if let Some(key) = &self.key {
            rb = rb.header("authorization", format!("Bearer {key}"));
        }
        rb
    }

    /// `initialize` asking for `version` with `capabilities`; keeps the session id.
    pub async fn initialize(&mut self, version: &str, capabilities: Value) -> Resp {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version,
            "capabilities": capabilities,
            "clientInfo": {"name": "redmark-tests-2025", "version": "0"},
        }});
        let resp = read_resp(self.post(&body).send().await.expect("initialize")).await;
        if let Some(id) = resp.headers.get("mcp-session-id") {
            self.id = Some(id.to_str().expect("visible ASCII").to_owned());
            self.version = resp.result()["protocolVersion"]
                .as_str()
                .unwrap_or(version)
                .to_owned();
            let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            let ack = self.post(&initialized).send().await.expect("initialized");
            assert_eq!(ack.status().as_u16(), 202);
        }
        resp
    }

    /// One request, read whole.
    pub async fn request(&self, id: Value, method: &str, params: Value) -> Resp {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        read_resp(self.post(&body).send().await.expect("request")).await
    }

    /// A call whose answer is a stream of pushes and, at the end, its response.
    pub async fn stream(&self, id: Value, method: &str, params: Value) -> SseReader {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        SseReader::open(self.post(&body).send().await.expect("request")).await
    }

    /// POSTs the answer to a pushed request; returns the HTTP status.
    pub async fn answer(&self, id: &Value, result: Value) -> u16 {
        self.status(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await
    }

    /// POSTs a notification; returns the HTTP status.
    pub async fn notify(&self, method: &str, params: Value) -> u16 {
        self.status(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    /// POSTs `body`, which gets no JSON-RPC answer; returns the HTTP status.
    async fn status(&self, body: &Value) -> u16 {
        self.post(body)
            .send()
            .await
            .expect("POST")
            .status()
            .as_u16()
    }

    /// DELETE: ends the session; returns the HTTP status.
    pub async fn delete(&self) -> u16 {
        let mut rb = self.http.delete(&self.url);
        if let Some(id) = &self.id {
            rb = rb.header("mcp-session-id", id);
        }
        if let Some(key) = &self.key {
            rb = rb.header("authorization", format!("Bearer {key}"));
        }
        rb.send().await.expect("DELETE").status().as_u16()
    }
}
