//! Relay benchmark: the same `echo` workload through three paths, side by side in one run.
//!
//! - direct:  a legacy (2025-11-25) client straight to `@modelcontextprotocol/server-everything`
//! - nginx:   the same legacy client through a plain nginx reverse proxy
//! - gateway: a 2026-07-28 client through redmark
//!
//! Env: BENCH_SECONDS (default 10), BENCH_WARMUP_SECONDS (2), BENCH_CONCURRENCY (16).
//! Output: a markdown table on stdout and in target/bench/relay.md. See benches/README.md.

// An example/benchmark may panic on what it cannot do: it is not on a request path.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use std::fmt::Write as _;
use std::fs::File;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const LEGACY: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Upper bound on requests per worker per phase, on top of the time bound.
const MAX_REQUESTS_PER_WORKER: usize = 2_000_000;

/// A spawned process, killed and reaped when dropped (also on panic).
struct Proc {
    name: &'static str,
    child: Child,
}

impl Proc {
    /// Starts `cmd` with output to `<dir>/<name>.log`; waits for `ready` in it; returns the log.
    fn start(name: &'static str, mut cmd: Command, dir: &Path, ready: &str) -> (Proc, String) {
        let log = dir.join(format!("{name}.log"));
        let out = File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = cmd.stdin(Stdio::null()).stdout(out).stderr(err).spawn();
        let child = child.unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let mut p = Proc { name, child };
        let text = wait_for_log(&mut p, &log, ready, Duration::from_secs(30));
        (p, text)
    }
}

impl Drop for Proc {
    /// SIGTERM (nginx's master then stops its workers), up to 5 s to exit, then SIGKILL.
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        eprintln!("[bench] stopped {} (pid {pid})", self.name);
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().unwrap().port()
}

/// Polls `log` (bounded: 100 ms steps up to `limit`) until it contains `marker`; returns the log.
fn wait_for_log(p: &mut Proc, log: &Path, marker: &str, limit: Duration) -> String {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(marker) {
            return text;
        }
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!("{} exited ({status}) before '{marker}':\n{text}", p.name);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{} did not say '{marker}' within {limit:?}", p.name);
}

/// Polls 127.0.0.1:`port` (at most 100 tries, 100 ms apart) until it accepts a connection.
fn wait_for_port(port: u16) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    for _ in 0..100 {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("nothing listening on 127.0.0.1:{port}");
}

/// A `/proc/<pid>/status` field in KiB (VmRSS, VmHWM), summed over `pid` and its children.
fn mem_kib(pid: u32, field: &str) -> u64 {
    let own = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    own + children
        .split_whitespace()
        .filter_map(|c| c.parse::<u32>().ok())
        .map(|c| mem_kib(c, field))
        .sum::<u64>()
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| v.parse().unwrap_or(default))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// target/release/redmark if built, else target/debug/redmark.
fn redmark_bin() -> PathBuf {
    let bins = ["release", "debug"].map(|p| repo().join("target").join(p).join("redmark"));
    let bin = bins.into_iter().find(|b| b.exists());
    bin.expect("no redmark binary: run `cargo build --release --bin redmark`")
}

/// The JSON-RPC message answering `id` in a JSON or SSE body.
fn parse_response(body: &str) -> Option<Value> {
    let trimmed = body.trim_start();
    if trimmed.starts_with('{') {
        return serde_json::from_str(trimmed).ok();
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some() && (v.get("result").is_some() || v.get("error").is_some()))
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Direct,
    Nginx,
    Gateway,
}

/// One worker's client: its own keep-alive connection and, for legacy paths, its own session.
struct Client {
    http: reqwest::Client,
    url: String,
    kind: Kind,
    session: Option<String>,
    next_id: u64,
}

