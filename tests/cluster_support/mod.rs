//! The cluster the `cluster_nginx*.rs` tests run against: three `redmark`
//! processes behind a Debian nginx (plain round robin, no stickiness), with a
//! Debian `redis-server` as `[state] store`. Route `/mcp` fronts one
//! `tests/fixtures/mrtr_server.py` over Streamable HTTP shared by all three,
//! route `/stdio` one per replica, route `/replay` the shared server in
//! replay mode, route `/tasks` a rooms server per replica with gateway-made
//! tasks, and route `/native-tasks` one native rmcp server whose own tasks
//! are relayed. Also the metric samples the tests read on each replica and
//! the shape of a driver's output.
//!
//! Everything listens on 127.0.0.1, on ports chosen here; nginx's config is
//! written to a temporary directory; every process is killed when the
//! [`Cluster`] drops. Include with `mod cluster_support;` after
//! `mod common;` and `mod mrtr_support;`.
#![allow(dead_code)]

use std::path::Path;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::common::*;
use crate::mrtr_support::{TEST_SECRET, secret};

pub const NODES: [&str; 3] = ["r1", "r2", "r3"];

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One replica: its process and its internal endpoint.
pub struct Replica {
    pub node: &'static str,
    pub process: Option<RedmarkProcess>,
    pub internal: u16,
}

impl Replica {
    pub fn process(&self) -> &RedmarkProcess {
        self.process.as_ref().expect("replica running")
    }

    pub async fn metrics(&self) -> String {
        reqwest::get(format!("{}/metrics", self.process().admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    pub async fn metric(&self, sample: &str) -> f64 {
        self.metrics()
            .await
            .lines()
            .find_map(|l| l.strip_prefix(sample).and_then(|v| v.trim().parse().ok()))
            .unwrap_or(0.0)
    }
}

/// The running cluster: Redis, the shared servers, the replicas and nginx.
pub struct Cluster {
    _dir: tempfile::TempDir,
    _redis: ChildGuard,
    _server: ChildGuard,
    _native: ChildGuard,
    _nginx: ChildGuard,
    pub replicas: Vec<Replica>,
    /// `http://127.0.0.1:<nginx port>`
    pub base: String,
}

/// Rounds (or `tasks/*`) a replica forwarded to the owner on `route`.
pub fn forwarded(route: &str) -> String {
    format!(r#"redmark_forwarded_retries_total{{route="{route}",outcome="forwarded"}}"#)
}

/// Replay-mode rounds a replica asked for `tool`.
pub fn replayed(tool: &str) -> String {
    format!(r#"redmark_replay_rounds_total{{route="replay",tool="{tool}"}}"#)
}

/// Forwards a replica received on `route`'s internal endpoint.
pub fn received(route: &str) -> String {
    format!(r#"redmark_forwards_received_total{{route="{route}"}}"#)
}

pub const PENDING: &str = "redmark_pending_operations";

/// One replica's config: every route above, `node` its node id, its
/// internal endpoint on `internal`, the shared Redis, servers and keys.
pub fn replica_config(node: &str, internal: u16, redis: u16, server: u16, native: u16) -> String {
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
pub fn nginx_config(dir: &Path, port: u16, upstreams: &[String]) -> String {
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
    pub async fn start() -> Cluster {
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
            "[tool.multi_input.fields.name]\npattern = \"^[a-z]+$\"\n\n\
             [tool.confirm_delete.fields.confirm]\n\
             authz = 'value != true || !tool.arguments.filename.startsWith(\"/etc/\")'\n\
             authz_message = \"nothing under /etc is deleted\"\n",
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

    pub fn url(&self, route: &str) -> String {
        format!("{}{route}", self.base)
    }

    pub fn replica(&self, node: &str) -> &Replica {
        self.replicas.iter().find(|r| r.node == node).unwrap()
    }

    pub fn replica_mut(&mut self, node: &str) -> &mut Replica {
        self.replicas.iter_mut().find(|r| r.node == node).unwrap()
    }

    pub fn running(&self) -> impl Iterator<Item = &Replica> {
        self.replicas.iter().filter(|r| r.process.is_some())
    }

    pub async fn sum(&self, sample: &str) -> f64 {
        let mut total = 0.0;
        for r in self.running() {
            total += r.metric(sample).await;
        }
        total
    }

    pub async fn settled(&self) {
        for r in self.running() {
            eventually(&format!("{}'s pending gauge to be 0", r.node), || async {
                let n = r.metric(PENDING).await;
                if n == 0.0 { Ok(()) } else { Err(n) }
            })
            .await;
        }
    }
}

/// A driver's output line for step `i`.
pub fn step(lines: &[Value], i: u64) -> &Value {
    lines
        .iter()
        .find(|l| l["step"] == i)
        .unwrap_or_else(|| panic!("no output for step {i}: {lines:?}"))
}

/// The JSON text a fixture tool returned, from a driver's result.
pub fn tool_output(result: &Value) -> Value {
    serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()
}

/// The names a fixture tool's output says it was answered.
pub fn names(out: &Value) -> Vec<String> {
    out["answers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["content"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// A three-round operation walked by a real client through the balancer.
pub fn rounds_script(tag: &str) -> Value {
    json!({
        "steps": [{"op": "call_tool", "name": "rounds", "arguments": {"tag": tag, "n": 3}}],
        "elicitation": [
            {"action": "accept", "content": {"name": "one"}},
            {"action": "accept", "content": {"name": "two"}},
            {"action": "accept", "content": {"name": "three"}},
        ],
    })
}
