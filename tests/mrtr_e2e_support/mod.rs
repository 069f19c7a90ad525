//! Shared pieces of the end-to-end elicitation tests (`tests/mrtr_e2e.rs`,
//! `tests/mrtr_e2e_ts.rs`): a real 2026-07-28 client drives redmark, which
//! fronts a real legacy server that pushes `elicitation/create` mid-call.
//!
//! Both client drivers (tests/peers/py_client.py, tests/peers/ts_client.mjs)
//! print the same line shapes, so each server's checks serve both clients.
//! Every check asserts what the SERVER received, as its tool result reports it.
#![allow(dead_code)]

use serde_json::{Value, json};
use tokio::process::Command;

use crate::common::*;

mod checks;
pub use checks::*;

/// Which real client drives the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// PyPI `mcp` 2.3.0, `Client(url, mode="2026-07-28")`.
    Py,
    /// npm `@modelcontextprotocol/client` 2.4.0, `versionNegotiation: {mode: {pin: '2026-07-28'}}`.
    Ts,
    /// PyPI `mcp` 1.30.0 `ClientSession`: a 2025-era client (`initialize`,
    /// a session, questions pushed on the call's stream).
    Py2025,
    /// npm `@modelcontextprotocol/sdk` 1.32.2 `Client`: a 2025-era client.
    Ts2025,
}

impl Client {
    pub async fn run(self, url: &str, script: &Value) -> Output {
        let lines = match self {
            Client::Py => py_client(url, script).await,
            Client::Ts => ts_client(url, script).await,
            Client::Py2025 => py_client_2025(url, script).await,
            Client::Ts2025 => ts_client_2025(url, script).await,
        };
        if let Some(fatal) = lines.iter().find(|l| l["event"] == "fatal") {
            panic!("{self:?} client lost its connection: {fatal}\n{lines:#?}");
        }
        if self == Client::Ts {
            let connected = &lines[0];
            assert_eq!(connected["event"], "connected", "{lines:#?}");
            assert_eq!(connected["protocolVersion"], VERSION, "{connected}");
        }
        Output {
            client: self,
            lines,
        }
    }
}

/// What a client driver printed.
pub struct Output {
    pub client: Client,
    pub lines: Vec<Value>,
}

impl Output {
    /// The output line of step `i`.
    pub fn step(&self, i: usize) -> &Value {
        self.lines
            .iter()
            .find(|l| l["step"] == i)
            .unwrap_or_else(|| panic!("no output for step {i}: {:#?}", self.lines))
    }

    /// The result of step `i`, which must have succeeded.
    pub fn result(&self, i: usize) -> &Value {
        let line = self.step(i);
        assert_eq!(line["ok"], true, "step {i} failed: {line}");
        &line["result"]
    }

    /// The text blocks of step `i`'s result.
    pub fn texts(&self, i: usize) -> Vec<String> {
        self.result(i)["content"]
            .as_array()
            .unwrap_or_else(|| panic!("no content in step {i}: {}", self.step(i)))
            .iter()
            .filter_map(|c| c["text"].as_str().map(str::to_owned))
            .collect()
    }

    /// The text of step `i`'s result, which must not be a tool error.
    pub fn text(&self, i: usize) -> String {
        assert_ne!(
            self.result(i)["isError"],
            true,
            "step {i} is a tool error: {}",
            self.step(i)
        );
        self.texts(i).join("\n")
    }