impl Client {
    async fn new(url: &str, kind: Kind) -> anyhow::Result<Client> {
        let http = reqwest::Client::builder().pool_max_idle_per_host(1);
        let http = http.timeout(REQUEST_TIMEOUT).build()?;
        let (url, session, next_id) = (url.to_string(), None, 1);
        let mut c = Client {
            http,
            url,
            kind,
            session,
            next_id,
        };
        if kind != Kind::Gateway {
            let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": LEGACY, "capabilities": {},
                "clientInfo": {"name": "redmark-bench", "version": "0"}}});
            let resp = c.post(&init, "initialize", None).send().await?;
            let sid = resp.headers().get("mcp-session-id");
            let sid = sid.and_then(|v| v.to_str().ok()).map(str::to_string);
            let body = resp.text().await?;
            anyhow::ensure!(sid.is_some(), "initialize gave no Mcp-Session-Id: {body}");
            c.session = sid;
            let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            let r = c.post(&note, "notifications/initialized", None);
            let r = r.send().await?;
            anyhow::ensure!(r.status().is_success(), "initialized: {}", r.status());
        }
        Ok(c)
    }

    fn post(&self, body: &Value, method: &str, name: Option<&str>) -> reqwest::RequestBuilder {
        let mut rb = self
            .http
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body.to_string());
        if self.kind == Kind::Gateway {
            rb = rb
                .header("MCP-Protocol-Version", MODERN)
                .header("Mcp-Method", method);
            if let Some(n) = name {
                rb = rb.header("Mcp-Name", n);
            }
        } else if method != "initialize" {
            rb = rb.header("MCP-Protocol-Version", LEGACY);
        }
        if let Some(s) = &self.session {
            rb = rb.header("Mcp-Session-Id", s);
        }
        rb
    }

    /// One `tools/call echo`; Ok(()) only for a 200 whose result echoes the message back.
    async fn echo(&mut self) -> anyhow::Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = format!("bench {id}");
        let mut params = json!({"name": "echo", "arguments": {"message": msg}});
        if self.kind == Kind::Gateway {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            });
        }
        let req = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let resp = self.post(&req, "tools/call", Some("echo")).send().await?;
        let status = resp.status();
        let body = resp.text().await?;
        anyhow::ensure!(status.is_success(), "HTTP {status}: {body}");
        let v = parse_response(&body).ok_or_else(|| anyhow::anyhow!("no response in {body}"))?;
        let text = v["result"]["content"][0]["text"].as_str().unwrap_or("");
        anyhow::ensure!(text == format!("Echo: {msg}"), "unexpected answer: {body}");
        Ok(())
    }

    async fn close(self) {
        if let Some(s) = &self.session {
            let _ = self
                .http
                .delete(&self.url)
                .header("Mcp-Session-Id", s)
                .header("MCP-Protocol-Version", LEGACY)
                .send()
                .await;
        }
    }
}

/// Workers, warm-up, measured time.
type Params = (usize, Duration, Duration);

#[derive(Default)]
struct Stats {
    ok: usize,
    errors: usize,
    secs: f64,
    lat_us: Vec<u64>,
    first_error: Option<String>,
}

impl Stats {
    fn rps(&self) -> f64 {
        self.ok as f64 / self.secs
    }
    /// Nearest-rank percentile in milliseconds.
    fn pct(&self, p: f64) -> f64 {
        if self.lat_us.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * self.lat_us.len() as f64).ceil() as usize;
        self.lat_us[rank.clamp(1, self.lat_us.len()) - 1] as f64 / 1000.0
    }
}

/// Runs `concurrency` workers for `warmup` (discarded) and then `secs` (measured).
async fn load(url: &str, kind: Kind, (concurrency, warmup, secs): Params) -> Stats {
    let start = Instant::now() + Duration::from_millis(500);
    let measure_from = start + warmup;
    let end = measure_from + secs;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let url = url.to_string();
        tasks.push(tokio::spawn(async move {
            let mut c = Client::new(&url, kind).await.expect("client setup");
            tokio::time::sleep_until(start.into()).await;
            let (mut lat, mut errors, mut first_error) = (Vec::new(), 0usize, None);
            for _ in 0..MAX_REQUESTS_PER_WORKER {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                let r = c.echo().await;
                if t0 < measure_from {
                    continue;
                }
                match r {
                    Ok(()) => lat.push(t0.elapsed().as_micros() as u64),
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| e.to_string());
                    }
                }
            }
            c.close().await;
            (lat, errors, first_error)
        }));
    }
    let secs = secs.as_secs_f64();
    let mut stats = Stats {
        secs,
        ..Stats::default()
    };
    for t in tasks {
        let (lat, errors, first_error) = t.await.expect("worker");
        stats.ok += lat.len();
        stats.errors += errors;
        stats.lat_us.extend(lat);
        if stats.first_error.is_none() {
            stats.first_error = first_error;
        }
    }
    stats.lat_us.sort_unstable();
    stats
}

