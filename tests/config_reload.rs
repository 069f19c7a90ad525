//! Reloading `redmark.toml` in the running binary: SIGHUP and `redmark
//! reload` put new API keys, routes and requestState keys in force at once;
//! settings bound at start are logged "restart needed" while the rest
//! applies; an invalid file keeps the running config and says why; an
//! operation in flight across a signing-key switch completes.

// A test may panic (that is how it fails).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use serde_json::{Value, json};

fn hup(gw: &RedmarkProcess) {
    let ok = std::process::Command::new("kill")
        .args(["-HUP", &gw.pid().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Waits until stderr has `n` lines containing `needle`; returns the last.
async fn logged(gw: &RedmarkProcess, needle: &str, n: usize) -> String {
    eventually(&format!("{n} line(s) with {needle:?}"), || async {
        let lines: Vec<String> = gw
            .stderr_lines()
            .into_iter()
            .filter(|l| l.contains(needle))
            .collect();
        if lines.len() >= n {
            Ok(lines[n - 1].clone())
        } else {
            Err(format!("{:#?}", gw.stderr_lines()))
        }
    })
    .await
}

async fn list(url: &str, key: &str) -> Resp {
    let client = McpClient::new(url);
    let rb = client
        .request("tools/list", json!({"_meta": meta(json!({}))}))
        .header("authorization", format!("Bearer {key}"));
    read_resp(client.send(rb).await).await
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

fn route(name: &str, path: &str) -> String {
    format!(
        "[[route]]\nname = {}\npath = {}\n[route.upstream]\ncommand = [{}]\n",
        toml_str(name),
        toml_str(path),
        toml_path(&rooms_bin())
    )
}

#[tokio::test]
async fn sighup_reloads_keys_and_routes_and_keeps_the_config_when_the_file_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("redmark.toml");
    let server = "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n";
    let alice = api_key("k-alice", "alice", &[]);
    let bob = api_key("k-bob", "bob", &[]);
    write(
        &config,
        &format!("{server}{alice}{}", route("main", "/mcp")),
    );
    let gw = RedmarkProcess::start(&config, false, &[]).await;
    let (main, two) = (gw.url("/mcp"), gw.url("/mcp/two"));
    assert_eq!(list(&main, "k-alice").await.status, 200);
    assert_eq!(list(&main, "k-bob").await.reason(), "invalid_credentials");

    // An API key and a route added.
    write(
        &config,
        &format!(
            "{server}{alice}{bob}{}{}",
            route("main", "/mcp"),
            route("two", "/mcp/two")
        ),
    );
    hup(&gw);
    let line = logged(&gw, "config reloaded", 1).await;
    assert!(line.contains("two"), "{line}");
    let r = list(&main, "k-bob").await;
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(list(&two, "k-alice").await.status, 200);

    // A file that does not load changes nothing.
    write(&config, "[server\nlisten = ");
    hup(&gw);
    logged(
        &gw,
        "config reload failed; the running config stays in force",
        1,
    )
    .await;
    assert_eq!(list(&main, "k-bob").await.status, 200);
    assert_eq!(list(&two, "k-bob").await.status, 200);

    // A setting bound at start is "restart needed"; the rest (a route removed) applies.
    write(
        &config,
        &format!(
            "{server}max_connections = 100\n{alice}{bob}{}",
            route("main", "/mcp")
        ),
    );
    hup(&gw);
    let line = logged(&gw, "restart needed", 1).await;
    assert!(line.contains("server.max_connections"), "{line}");
    let line = logged(&gw, "config reloaded", 2).await;
    assert!(line.contains("removed"), "{line}");
    let gone = reqwest::Client::new().post(&two).send().await.unwrap();
    assert_eq!(gone.status().as_u16(), 404);
    assert_eq!(list(&main, "k-alice").await.status, 200);
    gw.stop().await;
}

/// The signing key switched by `redmark reload` while a question is open:
/// the open operation's state (sealed with k1, still verified) completes,
/// and new states are sealed with k2.
#[tokio::test]
async fn redmark_reload_switches_the_signing_key_without_dropping_an_operation() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("redmark.toml");
    let (s1, s2) = (
        redmark::mrtr::state::generate_secret(),
        redmark::mrtr::state::generate_secret(),
    );
    let policy = toml_path(&repo().join("policies/rooms.toml"));
    let text = |keys: &str| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{keys}\n[[route]]\nname = \"main\"\npath = \"/mcp\"\npolicy = {policy}\n[route.upstream]\ncommand = [{}]\n",
            toml_path(&rooms_bin())
        )
    };
    write(
        &config,
        &text(&format!(
            "[[state.keys]]\nid = \"k1\"\nsecret = \"{s1}\"\nsign = true\n"
        )),
    );
    let gw = RedmarkProcess::start(&config, false, &[]).await;
    let client = McpClient::new(gw.url("/mcp"));
    let op =
        Op::tool("create_ticket", json!({"title": "printer"})).caps(json!({"elicitation": {}}));
    let asked = input_required("tools/call", &op.start(&client).await);
    assert!(asked.state.starts_with("k1."), "{}", asked.state);

    write(
        &config,
        &text(&format!(
            "[[state.keys]]\nid = \"k2\"\nsecret = \"{s2}\"\nsign = true\n[[state.keys]]\nid = \"k1\"\nsecret = \"{s1}\"\n"
        )),
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_redmark"))
        .args(["reload", "--admin", &gw.admin])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(done["signing_key"], "k2", "{done}");
    assert_eq!(
        done["routes_changed"],
        json!([]),
        "an unchanged route keeps its sessions"
    );

    let answer = asked.reply("priority", accepted(json!({"priority": 3})));
    let r = op.retry(&client, &asked.state, answer).await;
    assert_eq!(r.result()["resultType"], "complete", "{}", r.raw);
    let next = input_required("tools/call", &op.start(&client).await);
    assert!(next.state.starts_with("k2."), "{}", next.state);
    gw.stop().await;
}

/// Under `redmark serve`, SIGHUP reloads the config file, and the policies
/// with it, once: the policy watcher leaves SIGHUP to the config reload. A
/// route removed by a reload has its policy file no longer watched.
#[tokio::test]
async fn one_sighup_reads_a_policy_once_and_a_removed_routes_policy_is_not_watched() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("redmark.toml");
    let (one, two) = (dir.path().join("one.toml"), dir.path().join("two.toml"));
    write(&one, "[tool.book_room]\nmax_reasks = 1\n");
    write(&two, "[tool.book_room]\nmax_reasks = 2\n");
    let with_policy = |name: &str, path: &str, policy: &Path| {
        route(name, path).replace(
            "[route.upstream]",
            &format!("policy = {}\n[route.upstream]", toml_path(policy)),
        )
    };
    let server = "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n";
    write(
        &config,
        &format!(
            "{server}{}{}",
            with_policy("main", "/mcp", &one),
            with_policy("two", "/mcp/two", &two)
        ),
    );
    let gw = RedmarkProcess::start(&config, false, &[]).await;

    // The route `two` removed, by SIGHUP.
    write(
        &config,
        &format!("{server}{}", with_policy("main", "/mcp", &one)),
    );
    hup(&gw);
    logged(&gw, "config reloaded", 1).await;
    // Then `two`'s file broken and `one`'s changed: the watcher sees `one`
    // (in the same pass it would have seen `two`).
    write(&two, "[tool.book_room\n");
    write(&one, "[tool.book_room]\nmax_reasks = 3\n");
    logged(&gw, "file changed", 1).await;

    let policy_lines: Vec<String> = gw
        .stderr_lines()
        .into_iter()
        .filter(|l| l.contains("policy reload"))
        .collect();
    let by_sighup = policy_lines.iter().filter(|l| l.contains("SIGHUP")).count();
    assert_eq!(
        by_sighup, 1,
        "one SIGHUP, one read of main's policy: {policy_lines:#?}"
    );
    assert!(
        policy_lines.iter().all(|l| !l.contains("two.toml")),
        "the removed route's policy is not watched: {policy_lines:#?}"
    );
    assert!(
        policy_lines.iter().all(|l| !l.contains("failed")),
        "{policy_lines:#?}"
    );
    gw.stop().await;
}

