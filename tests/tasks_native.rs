//! A native server's own tasks (the `io.modelcontextprotocol/tasks`
//! extension) relayed on a route with `[route.tasks]`: the rmcp 3.11
//! conformance fixture (`--native`, over stdio), whose tasks run with rmcp's
//! `TaskManager` (`slow_compute`, `failing_job`, and `confirm_delete` and
//! `multi_input`, which ask as the task's `inputRequests`). The client gets
//! wrapped task ids (sealed: route, principal, tool, expiry), the server's
//! questions are guarded and the answers held to the policy before the
//! server sees them, as a native call's MRTR rounds are. Raw HTTP: no SDK
//! client speaks the 2026-07-28 tasks extension yet.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-key";
const BOB: &str = "bob-key";

/// The native fixture behind a route with `[route.tasks]`, `policy` (a
/// policy file's text), two principals and an audit log.
async fn gateway(fx: &Fixture, policy: &str) -> TestGateway {
    let keys = api_key(ALICE, "alice", &[]) + &api_key(BOB, "bob", &[]);
    let config = format!(
        "{keys}\n[audit]\npath = {}\n\n[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n\
         [[route]]\nname = \"main\"\npath = \"/mcp\"\n{}\n\
         [route.upstream]\nprotocol = \"2026-07-28\"\ncommand = [{}, \"--native\"]\n{}\n\n\
         [route.tasks]\nttl = \"2m\"\n",
        toml_path(&fx.path("audit.jsonl")),
        fx.policy(policy),
        toml_path(&example_bin("conformance_fixture")),
        fx.log_env(),
    );
    TestGateway::start(&config).await
}

/// A request as `key`'s principal, with `_meta` declaring `caps` (and, for
/// `tasks/*`, `Mcp-Name` set to the task id).
async fn rpc_as(gw: &TestGateway, key: &str, method: &str, mut params: Value, caps: Value) -> Resp {
    let name = params["taskId"].as_str().map(str::to_owned);
    params["_meta"] = meta(caps);
    let mut rb = gw.request(method, params).bearer_auth(key);
    if let Some(name) = name {
        rb = rb.header("mcp-name", name);
    }
    read_resp(gw.send(rb).await).await
}

async fn call(gw: &TestGateway, tool: &str, arguments: Value) -> Resp {
    let params = json!({"name": tool, "arguments": arguments});
    rpc_as(gw, ALICE, "tools/call", params, declaring_tasks()).await
}

async fn get(gw: &TestGateway, id: &str) -> Value {
    let r = rpc_as(
        gw,
        ALICE,
        "tasks/get",
        json!({"taskId": id}),
        declaring_tasks(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.raw);
    r.result().clone()
}

async fn update(gw: &TestGateway, id: &str, answers: Value) -> Resp {
    let params = json!({"taskId": id, "inputResponses": answers});
    let r = rpc_as(gw, ALICE, "tasks/update", params, declaring_tasks()).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.result(), &json!({"resultType": "complete"}), "{}", r.raw);
    r
}

/// Polls `tasks/get` until `ready` says the task is as wanted.
async fn until(gw: &TestGateway, id: &str, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || async {
        let t = get(gw, id).await;
        if ready(&t) { Ok(t) } else { Err(t.to_string()) }
    })
    .await
}

/// The `CreateTaskResult` of a call, with redmark's wrapped id.
fn created(r: &Resp) -> String {
    assert_eq!(r.status, 200, "{}", r.raw);
    let t = r.result();
    assert_eq!(t["resultType"], "task", "{}", r.raw);
    let id = t["taskId"].as_str().unwrap();
    assert!(id.starts_with("redmark-task."), "{}", r.raw);
    // The route's ttl (2m) caps the server's (rmcp's default, 5m).
    assert_eq!(t["ttlMs"], 120_000, "{}", r.raw);
    assert_eq!(t["pollIntervalMs"], 100, "{}", r.raw);
    assert!(t.get("inputRequests").is_none(), "{}", r.raw);
    id.to_owned()
}

/// The text of a completed task's tool result.
fn said(task: &Value) -> &str {
    task["result"]["content"][0]["text"].as_str().unwrap()
}

