//! The tasks extension (`io.modelcontextprotocol/tasks`) on a route that
//! does not serve it: never half-supported. In front of a native server
//! that serves tasks (the rmcp 3.11 conformance fixture, `--native`, whose
//! `slow_compute` makes a task for a request that declared the extension,
//! with rmcp's `TaskManager`), redmark does not offer the extension in
//! `server/discover`, does not pass a client's declaration on (the server
//! runs the call synchronously, as it logged), and answers `tasks/*` as
//! methods it does not route. A server that answers with a task anyway
//! (tests/fixtures/native_hostile_server.py: misbehaviour on purpose, which
//! rmcp's own guard prevents) gets `upstream_invalid_result`, and the task
//! never reaches the client. A 2025-11-25 `task` request member reaches no
//! server either (server-everything, which would make a 2025-11-25 task of
//! it), and a 2025-era session is held to the same rules.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};
use tokio::process::Command;

/// Client capabilities that declare the extension (and another one, kept).
fn declaring() -> Value {
    json!({"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}, "com.example/other": {}}})
}

fn rmcp_config(fx: &Fixture) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n\
         [[route]]\nname = \"main\"\npath = \"/mcp\"\n\n\
         [route.upstream]\nprotocol = \"2026-07-28\"\ncommand = [{}, \"--native\"]\n{}\n",
        toml_path(&example_bin("conformance_fixture")),
        fx.log_env(),
    )
}

fn hostile_config(fx: &Fixture) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n\
         [[route]]\nname = \"main\"\npath = \"/mcp\"\n\n\
         [route.upstream]\nprotocol = \"2026-07-28\"\ncommand = [{}, {}]\n{}\n",
        toml_path(&client_python()),
        toml_path(&fixture_file("native_hostile_server.py")),
        fx.log_env(),
    )
}

/// Whether each call of `tool` the rmcp fixture logged had its request declare the extension.
fn declared_to(fx: &Fixture, tool: &str) -> Vec<bool> {
    fx.log
        .events()
        .iter()
        .filter(|e| e["event"] == "task_tool" && e["tool"] == tool)
        .map(|e| e["declared_tasks"].as_bool().unwrap())
        .collect()
}

/// The control: asked directly, the same server does make a task for a
/// declaring client, so what the gateway tests see is redmark's doing.
#[tokio::test]
async fn the_rmcp_fixture_alone_makes_a_task_for_a_declaring_client() {
    let mut cmd = Command::new(example_bin("conformance_fixture"));
    cmd.args(["--native", "--http", "127.0.0.1:0"]);
    let (_server, port) = spawn_listening(cmd, "conformance-fixture listening on").await;
    let ep = McpClient::new(format!("http://127.0.0.1:{port}/mcp"));
    let made = ep
        .rpc(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "x"}}),
            declaring(),
        )
        .await;
    assert_eq!(made.result()["resultType"], "task", "{}", made.raw);
    assert!(made.result()["taskId"].is_string(), "{}", made.raw);
    let discovered = ep.rpc("server/discover", json!({}), json!({})).await;
    assert!(
        discovered.result()["capabilities"]["extensions"][TASKS_EXTENSION].is_object(),
        "{}",
        discovered.raw
    );
}

