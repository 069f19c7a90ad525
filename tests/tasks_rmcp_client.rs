//! The tasks extension with a real SDK client: rmcp 3.11, whose client
//! speaks the 2026-07-28 extension (`call_tool_once` hands back a
//! `CreateTaskResult`; `get_task`, `update_task`, `cancel_task`), in its
//! Discover lifecycle against redmark, declaring the extension in its
//! capabilities. Both kinds of task: a native server's own, relayed (the
//! rmcp conformance fixture, `--native`), and gateway-made ones in front of
//! a legacy server (the rooms example), each asking a person through
//! `inputRequests` and held to the policy. (The TypeScript SDK v2 client
//! knows only 2025-11-25 tasks and PyPI `mcp` 2.3 none: see
//! docs/src/guides/tasks.md.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, ProtocolVersion, TaskStatus, UpdateTaskParams,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use common::*;

/// A client that declares form elicitation and the tasks extension, and
/// answers its tasks' questions itself (through `update_task`).
#[derive(Clone, Default)]
struct Declaring;

impl ClientHandler for Declaring {
    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities = serde_json::from_value(declaring_tasks()).unwrap();
        ClientConfig::new(capabilities, Implementation::new("redmark-tasks-test", "0"))
    }
}

type Client = RunningService<RoleClient, Declaring>;

async fn connect(url: &str) -> Client {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    Declaring
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .unwrap_or_else(|e| panic!("rmcp Discover startup failed: {e:?}"))
}

/// Calls `tool` once; it must answer with a task. Returns its id.
async fn task_of(client: &Client, tool: &'static str, arguments: Value) -> String {
    let params =
        CallToolRequestParams::new(tool).with_arguments(arguments.as_object().unwrap().clone());
    match client.call_tool_once(params).await.unwrap() {
        CallToolResponse::Task(created) => {
            assert!(
                created.task.task_id.starts_with("redmark-task."),
                "{created:?}"
            );
            created.task.task_id
        }
        other => panic!("{tool} did not make a task: {other:?}"),
    }
}

/// Polls the task until `ready`; returns it as JSON.
async fn until(client: &Client, id: &str, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || async {
        let got = client.get_task(GetTaskParams::new(id)).await.unwrap();
        let task = serde_json::to_value(&got).unwrap();
        if ready(&task) {
            Ok(task)
        } else {
            Err(task.to_string())
        }
    })
    .await
}

async fn answer(client: &Client, id: &str, answers: Value) {
    let answers = serde_json::from_value(answers).unwrap();
    client
        .update_task(UpdateTaskParams::new(id, answers))
        .await
        .unwrap();
}

fn asking(key: &'static str) -> impl Fn(&Value) -> bool {
    move |t| t["status"] == "input_required" && t["inputRequests"].get(key).is_some()
}

#[tokio::test]
async fn the_rmcp_client_drives_a_relayed_native_task() {
    let fx = Fixture::new();
    let policy = "[tool.multi_input.fields.name]\npattern = \"^[a-z]+$\"\n";
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n\
         [[route]]\nname = \"main\"\npath = \"/mcp\"\n{}\n\
         [route.upstream]\nprotocol = \"2026-07-28\"\ncommand = [{}, \"--native\"]\n\n\
         [route.tasks]\n",
        fx.policy(policy),
        toml_path(&example_bin("conformance_fixture")),
    );
    let gw = TestGateway::start(&config).await;
    let client = connect(&gw.url).await;
    let info = client.peer_info().unwrap();
    assert!(
        info.capabilities
            .extensions
            .as_ref()
            .is_some_and(|e| e.contains_key(TASKS_EXTENSION)),
        "{info:?}"
    );

    let id = task_of(&client, "multi_input", json!({})).await;
    until(&client, &id, "both questions", |t| {
        t["inputRequests"].as_object().is_some_and(|r| r.len() == 2)
    })
    .await;
    answer(
        &client,
        &id,
        json!({"first": {"action": "accept", "content": {"name": "Ada Lovelace"}},
               "second": {"action": "accept", "content": {"name": "bob"}}}),
    )
    .await;
    let reasked = until(
        &client,
        &id,
        "the red-marked question",
        asking("first.redmark-2"),
    )
    .await;
    let message = reasked["inputRequests"]["first.redmark-2"]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(message.contains('✗'), "{message}");
    answer(
        &client,
        &id,
        json!({"first.redmark-2": {"action": "accept", "content": {"name": "ada"}}}),
    )
    .await;
    let done = until(&client, &id, "completed", |t| t["status"] == "completed").await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        r#"answers: Some(String("ada")) and Some(String("bob"))"#,
        "{done}"
    );

    // Cancelled through the client: the server's task ends so.
    let id = task_of(&client, "slow_compute", json!({"seconds": 30})).await;
    client
        .cancel_task(CancelTaskParams::new(&id))
        .await
        .unwrap();
    let got = eventually("cancelled", || async {
        let t = client.get_task(GetTaskParams::new(&id)).await.unwrap();
        if t.task.status() == TaskStatus::Cancelled {
            Ok(t)
        } else {
            Err(format!("{t:?}"))
        }
    })
    .await;
    assert_eq!(got.task.task.task_id, id);
    client.cancel().await.unwrap();
    gw.stop().await;
}

#[tokio::test]
async fn the_rmcp_client_drives_a_gateway_made_task() {
    let fx = Fixture::new();
    let shipped = std::fs::read_to_string(repo().join("policies/rooms.toml")).unwrap();
    let policy = shipped.replacen(
        "[tool.book_room]\n",
        "[tool.book_room]\ntask = \"required\"\n",
        1,
    );
    let config = rooms_config("").replacen(
        "[route.upstream]",
        &format!("{}\n[route.upstream]", fx.policy(&policy)),
        1,
    ) + "\n[route.tasks]\n";
    let gw = TestGateway::start(&config).await;
    let client = connect(&gw.url).await;

    let id = task_of(
        &client,
        "book_room",
        json!({"day": "2026-12-08", "hour": 10, "room_hint": "the big one"}),
    )
    .await;
    until(&client, &id, "the room question", asking("room")).await;
    // A room the policy's enum does not have: asked again, never booked.
    answer(
        &client,
        &id,
        json!({"room": {"action": "accept", "content": {"room_id": "ballroom"}}}),
    )
    .await;
    until(&client, &id, "the red-marked question", asking("room.2")).await;
    answer(
        &client,
        &id,
        json!({"room.2": {"action": "accept", "content": {"room_id": "nook"}}}),
    )
    .await;
    let done = until(&client, &id, "completed", |t| t["status"] == "completed").await;
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("nook") && !text.contains("ballroom"),
        "{done}"
    );
    client.cancel().await.unwrap();
    gw.stop().await;
}