fn audit_lines(fx: &Fixture, tool: &str) -> Vec<Value> {
    std::fs::read_to_string(fx.path("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["tool"] == tool)
        .collect()
}

/// On a route whose server speaks 2026-07-28 the server decides which
/// calls become tasks: `redmark check` refuses the settings that could only
/// make a legacy server's call a task (they would silently do nothing).
#[test]
fn check_refuses_settings_a_native_route_cannot_use() {
    let fx = Fixture::new();
    let native = |policy: &str, tasks: &str| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[[route]]\nname = \"main\"\npath = \"/mcp\"\n{}\n\
             [route.upstream]\nprotocol = \"2026-07-28\"\nurl = \"http://127.0.0.1:9/mcp\"\n\n[route.tasks]\n{tasks}\n",
            fx.policy(policy)
        )
    };
    let check = |text: String| {
        let file = fx.path("redmark.toml");
        std::fs::write(&file, text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_redmark"))
            .args(["check", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), said)
    };
    let (ok, said) = check(native("[tool.x]\ntask = \"required\"\n", ""));
    assert!(
        !ok && said.contains("it decides which calls become tasks"),
        "{said}"
    );
    let (ok, said) = check(native("", "after = \"5s\""));
    assert!(
        !ok && said.contains("[route.tasks] after has no effect"),
        "{said}"
    );
    let (ok, said) = check(native("", "ttl = \"5m\""));
    assert!(ok, "{said}");
}

#[tokio::test]
async fn a_native_servers_task_is_relayed_under_a_wrapped_id() {
    let fx = Fixture::new();
    let gw = gateway(&fx, "").await;
    // Offered, as the server offers it.
    let discovered = rpc_as(&gw, ALICE, "server/discover", json!({}), declaring_tasks()).await;
    let caps = &complete("server/discover", &discovered)["capabilities"];
    assert_eq!(caps["extensions"][TASKS_EXTENSION], json!({}), "{caps}");

    let made = call(&gw, "slow_compute", json!({"seconds": 0.2, "label": "x"})).await;
    let id = created(&made);
    let done = until(&gw, &id, "completed", |t| t["status"] == "completed").await;
    assert_eq!(done["taskId"], id, "{done}");
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(said(&done), "computed x", "{done}");
    // The server heard the declaration: it made the task.
    let declared: Vec<Value> = fx
        .log
        .events()
        .into_iter()
        .filter(|e| e["event"] == "task_tool")
        .map(|e| e["declared_tasks"].clone())
        .collect();
    assert_eq!(declared, [json!(true)]);
    gw.wait_metric(
        r#"redmark_tasks_total{route="main",tool="slow_compute",outcome="completed"}"#,
        1.0,
    )
    .await;
    assert_eq!(gw.metric("redmark_tasks_live").await, Some(0.0));

    // A task that fails with the server's JSON-RPC error reads `failed` with it.
    let id = created(&call(&gw, "failing_job", json!({})).await);
    let failed = until(&gw, &id, "failed", |t| t["status"] == "failed").await;
    assert_eq!(failed["error"]["message"], "the job failed", "{failed}");
    gw.stop().await;
}

/// The rules of the extension as redmark keeps them for relayed tasks.
#[tokio::test]
async fn relayed_task_ids_are_the_principals_own_and_errors_are_the_extensions() {
    let fx = Fixture::new();
    let gw = gateway(&fx, "").await;
    let id = created(&call(&gw, "slow_compute", json!({"seconds": 30})).await);

    // Another principal: the same answer as for an id never made.
    let theirs = rpc_as(
        &gw,
        BOB,
        "tasks/get",
        json!({"taskId": id}),
        declaring_tasks(),
    )
    .await;
    assert_error(&theirs, 200, -32602, "task_unknown");
    let forged = format!("{id}x");
    let r = rpc_as(
        &gw,
        ALICE,
        "tasks/get",
        json!({"taskId": forged}),
        declaring_tasks(),
    )
    .await;
    assert_error(&r, 200, -32602, "task_unknown");
    // The extension undeclared on the request: -32021 naming it.
    let r = rpc_as(&gw, ALICE, "tasks/get", json!({"taskId": id}), json!({})).await;
    let err = assert_error(&r, 400, -32021, "missing_capability");
    assert!(
        err.error["data"]["requiredCapabilities"]["extensions"][TASKS_EXTENSION].is_object(),
        "{}",
        r.raw
    );
    // `Mcp-Name` that is not the task id (ext-tasks "Streamable HTTP:
    // Routing Headers"): -32020, as for any mirrored header.
    let mut params = json!({"taskId": id});
    params["_meta"] = meta(declaring_tasks());
    let rb = gw
        .request("tasks/get", params)
        .bearer_auth(ALICE)
        .header("mcp-name", "redmark-task.other");
    let r = read_resp(gw.send(rb).await).await;
    assert_error(&r, 400, -32020, "header_mismatch");
    // Gone from the extension.
    for method in ["tasks/result", "tasks/list"] {
        let r = rpc_as(&gw, ALICE, method, json!({}), declaring_tasks()).await;
        assert_error(&r, 404, -32601, "method_not_found");
    }
    // Answers that are not an object of answers.
    let params = json!({"taskId": id, "inputResponses": ["yes"]});
    let r = rpc_as(&gw, ALICE, "tasks/update", params, declaring_tasks()).await;
    assert_error(&r, 200, -32602, "malformed_input_response");
    // A tool that runs only as a task, for a client without the extension:
    // the route relays tasks, so the client is told to declare it.
    let params = json!({"name": "failing_job", "arguments": {}});
    let r = rpc_as(&gw, ALICE, "tools/call", params, json!({})).await;
    let err = assert_error(&r, 400, -32021, "missing_capability");
    let message = err.error["message"].as_str().unwrap();
    assert!(message.contains("declare the"), "{message}");

    // Cancelled: an empty ack, idempotent, and the server's task ends so.
    for _ in 0..2 {
        let r = rpc_as(
            &gw,
            ALICE,
            "tasks/cancel",
            json!({"taskId": id}),
            declaring_tasks(),
        )
        .await;
        assert_eq!(r.result(), &json!({"resultType": "complete"}), "{}", r.raw);
    }
    until(&gw, &id, "cancelled", |t| t["status"] == "cancelled").await;
    gw.wait_metric(
        r#"redmark_tasks_total{route="main",tool="slow_compute",outcome="cancelled"}"#,
        1.0,
    )
    .await;
    // Never the server's own id: the client sees only redmark's.
    let server_ids: Vec<String> = fx
        .log
        .events()
        .into_iter()
        .filter_map(|e| e["task_id"].as_str().map(str::to_owned))
        .collect();
    for server_id in server_ids {
        assert!(!id.contains(&server_id));
    }
    gw.stop().await;
}

/// The server's questions reach the client through `tasks/get`, and the
/// answers are held to the policy: one that breaks a field rule comes back
/// as a new question with the red mark, under a new key, and never reaches
/// the server; a partial answer leaves the task asking the rest; the
/// superseded key is ignored; the questions are audited without values.
#[tokio::test]
async fn a_relayed_tasks_answers_are_held_to_the_policy() {
    let fx = Fixture::new();
    let policy = "[tool.multi_input.fields.name]\npattern = \"^[a-z]+$\"\n";
    let gw = gateway(&fx, policy).await;
    let id = created(&call(&gw, "multi_input", json!({})).await);
    let asked = until(&gw, &id, "two questions", |t| {
        t["inputRequests"].as_object().is_some_and(|r| r.len() == 2)
    })
    .await;
    assert_eq!(asked["status"], "input_required", "{asked}");
    let keys: Vec<&String> = asked["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["first", "second"], "{asked}");

    // One answer, breaking the rule: acked, then asked again under `first.redmark-2`.
    update(
        &gw,
        &id,
        json!({"first": {"action": "accept", "content": {"name": "Not Valid!"}}}),
    )
    .await;
    let reasked = get(&gw, &id).await;
    let requests = reasked["inputRequests"].as_object().unwrap();
    let keys: Vec<&String> = requests.keys().collect();
    assert_eq!(keys, ["first.redmark-2", "second"], "{reasked}");
    let message = requests["first.redmark-2"]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.starts_with("First question") && message.contains('✗'),
        "{message}"
    );
    assert!(message.contains("name must match ^[a-z]+$"), "{message}");

    // The superseded key is ignored; a partial answer leaves one question.
    update(
        &gw,
        &id,
        json!({"first": {"action": "accept", "content": {"name": "sneaky"}},
               "second": {"action": "accept", "content": {"name": "bob"}}}),
    )
    .await;
    let partial = until(&gw, &id, "one question left", |t| {
        t["inputRequests"].as_object().is_some_and(|r| r.len() == 1)
    })
    .await;
    assert_eq!(partial["status"], "input_required", "{partial}");
    assert!(
        partial["inputRequests"]["first.redmark-2"].is_object(),
        "{partial}"
    );

    update(
        &gw,
        &id,
        json!({"first.redmark-2": {"action": "accept", "content": {"name": "ada"}}}),
    )
    .await;
    let done = until(&gw, &id, "completed", |t| t["status"] == "completed").await;
    // The server heard the valid answers only.
    assert_eq!(
        said(&done),
        r#"answers: Some(String("ada")) and Some(String("bob"))"#,
        "{done}"
    );

    let lines = eventually("three audit lines", || async {
        let lines = audit_lines(&fx, "multi_input");
        if lines.len() == 3 {
            Ok(lines)
        } else {
            Err(format!("{lines:?}"))
        }
    })
    .await;
    let outcomes: Vec<&str> = lines.iter().filter_map(|l| l["outcome"].as_str()).collect();
    assert_eq!(outcomes, ["invalid", "accepted", "accepted"], "{lines:?}");
    let text = std::fs::read_to_string(fx.path("audit.jsonl")).unwrap();
    assert!(
        !text.contains("Not Valid") && !text.contains("ada"),
        "{text}"
    );
    gw.stop().await;
}

/// A question the policy refuses (one more than `max_questions`) ends the
/// task before the client sees it: `failed` with redmark's error, and the
/// server hears `tasks/cancel`; a question the client did not declare it
/// can answer ends it with `-32021` in the task's error.
#[tokio::test]
async fn a_question_the_guard_refuses_ends_the_relayed_task() {
    let fx = Fixture::new();
    let gw = gateway(&fx, "[tool.multi_input]\nmax_questions = 1\n").await;
    let id = created(&call(&gw, "multi_input", json!({})).await);
    let failed = until(&gw, &id, "failed", |t| t["status"] == "failed").await;
    assert_eq!(
        failed["error"]["data"]["reason"], "policy_too_many_questions",
        "{failed}"
    );
    assert!(failed.get("inputRequests").is_none(), "{failed}");
    // It stays so, and answers to it change nothing.
    update(
        &gw,
        &id,
        json!({"first": {"action": "accept", "content": {"name": "a"}}}),
    )
    .await;
    assert_eq!(get(&gw, &id).await["status"], "failed");
    gw.wait_metric(
        r#"redmark_tasks_total{route="main",tool="multi_input",outcome="failed"}"#,
        1.0,
    )
    .await;

    // Answered before any read: the update guards the server's questions
    // first, so the answers are neither judged nor delivered, and the
    // refusal is audited though nothing read the task.
    let refused = |fx: &Fixture| {
        audit_lines(fx, "multi_input")
            .iter()
            .filter(|l| l["verdict"] == "policy_too_many_questions")
            .count()
    };
    let before = refused(&fx);
    let id = created(&call(&gw, "multi_input", json!({})).await);
    let answers = json!({"first": {"action": "accept", "content": {"name": "early"}}});
    eventually("the update's guard to refuse", || async {
        // Until the server has asked, nothing is outstanding (an empty ack).
        update(&gw, &id, answers.clone()).await;
        if refused(&fx) > before {
            Ok(())
        } else {
            Err("not yet")
        }
    })
    .await;
    let t = get(&gw, &id).await;
    assert_eq!(t["status"], "failed", "{t}");
    assert_eq!(
        t["error"]["data"]["reason"], "policy_too_many_questions",
        "{t}"
    );

    // Elicitation not declared: the client never sees the question.
    let params = json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"}});
    let caps = json!({"extensions": {TASKS_EXTENSION: {}}});
    let id = created(&rpc_as(&gw, ALICE, "tools/call", params, caps.clone()).await);
    let failed = eventually("failed", || async {
        let r = rpc_as(&gw, ALICE, "tasks/get", json!({"taskId": id}), caps.clone()).await;
        let t = r.result().clone();
        if t["status"] == "failed" {
            Ok(t)
        } else {
            Err(r.raw)
        }
    })
    .await;
    assert_eq!(failed["error"]["code"], -32021, "{failed}");
    assert_eq!(
        failed["error"]["data"]["reason"], "missing_capability",
        "{failed}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_relayed_task_that_asks_once_completes_with_the_answer() {
    let fx = Fixture::new();
    let gw = gateway(&fx, "").await;
    let id = created(&call(&gw, "confirm_delete", json!({"filename": "old.txt"})).await);
    let asked = until(&gw, &id, "input_required", |t| {
        t["status"] == "input_required"
    })
    .await;
    let q = &asked["inputRequests"]["confirm"];
    assert_eq!(q["method"], "elicitation/create", "{asked}");
    assert_eq!(q["params"]["message"], "Delete old.txt?", "{asked}");
    update(
        &gw,
        &id,
        json!({"confirm": {"action": "accept", "content": {"confirm": true}}}),
    )
    .await;
    let done = until(&gw, &id, "completed", |t| t["status"] == "completed").await;
    assert_eq!(said(&done), "deleted", "{done}");
    gw.stop().await;
}

/// `notifications/tasks` for relayed tasks on `subscriptions/listen`: served
/// by redmark (the server does not know the wrapped ids), the listener's
/// own tasks only, each read at its poll interval and sent when it reads
/// differently, guarded as `tasks/get` is, until it ends.
#[tokio::test]
async fn a_listen_is_sent_each_change_of_a_relayed_task() {
    use std::time::Duration;
    let fx = Fixture::new();
    let gw = gateway(&fx, "").await;
    let id = created(&call(&gw, "confirm_delete", json!({"filename": "n.txt"})).await);
    let bobs = {
        let params = json!({"name": "slow_compute", "arguments": {"seconds": 30}});
        created(&rpc_as(&gw, BOB, "tools/call", params, declaring_tasks()).await)
    };
    let listen = async |task_ids: Value| {
        let params = json!({"notifications": {"taskIds": task_ids}});
        let (stream, ack) = listen_declaring_tasks(&gw, Some(ALICE), params).await;
        assert_eq!(
            ack["params"]["notifications"]["taskIds"],
            json!([id]),
            "{ack}"
        );
        stream
    };
    let mut stream = listen(json!([id, bobs, "redmark-task.forged"])).await;
    // A second listen on the same task shares the first one's reader
    // (front/tasks/polls.rs) and hears the same changes.
    let mut second = listen(json!([id])).await;

    let next = async |stream: &mut SseReader| {
        let n = stream
            .next(Duration::from_secs(30))
            .await
            .expect("a notification");
        assert_eq!(n["method"], "notifications/tasks", "{n}");
        assert_eq!(n["params"]["taskId"], id.as_str(), "{n}");
        assert!(n["params"].get("resultType").is_none(), "{n}");
        n["params"].clone()
    };
    let asking = loop {
        let p = next(&mut stream).await;
        if p["status"] == "input_required" {
            break p;
        }
    };
    assert_eq!(
        asking["inputRequests"]["confirm"]["method"], "elicitation/create",
        "{asking}"
    );
    let also_asking = loop {
        let p = next(&mut second).await;
        if p["status"] == "input_required" {
            break p;
        }
    };
    assert_eq!(also_asking["inputRequests"], asking["inputRequests"]);
    update(
        &gw,
        &id,
        json!({"confirm": {"action": "accept", "content": {"confirm": true}}}),
    )
    .await;
    let done = loop {
        let p = next(&mut stream).await;
        if p["status"] == "completed" {
            break p;
        }
    };
    assert_eq!(said(&done), "deleted", "{done}");
    let also_done = loop {
        let p = next(&mut second).await;
        if p["status"] == "completed" {
            break p;
        }
    };
    assert_eq!(said(&also_done), "deleted", "{also_done}");
    gw.stop().await;
}

/// A server that reuses a question's key for another question (ext-tasks:
/// a key "MUST NOT" refer to two distinct requests; misbehaviour on purpose,
/// tests/fixtures/native_hostile_server.py): the second question, a
/// password, never reaches the client unguarded; the task fails, saying why.
#[tokio::test]
async fn a_key_the_server_reuses_for_another_question_fails_the_task() {
    let fx = Fixture::new();
    let config = format!(
        "{}\n[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n\
         [[route]]\nname = \"main\"\npath = \"/mcp\"\n\
         [route.upstream]\nprotocol = \"2026-07-28\"\ncommand = [{}, {}]\n{}\n\n[route.tasks]\n",
        api_key(ALICE, "alice", &[]),
        toml_path(&client_python()),
        toml_path(&fixture_file("native_hostile_server.py")),
        fx.log_env(),
    );
    let gw = TestGateway::start(&config).await;
    let made = call(&gw, "rogue_task", json!({})).await;
    assert_eq!(made.result()["resultType"], "task", "{}", made.raw);
    let id = made.result()["taskId"].as_str().unwrap().to_owned();
    assert!(!id.contains("rogue-task-1"), "{id}");
    let first = get(&gw, &id).await;
    assert_eq!(
        first["inputRequests"]["k"]["params"]["message"], "Your name?",
        "{first}"
    );
    let second = get(&gw, &id).await;
    assert_eq!(second["status"], "failed", "{second}");
    assert_eq!(
        second["error"]["data"]["reason"], "upstream_invalid_result",
        "{second}"
    );
    assert!(!second.to_string().contains("password"), "{second}");
    // The server heard tasks/cancel.
    let methods: Vec<Value> = fx
        .log
        .events()
        .into_iter()
        .map(|e| e["method"].clone())
        .collect();
    assert!(methods.contains(&json!("tasks/cancel")), "{methods:?}");
    gw.stop().await;
}
