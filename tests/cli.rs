//! The `redmark` command as a user runs it: help, check, hash-key, and serve
//! with a graceful SIGTERM that ends the upstream processes too.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use serde_json::json;

fn redmark() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_redmark"))
}

/// `redmark check --config CONFIG`.
fn check(config: &std::path::Path) -> std::process::Output {
    redmark()
        .args(["check", "--config"])
        .arg(config)
        .output()
        .unwrap()
}

#[test]
fn help_names_every_command() {
    let out = redmark().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for word in ["serve", "check", "hash-key", "legacy MCP servers"] {
        assert!(text.contains(word), "--help lacks {word:?}:\n{text}");
    }
}

#[test]
fn check_accepts_the_rooms_example() {
    let dir = tempfile::tempdir().unwrap();
    let out = check(&rooms_example(dir.path()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok"));
}

#[test]
fn check_names_file_and_line_of_each_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[server]\nlisten = \"127.0.0.1:8080\"\n\n[[route]]\nname = \"r\"\npath = \"/mcp\"\ncolour = \"red\"\n[route.upstream]\ncommand = [\"x\"]\n").unwrap();
    let out = check(&path);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:7:"), "{err}");
    assert!(err.contains("colour"), "{err}");

    std::fs::write(&path, "[server]\nlisten = \"127.0.0.1:8080\"\n[[route]]\nname = \"r\"\npath = \"mcp\"\n[route.upstream]\nurl = \"ftp://x\"\n").unwrap();
    let out = check(&path);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("path must start with `/`"), "{err}");
    assert!(err.contains("http:// or https://"), "{err}");
    assert!(
        err.contains("bad.toml:3:") && err.contains("bad.toml:6:"),
        "{err}"
    );
}

/// A stdio command that is not there, or not executable, and an HTTP URL
/// that does not parse: each an error at its route's line, exit code 1.
#[test]
fn check_finds_upstreams_that_cannot_start() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("server.py");
    std::fs::write(&script, "print()\n").unwrap();
    let path = dir.path().join("redmark.toml");
    std::fs::write(
        &path,
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[route]]\nname = \"gone\"\npath = \"/a\"\n[route.upstream]\ncommand = [\"no-such-mcp-server\"]\n\n\
         [[route]]\nname = \"script\"\npath = \"/b\"\n[route.upstream]\ncommand = [\"./server.py\"]\n\n\
         [[route]]\nname = \"web\"\npath = \"/c\"\n[route.upstream]\nurl = \"http://exa mple.com/mcp\"\n\n\
         [[route]]\nname = \"fine\"\npath = \"/d\"\n[route.upstream]\ncommand = [\"sh\"]\n",
    )
    .unwrap();
    let out = check(&path);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let line = |n: usize, words: &[&str]| {
        let l = err
            .lines()
            .find(|l| l.contains(&format!("redmark.toml:{n}:")))
            .unwrap_or_else(|| panic!("nothing at line {n}: {err}"));
        for w in words {
            assert!(l.contains(w), "{w:?} not in {l}");
        }
    };
    line(
        7,
        &["route `gone`", "`no-such-mcp-server` not found on PATH"],
    );
    line(13, &["route `script`", "not executable"]);
    line(19, &["route `web`", "does not parse"]);
    assert!(!err.contains("route `fine`"), "{err}");
}

/// `--probe` starts the server and lists its tools: a policy section for a
/// tool it does not have guards nothing, and is an error with a suggestion.
#[test]
fn check_probe_finds_policy_sections_for_tools_the_server_does_not_have() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[tool.create_ticket]\nkeys = [\"priority\"]\n\n[tool.book_rom.fields.room_id]\nauthz = 'value != \"atrium\"'\n",
    )
    .unwrap();
    let path = dir.path().join("redmark.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[[route]]\nname = \"rooms\"\npath = \"/mcp\"\npolicy = \"policy.toml\"\n[route.upstream]\ncommand = [{}]\n",
            toml_path(&rooms_bin())
        ),
    )
    .unwrap();
    // Without --probe nothing is started, so nothing is known of the tools.
    assert!(check(&path).status.success());
    let out = redmark()
        .args(["check", "--probe", "--config"])
        .arg(&path)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let listed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{err}{listed}");
    assert!(
        listed.contains("book_room") && listed.contains("create_ticket"),
        "{listed}"
    );
    let problem = err
        .lines()
        .find(|l| l.contains("policy.toml:4:"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        problem.contains("no tool or prompt `book_rom`"),
        "{problem}"
    );
    assert!(problem.contains("did you mean book_room?"), "{problem}");
    assert!(!err.contains("create_ticket"), "{err}");
}