    /// Step `i`'s text, parsed as the JSON a fixture reports what it received in.
    pub fn received(&self, i: usize) -> Value {
        let text = self.text(i);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("step {i}: {e}: {text}"))
    }

    /// The elicitations the client answered while step `i` ran, in order.
    pub fn asked_in(&self, i: usize) -> Vec<&Value> {
        let mut asked = Vec::new();
        for line in &self.lines {
            if line["event"] == "elicitation" {
                asked.push(line);
            } else if line.get("step").is_some() {
                if line["step"] == i {
                    return asked;
                }
                asked.clear();
            }
        }
        panic!("no output for step {i}: {:#?}", self.lines)
    }

    /// Asserts each call of `steps` was asked exactly one question, with
    /// `message`, under `key` where the client shows keys; returns them.
    pub fn one_question_each(
        &self,
        steps: impl IntoIterator<Item = usize>,
        message: &str,
        key: &str,
    ) -> Vec<&Value> {
        let mut questions = Vec::new();
        for step in steps {
            let asked = self.asked_in(step);
            assert_eq!(asked.len(), 1, "one question in step {step}: {asked:#?}");
            assert_eq!(asked[0]["message"], message, "step {step}");
            if let Some(shown) = self.key_of(asked[0]) {
                assert_eq!(shown, key, "step {step}");
            }
            questions.push(asked[0]);
        }
        questions
    }

    /// Every elicitation the client saw.
    pub fn elicitations(&self) -> Vec<&Value> {
        self.lines
            .iter()
            .filter(|l| l["event"] == "elicitation")
            .collect()
    }

    /// Tool names of a `list_tools` step.
    pub fn tool_names(&self, i: usize) -> Vec<String> {
        self.result(i)["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools in step {i}: {}", self.step(i)))
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// The input request key a question was asked under. Only the Node
    /// client shows it (the Python driver does not print it): `None` there.
    pub fn key_of<'a>(&self, asked: &'a Value) -> Option<&'a str> {
        match self.client {
            Client::Ts => Some(asked["key"].as_str().unwrap_or_else(|| {
                panic!("the Node driver prints the input request key: {asked}")
            })),
            Client::Py | Client::Py2025 | Client::Ts2025 => None,
        }
    }
}

/// The answers every three-way test gives: accept (with `content`), decline, cancel.
pub fn three_answers(content: Value) -> Value {
    json!([{"action": "accept", "content": content}, {"action": "decline"}, {"action": "cancel"}])
}

/// A script that calls `tool` three times and answers accept, decline, cancel.
pub fn three_calls(tool: &str, arguments: Value, accept: Value) -> Value {
    let call = json!({"op": "call_tool", "name": tool, "arguments": arguments});
    json!({"steps": [call, call, call], "elicitation": three_answers(accept)})
}

/// A gateway in front of one legacy server, with the server's process if it
/// runs outside the gateway (HTTP peers); the guard kills it when dropped.
pub struct Fronted {
    pub gw: TestGateway,
    /// The API key scripts send unless told otherwise (routes with `[auth]`).
    key: Option<&'static str>,
    _peer: Option<ChildGuard>,
}

impl Fronted {
    /// A gateway whose scripts run as the principal of `key` unless told
    /// otherwise, with the server process `peer` if it runs on its own.
    pub fn new(gw: TestGateway, key: Option<&'static str>, peer: Option<ChildGuard>) -> Fronted {
        Fronted {
            gw,
            key,
            _peer: peer,
        }
    }

    pub async fn stop(self) {
        self.gw.stop().await;
    }

    /// Runs `script` with `client` through the gateway (as the default principal).
    pub async fn run(&self, client: Client, script: &Value) -> Output {
        self.run_with(client, self.key, script).await
    }

    /// Runs `script` as the principal of API key `key`.
    pub async fn run_as(&self, client: Client, key: &str, script: &Value) -> Output {
        self.run_with(client, Some(key), script).await
    }

    async fn run_with(&self, client: Client, key: Option<&str>, script: &Value) -> Output {
        let mut script = script.clone();
        if let Some(key) = key {
            script["headers"] = json!({"Authorization": format!("Bearer {key}")});
        }
        client.run(&self.gw.url, &script).await
    }

    /// Waits (bounded) until the gateway counted `n` operations of `tool` that ended `outcome`.
    pub async fn counted(&self, tool: &str, outcome: &str, n: f64) {
        self.gw.wait_metric(&ops(tool, outcome), n).await;
    }

    /// Waits until three operations of `tool` ended completed, declined and cancelled.
    pub async fn counted_three_ways(&self, tool: &str) {
        for outcome in ["completed", "declined", "cancelled"] {
            self.counted(tool, outcome, 1.0).await;
        }
    }
}

