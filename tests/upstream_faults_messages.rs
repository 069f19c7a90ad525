//! A misbehaving upstream, and what each fault gives the client (2/2): what
//! the server sends is too large, not UTF-8, not JSON, a response nobody
//! asked for or a second one, a push redmark does not know, a burst of 1,000
//! questions, and a tool list that changes mid-operation. See `upstream_faults.rs`.

// A test may panic (that is how it fails).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mrtr_support;
mod upstream_faults_support;

use common::*;
use mrtr_support::*;
use serde_json::{Value, json};
use upstream_faults_support::*;

// --- bad messages -----------------------------------------------------------

#[tokio::test]
async fn a_message_over_max_message_bytes_ends_the_session_stdio() {
    let f = Setup::new(Via::Stdio)
        .upstream("max_message_bytes = 65536")
        .start()
        .await;
    let (r, _) = f
        .call_within(CALL_TIMEOUT, "oversize", json!({"bytes": 200000}))
        .await;
    let err = assert_error(&r, 200, -32603, "upstream_lost");
    assert_contains(err["message"].as_str().unwrap(), &["max_message_bytes"]);
    f.gw.wait_metric(&ops("oversize", "upstream_lost"), 1.0)
        .await;
    // A new session serves the next call.
    let ok = f.call("echo", json!({})).await;
    assert_eq!(text(&ok), "ok");
    f.done().await;
}

#[tokio::test]
async fn an_sse_event_over_max_message_bytes_fails_the_call_http() {
    let f = Setup::new(Via::Http)
        .upstream("max_message_bytes = 65536")
        .start()
        .await;
    let (r, _) = f
        .call_within(CALL_TIMEOUT, "oversize", json!({"bytes": 200000}))
        .await;
    assert_error(&r, 200, -32603, "upstream_error");
    f.gw.wait_metric(&ops("oversize", "upstream_error"), 1.0)
        .await;
    f.done().await;
}

/// Faults a session survives: the call is answered, and so is the next one.
async fn survived(via: Via, tool: &str, want: &str) {
    let f = Setup::new(via).start().await;
    let (r, _) = f.call_within(CALL_TIMEOUT, tool, json!({})).await;
    assert_eq!(text(&r), want, "{tool} over {via:?}");
    f.gw.wait_metric(&ops(tool, "completed"), 1.0).await;
    let ok = f.call("echo", json!({})).await;
    assert_eq!(text(&ok), "ok", "after {tool} over {via:?}");
    f.done().await;
}

#[tokio::test]
async fn a_line_that_is_not_utf8_is_skipped() {
    survived(Via::Stdio, "bad_utf8", "survived").await;
    survived(Via::Http, "bad_utf8", "survived").await;
}

#[tokio::test]
async fn a_line_that_is_not_json_is_skipped() {
    survived(Via::Stdio, "bad_json", "survived").await;
    survived(Via::Http, "bad_json", "survived").await;
}

#[tokio::test]
async fn a_response_nobody_asked_for_is_ignored() {
    survived(Via::Stdio, "stray_response", "survived").await;
    survived(Via::Http, "stray_response", "survived").await;
}

#[tokio::test]
async fn a_second_response_for_the_same_id_is_ignored() {
    survived(Via::Stdio, "double_response", "first").await;
    survived(Via::Http, "double_response", "first").await;
}

#[tokio::test]
async fn a_push_redmark_does_not_know_is_refused_and_the_call_goes_on() {
    for via in [Via::Stdio, Via::Http] {
        let f = Setup::new(via).start().await;
        let (r, _) = f.call_within(CALL_TIMEOUT, "unknown_push", json!({})).await;
        // The server heard -32601 `not_relayed`; the client only gets the result.
        let heard: Value = serde_json::from_str(&text(&r)).unwrap();
        assert_eq!(heard["error"]["code"], -32601, "{heard}");
        assert_eq!(heard["error"]["data"]["reason"], "not_relayed", "{heard}");
        f.gw.wait_metric(&ops("unknown_push", "completed"), 1.0)
            .await;
        f.done().await;
    }
}

#[tokio::test]
async fn a_burst_of_1000_questions_stops_at_max_questions() {
    let f = Setup::new(Via::Stdio).start().await;
    let (r, _) = within(
        CALL_TIMEOUT,
        f.call_with("burst", json!({"n": 1000}), form_caps()),
    )
    .await;
    assert_error(&r, 200, -32603, "policy_too_many_questions");
    f.gw.wait_metric(&ops("burst", "policy_refused"), 1.0).await;
    // The server heard: the eleventh question refused, the ten taken `cancel`,
    // then the call cancelled; the session is retired (what it pushed after
    // that dies with it), so the other 989 were never taken from the pipe.
    f.fx.log
        .eventually("the call cancelled", |e| {
            e["method"] == "notifications/cancelled"
        })
        .await;
    let answers: Vec<Value> =
        f.fx.log
            .events()
            .into_iter()
            .filter(|e| e["event"] == "received" && e["method"].is_null())
            .map(|e| e["answer"].clone())
            .collect();
    assert_eq!(answers.len(), 11, "{answers:?}");
    let refused: Vec<&Value> = answers
        .iter()
        .filter(|a| a.get("error").is_some())
        .collect();
    assert_eq!(refused.len(), 1, "{answers:?}");
    assert_eq!(
        refused[0]["error"]["data"]["reason"],
        "policy_too_many_questions"
    );
    assert_eq!(
        answers.iter().filter(|a| a["action"] == "cancel").count(),
        10,
        "{answers:?}"
    );
    f.gw.wait_metric(&sessions("idle"), 0.0).await;
    // Ten questions (the default max_questions) were taken and abandoned; the eleventh refused.
    let mut want = vec!["abandoned"; 10];
    want.insert(0, "refused");
    want.sort_unstable();
    // The audit writer flushes when its queue runs dry: read until all are in.
    eventually("the audit log to record the burst", || {
        let mut got: Vec<String> = f
            .audit()
            .iter()
            .filter(|l| l["tool"] == "burst")
            .map(|l| l["outcome"].as_str().unwrap_or_default().to_owned())
            .collect();
        got.sort_unstable();
        std::future::ready(if got == want {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        })
    })
    .await;
    f.done().await;
}

// --- the tool list changes mid-operation -------------------------------------

#[tokio::test]
async fn a_tool_list_changed_mid_operation_keeps_the_operation_and_refreshes_the_list() {
    for via in [Via::Stdio, Via::Http] {
        let f = Setup::new(via).start().await;
        // The list as it was, cached by redmark.
        let before = f.gw.rpc("tools/list", json!({}), json!({})).await;
        assert!(!before.raw.contains("\"added\""), "{}", before.raw);
        let op = Op::tool("list_change", json!({}));
        let asked = input_required("tools/call", &op.start(&f.gw).await);
        // The new list is what clients see from now on.
        eventually("tools/list to show the added tool", || async {
            let r = f.gw.rpc("tools/list", json!({}), json!({})).await;
            let names: Vec<String> = r.result()["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect();
            if names.iter().any(|n| n == "added") {
                Ok(())
            } else {
                Err(format!("{names:?}"))
            }
        })
        .await;
        // The operation in flight is untouched.
        let done = op
            .retry(&f.gw, &asked.state, json!({"elicitation-1": accept("Ada")}))
            .await;
        let heard: Value = serde_json::from_str(&text(&done)).unwrap();
        assert_eq!(heard["content"]["name"], "Ada", "{heard}");
        f.audited("list_change", &["accepted"]).await;
        f.done().await;
    }
}
