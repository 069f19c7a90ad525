//! Three `redmark` processes behind a Debian nginx (plain round robin, no
//! stickiness), with a Debian `redis-server` as `[state] store`: route `/mcp`
//! in front of one `tests/fixtures/mrtr_server.py` over Streamable HTTP shared
//! by all three, route `/stdio` in front of one per replica, route `/replay`
//! in front of the shared server in replay mode. Real 2026-07-28
//! clients (PyPI `mcp` 2.3.0, npm `@modelcontextprotocol/client`) walk
//! multi-round hold-mode operations whose rounds land on different replicas;
//! the replicas' own `/metrics` say they forwarded. Replay-mode operations
//! complete with nothing forwarded, and a consumed replay-mode state is
//! refused by every replica (Redis). Then 20 concurrent
//! operations answered in reverse order, the internal endpoint refusing an
//! unsigned request, 20 concurrent three-round replay-mode operations, `kill
//! -9` of a replica mid-operation (its hold-mode questions are
//! `owner_unreachable`, a replay-mode one it started completes on the
//! others), and a drained
//! replica finishing its operation before it exits.
//!
//! Everything listens on 127.0.0.1, on ports chosen here; nginx's config is
//! written to a temporary directory; every process is killed at the end.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod mrtr_support;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use mrtr_support::{TEST_SECRET, accept, claims, form_caps, secret};
use serde_json::{Value, json};
use tokio::process::Command;

const NODES: [&str; 3] = ["r1", "r2", "r3"];

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One replica: its process and its internal endpoint.
struct Replica {
    node: &'static str,
    process: Option<RedmarkProcess>,
    internal: u16,
}

impl Replica {
    fn process(&self) -> &RedmarkProcess {
        self.process.as_ref().expect("replica running")
    }

    async fn metrics(&self) -> String {
        reqwest::get(format!("{}/metrics", self.process().admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    async fn metric(&self, sample: &str) -> f64 {
        self.metrics()
            .await
            .lines()
            .find_map(|l| l.strip_prefix(sample).and_then(|v| v.trim().parse().ok()))
            .unwrap_or(0.0)
    }
}

struct Cluster {
    _dir: tempfile::TempDir,
    _redis: ChildGuard,
    _server: ChildGuard,
    _native: ChildGuard,
    _nginx: ChildGuard,
    replicas: Vec<Replica>,
    /// `http://127.0.0.1:<nginx port>`
    base: String,
}

fn forwarded(route: &str) -> String {
    format!(r#"redmark_forwarded_retries_total{{route="{route}",outcome="forwarded"}}"#)
}

fn replayed(tool: &str) -> String {
    format!(r#"redmark_replay_rounds_total{{route="replay",tool="{tool}"}}"#)
}

fn received(route: &str) -> String {
    format!(r#"redmark_forwards_received_total{{route="{route}"}}"#)
}

const PENDING: &str = "redmark_pending_operations";

fn replica_config(node: &str, internal: u16, redis: u16, server: u16, native: u16) -> String {
    let py = legacy_python();
    let script = fixture_file("mrtr_server.py");
    format!(
        r#"[server]
listen = "127.0.0.1:0"
node_id = "{node}"

[state]
store = "redis://127.0.0.1:{redis}/0"

[[state.keys]]
id = "k1"
secret_env = "REDMARK_STATE_KEY"
sign = true

[cluster]
listen = "127.0.0.1:{internal}"
secret_env = "REDMARK_CLUSTER_KEY"
drain = "60s"

[mrtr]
gather = "300ms"
gather_quiet = "300ms"

[[route]]
name = "main"
path = "/mcp"
[route.upstream]
url = "http://127.0.0.1:{server}/mcp"
init_timeout = "60s"

[[route]]
name = "stdio"
path = "/stdio"
[route.upstream]
command = [{}, {}]
init_timeout = "120s"

# Gateway-made tasks: one rooms server per replica; a task's tasks/* are
# forwarded to the replica holding it.
[[route]]
name = "tasks"
path = "/tasks"
policy = "tasks.toml"
[route.upstream]
command = [{}]
{}
[route.tasks]
poll_interval = "100ms"

# A native server's own tasks, relayed: one rmcp server behind every
# replica; a task's tasks/* go to the replica that relayed its creation.
[[route]]
name = "native-tasks"
path = "/native-tasks"
policy = "native-tasks.toml"
[route.upstream]
protocol = "2026-07-28"
url = "http://127.0.0.1:{native}/mcp"
[route.tasks]

# Replay mode: nothing held between rounds, no owner to forward to.
[[route]]
name = "replay"
path = "/replay"
policy = "replay.toml"
[route.upstream]
url = "http://127.0.0.1:{server}/mcp"
init_timeout = "60s"
"#,
        toml_path(&py),
        toml_path(&script),
        toml_path(&rooms_bin()),
        rooms_state_env(),
    )
}

/// The nginx config of the book (docs/src/guides/replicas.md, "nginx in front"), on `port`.
fn nginx_config(dir: &Path, port: u16, upstreams: &[String]) -> String {
    let servers: String = upstreams
        .iter()
        .map(|u| format!("        server {u};\n"))
        .collect();
    let d = dir.display();
    format!(
        r#"worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 512; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream redmark {{
{servers}        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://redmark;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 300s;
            proxy_next_upstream error non_idempotent;
        }}
    }}
}}
"#
    )
}

