//! Remembered answers (`remember = "30d"` on a field): through the rooms
//! example, each person's last accepted currency comes back as the
//! question's `default` (SEP-1034), another person never sees it, the audit
//! line says when a default was offered and whether it was kept, and no
//! value reaches the audit log. With `[state] store`, a value remembered on
//! one replica is offered on another (Redis, started here). `redmark check`
//! refuses `remember` on a field named as a secret, and warns of one that a
//! form could ask for as a secret (`secret_fields = "allow"`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use serde_json::{Value, json};
use tokio::process::Command;

const POLICY: &str = "[tool.create_invoice]\nkeys = [\"currency\"]\n\
[tool.create_invoice.fields.currency]\nenum = [\"EUR\", \"GBP\", \"USD\"]\nremember = \"30d\"\n";

fn config(dir: &Path, audit: &Path, top: &str) -> String {
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    let bin = rooms_bin();
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[audit]\npath = {}\n{}\n{}\n{top}\n\
         [[route]]\nname = \"main\"\npath = \"/mcp\"\npolicy = {}\n[route.upstream]\ncommand = [{}]\n{}",
        toml_path(audit),
        api_key("alice-key", "alice", &[]),
        api_key("bob-key", "bob", &[]),
        toml_path(&policy),
        toml_path(&bin),
        rooms_state_env(),
    )
}

/// One invoice: the `currency` question's schema, after answering `answer`.
async fn invoice(ep: &McpClient, key: &str, answer: &str) -> Value {
    let op = Op::tool(
        "create_invoice",
        json!({"customer": "acme", "amount": 10.0}),
    )
    .caps(json!({"elicitation": {}}))
    .key(key);
    let mut schema = Value::Null;
    let resps = op
        .walk(ep, 1, |_, q| {
            schema = q.request()["params"]["requestedSchema"]["properties"]["currency"].clone();
            q.reply(
                "currency",
                json!({"action": "accept", "content": {"currency": answer}}),
            )
        })
        .await;
    assert_eq!(
        resps[1].result()["resultType"],
        "complete",
        "{}",
        resps[1].raw
    );
    schema
}

fn audit_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn a_persons_last_answer_is_offered_to_them_alone() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let gw = TestGateway::start(&config(dir.path(), &audit, "")).await;
    assert!(
        invoice(&gw, "alice-key", "EUR")
            .await
            .get("default")
            .is_none()
    );
    assert_eq!(invoice(&gw, "alice-key", "EUR").await["default"], "EUR");
    // Another person: nothing of alice's.
    assert!(
        invoice(&gw, "bob-key", "USD")
            .await
            .get("default")
            .is_none()
    );
    // Alice changes her mind: offered EUR, not kept; GBP is next.
    assert_eq!(invoice(&gw, "alice-key", "GBP").await["default"], "EUR");
    assert_eq!(invoice(&gw, "alice-key", "GBP").await["default"], "GBP");
    assert_eq!(invoice(&gw, "bob-key", "USD").await["default"], "USD");
    gw.stop().await;

    let lines = audit_lines(&audit);
    assert_eq!(lines.len(), 6);
    let offered: Vec<(Value, Value)> = lines
        .iter()
        .map(|l| (l["default_offered"].clone(), l["default_kept"].clone()))
        .collect();
    let c = || json!(["currency"]);
    assert_eq!(
        offered,
        [
            (Value::Null, Value::Null),
            (c(), c()),
            (Value::Null, Value::Null),
            (c(), Value::Null),
            (c(), c()),
            (c(), c()),
        ]
    );
    let text = std::fs::read_to_string(&audit).unwrap();
    for value in ["EUR", "GBP", "USD"] {
        assert!(!text.contains(value), "{value} in the audit log: {text}");
    }
}

/// `redmark check` of a route whose policy file is `policy`: its exit code
/// and what it printed.
fn check(policy: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, policy).unwrap();
    let config = dir.path().join("redmark.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[[route]]\nname = \"main\"\npath = \"/mcp\"\npolicy = {}\n[route.upstream]\ncommand = [\"true\"]\n",
            toml_path(&path)
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_redmark"))
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    (out.status.code(), text)
}

#[test]
fn check_refuses_remember_on_a_secret_field() {
    let (code, err) = check(
        "[tool.login.fields.api_key]\nremember = \"30d\"\n[tool.t.fields.f]\nremember = \"forever\"\n",
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("remember is refused on a secret"), "{err}");
    assert!(err.contains("remember must be a duration"), "{err}");
}

/// A `remember` rule on a field whose name is no secret (`pin`) could still
/// meet a form asking for it as one where `secret_fields = "allow"` lets such
/// forms through (issue 47, item 8): a warning naming the rule.
#[test]
fn check_warns_of_a_remember_rule_that_could_meet_a_secret() {
    let policy = |secret_fields: &str| {
        format!(
            "[defaults]\nsecret_fields = \"{secret_fields}\"\n[tool.unlock.fields.pin]\nremember = \"30d\"\n"
        )
    };
    let (code, text) = check(&policy("allow"));
    assert_eq!(code, Some(2), "warnings only: {text}");
    assert!(
        text.contains("policy.toml:3:1: warning: tool `unlock` field `pin`: remember: secret_fields = \"allow\""),
        "{text}"
    );
    assert!(text.contains("never remembered nor offered"), "{text}");
    // With `deny` the guard refuses such a form before anyone sees it.
    let (code, text) = check(&policy("deny"));
    assert_eq!(code, Some(0), "{text}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn with_a_store_every_replica_offers_it() {
    ensure_deps();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--dir")
        .arg(dir.path());
    let _redis = spawn_until(cmd, "Ready to accept connections").await;
    // Replicas share the state key: a value sealed on one opens on another.
    let store = format!(
        "[state]\nstore = \"redis://127.0.0.1:{port}/0\"\n[[state.keys]]\nid = \"k1\"\n\
         secret = \"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\"\nsign = true\n"
    );
    let one = TestGateway::start(&config(dir.path(), &dir.path().join("a1.jsonl"), &store)).await;
    let two = TestGateway::start(&config(dir.path(), &dir.path().join("a2.jsonl"), &store)).await;
    assert!(
        invoice(&one, "alice-key", "GBP")
            .await
            .get("default")
            .is_none()
    );
    assert_eq!(invoice(&two, "alice-key", "GBP").await["default"], "GBP");
    assert!(
        invoice(&two, "bob-key", "EUR")
            .await
            .get("default")
            .is_none()
    );
    // Sealed in Redis: no value in clear.
    let keys = std::process::Command::new("redis-cli")
        .args([
            "-p",
            &port.to_string(),
            "--scan",
            "--pattern",
            "redmark:remember:*",
        ])
        .output()
        .unwrap();
    let keys = String::from_utf8(keys.stdout).unwrap();
    assert_eq!(keys.lines().count(), 2, "{keys}");
    for key in keys.lines() {
        let v = std::process::Command::new("redis-cli")
            .args(["-p", &port.to_string(), "GET", key])
            .output()
            .unwrap();
        let v = String::from_utf8(v.stdout).unwrap();
        assert!(!v.contains("GBP") && !v.contains("EUR"), "{v}");
    }
    one.stop().await;
    two.stop().await;
}
