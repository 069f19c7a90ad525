//! Remembered answers held to what is in force when they would be offered
//! (issue 47, items 6 and 8), for a legacy server's pushed questions (PyPI
//! `mcp` 1.x, tests/fixtures/policy_server.py, which asks with any schema)
//! and a native 2026-07-28 server's own (PyPI `mcp` 2.3.0: native_py_server.py
//! and remember_native_server.py):
//!
//! - after a reload narrows a field's rule, a remembered value the new rule
//!   refuses is no longer offered as the default, and one it accepts is;
//! - under `secret_fields = "allow"`, a field the guard would call secret by
//!   its schema (`format: password`, title "Password") is never remembered
//!   nor offered, though the policy's `remember` rule names it (`pin`)
//!   (`redmark check`'s warning about such a rule: tests/attention_remember.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod policy_support;

use common::*;
use policy_support::{reloads, schema};
use serde_json::{Value, json};

const ALICE: &str = "alice-key";

/// `[audit]` and alice's key, before `[[route]]`.
fn top(fx: &Fixture) -> String {
    format!(
        "[audit]\npath = {}\n{}",
        toml_path(&fx.path("audit.jsonl")),
        api_key(ALICE, "alice", &[])
    )
}

/// `default_offered` of each audit line, in order.
fn offered(fx: &Fixture) -> Vec<Value> {
    std::fs::read_to_string(fx.path("audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["default_offered"].clone())
        .collect()
}

/// One call of policy_server.py's `ask` with `form` as alice: the property
/// `field` as she was shown it, after she accepted `answer` for it. The
/// question is read without [`input_required`]'s schema check: a form
/// asking `format: password` (let through by `secret_fields = "allow"`) is
/// no valid 2026-07-28 form, which is the server's doing.
async fn ask_legacy(gw: &TestGateway, form: &Value, field: &str, answer: &str, tag: &str) -> Value {
    let call = policy_support::ask(form, "Please answer", tag).key(ALICE);
    let r = call.start(gw).await;
    let result = r.result();
    assert_eq!(result["resultType"], "input_required", "{}", r.raw);
    let (key, question) = result["inputRequests"]
        .as_object()
        .and_then(|q| q.iter().next())
        .unwrap_or_else(|| panic!("no question: {}", r.raw));
    let shown = question["params"]["requestedSchema"]["properties"][field].clone();
    let state = result["requestState"].as_str().unwrap();
    let reply = json!({ key: accepted(json!({ field: answer })) });
    complete("tools/call", &call.retry(gw, state, reply).await);
    shown
}

fn currencies(list: &str) -> String {
    format!("[tool.ask.fields.currency]\nenum = [{list}]\nremember = \"30d\"\n")
}

/// The regression of item 6: EUR, GBP, USD narrowed to EUR, GBP by a
/// reload; the server's own form still lists USD, so only the policy in
/// force can keep the remembered USD off the next form (which the policy
/// also narrows to EUR and GBP).
#[tokio::test]
async fn a_value_the_reloaded_policy_refuses_is_not_offered() {
    let fx = Fixture::with_policy(&currencies(r#""EUR", "GBP", "USD""#));
    let gw = TestGateway::start(&fx.config(&top(&fx))).await;
    let form = schema(
        json!({"currency": {"type": "string", "enum": ["EUR", "GBP", "USD"]}}),
        &["currency"],
    );
    let shown = ask_legacy(&gw, &form, "currency", "USD", "1").await;
    assert!(shown.get("default").is_none(), "{shown}");
    let shown = ask_legacy(&gw, &form, "currency", "USD", "2").await;
    assert_eq!(shown["default"], "USD", "remembered under the first policy");

    fx.write_policy(&currencies(r#""EUR", "GBP""#));
    gw.wait_metric(&reloads("ok"), 1.0).await;
    let shown = ask_legacy(&gw, &form, "currency", "EUR", "3").await;
    assert!(shown.get("default").is_none(), "USD offered: {shown}");
    // The form the person sees is narrowed by the policy in force (issue
    // 50): USD is neither offered nor a choice.
    assert_eq!(
        shown["enum"],
        json!(["EUR", "GBP"]),
        "the server's form, narrowed"
    );
    let shown = ask_legacy(&gw, &form, "currency", "EUR", "4").await;
    assert_eq!(
        shown["default"], "EUR",
        "an accepted value is still offered"
    );
    gw.stop().await;
    let c = json!(["currency"]);
    assert_eq!(offered(&fx), [Value::Null, c.clone(), Value::Null, c]);
}

const PIN_POLICY: &str =
    "[defaults]\nsecret_fields = \"allow\"\n[tool.ask.fields.pin]\nremember = \"30d\"\n";

/// The regression of item 8 for a pushed question: with `secret_fields =
/// "allow"`, the `pin` asked as a password is answered (the server gets it)
/// but not kept, and the value kept from a plain `pin` form is not offered
/// to it.
#[tokio::test]
async fn a_pushed_password_is_neither_remembered_nor_offered() {
    let fx = Fixture::with_policy(PIN_POLICY);
    let gw = TestGateway::start(&fx.config(&top(&fx))).await;
    let plain = schema(json!({"pin": {"type": "string", "title": "PIN"}}), &["pin"]);
    let password = schema(
        json!({"pin": {"type": "string", "format": "password", "title": "Password"}}),
        &["pin"],
    );
    let shown = ask_legacy(&gw, &plain, "pin", "1111", "1").await;
    assert!(shown.get("default").is_none(), "{shown}");
    // The rule works for the plain form: the test below is not vacuous.
    let shown = ask_legacy(&gw, &plain, "pin", "1111", "2").await;
    assert_eq!(shown["default"], "1111");
    let shown = ask_legacy(&gw, &password, "pin", "4321", "3").await;
    assert_eq!(shown["format"], "password", "{shown}");
    assert!(
        shown.get("default").is_none(),
        "offered to a password: {shown}"
    );
    // 4321 was not kept: the plain form still offers 1111.
    let shown = ask_legacy(&gw, &plain, "pin", "1111", "4").await;
    assert_eq!(shown["default"], "1111", "the password was remembered");
    let got = fx.log.only_answer("3").await;
    assert_eq!(got["content"], json!({"pin": "4321"}), "the server got it");
    gw.stop().await;
    let p = json!(["pin"]);
    assert_eq!(offered(&fx), [Value::Null, p.clone(), Value::Null, p]);
}

/// One route in front of remember_native_server.py, with `policy`.
fn native_config(fx: &Fixture, policy: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{}\n\
         [[route]]\nname = \"main\"\npath = \"/mcp\"\n{}\n[route.upstream]\n\
         command = [{}, {}]\nenv = {{ FIXTURE_LOG = {} }}\ninit_timeout = \"120s\"\n",
        top(fx),
        fx.policy(policy),
        toml_path(&client_python()),
        toml_path(&fixture_file("remember_native_server.py")),
        toml_path(&fx.log.path),
    )
}

/// One call of `tool` with `arguments` as alice: the property `field` of the
/// native server's question as she was shown it, after accepting `answer`.
async fn ask_native(gw: &TestGateway, tool: &str, arguments: Value, answer: Value) -> Value {
    let call = Op::tool(tool, arguments)
        .caps(json!({"elicitation": {"form": {}}}))
        .key(ALICE);
    let q = input_required("tools/call", &call.start(gw).await);
    let (field, _) = answer.as_object().unwrap().iter().next().unwrap();
    let shown = q.request()["params"]["requestedSchema"]["properties"][field].clone();
    complete("tools/call", &call.answer(gw, &q, accepted(answer)).await);
    shown
}

/// What the native server's tool received (`data`), in order.
fn received(fx: &Fixture) -> Vec<Value> {
    fx.log
        .events()
        .into_iter()
        .filter(|e| e["event"] == "ran")
        .map(|e| e["received"]["data"].clone())
        .collect()
}

/// The same for a native server's own question: `pin` asked with title
/// "Password" (the SDK renders no `format: password`).
#[tokio::test]
async fn a_native_servers_password_is_neither_remembered_nor_offered() {
    let fx = Fixture::new();
    let policy = PIN_POLICY.replace("tool.ask", "tool.unlock");
    let gw = TestGateway::start(&native_config(&fx, &policy)).await;
    let unlock = |masked: bool| json!({"door": "front", "masked": masked});
    let shown = ask_native(&gw, "unlock", unlock(false), json!({"pin": "1111"})).await;
    assert!(shown.get("default").is_none(), "{shown}");
    let shown = ask_native(&gw, "unlock", unlock(false), json!({"pin": "1111"})).await;
    assert_eq!(shown["default"], "1111");
    let shown = ask_native(&gw, "unlock", unlock(true), json!({"pin": "4321"})).await;
    assert_eq!(shown["title"], "Password", "{shown}");
    assert!(
        shown.get("default").is_none(),
        "offered to a password: {shown}"
    );
    let shown = ask_native(&gw, "unlock", unlock(false), json!({"pin": "1111"})).await;
    assert_eq!(shown["default"], "1111", "the password was remembered");
    gw.stop().await;
    let pins: Vec<Value> = ["1111", "1111", "4321", "1111"]
        .iter()
        .map(|p| json!({"pin": p}))
        .collect();
    assert_eq!(received(&fx), pins);
    let p = json!(["pin"]);
    assert_eq!(offered(&fx), [Value::Null, p.clone(), Value::Null, p]);
}

/// Item 6 for a native server's own question (native_py_server.py's `book`
/// asks `nights`): a reload lowers `maximum` below the remembered value.
#[tokio::test]
async fn a_native_value_the_reloaded_policy_refuses_is_not_offered() {
    let fx = Fixture::new();
    let nights = |max: u32| {
        format!("[tool.book.fields.nights]\nminimum = 1\nmaximum = {max}\nremember = \"30d\"\n")
    };
    let config =
        native_config(&fx, &nights(30)).replace("remember_native_server.py", "native_py_server.py");
    let gw = TestGateway::start(&config).await;
    let book = || json!({"hotel": "the Ritz"});
    let shown = ask_native(&gw, "book", book(), json!({"nights": 20})).await;
    assert!(shown.get("default").is_none(), "{shown}");
    let shown = ask_native(&gw, "book", book(), json!({"nights": 20})).await;
    assert_eq!(shown["default"], 20);

    fx.write_policy(&nights(7));
    gw.wait_metric(&reloads("ok"), 1.0).await;
    let shown = ask_native(&gw, "book", book(), json!({"nights": 5})).await;
    assert!(shown.get("default").is_none(), "20 offered: {shown}");
    let shown = ask_native(&gw, "book", book(), json!({"nights": 5})).await;
    assert_eq!(shown["default"], 5);
    gw.stop().await;
}