impl Cluster {
    async fn start() -> Cluster {
        ensure_deps();
        let dir = tempfile::tempdir().unwrap();
        let redis_port = free_port();
        let mut redis = Command::new("redis-server");
        redis
            .args(["--port", &redis_port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path());
        let redis = spawn_until(redis, "Ready to accept connections").await;
        let mut server = Command::new(legacy_python());
        server
            .arg(fixture_file("mrtr_server.py"))
            .args(["--http", "0"]);
        let (server, server_port) = spawn_listening(server, "Uvicorn running on").await;
        let mut native = Command::new(example_bin("conformance_fixture"));
        native.args(["--native", "--http", "127.0.0.1:0"]);
        let (native, native_port) =
            spawn_listening(native, "conformance-fixture listening on").await;
        let env = [
            // The harness's default key, so `claims` can read the states.
            ("REDMARK_STATE_KEY", TEST_SECRET.to_owned()),
            ("REDMARK_CLUSTER_KEY", secret()),
        ];
        std::fs::write(
            dir.path().join("replay.toml"),
            "[defaults]\nmode = \"replay\"\n",
        )
        .unwrap();
        let rooms = std::fs::read_to_string(repo().join("policies/rooms.toml")).unwrap();
        std::fs::write(
            dir.path().join("tasks.toml"),
            rooms.replacen(
                "[tool.book_room]\n",
                "[tool.book_room]\ntask = \"required\"\n",
                1,
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("native-tasks.toml"),
            "[tool.multi_input.fields.name]\npattern = \"^[a-z]+$\"\n",
        )
        .unwrap();
        let mut replicas = Vec::new();
        for node in NODES {
            let internal = free_port();
            let path = dir.path().join(format!("{node}.toml"));
            std::fs::write(
                &path,
                replica_config(node, internal, redis_port, server_port, native_port),
            )
            .unwrap();
            let process = RedmarkProcess::start(&path, false, &env).await;
            replicas.push(Replica {
                node,
                process: Some(process),
                internal,
            });
        }
        let upstreams: Vec<String> = replicas
            .iter()
            .map(|r| r.process().base.trim_start_matches("http://").to_owned())
            .collect();
        let port = free_port();
        std::fs::write(
            dir.path().join("nginx.conf"),
            nginx_config(dir.path(), port, &upstreams),
        )
        .unwrap();
        let mut nginx = Command::new("/usr/sbin/nginx");
        nginx
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .args(["-g", "daemon off; master_process off;"]);
        let nginx = nginx.kill_on_drop(true).spawn().expect("nginx starts");
        let nginx = ChildGuard(nginx);
        let base = format!("http://127.0.0.1:{port}");
        let probe = reqwest::Client::new();
        eventually("nginx to answer", || async {
            match probe.get(format!("{base}/nowhere")).send().await {
                Ok(r) => Ok(r.status()),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
        Cluster {
            _dir: dir,
            _redis: redis,
            _server: server,
            _native: native,
            _nginx: nginx,
            replicas,
            base,
        }
    }

    fn url(&self, route: &str) -> String {
        format!("{}{route}", self.base)
    }

    fn replica(&self, node: &str) -> &Replica {
        self.replicas.iter().find(|r| r.node == node).unwrap()
    }

    fn replica_mut(&mut self, node: &str) -> &mut Replica {
        self.replicas.iter_mut().find(|r| r.node == node).unwrap()
    }

    fn running(&self) -> impl Iterator<Item = &Replica> {
        self.replicas.iter().filter(|r| r.process.is_some())
    }

    async fn sum(&self, sample: &str) -> f64 {
        let mut total = 0.0;
        for r in self.running() {
            total += r.metric(sample).await;
        }
        total
    }

    async fn settled(&self) {
        for r in self.running() {
            eventually(&format!("{}'s pending gauge to be 0", r.node), || async {
                let n = r.metric(PENDING).await;
                if n == 0.0 { Ok(()) } else { Err(n) }
            })
            .await;
        }
    }
}

fn step(lines: &[Value], i: u64) -> &Value {
    lines
        .iter()
        .find(|l| l["step"] == i)
        .unwrap_or_else(|| panic!("no output for step {i}: {lines:?}"))
}

/// The JSON text a fixture tool returned, from a driver's result.
fn tool_output(result: &Value) -> Value {
    serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()
}

fn names(out: &Value) -> Vec<String> {
    out["answers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["content"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// A three-round operation walked by a real client through the balancer.
fn rounds_script(tag: &str) -> Value {
    json!({
        "steps": [{"op": "call_tool", "name": "rounds", "arguments": {"tag": tag, "n": 3}}],
        "elicitation": [
            {"action": "accept", "content": {"name": "one"}},
            {"action": "accept", "content": {"name": "two"}},
            {"action": "accept", "content": {"name": "three"}},
        ],
    })
}

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

/// A gateway-made task through nginx's round robin: created on one
/// replica, then polled, answered and cancelled through whichever replica
/// each request lands on; every `tasks/*` away from the task's replica is
/// forwarded to it (the sealed id names it), and every replica reads the
/// task the same.
#[tokio::test]
async fn a_task_is_created_on_one_replica_and_polled_updated_and_cancelled_through_the_others() {
    const TASKS: &str = "io.modelcontextprotocol/tasks";
    let cluster = Cluster::start().await;
    let client = McpClient::new(cluster.url("/tasks"));
    let caps = json!({"elicitation": {"form": {}}, "extensions": {TASKS: {}}});
    let task_rpc = |method: &'static str, id: String, params: Value| {
        let (client, caps) = (&client, caps.clone());
        async move {
            let mut params = params;
            params["taskId"] = json!(id);
            params["_meta"] = meta(caps);
            let rb = client
                .request(method, params)
                .header("mcp-name", id.as_str());
            read_resp(client.send(rb).await).await
        }
    };
    let call = json!({"name": "book_room", "arguments": {"day": "2026-12-10", "hour": 11, "room_hint": "the big one"}});
    let status_of = |id: String| async move {
        let r = task_rpc("tasks/get", id, json!({})).await;
        assert_eq!(r.status, 200, "{}", r.raw);
        r.result().clone()
    };

    let made = client.rpc("tools/call", call.clone(), caps.clone()).await;
    assert_eq!(made.result()["resultType"], "task", "{}", made.raw);
    let id = made.result()["taskId"].as_str().unwrap().to_owned();
    let asked = eventually("the task to ask", || {
        let id = id.clone();
        async move {
            let t = status_of(id).await;
            if t["status"] == "input_required" {
                Ok(t)
            } else {
                Err(t.to_string())
            }
        }
    })
    .await;
    // Three polls in a row land on three replicas: the same question.
    for _ in 0..3 {
        assert_eq!(
            status_of(id.clone()).await["inputRequests"],
            asked["inputRequests"]
        );
    }
    // A listen for the task on any replica is sent it: the one holding it
    // as it changes, the others read it from there.
    let mut streams = Vec::new();
    for replica in cluster.running() {
        let direct = McpClient::new(replica.process().url("/tasks"));
        let mut params = json!({"notifications": {"taskIds": [id]}});
        params["_meta"] = meta(caps.clone());
        let mut stream = SseReader::new(
            direct
                .send(direct.request("subscriptions/listen", params))
                .await,
        );
        let ack = stream.next(Duration::from_secs(30)).await.unwrap();
        assert_eq!(
            ack["params"]["notifications"]["taskIds"],
            json!([id]),
            "{}: {ack}",
            replica.node
        );
        let note = stream.next(Duration::from_secs(30)).await.unwrap();
        assert_eq!(note["method"], "notifications/tasks", "{note}");
        assert_eq!(
            note["params"]["inputRequests"], asked["inputRequests"],
            "{}: {note}",
            replica.node
        );
        streams.push((replica.node, stream));
    }
    let answer =
        json!({"inputResponses": {"room": {"action": "accept", "content": {"room_id": "nook"}}}});
    let ack = task_rpc("tasks/update", id.clone(), answer).await;
    assert_eq!(
        ack.result(),
        &json!({"resultType": "complete"}),
        "{}",
        ack.raw
    );
    let done = eventually("the task to complete", || {
        let id = id.clone();
        async move {
            let t = status_of(id).await;
            if t["status"] == "completed" {
                Ok(t)
            } else {
                Err(t.to_string())
            }
        }
    })
    .await;
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("nook"),
        "{done}"
    );
    for (node, mut stream) in streams {
        let completed = loop {
            let n = stream.next(Duration::from_secs(30)).await.unwrap();
            if n["params"]["status"] == "completed" {
                break n;
            }
        };
        assert_eq!(completed["params"]["result"], done["result"], "{node}");
    }

    let made = client.rpc("tools/call", call, caps.clone()).await;
    let id = made.result()["taskId"].as_str().unwrap().to_owned();
    eventually("the second task to ask", || {
        let id = id.clone();
        async move {
            let t = status_of(id).await;
            if t["status"] == "input_required" {
                Ok(())
            } else {
                Err(t.to_string())
            }
        }
    })
    .await;
    let ack = task_rpc("tasks/cancel", id.clone(), json!({})).await;
    assert_eq!(
        ack.result(),
        &json!({"resultType": "complete"}),
        "{}",
        ack.raw
    );
    for _ in 0..3 {
        assert_eq!(status_of(id.clone()).await["status"], "cancelled");
    }
    let out = cluster.sum(&forwarded("tasks")).await;
    let into = cluster.sum(&received("tasks")).await;
    assert!(out >= 6.0, "{out} tasks/* forwarded");
    assert_eq!(out, into, "every forward arrived");
}

/// A native server's task relayed through three replicas: created on one,
/// its questions read and its answers judged through the others (each
/// forwarded to the replica that relayed it, so a red mark reads the same
/// everywhere), and, that replica killed, served by the survivors from
/// its id alone (the server still holds the task).
#[tokio::test]
async fn a_relayed_native_task_is_served_through_every_replica_and_outlives_its_relayer() {
    const TASKS: &str = "io.modelcontextprotocol/tasks";
    let mut cluster = Cluster::start().await;
    let client = McpClient::new(cluster.url("/native-tasks"));
    let caps = json!({"elicitation": {"form": {}}, "extensions": {TASKS: {}}});
    let task_rpc = |method: &'static str, id: String, params: Value| {
        let (client, caps) = (&client, caps.clone());
        async move {
            let mut params = params;
            params["taskId"] = json!(id);
            params["_meta"] = meta(caps);
            let rb = client
                .request(method, params)
                .header("mcp-name", id.as_str());
            let r = read_resp(client.send(rb).await).await;
            assert_eq!(r.status, 200, "{}", r.raw);
            r.result().clone()
        }
    };
    let made = client
        .rpc(
            "tools/call",
            json!({"name": "multi_input", "arguments": {}}),
            caps.clone(),
        )
        .await;
    assert_eq!(made.result()["resultType"], "task", "{}", made.raw);
    let id = made.result()["taskId"].as_str().unwrap().to_owned();
    eventually("two questions", || {
        let id = id.clone();
        async move {
            let t = task_rpc("tasks/get", id, json!({})).await;
            match t["inputRequests"].as_object() {
                Some(r) if r.len() == 2 => Ok(()),
                _ => Err(t.to_string()),
            }
        }
    })
    .await;
    // An answer that breaks the policy's rule, and a valid one: wherever
    // they land, the owner judges them, and every replica reads the red
    // mark under the same new key.
    let ack = task_rpc(
        "tasks/update",
        id.clone(),
        json!({"inputResponses": {
            "first": {"action": "accept", "content": {"name": "Not Valid"}},
            "second": {"action": "accept", "content": {"name": "bob"}}}}),
    )
    .await;
    assert_eq!(ack, json!({"resultType": "complete"}));
    for _ in 0..3 {
        let t = task_rpc("tasks/get", id.clone(), json!({})).await;
        let keys: Vec<&String> = t["inputRequests"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["first.2"], "{t}");
    }
    assert!(cluster.sum(&forwarded("native-tasks")).await >= 2.0);
    let relayer = eventually("the relaying replica", || async {
        for r in cluster.running() {
            if r.metric("redmark_tasks_live").await == 1.0 {
                return Ok(r.node);
            }
        }
        Err("no replica counts the task live")
    })
    .await;
    drop(cluster.replica_mut(relayer).process.take());
    // The survivors serve it from its id: the server still holds the task;
    // the red mark was the lost replica's, so the question reads as the
    // server asks it.
    for _ in 0..2 {
        let t = task_rpc("tasks/get", id.clone(), json!({})).await;
        assert_eq!(t["status"], "input_required", "{t}");
        let keys: Vec<&String> = t["inputRequests"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["first"], "{t}");
    }
    task_rpc(
        "tasks/update",
        id.clone(),
        json!({"inputResponses": {"first": {"action": "accept", "content": {"name": "ada"}}}}),
    )
    .await;
    let done = eventually("the task to complete", || {
        let id = id.clone();
        async move {
            let t = task_rpc("tasks/get", id, json!({})).await;
            if t["status"] == "completed" {
                Ok(t)
            } else {
                Err(t.to_string())
            }
        }
    })
    .await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        r#"answers: Some(String("ada")) and Some(String("bob"))"#,
        "{done}"
    );
}