/// The legacy servers of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// `@modelcontextprotocol/server-everything` 2026.8.31 over stdio.
    EverythingStdio,
    /// `@modelcontextprotocol/server-everything` 2026.8.31 over Streamable HTTP.
    EverythingHttp,
    /// examples/rooms (rmcp) over stdio, with policies/rooms.toml naming its question keys.
    Rooms,
    /// tests/fixtures/e2e_legacy_py.py (PyPI mcp 1.30.0 FastMCP, `ctx.elicit`) over stdio.
    LegacyPyStdio,
    /// The same over Streamable HTTP.
    LegacyPyHttp,
    /// tests/fixtures/e2e_legacy_ts.mjs (npm sdk 1.32.2, `elicitInput` + relatedRequestId) over stdio.
    LegacyTsStdio,
    /// The same over Streamable HTTP.
    LegacyTsHttp,
}

fn fixture(name: &str) -> String {
    fixture_file(name).to_str().unwrap().to_owned()
}

/// API key of `alice`, in the `facilities` group (policies/rooms.toml lets
/// only that group book the Atrium).
pub const ALICE: &str = "e2e-alice-key";
/// API key of `bob`, in no group.
pub const BOB: &str = "e2e-bob-key";

/// A config whose `/mcp` route fronts the rooms example with the rooms
/// policy, for the principals `alice` (facilities) and `bob`.
pub fn rooms_policy_config() -> String {
    let policy = repo().join("policies/rooms.toml");
    let bin = rooms_bin();
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n{}{}\n[[route]]\nname = \"main\"\npath = \"/mcp\"\npolicy = {}\n[route.upstream]\ncommand = [{}]\n{}",
        api_key(ALICE, "alice", &["facilities"]),
        api_key(BOB, "bob", &[]),
        toml_str(policy.to_str().unwrap()),
        toml_str(bin.to_str().unwrap()),
        rooms_state_env(),
    )
}

impl Server {
    /// Starts the server (if it runs on its own) and a gateway in front of it.
    pub async fn front(self) -> Fronted {
        self.front_with("").await
    }

    /// The same, with `extra` TOML (whole tables, e.g. `[mrtr]`) in the gateway's config.
    pub async fn front_with(self, extra: &str) -> Fronted {
        ensure_deps();
        let (config, peer) = match self {
            Server::EverythingStdio => (everything_stdio_config(""), None),
            Server::EverythingHttp => {
                let (guard, url) = everything_http().await;
                (http_config(&url, ""), Some(guard))
            }
            Server::Rooms => (rooms_policy_config(), None),
            Server::LegacyPyStdio => {
                let py = legacy_python();
                let script = fixture("e2e_legacy_py.py");
                (stdio_config(&[py.to_str().unwrap(), &script], ""), None)
            }
            Server::LegacyPyHttp => {
                let mut cmd = Command::new(legacy_python());
                cmd.arg(fixture("e2e_legacy_py.py")).args(["--http", "0"]);
                let (guard, port) = spawn_listening(cmd, "Uvicorn running on").await;
                let url = format!("http://127.0.0.1:{port}/mcp");
                (http_config(&url, ""), Some(guard))
            }
            Server::LegacyTsStdio => {
                let script = fixture("e2e_legacy_ts.mjs");
                (stdio_config(&["node", &script, "stdio"], ""), None)
            }
            Server::LegacyTsHttp => {
                let mut cmd = Command::new("node");
                cmd.arg(fixture("e2e_legacy_ts.mjs")).env("PORT", "0");
                let (guard, port) = spawn_listening(cmd, "e2e-legacy-ts listening on port").await;
                let url = format!("http://127.0.0.1:{port}/mcp");
                (http_config(&url, ""), Some(guard))
            }
        };
        // Tables go after [server]'s keys and before the first [[route]].
        let config = match config.find("\n[[route]]") {
            Some(at) if !extra.is_empty() => {
                format!("{}\n{extra}\n{}", &config[..at], &config[at..])
            }
            _ => config,
        };
        let key = (self == Server::Rooms).then_some(ALICE);
        Fronted::new(TestGateway::start(&config).await, key, peer)
    }
}