/// Issue 42: the admin listener checked neither `Origin` nor `Host`. A web
/// page could reload the config with a cross-origin `text/plain` POST (no
/// preflight) and read `/metrics` through a rebound name. Now `POST
/// /reload` needs `Content-Type: application/json`, a foreign `Origin` is
/// refused, and only `Host`s naming this listener are answered.
#[tokio::test]
async fn the_admin_listener_refuses_cross_origin_reloads_and_rebound_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("redmark.toml");
    let server = "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n";
    let alice = api_key("k-alice", "alice", &[]);
    let bob = api_key("k-bob", "bob", &[]);
    write(
        &config,
        &format!("{server}{alice}{}", route("main", "/mcp")),
    );
    let gw = RedmarkProcess::start(&config, false, &[]).await;
    let main = gw.url("/mcp");
    // A change waiting for a reload: bob's key.
    write(
        &config,
        &format!("{server}{alice}{bob}{}", route("main", "/mcp")),
    );
    let http = reqwest::Client::new();
    let reload = format!("{}/reload", gw.admin);
    let port = gw.admin.rsplit(':').next().unwrap().to_owned();
    let status = |r: reqwest::Response| r.status().as_u16();

    // What a page's `fetch(..., {method: "POST", body: "x"})` sends: text/plain.
    let plain = http
        .post(&reload)
        .header("content-type", "text/plain")
        .header("origin", "http://evil.example")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(status(plain), 403);
    let no_type = http.post(&reload).body("x").send().await.unwrap();
    assert_eq!(status(no_type), 415);
    let cross = http
        .post(&reload)
        .header("content-type", "application/json")
        .header("origin", "http://evil.example")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(status(cross), 403);
    let rebound = http
        .post(&reload)
        .header("content-type", "application/json")
        .header("host", format!("evil.example:{port}"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(status(rebound), 403);
    assert_eq!(
        list(&main, "k-bob").await.reason(),
        "invalid_credentials",
        "no refused request reloaded the config"
    );

    // Reads: a rebound name is refused, loopback names are answered.
    let metrics = format!("{}/metrics", gw.admin);
    for (host, want) in [
        (format!("evil.example:{port}"), 403),
        (format!("localhost:{port}"), 200),
        (format!("127.0.0.1:{port}"), 200),
    ] {
        let r = http
            .get(&metrics)
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(status(r), want, "Host: {host}");
    }
    let readyz = http
        .get(format!("{}/readyz", gw.admin))
        .header("host", "rebind.evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(status(readyz), 403);

    // The real thing: what `redmark reload` sends.
    let ok = http
        .post(&reload)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(status(ok), 200);
    assert_eq!(list(&main, "k-bob").await.status, 200);
    gw.stop().await;
}
