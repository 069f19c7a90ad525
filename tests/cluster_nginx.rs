//! Hold-mode and replay-mode operations through the three replicas behind
//! nginx (tests/cluster_support). Real 2026-07-28 clients (PyPI `mcp` 2.3.0,
//! npm `@modelcontextprotocol/client`) walk multi-round hold-mode operations
//! whose rounds land on different replicas; the replicas' own `/metrics` say
//! they forwarded. Replay-mode operations complete with nothing forwarded,
//! and a consumed replay-mode state is refused by every replica (Redis).
//! Then 20 concurrent operations answered in reverse order, the internal
//! endpoint refusing an unsigned request, 20 concurrent three-round
//! replay-mode operations, `kill -9` of a replica mid-operation (its
//! hold-mode questions are `owner_unreachable`, a replay-mode one it started
//! completes on the others), and a drained replica finishing its operation
//! before it exits. 2025-era sessions (PyPI `mcp` 1.30.0) are served by
//! every replica. Gateway-made and relayed tasks: tests/cluster_nginx_tasks.rs.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod cluster_support;
mod common;
mod mrtr_support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cluster_support::*;
use common::*;
use mrtr_support::{accept, claims, form_caps};
use serde_json::json;

#[tokio::test]
async fn three_replicas_behind_nginx_serve_every_round_wherever_it_lands() {
    let cluster = Cluster::start().await;
    // PyPI mcp 2.3.0 over the shared HTTP server; npm client over each replica's stdio server.
    for (route, driver) in [
        ("/mcp", "py"),
        ("/stdio", "ts"),
        ("/mcp", "ts"),
        ("/stdio", "py"),
    ] {
        let tag = format!("{driver}{}", route.replace('/', "-"));
        let url = cluster.url(route);
        let lines = match driver {
            "py" => py_client(&url, &rounds_script(&tag)).await,
            _ => ts_client(&url, &rounds_script(&tag)).await,
        };
        let done = step(&lines, 0);
        assert_eq!(done["ok"], true, "{driver} on {route}: {lines:?}");
        let out = tool_output(&done["result"]);
        assert_eq!(out["tag"], tag.as_str());
        assert_eq!(names(&out), ["one", "two", "three"], "{driver} on {route}");
    }
    // Rounds landed on replicas that did not hold their operation, and were forwarded.
    for route in ["main", "stdio"] {
        let out = cluster.sum(&forwarded(route)).await;
        let into = cluster.sum(&received(route)).await;
        assert!(out >= 2.0, "route {route}: {out} forwarded");
        assert_eq!(out, into, "route {route}: every forward arrived");
    }
    for r in &cluster.replicas {
        let m = r.metrics().await;
        println!(
            "{}: forwarded {} / received {}",
            r.node,
            r.metric(&forwarded("main")).await + r.metric(&forwarded("stdio")).await,
            r.metric(&received("main")).await + r.metric(&received("stdio")).await
        );
        assert!(m.contains("redmark_forwarded_retries"), "{m}");
    }

    // 20 at once through the balancer, answered in reverse order: each gets its own answer.
    let ep = McpClient::new(cluster.url("/mcp"));
    let ops: Vec<Op> = (0..20)
        .map(|i| Op::tool("ask", json!({"tag": format!("c{i}")})).caps(form_caps()))
        .collect();
    let firsts = futures::future::join_all(ops.iter().map(|op| op.start(&ep))).await;
    let asked: Vec<Asked> = firsts
        .iter()
        .map(|r| input_required("tools/call", r))
        .collect();
    let owners: std::collections::HashSet<String> =
        asked.iter().map(|a| claims(&a.state).node).collect();
    assert!(owners.len() >= 2, "round robin spread them: {owners:?}");
    for i in (0..20).rev() {
        let done = ops[i]
            .answer(&ep, &asked[i], accept(&format!("n{i}")))
            .await;
        let out = output(&done);
        assert_eq!(out["tag"], format!("c{i}"));
        assert_eq!(out["content"]["name"], format!("n{i}"));
    }

    // Replay mode through the same balancer: every round on whichever replica,
    // nothing forwarded, nothing held.
    let lines = py_client(&cluster.url("/replay"), &rounds_script("py-replay")).await;
    let done = step(&lines, 0);
    assert_eq!(done["ok"], true, "replay: {lines:?}");
    assert_eq!(
        names(&tool_output(&done["result"])),
        ["one", "two", "three"]
    );
    assert!(cluster.sum(&replayed("rounds")).await >= 3.0);
    // Its rounds were asked by different replicas (round robin, no stickiness).
    let mut asking = 0;
    for r in cluster.running() {
        if r.metric(&replayed("rounds")).await > 0.0 {
            asking += 1;
        }
    }
    assert!(asking >= 2, "replay rounds asked by {asking} replica(s)");
    assert_eq!(cluster.sum(&forwarded("replay")).await, 0.0);
    // A consumed replay-mode state is refused by every replica (Redis single use).
    let replay_ep = McpClient::new(cluster.url("/replay"));
    let op = Op::tool("ask", json!({"tag": "once"})).caps(form_caps());
    let first = input_required("tools/call", &op.start(&replay_ep).await);
    assert_eq!(claims(&first.state).m, "replay");
    let used = op.answer(&replay_ep, &first, accept("once")).await;
    assert_eq!(output(&used)["content"]["name"], "once");
    for r in cluster.running() {
        let direct = McpClient::new(format!("{}/replay", r.process().base));
        let again = op.answer(&direct, &first, accept("twice")).await;
        assert_error(&again, 200, -32602, "state_replayed");
    }

    // Replay mode, 20 at once through the balancer, three rounds each against
    // the FastMCP server over HTTP (issue 37: 1 of 20 completed, the rest
    // `upstream_lost`, when a given-up call's cancellation raced the answer).
    let many: Vec<Op> = (0..20)
        .map(|i| Op::tool("rounds", json!({"tag": format!("r{i}"), "n": 2})).caps(form_caps()))
        .collect();
    let walks = many.iter().enumerate().map(|(i, op)| {
        let ep = &replay_ep;
        async move {
            let first = input_required("tools/call", &op.start(ep).await);
            let next = op.answer(ep, &first, accept(&format!("a{i}"))).await;
            let second = input_required("tools/call", &next);
            op.answer(ep, &second, accept(&format!("b{i}"))).await
        }
    });
    for (i, done) in futures::future::join_all(walks).await.iter().enumerate() {
        assert_eq!(
            names(&output(done)),
            [format!("a{i}"), format!("b{i}")],
            "{}",
            done.raw
        );
    }

    // The internal endpoint refuses what the cluster secret did not sign.
    let r1 = cluster.replica("r1");
    let unsigned = McpClient::new(format!("http://127.0.0.1:{}/mcp", r1.internal));
    let resp = ops[0]
        .retry(&unsigned, &asked[0].state, asked[0].reply_only(accept("x")))
        .await;
    assert_error(&resp, 401, -32600, "forward_unsigned");
    cluster.settled().await;
}

