//! Rounds and correlation: a retry resumes exactly its own operation, for as
//! many rounds as `[mrtr] max_rounds` allows; fifty operations of one
//! principal on one tool, answered in random order, each deliver their answer
//! to their own server call.
//!
//! Drives `tests/fixtures/mrtr_server.py` (FastMCP from mcp==1.30.0).

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod mrtr_support;

use common::*;
use futures::future::join_all;
use mrtr_support::*;
use serde_json::{Value, json};

#[tokio::test]
async fn a_retry_resumes_its_operation_for_up_to_max_rounds() {
    let fx = Fixture::new();
    let gw = TestGateway::start(&fx.cfg().mrtr("max_rounds = 5").build()).await;
    let op = Op::tool("rounds", json!({"tag": "five", "n": 5}));
    let resps = op
        .walk(&gw, 5, |round, asked| {
            let key = format!("elicitation-{round}");
            assert_eq!(asked.keys(), [key.as_str()]);
            assert_eq!(
                asked.requests[&key]["params"]["message"],
                format!("Question {round} of 5?")
            );
            assert_eq!(claims(&asked.state).rd as usize, round);
            asked.reply(&key, accept(&format!("a{round}")))
        })
        .await;
    let out = output(&resps[5]);
    let want: Vec<Value> = (1..=5)
        .map(|k| json!({"action": "accept", "content": {"name": format!("a{k}")}}))
        .collect();
    assert_eq!(out["answers"], Value::Array(want));
    // One upstream call served all five rounds.
    let pids: std::collections::HashSet<String> = fx
        .log
        .tagged("answer", "five")
        .iter()
        .map(|e| e["pid"].to_string())
        .collect();
    assert_eq!(pids.len(), 1, "{pids:?}");
    assert_eq!(gw.metric(&ops("rounds", "completed")).await, Some(1.0));
    settled(&gw).await;
    gw.stop().await;
}

/// Each request on a connection of its own: the gateway hands consecutive
/// connections to its event loops in turn, so with two loops every retry
/// reaches the operation from the other loop than the one it waits on; with
/// `event_loops = 0` everything runs on the shared runtime. Both must walk
/// the same operation to its end on one upstream call.
#[tokio::test]
async fn a_retry_on_another_event_loop_resumes_its_operation() {
    for loops in [2, 0] {
        let fx = Fixture::new();
        let config = fx
            .cfg()
            .top(&format!("event_loops = {loops}"))
            .mrtr("max_rounds = 3")
            .build();
        let gw = TestGateway::start(&config).await;
        let mut ep = McpClient::new(gw.url.clone());
        ep.http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let tag = format!("loops{loops}");
        let op = Op::tool("rounds", json!({"tag": tag, "n": 3}));
        let resps = op
            .walk(&ep, 3, |round, asked| {
                asked.reply(
                    &format!("elicitation-{round}"),
                    accept(&format!("a{round}")),
                )
            })
            .await;
        let want: Vec<Value> = (1..=3)
            .map(|k| json!({"action": "accept", "content": {"name": format!("a{k}")}}))
            .collect();
        assert_eq!(
            output(&resps[3])["answers"],
            Value::Array(want),
            "event_loops = {loops}"
        );
        let pids: std::collections::HashSet<String> = fx
            .log
            .tagged("answer", &tag)
            .iter()
            .map(|e| e["pid"].to_string())
            .collect();
        assert_eq!(pids.len(), 1, "event_loops = {loops}: {pids:?}");
        settled(&gw).await;
        gw.stop().await;
    }
}

/// A permutation of `0..n` from the thread's random generator.
fn shuffled(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = usize::try_from(rand::random::<u64>() % (i as u64 + 1)).unwrap();
        v.swap(i, j);
    }
    v
}

#[tokio::test]
async fn fifty_concurrent_operations_each_get_their_own_answer() {
    const N: usize = 50;
    let fx = Fixture::new();
    let gw = TestGateway::start(
        &fx.cfg()
            .pool("max_sessions = 64")
            .pool("max_sessions_per_principal = 64")
            .build(),
    )
    .await;
    let calls: Vec<Op> = (0..N)
        .map(|i| Op::tool("ask", json!({"tag": format!("c{i}")})))
        .collect();
    let first = join_all(calls.iter().map(|op| op.start(&gw))).await;
    let states: Vec<String> = first
        .iter()
        .map(|r| {
            let asked = input_required("tools/call", r);
            assert_eq!(asked.keys(), ["elicitation-1"]);
            asked.state
        })
        .collect();
    assert_eq!(gw.metric(PENDING).await, Some(N as f64));
    assert_eq!(gw.metric(&sessions("leased")).await, Some(N as f64));

    // Every fifth declines; the rest accept with an answer naming their own call.
    let answer = |i: usize| {
        if i.is_multiple_of(5) {
            decline()
        } else {
            accept(&format!("answer-c{i}"))
        }
    };
    let order = shuffled(N);
    let gw_ref = &gw;
    let retries = order.iter().map(|&i| {
        let (op, state) = (&calls[i], &states[i]);
        async move {
            let r = op
                .retry(gw_ref, state, json!({"elicitation-1": answer(i)}))
                .await;
            (i, r)
        }
    });
    for (i, r) in join_all(retries).await {
        let mut want = answer(i);
        want["tag"] = json!(format!("c{i}"));
        assert_eq!(output(&r), want, "call c{i}");
    }
    // And the server calls themselves heard exactly their own answers.
    for i in 0..N {
        let heard = fx.log.tagged("answer", &format!("c{i}"));
        assert_eq!(heard.len(), 1, "c{i}: {heard:?}");
        let want = answer(i);
        assert_eq!(heard[0]["action"], want["action"], "c{i}");
        assert_eq!(heard[0].get("content"), want.get("content"), "c{i}");
    }
    assert_eq!(gw.metric(&ops("ask", "completed")).await, Some(40.0));
    assert_eq!(gw.metric(&ops("ask", "declined")).await, Some(10.0));
    settled(&gw).await;
    gw.stop().await;
}