#[test]
fn hash_key_prints_the_sha256() {
    let mut child = redmark()
        .arg("hash-key")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"s3cret\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        redmark::config::key_digest_hex("s3cret")
    );
}

fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

#[tokio::test]
async fn serve_answers_then_stops_gracefully_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let config = rooms_example(dir.path());
    let gw = RedmarkProcess::start(&config, false, &[]).await;
    let client = McpClient::new(gw.url("/mcp/rooms"));
    let resp = client.rpc("tools/list", json!({}), json!({})).await;
    assert!(
        resp.result()["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );

    // Under `protocol = "auto"` the first request asks a throwaway process
    // `server/discover`; the legacy answer closes it while the legacy pool
    // starts its own, so for a moment two processes can be alive.
    let pid = gw.pid();
    let upstreams = eventually("one rooms process behind the gateway", || async move {
        let children = children_of(pid);
        if children.len() == 1 {
            Ok(children)
        } else {
            Err(format!("children: {children:?}"))
        }
    })
    .await;
    // SIGTERM, and a clean exit within 20 s.
    gw.stop_within(Duration::from_secs(20)).await;
    for upstream in upstreams {
        let state = std::fs::read_to_string(format!("/proc/{upstream}/stat")).unwrap_or_default();
        assert!(
            state.is_empty(),
            "upstream process {upstream} outlived the gateway: {state}"
        );
    }
}

/// A server that dies under the gateway is an INFO line an operator sees
/// ("upstream session lost"); the sessions redmark itself closes at
/// shutdown, whose servers exit on their closed stdin, are not.
#[tokio::test]
async fn a_server_that_dies_is_logged_lost_and_a_shutdown_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let config = rooms_example(dir.path());
    let gw = RedmarkProcess::start(&config, false, &[]).await;
    let client = McpClient::new(gw.url("/mcp/rooms"));
    let list = client.rpc("tools/list", json!({}), json!({})).await;
    assert!(
        list.result()["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{}",
        list.last()
    );
    let pid = gw.pid();
    let upstream = eventually("one rooms process behind the gateway", || async move {
        match children_of(pid)[..] {
            [one] => Ok(one),
            ref children => Err(format!("children: {children:?}")),
        }
    })
    .await;
    let status = std::process::Command::new("kill")
        .args(["-KILL", &upstream.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let lost = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.contains("upstream session lost"))
            .count()
    };
    let running = &gw;
    eventually("the killed server's session logged lost", || async move {
        let lines = running.stderr_lines();
        if lost(&lines) == 1 {
            Ok(())
        } else {
            Err(format!("stderr so far: {lines:#?}"))
        }
    })
    .await;
    // A new session (and server) serves the next call (a list would come
    // from the gateway's cache), and is closed at shutdown.
    let call = client
        .rpc("tools/call", json!({"name": "list_rooms"}), json!({}))
        .await;
    assert!(call.result()["content"].is_array(), "{}", call.last());
    let lines = gw.stop_within(Duration::from_secs(20)).await;
    let started = lines
        .iter()
        .filter(|l| l.contains("upstream session started"))
        .count();
    assert_eq!(started, 2, "{lines:#?}");
    assert_eq!(lost(&lines), 1, "{lines:#?}");
}

/// The lines of a JSON log that say a native stdio server ended, as
/// (level, message).
fn ended_lines(lines: &[String]) -> Vec<(String, String)> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| {
            v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("native stdio server ended"))
        })
        .map(|v| {
            (
                v["level"].as_str().unwrap_or_default().to_owned(),
                v["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Under `protocol = "auto"` the first request asks a throwaway process
/// `server/discover`; a legacy server's answer has redmark stop it. That end
/// is redmark's own doing, at every start: DEBUG, not an INFO line an
/// operator would read as a server dying.
#[tokio::test]
async fn the_protocol_probes_own_process_ending_is_debug() {
    let dir = tempfile::tempdir().unwrap();
    let config = rooms_example(dir.path());
    let debug = [("RUST_LOG", "redmark=debug".to_owned())];
    let gw = RedmarkProcess::start(&config, true, &debug).await;
    let client = McpClient::new(gw.url("/mcp/rooms"));
    let resp = client.rpc("tools/list", json!({}), json!({})).await;
    assert!(resp.result()["tools"].is_array(), "{}", resp.last());
    let running = &gw;
    let ended = eventually("the probe's process to end", || async move {
        match ended_lines(&running.stderr_lines())[..] {
            [] => Err("not yet".to_owned()),
            ref ended => Ok(ended.to_vec()),
        }
    })
    .await;
    assert_eq!(ended.len(), 1, "{ended:#?}");
    assert_eq!(ended[0].0, "DEBUG", "{ended:#?}");
    let lines = gw.stop_within(Duration::from_secs(20)).await;
    let info: Vec<_> = ended_lines(&lines)
        .into_iter()
        .filter(|(level, _)| level != "DEBUG")
        .collect();
    assert!(info.is_empty(), "{info:#?}");
}

/// A server that ends by itself while redmark is talking to it (here: it
/// reads the probe's `server/discover` and exits) is still an INFO line.
#[tokio::test]
async fn a_native_stdio_server_ending_on_its_own_is_info() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("redmark.toml");
    std::fs::write(
        &config,
        stdio_config(&["/bin/sh", "-c", "read -r request; exit 0"], ""),
    )
    .unwrap();
    let gw = RedmarkProcess::start(&config, true, &[]).await;
    let client = McpClient::new(gw.url("/mcp"));
    // The call fails (no server answers); what matters is the log.
    let _ = client.rpc("tools/list", json!({}), json!({})).await;
    let running = &gw;
    let ended = eventually("the server's end to be logged", || async move {
        match ended_lines(&running.stderr_lines())[..] {
            [] => Err("not yet".to_owned()),
            ref ended => Ok(ended.to_vec()),
        }
    })
    .await;
    assert_eq!(ended[0].0, "INFO", "{ended:#?}");
    assert_eq!(ended[0].1, "native stdio server ended", "{ended:#?}");
    drop(gw);
}

#[tokio::test]
async fn sighup_without_a_policy_file_does_not_end_the_gateway() {
    // SIGHUP's default action ends a process: logrotate's `kill -HUP` must not.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("redmark.toml");
    std::fs::write(&config, rooms_config("")).unwrap();
    let gw = RedmarkProcess::start(&config, false, &[]).await;
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &gw.pid().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    eventually("the SIGHUP was handled", || async {
        let lines = gw.stderr_lines();
        if lines
            .iter()
            .any(|l| l.contains("config reloaded") && l.contains("SIGHUP"))
        {
            Ok(())
        } else {
            Err(format!("stderr so far: {lines:?}"))
        }
    })
    .await;
    let client = McpClient::new(gw.url("/mcp"));
    let resp = client.rpc("tools/list", json!({}), json!({})).await;
    assert!(resp.result()["tools"].is_array(), "{:?}", resp.raw);
    // `stop` asserts a clean exit on SIGTERM: not killed by the SIGHUP.
    let lines = gw.stop().await;
    // stderr is a pipe here: `--log-color auto` writes no ANSI escapes into it.
    assert!(
        lines.iter().all(|l| !l.contains('\u{1b}')),
        "colour codes in a redirected log: {lines:?}"
    );
}

/// Environment variables a command runs with.
type Env<'a> = Vec<(&'a str, &'a str)>;

/// `redmark serve --config CONFIG` with `env`, which must refuse to start:
/// the message it stops with (its `redmark: ` line, without the prefix).
async fn serve_refusal(config: &std::path::Path, env: &[(&str, &str)]) -> String {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_redmark"));
    cmd.args(["serve", "--config"])
        .arg(config)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(PATIENCE, cmd.output())
        .await
        .expect("serve refused in time")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "serve started: {stderr}");
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("redmark: "))
        .unwrap_or_else(|| panic!("no `redmark: ` line: {stderr}"))
        .to_owned()
}

/// Each thing `serve` refuses before it serves, walked through `check`
/// too: `check` fails on it, with the message `serve` stops with, said once
/// (issue 37: `check` passed a `[cluster]` secret that `serve` refused).
#[tokio::test]
async fn check_refuses_what_serve_refuses_with_the_same_message() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["not-a-cert.pem", "not-a-key.pem"] {
        std::fs::write(dir.path().join(name), "not PEM\n").unwrap();
    }
    let key = "cmVkbWFyay10ZXN0LXN0YXRlLWtleS0zMi1ieXRlcyE";
    let server = "[server]\nlisten = \"127.0.0.1:0\"\n";
    let route =
        "[[route]]\nname = \"r\"\npath = \"/mcp\"\n[route.upstream]\ncommand = [\"true\"]\n";
    let state = format!("[[state.keys]]\nid = \"k1\"\nsecret = \"{key}\"\nsign = true\n");
    let cluster = |store: &str| {
        format!(
            "[cluster]\nlisten = \"127.0.0.1:0\"\nadvertise = \"http://127.0.0.1:9\"\nsecret_env = \"REDMARK_CLUSTER_KEY\"\n[state]\nstore = \"{store}\"\n{state}"
        )
    };
    // What, the tables the config adds, the environment, what the refusal says.
    let cases: Vec<(&str, String, Env, &str)> = vec![
        (
            "a cluster secret that is not base64url",
            cluster("redis://127.0.0.1:9/0"),
            vec![("REDMARK_CLUSTER_KEY", "not a secret!")],
            "REDMARK_CLUSTER_KEY is not base64url",
        ),
        (
            "a cluster secret that is not set",
            cluster("redis://127.0.0.1:9/0"),
            vec![],
            "REDMARK_CLUSTER_KEY (secret_env) is not set",
        ),
        (
            "a store URL the store client does not take",
            cluster("redis://127.0.0.1:99999/0"),
            vec![("REDMARK_CLUSTER_KEY", key)],
            "[state] store `redis://127.0.0.1:99999/0`",
        ),
        (
            "a state key whose environment variable is not set",
            "[[state.keys]]\nid = \"k1\"\nsecret_env = \"REDMARK_TEST_KEY_K1\"\nsign = true\n"
                .into(),
            vec![],
            "environment variable REDMARK_TEST_KEY_K1 is not set",
        ),
        (
            "a state key whose environment variable is not a secret",
            "[[state.keys]]\nid = \"k1\"\nsecret_env = \"REDMARK_TEST_KEY_K1\"\nsign = true\n"
                .into(),
            vec![("REDMARK_TEST_KEY_K1", "short")],
            "the secret is not base64url of at least 16 bytes",
        ),
        (
            "TLS files that hold no certificate and no key",
            "[server.tls]\ncert = \"not-a-cert.pem\"\nkey = \"not-a-key.pem\"\n".into(),
            vec![],
            "client listener TLS: ",
        ),
        (
            // Refused by the config's own checks, which both commands run.
            "OAuth routes with no canonical URL",
            "[auth.oauth]\nissuer = \"https://issuer.example\"\nscopes = [\"mcp\"]\n".into(),
            vec![],
            "route `r`: no audience",
        ),
        (
            "an upstream token whose environment variable is not set",
            String::new(),
            vec![],
            "upstream bearer_token_env REDMARK_TEST_TOKEN is not set",
        ),
    ];
    for (i, (what, tables, env, says)) in cases.iter().enumerate() {
        let mut text = format!("{server}{tables}\n{route}");
        if what.contains("OAuth") {
            // Not a loopback listener: its address is no route's origin.
            text = text.replace("listen = \"127.0.0.1:0\"\n", "listen = \"0.0.0.0:0\"\n");
        }
        if what.contains("upstream token") {
            text = text.replace(
                "command = [\"true\"]\n",
                "url = \"http://127.0.0.1:9/mcp\"\nbearer_token_env = \"REDMARK_TEST_TOKEN\"\n",
            );
        }
        let config = dir.path().join(format!("case-{i}.toml"));
        std::fs::write(&config, &text).unwrap();

        let refused = serve_refusal(&config, env).await;
        assert!(refused.contains(says), "{what}: serve said {refused:?}");
        let checked = redmark()
            .args(["check", "--config"])
            .arg(&config)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&checked.stderr);
        assert_eq!(
            checked.status.code(),
            Some(1),
            "{what}: check passed: {stderr}"
        );
        assert!(
            stderr
                .lines()
                .any(|l| l == refused || l.ends_with(&format!(": {refused}"))),
            "{what}: check did not say {refused:?}:\n{stderr}"
        );
        assert_eq!(
            refused.matches(says).count(),
            1,
            "{what}: said twice: {refused}"
        );
    }
}