#[tokio::test]
async fn a_route_that_serves_no_tasks_neither_offers_nor_forwards_the_extension() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&rmcp_config(&fx)).await;

    // Not offered, though the server offers it.
    let discovered = gw.rpc("server/discover", json!({}), declaring()).await;
    let caps = &complete("server/discover", &discovered)["capabilities"];
    assert!(caps.get("extensions").is_none(), "{caps}");
    assert!(caps.get("tasks").is_none(), "{caps}");
    assert!(caps["tools"].is_object(), "{caps}");

    // Not forwarded: the server heard no declaration, so it ran the call
    // synchronously and the client gets the tool's own result.
    let called = gw
        .rpc(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "kept"}}),
            declaring(),
        )
        .await;
    let out = complete("tools/call", &called);
    assert_eq!(out["content"][0]["text"], "computed kept", "{out}");
    assert!(out.get("taskId").is_none(), "{out}");
    assert_eq!(declared_to(&fx, "slow_compute"), vec![false]);

    // A tool that runs only as a task: the server's -32021 names the
    // extension, and redmark says it is the route that does not serve it.
    let refused = gw
        .rpc(
            "tools/call",
            json!({"name": "failing_job", "arguments": {}}),
            declaring(),
        )
        .await;
    let err = assert_error(&refused, 400, -32021, "missing_capability");
    assert!(
        err.error["data"]["requiredCapabilities"]["extensions"][TASKS_EXTENSION].is_object(),
        "{}",
        refused.raw
    );
    let message = err.error["message"].as_str().unwrap();
    assert!(
        message.contains("this route does not serve the tasks extension"),
        "{message}"
    );
    assert_eq!(declared_to(&fx, "failing_job"), vec![false]);

    // tasks/* are methods the route does not have, for any client.
    for method in [
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
        "tasks/result",
        "tasks/list",
    ] {
        let r = gw
            .rpc(
                method,
                json!({"taskId": "t-1", "inputResponses": {}}),
                declaring(),
            )
            .await;
        let err = assert_error(&r, 404, -32601, "method_not_found");
        let message = err.error["message"].as_str().unwrap();
        assert!(message.contains("redmark serves no tasks"), "{message}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn a_task_the_server_was_not_asked_for_is_an_invalid_answer() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&hostile_config(&fx)).await;
    // (Its discover result lacks caching hints, so no schema check here.)
    let discovered = gw.rpc("server/discover", json!({}), declaring()).await;
    let caps = &discovered.result()["capabilities"];
    assert!(caps["tools"].is_object(), "{caps}");
    assert!(caps.get("extensions").is_none(), "{caps}");

    for caps in [declaring(), json!({})] {
        let r = gw
            .rpc(
                "tools/call",
                // 2025-11-25's task augmentation, which no server gets either.
                json!({"name": "rogue_task", "arguments": {}, "task": {"ttl": 60000}}),
                caps,
            )
            .await;
        let err = assert_error(&r, 502, -32603, "upstream_invalid_result");
        let message = err.error["message"].as_str().unwrap();
        assert!(message.contains("task (resultType `task`)"), "{message}");
        assert!(!r.raw.contains("rogue-task-1"), "{}", r.raw);
    }
    let calls: Vec<Value> = fx
        .log
        .events()
        .into_iter()
        .filter(|e| e["method"] == "tools/call")
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    for call in &calls {
        assert_eq!(call["declared_tasks"], false, "{call}");
        assert_eq!(call["task_param"], false, "{call}");
    }
    assert!(
        gw.metrics().await.contains(
            r#"redmark_operations_total{route="main",tool="rogue_task",outcome="upstream_invalid_result"} 2"#
        ),
        "{}",
        gw.metrics().await
    );
    gw.stop().await;
}

/// A 2025-era session (initialize, session id) is not offered tasks and its
/// own declarations (2025-11-25 `capabilities.tasks`, 2026's `extensions`,
/// a call's `task` member) reach no server: in front of the rmcp server the
/// call runs synchronously; in front of the server that makes a task
/// anyway, the session hears the same invalid-answer error.
#[tokio::test]
async fn a_2025_era_session_neither_sees_nor_passes_on_tasks() {
    let declared = json!({"tasks": {"requests": {"tools": {"call": {}}}},
        "extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}}});
    let fx = Fixture::new();
    let gw = TestGateway::start(&rmcp_config(&fx)).await;
    let mut session = Session2025::new(&gw.url);
    let init = session.initialize("2025-11-25", declared.clone()).await;
    let caps = &init.result()["capabilities"];
    assert!(caps.get("tasks").is_none(), "{caps}");
    assert!(caps.get("extensions").is_none(), "{caps}");
    let called = session
        .request(
            json!(1),
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "old"},
                "task": {"ttl": 60000}}),
        )
        .await;
    let out = called.result();
    assert_eq!(out["content"][0]["text"], "computed old", "{out}");
    assert!(
        out.get("task").is_none() && out.get("taskId").is_none(),
        "{out}"
    );
    assert_eq!(declared_to(&fx, "slow_compute"), vec![false]);
    gw.stop().await;

    let fx = Fixture::new();
    let gw = TestGateway::start(&hostile_config(&fx)).await;
    let mut session = Session2025::new(&gw.url);
    session.initialize("2025-11-25", declared).await;
    let r = session
        .request(
            json!(2),
            "tools/call",
            json!({"name": "rogue_task", "arguments": {}}),
        )
        .await;
    assert_eq!(
        r.error()["data"]["reason"],
        "upstream_invalid_result",
        "{}",
        r.raw
    );
    assert!(!r.raw.contains("rogue-task-1"), "{}", r.raw);
    gw.stop().await;
}

/// server-everything (npm, 2025-11-25) runs `simulate-research-query` only
/// as a 2025-11-25 task (`execution.taskSupport: "required"`). A 2026
/// client's `task` member never reaches it, so no task is made that nobody
/// could poll: the server refuses the plain call with a tool error, which
/// the client gets.
#[tokio::test]
async fn a_legacy_server_that_makes_tasks_never_gets_a_task_request() {
    let gw = TestGateway::start(&everything_stdio_config("")).await;
    let r = gw
        .rpc(
            "tools/call",
            json!({"name": "simulate-research-query", "arguments": {"topic": "tides"},
                "task": {"ttl": 60000}}),
            declaring(),
        )
        .await;
    // Passed on, the member had the server make a task, and the client got
    // an empty result (2026-07-28 has no nested `task` to relay).
    let out = complete("tools/call", &r);
    assert_eq!(out["isError"], true, "{out}");
    let text = out["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("requires task augmentation"), "{text}");
    gw.stop().await;
}

/// `subscriptions/listen` with `notifications.taskIds`: the filter's
/// `taskIds` are not asked of the server (which, not hearing the client's
/// withheld declaration, would refuse the whole listen with -32021) and not
/// acknowledged, and a `notifications/tasks` the server sends anyway never
/// reaches the client; the rest of the subscription is served.
#[tokio::test]
async fn a_listen_for_task_ids_is_served_without_them() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&hostile_config(&fx)).await;
    let r = gw
        .rpc(
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true, "taskIds": ["rogue-task-1"]}}),
            declaring(),
        )
        .await;
    assert!(r.is_sse(), "{}", r.raw);
    let methods: Vec<&str> = r
        .messages
        .iter()
        .filter_map(|m| m["method"].as_str())
        .collect();
    assert_eq!(
        methods,
        vec!["notifications/subscriptions/acknowledged"],
        "{}",
        r.raw
    );
    let agreed = &r.messages[0]["params"]["notifications"];
    assert_eq!(agreed, &json!({"toolsListChanged": true}), "{}", r.raw);
    assert_eq!(r.result()["resultType"], "complete", "{}", r.raw);
    assert!(!r.raw.contains("rogue-task-1"), "{}", r.raw);
    let listen = fx
        .log
        .events()
        .into_iter()
        .find(|e| e["method"] == "subscriptions/listen")
        .unwrap();
    assert_eq!(listen["task_ids"], false, "{listen}");
    gw.stop().await;
}
