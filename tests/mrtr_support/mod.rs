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

/// The claims inside a `requestState` sealed under key `id` with `secret`
/// (the state is encrypted: only a holder of the key reads it).
pub fn claims_of(state: &str, id: &str, secret: &str) -> Claims {
    keyring(id, secret)
        .unseal(state)
        .unwrap_or_else(|e| panic!("state {state}: {e}"))
}

/// The secret of key `k1` in [`Cfg::build`] unless a test configures its own keys.
pub const TEST_SECRET: &str = "cmVkbWFyay10ZXN0LXN0YXRlLWtleS0zMi1ieXRlcyE";

/// The claims inside a `requestState` sealed by a gateway of [`Cfg::build`]'s default key.
pub fn claims(state: &str) -> Claims {
    claims_of(state, "k1", TEST_SECRET)
}

/// The bytes of a `requestState` after its key id, base64url-decoded.
pub fn sealed_bytes(state: &str) -> Vec<u8> {
    let (_, blob) = state.split_once('.').expect("key id and blob");
    B64.decode(blob).expect("base64url blob")
}

/// The mrtr fixture server behind route "main", logging to the fixture's log.
impl Fixture {
    /// A config builder; `[mrtr] gather` defaults to 300 ms (and
    /// `gather_quiet` to the same) so that pushes sent back to back land in
    /// one round even on a loaded machine.
    pub fn cfg(&self) -> Cfg<'_> {
        Cfg {
            fx: self,
            script: "mrtr_server.py",
            url: None,
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
    /// The fixture server under tests/fixtures/.
    script: &'static str,
    /// A Streamable HTTP server the test started, instead of `script` over stdio.
    url: Option<String>,
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

    /// Another fixture server under tests/fixtures/ (default `mrtr_server.py`).
    pub fn script(mut self, name: &'static str) -> Self {
        self.script = name;
        self
    }

    /// A Streamable HTTP server at `url` (started by the test, which gives
    /// it the fixture's log itself) instead of a fixture script over stdio.
    pub fn url(mut self, url: &str) -> Self {
        self.url = Some(url.to_owned());
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
        let mut tables = tables;
        // States are sealed under a known key, so a test can read its claims.
        if !tables.iter().any(|t| t.contains("[[state.keys]]")) {
            tables.push(format!(
                "[[state.keys]]\nid = \"k1\"\nsecret = \"{TEST_SECRET}\"\nsign = true\n"
            ));
        }
        let mut mrtr = self.mrtr;
        let is = |l: &String, key: &str| l.split('=').next().is_some_and(|k| k.trim() == key);
        if !mrtr.iter().any(|l| is(l, "gather")) {
            mrtr.push("gather = \"300ms\"".into());
        }
        // The whole window, as a test sets it: the quiet time that ends it
        // early is tested on paused time (src/mrtr/engine_tests.rs).
        if !mrtr.iter().any(|l| is(l, "gather_quiet"))
            && let Some(g) = mrtr.iter().find(|l| is(l, "gather"))
            && let Some((_, value)) = g.split_once('=')
        {
            mrtr.push(format!("gather_quiet = {}", value.trim()));
        }
        let target = match &self.url {
            Some(url) => format!("url = {}", toml_str(url)),
            None => format!(
                "command = [{}, {}]\n{}",
                toml_path(&legacy_python()),
                toml_path(&fixture_file(self.script)),
                self.fx.log_env()
            ),
        };
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{}\n{}\n[mrtr]\n{}\n\
             [[route]]\nname = \"main\"\npath = \"/mcp\"\n{}\n\
             [route.upstream]\n{}\ninit_timeout = \"120s\"\n{}\n\
             [route.pool]\n{}\n",
            server.join("\n"),
            tables.join("\n"),
            mrtr.join("\n"),
            self.route.join("\n"),
            target,
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