#[tokio::test]
async fn a_killed_replica_loses_only_its_own_questions_and_a_drained_one_finishes_its_own() {
    let mut cluster = Cluster::start().await;
    let ep = McpClient::new(cluster.url("/mcp")).with_patience(Duration::from_secs(60));
    let ops: Vec<Op> = (0..6)
        .map(|i| Op::tool("ask", json!({"tag": format!("k{i}")})).caps(form_caps()))
        .collect();
    let mut asked = Vec::new();
    for op in &ops {
        asked.push(input_required("tools/call", &op.start(&ep).await));
    }
    let owner: Vec<String> = asked.iter().map(|a| claims(&a.state).node).collect();
    let victim = owner[0].clone();
    // A replay-mode question waiting for its person: no replica holds it.
    // Its first round is asked by the replica about to be killed, and it
    // has two more rounds to go.
    let replay_ep = McpClient::new(cluster.url("/replay")).with_patience(Duration::from_secs(60));
    let replay_op = Op::tool("rounds", json!({"tag": "survives", "n": 2})).caps(form_caps());
    let on_victim = McpClient::new(format!(
        "{}/replay",
        cluster.replica(&victim).process().base
    ));
    let replay_asked = input_required("tools/call", &replay_op.start(&on_victim).await);
    assert_eq!(claims(&replay_asked.state).node, victim);
    let by_owner: HashMap<&str, usize> = owner.iter().fold(HashMap::new(), |mut m, o| {
        *m.entry(o.as_str()).or_default() += 1;
        m
    });
    assert!(by_owner.len() >= 2, "{by_owner:?}");

    // kill -9: no drain, no goodbye.
    let pid = cluster.replica(&victim).process().pid();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    drop(cluster.replica_mut(&victim).process.take());

    for (i, op) in ops.iter().enumerate() {
        let started = Instant::now();
        let resp = op
            .answer(&ep, &asked[i], accept(&format!("after{i}")))
            .await;
        if owner[i] == victim {
            let refusal = assert_error(&resp, 503, -32603, "owner_unreachable");
            assert_eq!(refusal.data()["node"], victim.as_str());
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{:?}",
                started.elapsed()
            );
        } else {
            assert_eq!(output(&resp)["content"]["name"], format!("after{i}"));
        }
    }
    // The replay-mode operation does not care which replica died: its next
    // rounds run on the survivors.
    let next = replay_op
        .answer(&replay_ep, &replay_asked, accept("still here"))
        .await;
    let second = input_required("tools/call", &next);
    let done = replay_op
        .answer(&replay_ep, &second, accept("and here"))
        .await;
    assert_eq!(names(&output(&done)), ["still here", "and here"]);
    cluster.settled().await;

    // Drain: a waiting operation owned by a survivor, then SIGTERM to it.
    let survivors: Vec<&'static str> = cluster.running().map(|r| r.node).collect();
    let mut waiting = None;
    for i in 0..6 {
        let op = Op::tool("ask", json!({"tag": format!("d{i}")})).caps(form_caps());
        let a = input_required("tools/call", &op.start(&ep).await);
        if claims(&a.state).node == survivors[0] {
            waiting = Some((op, a));
            break;
        }
        // Not the one to drain: answered at once, at its owner, so the
        // balancer sees one request per attempt and alternates its replicas.
        let owner = claims(&a.state).node;
        let direct = McpClient::new(format!("{}/mcp", cluster.replica(&owner).process().base));
        output(&op.answer(&direct, &a, accept("skip")).await);
    }
    let (op, a) = waiting.expect("round robin reaches every survivor");
    let draining = cluster.replica_mut(survivors[0]).process.take().unwrap();
    let admin = draining.admin.clone();
    let stopping = tokio::spawn(draining.stop_within(Duration::from_secs(60)));
    eventually("the drained replica's /readyz to be 503", || async {
        match reqwest::get(format!("{admin}/readyz")).await {
            Ok(r) if r.status() == 503 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(!stopping.is_finished());
    let done = op.answer(&ep, &a, accept("drained")).await;
    assert_eq!(output(&done)["content"]["name"], "drained");
    let lines = tokio::time::timeout(Duration::from_secs(30), stopping)
        .await
        .expect("the drained replica exits once its operation ended")
        .unwrap();
    assert!(lines.iter().any(|l| l.contains("draining")), "{lines:#?}");
    cluster.settled().await;
}

/// A 2025-era client (PyPI `mcp` 1.30.0 `ClientSession`) through the same
/// balancer: its `initialize`, its call and each of its answers land on
/// whichever replica; the session is sealed into its id, so any replica
/// serves it, and an answer that lands on a replica that does not hold the
/// call is forwarded to the one that does (named, sealed, in the question's id).
#[tokio::test]
async fn a_2025_era_session_is_served_by_every_replica_and_its_answers_forwarded() {
    let cluster = Cluster::start().await;
    for (route, tag) in [
        ("/mcp", "s25-http"),
        ("/stdio", "s25-stdio"),
        ("/replay", "s25-replay"),
    ] {
        for i in 0..3 {
            let tag = format!("{tag}-{i}");
            let lines = py_client_2025(&cluster.url(route), &rounds_script(&tag)).await;
            assert!(
                lines.iter().any(|l| l["event"] == "initialized"),
                "{route}: {lines:?}"
            );
            let done = step(&lines, 0);
            assert_eq!(done["ok"], true, "{route}: {lines:?}");
            let out = tool_output(&done["result"]);
            assert_eq!(out["tag"], tag.as_str());
            assert_eq!(names(&out), ["one", "two", "three"], "{route}");
        }
    }
    // Nine calls of three answers each, by round robin over three replicas:
    // answers landed away from their call and were forwarded, and arrived.
    let mut out = 0.0;
    let mut into = 0.0;
    for route in ["main", "stdio"] {
        out += cluster.sum(&forwarded(route)).await;
        into += cluster.sum(&received(route)).await;
    }
    assert!(out >= 2.0, "{out} answers forwarded");
    assert_eq!(out, into, "every forward arrived");
    cluster.settled().await;
}

/// What a 2025-era session changes after `initialize` holds on every
/// replica through the `[state] store`: the log level one replica was told
/// filters the calls the others serve, and a DELETE on one ends the session
/// on all (each request of the session lands on the next replica).
#[tokio::test]
async fn a_2025_era_sessions_log_level_and_end_hold_on_every_replica() {
    let cluster = Cluster::start().await;
    let mut s = Session2025::new(&cluster.url("/mcp"));
    assert_eq!(s.initialize("2025-11-25", json!({})).await.status, 200);
    let set = s
        .request(json!(1), "logging/setLevel", json!({"level": "warning"}))
        .await;
    assert_eq!(set.result(), &json!({}));
    // Six calls round robin: every replica relays only what is at or above warning.
    for i in 0..6 {
        let level = if i % 2 == 0 { "info" } else { "error" };
        let r = s
            .request(
                json!(10 + i),
                "tools/call",
                json!({"name": "log", "arguments": {"level": level, "text": format!("t{i}")}}),
            )
            .await;
        assert_eq!(
            r.last()["result"]["content"][0]["text"],
            "logged",
            "{}",
            r.raw
        );
        let logs = r
            .messages
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .count();
        assert_eq!(
            logs,
            usize::from(level == "error"),
            "call {i} ({level}): {:?}",
            r.messages
        );
    }
    assert_eq!(s.delete().await, 200);
    for i in 0..3 {
        let r = s.request(json!(20 + i), "ping", json!({})).await;
        assert_error(&r, 404, -32600, "session_unknown");
    }
    cluster.settled().await;
}
