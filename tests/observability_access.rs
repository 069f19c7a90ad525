//! The access log of the real `redmark` binary: one INFO line per client
//! request with route, method, tool, principal, HTTP status, outcome or
//! `data.reason`, duration, operation id and round; in JSON lines every field
//! has its JSON type (numbers as numbers, lists as arrays, no `Some(..)`, no
//! empty `trace_id`); `[log] access` sends the lines to a file or nowhere.

// A test may panic (that is how it fails).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod observability_support;

use common::{McpClient, RedmarkProcess};
use observability_support::*;
use serde_json::{Value, json};

fn parse(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn access(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|l| l["target"] == "redmark::access")
        .collect()
}

/// A ticket whose priority is asked once: two requests of one operation.
async fn one_ticket(client: &McpClient) {
    let op = tool_call("create_ticket", json!({"title": "printer"}), "t");
    let resps = op
        .walk(client, 1, |_, q| {
            accept(q, "priority", json!({"priority": 3}))
        })
        .await;
    assert_eq!(
        resps[1].result()["resultType"],
        "complete",
        "{}",
        resps[1].raw
    );
}

/// A request without `MCP-Protocol-Version`: refused by the pipeline.
async fn one_refusal(url: &str) {
    let r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
}

#[tokio::test]
async fn one_typed_json_line_per_request_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let config = rooms_example_config(dir.path(), "");
    let gw = RedmarkProcess::start(&config, true, &[]).await;
    let url = gw.url("/mcp/rooms");
    one_ticket(&client(url.clone())).await;
    one_refusal(&url).await;
    let lines = parse(&gw.stop().await);

    let acc = access(&lines);
    assert_eq!(acc.len(), 3, "{acc:#?}");
    let (first, retry, refused) = (acc[0], acc[1], acc[2]);
    for l in [first, retry] {
        assert_eq!(l["level"], "INFO");
        assert_eq!(l["message"], "request");
        assert_eq!(l["route"], "rooms");
        assert_eq!(l["method"], "tools/call");
        assert_eq!(l["name"], "create_ticket");
        assert_eq!(l["principal"], "anonymous");
        assert_eq!(l["status"], 200);
        assert!(l["duration_ms"].is_f64(), "{l}");
        assert!(l.get("trace_id").is_none(), "not traced: no trace_id: {l}");
    }
    assert_eq!(first["outcome"], "input_required");
    assert_eq!(first["round"], 1);
    assert_eq!(retry["outcome"], "complete");
    assert_eq!(retry["round"], 2);
    let op = first["operation"].as_str().unwrap();
    assert_eq!(op.len(), 32, "{first}");
    assert_eq!(retry["operation"], op);
    assert_eq!(refused["status"], 400);
    assert_eq!(refused["outcome"], "header_missing");
    assert_eq!(refused["method"], "tools/list");
    assert!(refused.get("operation").is_none(), "{refused}");

    // Every other line is typed too.
    let listening = lines
        .iter()
        .find(|l| l["message"] == "redmark listening")
        .unwrap();
    let admin = listening["admin"].as_str().unwrap();
    assert!(admin.starts_with("127.0.0.1:"), "{listening}");
    let asking = lines
        .iter()
        .find(|l| l["message"] == "asking the client")
        .unwrap();
    assert_eq!(asking["keys"], json!(["priority"]), "{asking}");
    assert_eq!(asking["round"], 1, "{asking}");
    for l in &lines {
        for (k, v) in l.as_object().unwrap() {
            let s = v.as_str().unwrap_or_default();
            assert!(!s.starts_with("Some("), "{k} is a debug string: {l}");
            assert!(!(k == "trace_id" && s.is_empty()), "empty trace_id: {l}");
        }
    }
}

#[tokio::test]
async fn the_access_log_goes_to_its_file_or_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let config = rooms_example_config(dir.path(), "[log]\naccess = \"access.jsonl\"\n");
    let gw = RedmarkProcess::start(&config, true, &[]).await;
    let url = gw.url("/mcp/rooms");
    one_ticket(&client(url.clone())).await;
    one_refusal(&url).await;
    let stderr = parse(&gw.stop().await);
    assert!(access(&stderr).is_empty(), "a file was configured");
    let text = std::fs::read_to_string(dir.path().join("access.jsonl")).unwrap();
    let file: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(file.len(), 3, "{text}");
    assert_eq!(file[0]["outcome"], "input_required");
    assert_eq!(file[1]["round"], 2);
    assert_eq!(file[2]["status"], 400);
    assert!(file[0]["time"].as_str().unwrap().ends_with('Z'));

    let off = tempfile::tempdir().unwrap();
    let config = rooms_example_config(off.path(), "[log]\naccess = \"off\"\n");
    let gw = RedmarkProcess::start(&config, true, &[]).await;
    one_refusal(&gw.url("/mcp/rooms")).await;
    let stderr = parse(&gw.stop().await);
    assert!(access(&stderr).is_empty(), "{stderr:#?}");
}

/// At the default level a plain call writes one line, its access line: its
/// `operation ended` summary would repeat it. A call that asked a question
/// also writes the summary (rounds, dropped notifications, time).
#[tokio::test]
async fn a_plain_call_writes_one_line_and_a_call_that_asked_its_summary_too() {
    let dir = tempfile::tempdir().unwrap();
    let config = rooms_example_config(dir.path(), "");
    let gw = RedmarkProcess::start(&config, true, &[]).await;
    let c = client(gw.url("/mcp/rooms"));
    let plain = tool_call("list_rooms", json!({}), "plain")
        .walk(&c, 0, |_, _| json!({}))
        .await;
    assert_eq!(
        plain[0].result()["resultType"],
        "complete",
        "{}",
        plain[0].raw
    );
    one_ticket(&c).await;
    let lines = parse(&gw.stop().await);

    let acc = access(&lines);
    let op_of = |tool: &str| {
        acc.iter()
            .find(|l| l["name"] == tool)
            .and_then(|l| l["operation"].as_str())
            .unwrap_or_else(|| panic!("no access line for {tool}: {acc:#?}"))
            .to_owned()
    };
    let about = |op: &str| -> Vec<&Value> {
        lines
            .iter()
            .filter(|l| l.to_string().contains(op))
            .collect()
    };
    let plain_op = op_of("list_rooms");
    let plain_lines = about(&plain_op);
    assert_eq!(plain_lines.len(), 1, "{plain_lines:#?}");
    assert_eq!(plain_lines[0]["target"], "redmark::access");

    let ticket_op = op_of("create_ticket");
    let ticket_lines = about(&ticket_op);
    let ended: Vec<&&Value> = ticket_lines
        .iter()
        .filter(|l| l["message"] == "operation ended")
        .collect();
    assert_eq!(ended.len(), 1, "{ticket_lines:#?}");
    assert_eq!(ended[0]["level"], "INFO");
    assert_eq!(ended[0]["rounds"], 1);
    assert_eq!(ended[0]["outcome"], "completed");
}