fn nginx_conf(dir: &Path, listen: u16, upstream: u16) -> PathBuf {
    for sub in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        std::fs::create_dir_all(dir.join(sub)).expect("nginx temp dirs");
    }
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process on;\nworker_processes auto;\npid {d}/nginx.pid;\n\
         error_log {d}/nginx-error.log warn;\nevents {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         \x20 fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         \x20 upstream everything {{ server 127.0.0.1:{upstream}; keepalive 64; }}\n\
         \x20 server {{\n    listen 127.0.0.1:{listen};\n    location / {{\n\
         \x20     proxy_pass http://everything;\n      proxy_http_version 1.1;\n\
         \x20     proxy_set_header Connection \"\";\n      proxy_set_header Host 127.0.0.1:{upstream};\n\
         \x20     proxy_buffering off;\n      proxy_request_buffering off;\n      proxy_read_timeout 60s;\n\
         \x20   }}\n  }}\n}}\n"
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).expect("write nginx.conf");
    path
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this
    // binary without it, and a benchmark is not a test: do nothing then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("relay benchmark: run it with `cargo bench --bench relay` or scripts/bench.sh");
        return;
    }
    let secs = Duration::from_secs(env_num("BENCH_SECONDS", 10).max(1));
    let warmup = Duration::from_secs(env_num("BENCH_WARMUP_SECONDS", 2));
    let concurrency = env_num("BENCH_CONCURRENCY", 16).clamp(1, 1024) as usize;
    let root = repo();
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();

    // Upstream: server-everything over Streamable HTTP.
    let everything =
        ".cache/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js";
    let everything = root.join(everything);
    assert!(
        everything.exists(),
        "no {everything:?}: run scripts/setup-test-deps.sh"
    );
    let up_port = free_port();
    let mut cmd = Command::new("node");
    cmd.arg(&everything).arg("streamableHttp");
    cmd.env("PORT", up_port.to_string());
    let (upstream, _) = Proc::start("server-everything", cmd, dir, "listening on port");
    let direct_url = format!("http://127.0.0.1:{up_port}/mcp");

    // nginx in front of it (logs only errors, so readiness is the port answering).
    let ng_port = free_port();
    let conf = nginx_conf(dir, ng_port, up_port);
    let mut cmd = Command::new("nginx");
    cmd.arg("-c").arg(&conf).arg("-p").arg(dir);
    cmd.arg("-e").arg(dir.join("nginx-error.log"));
    let (nginx, _) = Proc::start("nginx", cmd, dir, "");
    wait_for_port(ng_port);
    let nginx_url = format!("http://127.0.0.1:{ng_port}/mcp");

    // redmark with one route to it; the pool allows one session per worker.
    let (max, per) = (concurrency.max(64), concurrency.max(16));
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[route]]\nname = \"everything\"\npath = \"/mcp\"\n\
         [route.upstream]\nurl = \"{direct_url}\"\n\
         [route.pool]\nmax_sessions = {max}\nmax_sessions_per_principal = {per}\n"
    );
    std::fs::write(dir.join("redmark.toml"), config).expect("write redmark.toml");
    let bin = redmark_bin();
    let mut cmd = Command::new(&bin);
    cmd.arg("serve")
        .arg("--config")
        .arg(dir.join("redmark.toml"));
    cmd.env(
        "RUST_LOG",
        std::env::var("RUST_LOG").unwrap_or("warn".into()),
    );
    let marker = "redmark listening on http://";
    let (redmark, text) = Proc::start("redmark", cmd, dir, marker);
    let addr = text
        .split(marker)
        .nth(1)
        .and_then(|s| s.split_whitespace().next());
    let gateway_url = format!("http://{}/mcp", addr.expect("redmark address"));

    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    std::thread::sleep(Duration::from_millis(500));
    let redmark_idle = mem_kib(redmark.child.id(), "VmRSS");
    let nginx_idle = mem_kib(nginx.child.id(), "VmRSS");
    eprintln!(
        "[bench] {concurrency} workers, {warmup:?} warm-up + {secs:?} per path; redmark {}",
        bin.display()
    );

    let mut results = Vec::new();
    let mut mem = Vec::new();
    for (name, kind, url) in [
        ("direct", Kind::Direct, &direct_url),
        ("nginx", Kind::Nginx, &nginx_url),
        ("gateway", Kind::Gateway, &gateway_url),
    ] {
        eprintln!("[bench] {name}: {url}");
        let s = rt.block_on(load(url, kind, (concurrency, warmup, secs)));
        let watched = match kind {
            Kind::Gateway => Some(("redmark", redmark_idle, redmark.child.id())),
            Kind::Nginx => Some(("nginx", nginx_idle, nginx.child.id())),
            Kind::Direct => None,
        };
        if let Some((who, idle, pid)) = watched {
            mem.push((who, idle, mem_kib(pid, "VmRSS"), mem_kib(pid, "VmHWM")));
        }
        if let Some(e) = &s.first_error {
            eprintln!("[bench] {name}: {} errors, first: {e}", s.errors);
        }
        results.push((name, s));
    }
    drop(rt);

    let mut md = String::new();
    macro_rules! out {
        ($($t:tt)*) => {
            let _ = writeln!(md, $($t)*);
        };
    }
    out!("## relay benchmark\n");
    out!(
        "`tools/call echo` on server-everything, {concurrency} concurrent keep-alive clients, \
         {}s measured after {}s warm-up per path, paths run one after another in one process; \
         {} cores.\n",
        secs.as_secs(),
        warmup.as_secs(),
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
    );
    out!("| path | ok | errors | req/s | p50 ms | p90 ms | p99 ms |");
    out!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, s) in &results {
        let (ok, errors, rps) = (s.ok, s.errors, s.rps());
        let (p50, p90, p99) = (s.pct(50.0), s.pct(90.0), s.pct(99.0));
        out!("| {name} | {ok} | {errors} | {rps:.0} | {p50:.2} | {p90:.2} | {p99:.2} |");
    }
    let (d, n, g) = (&results[0].1, &results[1].1, &results[2].1);
    out!("\n| ratio | throughput | p50 | p99 |");
    out!("|---|---:|---:|---:|");
    for (label, base) in [
        ("gateway / direct", d),
        ("gateway / nginx", n),
        ("nginx / direct", d),
    ] {
        let top = if label.starts_with("nginx") { n } else { g };
        out!(
            "| {label} | {:.2}x | {:.2}x | {:.2}x |",
            top.rps() / base.rps(),
            top.pct(50.0) / base.pct(50.0),
            top.pct(99.0) / base.pct(99.0)
        );
    }
    out!("\n| memory (RSS, MiB) | idle | end of load | peak (VmHWM) |");
    out!("|---|---:|---:|---:|");
    let mib = |k: u64| k as f64 / 1024.0;
    for (who, idle, end, hwm) in mem {
        let (idle, end, hwm) = (mib(idle), mib(end), mib(hwm));
        out!("| {who} | {idle:.1} | {end:.1} | {hwm:.1} |");
    }
    out!(
        "\nnginx figures sum master and workers. Shared machine: absolute numbers are indicative, \
         the ratios are the point."
    );
    print!("{md}");
    let out = root.join("target/bench");
    std::fs::create_dir_all(&out).expect("target/bench");
    std::fs::write(out.join("relay.md"), &md).expect("write target/bench/relay.md");
    eprintln!("[bench] wrote {}", out.join("relay.md").display());

    drop(redmark);
    drop(nginx);
    drop(upstream);
    assert!(
        results.iter().all(|(_, s)| s.ok > 0),
        "a path completed no requests"
    );
}
