//! What the `policy_*.rs` tests share beyond tests/common: a gateway in front
//! of `tests/fixtures/policy_server.py` with a policy file on disk, calls that
//! declare elicitation, the one-question `InputRequiredResult` they expect,
//! and the metrics of policy decisions.
//! Include with `mod policy_support;` after `mod common;`.
#![allow(dead_code)]

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

/// policy_server.py behind route "main", with the fixture's policy file.
impl Fixture {
    /// A fixture whose route uses a policy file with `policy` as its text.
    pub fn with_policy(policy: &str) -> Fixture {
        let fx = Fixture::new();
        fx.write_policy(policy);
        fx
    }

    /// The config: `top` goes before `[[route]]` (e.g. `[[auth.api_key]]` tables).
    pub fn config(&self, top: &str) -> String {
        let py = legacy_python();
        let script = fixture_file("policy_server.py");
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{top}\n\
             [[route]]\nname = \"main\"\npath = \"/mcp\"\npolicy = {}\n\
             [route.upstream]\ncommand = [{}, {}]\n{}\ninit_timeout = \"120s\"\n",
            toml_path(&self.policy_path()),
            toml_path(&py),
            toml_path(&script),
            self.log_env(),
        )
    }

    pub async fn gateway(&self) -> TestGateway {
        TestGateway::start(&self.config("")).await
    }
}

/// A `tools/call` of `name` declaring every elicitation mode.
pub fn tool(name: &str, arguments: Value) -> Op {
    Op::tool(name, arguments).caps(caps())
}

/// A call of the fixture's `ask` with this schema, message and tag.
pub fn ask(schema: &Value, message: &str, tag: &str) -> Op {
    tool(
        "ask",
        json!({"schema": schema.to_string(), "message": message, "tag": tag}),
    )
}

/// Asserts `r` asks exactly one question, an elicitation, and returns it.
pub fn asked(r: &Resp) -> Asked {
    let asked = input_required("tools/call", r);
    assert_eq!(asked.request()["method"], "elicitation/create", "{}", r.raw);
    asked
}

/// `inputResponses` answering `q`'s only question, which must be an elicitation.
pub fn reply(q: &Asked, answer: Value) -> Value {
    assert_eq!(q.request()["method"], "elicitation/create", "{q:?}");
    q.reply_only(answer)
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
