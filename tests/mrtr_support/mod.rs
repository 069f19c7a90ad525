//! What the `mrtr_*.rs` tests share beyond tests/common: a gateway config in
//! front of `tests/fixtures/mrtr_server.py` (`Fixture::cfg`), the metrics
//! they settle on, `requestState` keys and claims, API keys, and the answers
//! a client gives. Include with `mod mrtr_support;` after `mod common;`.
#![allow(dead_code)]

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use redmark::mrtr::state::{Claims, Key, Keyring};
use serde_json::{Value, json};

use crate::common::*;

pub const PENDING: &str = "redmark_pending_operations";

/// Waits until no operation is pending and no upstream session is leased.
pub async fn settled(gw: &TestGateway) {
    gw.wait_metric(PENDING, 0.0).await;
    gw.wait_metric(&sessions("leased"), 0.0).await;
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

/// The mrtr fixture server behind route "main", logging to the fixture's log.
impl Fixture {
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
        let script = fixture_file("mrtr_server.py");
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{}\n{}\n[mrtr]\n{}\n\
             [[route]]\nname = \"main\"\npath = \"/mcp\"\n{}\n\
             [route.upstream]\ncommand = [{}, {}]\n{}\ninit_timeout = \"120s\"\n{}\n\
             [route.pool]\n{}\n",
            server.join("\n"),
            tables.join("\n"),
            mrtr.join("\n"),
            self.route.join("\n"),
            toml_path(&py),
            toml_path(&script),
            self.fx.log_env(),
            self.upstream.join("\n"),
            self.pool.join("\n"),
        )
    }
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
