//! Helpers shared by the `policy_*.rs` tests: a gateway in front of
//! `tests/fixtures/policy_server.py` with a policy file on disk, the log of
//! what the fixture server was answered, one call driven round by round, and
//! assertions on `InputRequiredResult`s, refusals and metrics.
//! Include with `mod policy_support;` after `mod common;`.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::common::*;

/// Every elicitation mode.
pub fn caps() -> Value {
    json!({"elicitation": {"form": {}, "url": {}}})
}

/// A flat form schema with these properties (and `required`).
pub fn schema(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

/// The sample of `redmark_policy_rejections_total` for route "main".
pub fn rejections(tool: &str, reason: &str) -> String {
    format!(r#"redmark_policy_rejections_total{{route="main",tool="{tool}",reason="{reason}"}}"#)
}

/// The sample of `redmark_policy_reloads_total` for route "main".
pub fn reloads(result: &str) -> String {
    format!(r#"redmark_policy_reloads_total{{route="main",result="{result}"}}"#)
}

/// The fixture server behind route "main", its log and its route's policy file.
pub struct Fixture {
    dir: tempfile::TempDir,
    pub log: PathBuf,
    pub policy: PathBuf,
}

impl Fixture {
    /// A fixture whose route uses a policy file with `policy` as its text.
    pub fn new(policy: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("fixture.jsonl");
        let fx = Self {
            policy: dir.path().join("policy.toml"),
            dir,
            log,
        };
        fx.write_policy(policy);
        fx
    }

    /// Replaces the policy file in one step (write aside, then rename), so the
    /// gateway never reads a half-written file.
    pub fn write_policy(&self, text: &str) {
        let aside = self.dir.path().join("policy.toml.new");
        std::fs::write(&aside, text).expect("write policy");
        std::fs::rename(&aside, &self.policy).expect("rename policy");
    }

    /// The config: `top` goes before `[[route]]` (e.g. `[[auth.api_key]]` tables).
    pub fn config(&self, top: &str) -> String {
        let py = legacy_python();
        let script = repo().join("tests/fixtures/policy_server.py");
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{top}\n\
             [[route]]\nname = \"main\"\npath = \"/mcp\"\npolicy = {}\n\
             [route.upstream]\ncommand = [{}, {}]\nenv = {{ FIXTURE_LOG = {} }}\ninit_timeout = \"120s\"\n",
            toml_str(self.policy.to_str().unwrap()),
            toml_str(py.to_str().unwrap()),
            toml_str(script.to_str().unwrap()),
            toml_str(self.log.to_str().unwrap()),
        )
    }

    pub async fn gateway(&self) -> TestGateway {
        TestGateway::start(&self.config("")).await
    }

    /// Every complete line of the log so far.
    pub fn events(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// What the server was answered in call `tag`, in order.
    pub fn answers(&self, tag: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["event"] == "answer" && e["tag"] == tag)
            .collect()
    }

    /// Every answer the server was given, in any call.
    pub fn all_answers(&self) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["event"] == "answer")
            .collect()
    }

    /// Waits (bounded, 15 s) until call `tag` has `n` answers and returns them.
    pub async fn wait_answers(&self, tag: &str, n: usize) -> Vec<Value> {
        for _ in 0..600 {
            let got = self.answers(tag);
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("call {tag} never got {n} answers; log: {:?}", self.events());
    }

    /// The only answer call `tag` got (waits for it).
    pub async fn answer(&self, tag: &str) -> Value {
        let got = self.wait_answers(tag, 1).await;
        assert_eq!(got.len(), 1, "call {tag}: {got:?}");
        got[0].clone()
    }
}

/// One `tools/call` as the client sends it, with an optional API key.
#[derive(Debug, Clone)]
pub struct Call {
    pub name: String,
    pub arguments: Value,
    pub bearer: Option<String>,
}

impl Call {
    pub fn new(name: &str, arguments: Value) -> Call {
        Call {
            name: name.to_owned(),
            arguments,
            bearer: None,
        }
    }

    /// `ask` with this schema, message and tag.
    pub fn ask(schema: &Value, message: &str, tag: &str) -> Call {
        Call::new(
            "ask",
            json!({"schema": schema.to_string(), "message": message, "tag": tag}),
        )
    }

    pub fn key(mut self, key: &str) -> Call {
        self.bearer = Some(key.to_owned());
        self
    }

    /// Sends the call with `extra` params (`inputResponses`, `requestState`).
    pub async fn send(&self, gw: &TestGateway, extra: Value) -> Resp {
        let mut params = Map::new();
        params.insert("name".into(), json!(self.name));
        params.insert("arguments".into(), self.arguments.clone());
        for (k, v) in extra.as_object().expect("extra params object") {
            params.insert(k.clone(), v.clone());
        }
        params.insert("_meta".into(), meta(caps()));
        let mut rb = gw.request("tools/call", Value::Object(params));
        if let Some(key) = &self.bearer {
            rb = rb.header("authorization", format!("Bearer {key}"));
        }
        read_resp(rb.send().await.expect("POST")).await
    }

    pub async fn start(&self, gw: &TestGateway) -> Resp {
        self.send(gw, json!({})).await
    }

    /// A retry answering the single question `asked` with `answer`.
    pub async fn answer(&self, gw: &TestGateway, asked: &Asked, answer: Value) -> Resp {
        self.send(
            gw,
            json!({"inputResponses": {asked.key.clone(): answer}, "requestState": asked.state}),
        )
        .await
    }
}

/// A schema-valid `InputRequiredResult` carrying exactly one question.
#[derive(Debug, Clone)]
pub struct Asked {
    pub key: String,
    pub request: Value,
    pub state: String,
}

impl Asked {
    pub fn message(&self) -> &str {
        self.request["params"]["message"]
            .as_str()
            .unwrap_or_default()
    }
}

/// Asserts `r` asks exactly one question and returns it.
pub fn asked(r: &Resp) -> Asked {
    assert_eq!(r.status, 200, "HTTP status; body: {}", r.raw);
    assert_response_schema("tools/call", r.last());
    let result = r.result();
    assert_eq!(result["resultType"], "input_required", "{}", r.raw);
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{}", r.raw);
    let (key, request) = requests.iter().next().unwrap();
    assert_schema("ElicitRequest", request);
    Asked {
        key: key.clone(),
        request: request.clone(),
        state: result["requestState"]
            .as_str()
            .expect("requestState")
            .to_owned(),
    }
}

/// Asserts `r` is a JSON-RPC error with `data.reason == reason` (HTTP 200) and returns `data`.
pub fn refused(r: &Resp, reason: &str) -> Value {
    assert_eq!(r.status, 200, "HTTP status; body: {}", r.raw);
    assert_response_schema("tools/call", r.last());
    assert_eq!(r.reason(), reason, "{}", r.raw);
    r.error()["data"].clone()
}

/// The JSON the fixture tool returned, from a complete, successful `tools/call`.
pub fn output(r: &Resp) -> Value {
    assert_eq!(r.status, 200, "HTTP status; body: {}", r.raw);
    assert_response_schema("tools/call", r.last());
    let result = r.result();
    assert_eq!(result["resultType"], "complete", "{}", r.raw);
    assert_ne!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("text content: {result}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// What the fixture logs for an answer it received: `action` and `content`, nothing else.
pub fn received(answer: &Value) -> Value {
    let mut got = Map::new();
    for k in ["action", "content", "error"] {
        if let Some(v) = answer.get(k) {
            got.insert(k.into(), v.clone());
        }
    }
    Value::Object(got)
}
