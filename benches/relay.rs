//! The gateway's cost, measured against a fast upstream, side by side in one run:
//!
//! - passthrough `tools/call echo`: a legacy (2025-11-25) client straight to
//!   `examples/bench_upstream.rs` over Streamable HTTP (direct), the same
//!   client through a plain nginx reverse proxy (nginx), the same client
//!   through `examples/bench_floor.rs` (a bare hyper relay on redmark's
//!   stack that does no work of its own: what the stack costs before
//!   redmark parses or checks anything), and a 2026-07-28 client through
//!   redmark (gateway); each path `BENCH_RUNS` times, interleaved, the
//!   median reported;
//! - the same passthrough at light load (`BENCH_LIGHT_CONCURRENCY` clients,
//!   default 1, one request at a time each): what each hop adds to a call
//!   when nothing queues, beside the figure at saturation;
//! - complete elicitation operations per second in hold mode (`ask`: one
//!   question, `ask2`: two at once): a client that answers every
//!   `InputRequiredResult` with its `requestState`;
//! - gateway memory per waiting question with `BENCH_WAITING` questions open
//!   (hold mode on multiplexed HTTP sessions; `BENCH_WAITING_STDIO` over
//!   stdio, one server process each), and passthrough latency while they wait.
//!
//! Env: BENCH_SECONDS (default 5), BENCH_WARMUP_SECONDS (1), BENCH_CONCURRENCY (32),
//! BENCH_RUNS (3), BENCH_WAITING (10000), BENCH_WAITING_STDIO (200),
//! BENCH_LIGHT_CONCURRENCY (1; 0 skips the light-load phase).
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

/// A label as a file name: labels may hold a slash ("HTTP/1.1").
fn file_stem(label: &str) -> String {
    label.replace(['/', ' ', ',', '(', ')'], "-")
}

/// A spawned process, killed and reaped when dropped (also on panic).
struct Proc {
    name: &'static str,
    child: Child,
}

impl Proc {
    /// Starts `cmd` with output to `<dir>/<name>.log`; waits for `ready` in it; returns the log.
    fn start(name: &'static str, mut cmd: Command, dir: &Path, ready: &str) -> (Proc, String) {
        let log = dir.join(format!("{}.log", file_stem(name)));
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
    own + children(pid)
        .into_iter()
        .map(|c| mem_kib(c, field))
        .sum::<u64>()
}

/// The processes `pid` started. A child is listed under the thread that
/// spawned it, and redmark spawns its stdio servers from its event loops,
/// not its main thread.
fn children(pid: u32) -> Vec<u32> {
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    threads
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// CPU time (user + system, every thread) `pid` and the processes it
/// started have used so far, in clock ticks: nginx's work is done by its
/// master's worker processes.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is the first, utime the 12th, stime the 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(11) + field(12) + children(pid).into_iter().map(cpu_ticks).sum::<u64>()
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux if it cannot say).
fn ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| v.parse().unwrap_or(default))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `$CARGO_TARGET_DIR`, else the repository's `target/`.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo().join("target"), PathBuf::from)
}

/// `<target>/release/<rel>` if built, else `<target>/debug/<rel>`.
fn built(rel: &str) -> PathBuf {
    let bins = ["release", "debug"].map(|p| target_dir().join(p).join(rel));
    let bin = bins.into_iter().find(|b| b.exists());
    bin.unwrap_or_else(|| {
        panic!("no {rel}: run `cargo build --release --bin redmark --example bench_upstream`")
    })
}

/// The VmRSS of `pid` alone, in KiB.
fn own_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
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

/// What each worker does in a loop.
#[derive(Clone, Copy, PartialEq)]
enum Work {
    Echo,
    /// A whole hold-mode operation through the gateway: the call, then a
    /// retry answering every question, until the result is complete.
    Elicit(&'static str),
}

/// Which protocol a worker's client speaks.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// 2025-11-25 with a session: to the server, or through a proxy that
    /// relays it unchanged (nginx, the bare hyper relay).
    Legacy,
    /// 2026-07-28, no session: through redmark.
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

    /// One operation of `tool` walked to its end, every question answered
    /// with the name "bench"; Ok(()) only if the result says so.
    async fn elicit(&mut self, tool: &str) -> anyhow::Result<()> {
        let mut params = json!({"name": tool, "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        }});
        for _ in 0..4 {
            let id = self.next_id;
            self.next_id += 1;
            let req = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
            let resp = self.post(&req, "tools/call", Some(tool)).send().await?;
            let status = resp.status();
            let body = resp.text().await?;
            anyhow::ensure!(status.is_success(), "HTTP {status}: {body}");
            let v =
                parse_response(&body).ok_or_else(|| anyhow::anyhow!("no response in {body}"))?;
            let r = &v["result"];
            if r["resultType"] == "input_required" {
                let asked = r["inputRequests"].as_object();
                let asked = asked.ok_or_else(|| anyhow::anyhow!("no inputRequests: {body}"))?;
                let answers: serde_json::Map<String, Value> = asked
                    .keys()
                    .map(|k| {
                        (
                            k.clone(),
                            json!({"action": "accept", "content": {"name": "bench"}}),
                        )
                    })
                    .collect();
                params["inputResponses"] = Value::Object(answers);
                params["requestState"] = r["requestState"].clone();
                continue;
            }
            let text = r["content"][0]["text"].as_str().unwrap_or("");
            let want = if tool == "ask2" {
                "bench,bench"
            } else {
                "bench"
            };
            anyhow::ensure!(text == want, "unexpected answer: {body}");
            return Ok(());
        }
        anyhow::bail!("{tool} did not complete in 4 rounds")
    }

    /// The first request of an `ask` operation; Ok(()) if it asked.
    async fn open(&mut self) -> anyhow::Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        let params = json!({"name": "ask", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        }});
        let req = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let resp = self.post(&req, "tools/call", Some("ask")).send().await?;
        let body = resp.text().await?;
        let v = parse_response(&body).ok_or_else(|| anyhow::anyhow!("no response in {body}"))?;
        anyhow::ensure!(
            v["result"]["resultType"] == "input_required",
            "not asked: {body}"
        );
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
    /// CPU seconds the measured processes used over the measured window.
    cpu_secs: Option<f64>,
    lat_us: Vec<u64>,
    first_error: Option<String>,
}

impl Stats {
    fn rps(&self) -> f64 {
        self.ok as f64 / self.secs
    }
    /// CPU microseconds per completed request (or operation), when measured.
    fn cpu_us(&self) -> f64 {
        self.cpu_secs
            .filter(|_| self.ok > 0)
            .map_or(f64::NAN, |c| c * 1e6 / self.ok as f64)
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
async fn load(url: &str, kind: Kind, work: Work, params: Params) -> Stats {
    load_measuring(url, kind, work, params, None).await
}

/// [`load`], with the CPU time `cpu_of` (a process and the processes it
/// started) uses over the measured window.
async fn load_measuring(
    url: &str,
    kind: Kind,
    work: Work,
    (concurrency, warmup, secs): Params,
    cpu_of: Option<u32>,
) -> Stats {
    let start = Instant::now() + Duration::from_millis(500);
    let measure_from = start + warmup;
    let end = measure_from + secs;
    let cpu = cpu_of.map(|pid| {
        tokio::spawn(async move {
            tokio::time::sleep_until(measure_from.into()).await;
            let before = cpu_ticks(pid);
            tokio::time::sleep_until(end.into()).await;
            cpu_ticks(pid).saturating_sub(before) as f64 / ticks_per_second()
        })
    });
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
                let r = match work {
                    Work::Echo => c.echo().await,
                    Work::Elicit(tool) => c.elicit(tool).await,
                };
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
    if let Some(cpu) = cpu {
        stats.cpu_secs = Some(cpu.await.expect("cpu sampler"));
    }
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
         \x20 upstream fast {{ server 127.0.0.1:{upstream}; keepalive 64; }}\n\
         \x20 server {{\n    listen 127.0.0.1:{listen};\n    location / {{\n\
         \x20     proxy_pass http://fast;\n      proxy_http_version 1.1;\n\
         \x20     proxy_set_header Connection \"\";\n      proxy_set_header Host 127.0.0.1:{upstream};\n\
         \x20     proxy_buffering off;\n      proxy_request_buffering off;\n      proxy_read_timeout 60s;\n\
         \x20   }}\n  }}\n}}\n"
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).expect("write nginx.conf");
    path
}

/// Opens `n` questions through the gateway (`concurrency` clients) and leaves them waiting.
async fn open_waiting(url: &str, n: usize, concurrency: usize) -> (usize, Option<String>) {
    let per = n.div_ceil(concurrency);
    let mut tasks = Vec::new();
    for w in 0..concurrency {
        let url = url.to_string();
        let count = per.min(n.saturating_sub(w * per));
        tasks.push(tokio::spawn(async move {
            let mut c = Client::new(&url, Kind::Gateway).await.expect("client");
            let (mut ok, mut first) = (0, None);
            for _ in 0..count {
                match c.open().await {
                    Ok(()) => ok += 1,
                    Err(e) => {
                        first.get_or_insert_with(|| e.to_string());
                    }
                }
            }
            (ok, first)
        }));
    }
    let mut out = (0, None);
    for t in tasks {
        let (ok, first) = t.await.expect("opener");
        out.0 += ok;
        if out.1.is_none() {
            out.1 = first;
        }
    }
    out
}

/// The median of `xs` (NaN when empty).
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A redmark process with one route `[route.upstream] {upstream}` and extra
/// config; `route` goes under `[[route]]` (e.g. a `policy = ...` line).
fn start_redmark(
    dir: &Path,
    name: &'static str,
    upstream: &str,
    extra: &str,
    route: &str,
) -> (Proc, String) {
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{extra}\n[[route]]\nname = \"bench\"\npath = \"/mcp\"\n\
         {route}\n[route.upstream]\n{upstream}\n"
    );
    let file = dir.join(format!("{}.toml", file_stem(name)));
    std::fs::write(&file, config).expect("write redmark config");
    let mut cmd = Command::new(built("redmark"));
    cmd.arg("serve").arg("--config").arg(&file);
    cmd.env(
        "RUST_LOG",
        std::env::var("RUST_LOG").unwrap_or("warn".into()),
    );
    // Only the gateway's runtime: the load generator and the upstream keep theirs.
    if let Ok(n) = std::env::var("BENCH_GATEWAY_THREADS") {
        cmd.env("TOKIO_WORKER_THREADS", n);
    }
    let marker = "redmark listening on http://";
    let (p, text) = Proc::start(name, cmd, dir, marker);
    let addr = text
        .split(marker)
        .nth(1)
        .and_then(|s| s.split_whitespace().next());
    (p, format!("http://{}/mcp", addr.expect("redmark address")))
}

/// What holding `n` questions costs one gateway process.
struct Waiting {
    label: &'static str,
    n: usize,
    opened: usize,
    idle_kib: u64,
    full_kib: u64,
    /// jemalloc's live heap (`redmark_allocator_bytes{kind="allocated"}`), idle and at `n`.
    idle_heap_kib: u64,
    full_heap_kib: u64,
    /// RSS of the server processes the gateway started (stdio), at `n`.
    servers_kib: u64,
    p50_idle: f64,
    p50_full: f64,
    error: Option<String>,
}

/// The gateway's live heap in KiB, from its admin listener's `/metrics`.
fn heap_kib(rt: &tokio::runtime::Runtime, admin: &str) -> Option<u64> {
    allocator_kib(rt, admin, "allocated")
}

/// `redmark_allocator_bytes{kind}` in KiB.
fn allocator_kib(rt: &tokio::runtime::Runtime, admin: &str, kind: &str) -> Option<u64> {
    let wanted = format!("redmark_allocator_bytes{{kind=\"{kind}\"}}");
    let text = rt.block_on(async {
        reqwest::get(format!("http://{admin}/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()
    })?;
    text.lines()
        .find(|l| l.starts_with(&wanted))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map(|bytes| (bytes / 1024.0) as u64)
}

/// Waits until the gateway's live heap stops moving, then until its RSS
/// does (each at most 15 s), and reads (RSS, live heap). What a burst
/// leaves in flight (a replay round's cancelled upstream call still
/// closing, an answer's POST) and the pages the allocator keeps a few
/// seconds after it (jemalloc's decay) are not what the waiting questions
/// hold.
fn settled(rt: &tokio::runtime::Runtime, pid: u32, admin: &str) -> (u64, u64) {
    let steady = |read: &dyn Fn() -> u64, every: Duration| {
        let mut last = read();
        for _ in 0..(15_000 / every.as_millis().max(1)) {
            std::thread::sleep(every);
            let now = read();
            let moved = now.abs_diff(last);
            last = now;
            if moved * 200 <= now.max(1) {
                break;
            }
        }
        last
    };
    let began = Instant::now();
    let heap = steady(
        &|| heap_kib(rt, admin).unwrap_or(0),
        Duration::from_millis(250),
    );
    // jemalloc gives freed pages back over its decay time (10 s by
    // default, by a background thread): wait until what it keeps resident
    // beyond the live heap stops shrinking for 2 s.
    let kept = || {
        allocator_kib(rt, admin, "resident")
            .unwrap_or(0)
            .saturating_sub(heap_kib(rt, admin).unwrap_or(0))
    };
    let (mut least, mut since) = (kept(), Instant::now());
    while began.elapsed() < Duration::from_secs(20) && since.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(250));
        let now = kept();
        if now + 64 < least {
            (least, since) = (now, Instant::now());
        }
    }
    let rss = steady(&|| own_kib(pid), Duration::from_millis(1000));
    eprintln!(
        "[bench] settled after {:.1}s: live heap {heap} KiB, allocator resident {} KiB, RSS {rss} KiB",
        began.elapsed().as_secs_f64(),
        allocator_kib(rt, admin, "resident").unwrap_or(0)
    );
    (rss, heap)
}

/// Starts a gateway, warms it (one complete operation: the route learns its
/// mode), measures passthrough, opens `n` questions, measures again.
fn measure_waiting(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    label: &'static str,
    upstream: &str,
    route: &str,
    n: usize,
    concurrency: usize,
) -> Waiting {
    let admin = format!("127.0.0.1:{}", free_port());
    let extra = format!(
        "admin = \"{admin}\"\n[mrtr]\nttl = \"30m\"\nmax_pending_per_principal = {}\n",
        n + 1000
    );
    let pool = format!(
        "[route.pool]\nmax_sessions = {m}\nmax_sessions_per_principal = {m}\nmax_operations_per_session = 1000\n",
        m = n + 64
    );
    let (gw, url) = start_redmark(dir, label, &format!("{upstream}\n{pool}"), &extra, route);
    let pid = gw.child.id();
    let short = (16, Duration::from_millis(500), Duration::from_secs(2));
    rt.block_on(load(
        &url,
        Kind::Gateway,
        Work::Elicit("ask"),
        (1, Duration::ZERO, Duration::from_millis(300)),
    ));
    let idle = rt.block_on(load(&url, Kind::Gateway, Work::Echo, short));
    let (idle_kib, idle_heap_kib) = settled(rt, pid, &admin);
    let (opened, error) = rt.block_on(open_waiting(&url, n, concurrency));
    let (full_kib, full_heap_kib) = settled(rt, pid, &admin);
    let servers_kib = mem_kib(pid, "VmRSS").saturating_sub(own_kib(pid));
    let full = rt.block_on(load(&url, Kind::Gateway, Work::Echo, short));
    drop(gw);
    Waiting {
        label,
        n,
        opened,
        idle_kib,
        full_kib,
        idle_heap_kib,
        full_heap_kib,
        servers_kib,
        p50_idle: idle.pct(50.0),
        p50_full: full.pct(50.0),
        error: error.or(full.first_error),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this
    // binary without it, and a benchmark is not a test: do nothing then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("relay benchmark: run it with `cargo bench --bench relay` or scripts/bench.sh");
        return;
    }
    let secs = Duration::from_secs(env_num("BENCH_SECONDS", 5).max(1));
    let warmup = Duration::from_secs(env_num("BENCH_WARMUP_SECONDS", 1));
    let concurrency = env_num("BENCH_CONCURRENCY", 32).clamp(1, 1024) as usize;
    let light = env_num("BENCH_LIGHT_CONCURRENCY", 1).min(1024) as usize;
    let runs = env_num("BENCH_RUNS", 3).clamp(1, 15) as usize;
    let waiting_n = env_num("BENCH_WAITING", 10_000) as usize;
    let waiting_stdio = env_num("BENCH_WAITING_STDIO", 200) as usize;
    let root = repo();
    let load_avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);

    // Upstream: the fast hyper server over Streamable HTTP.
    let fast = built("examples/bench_upstream");
    let mut cmd = Command::new(&fast);
    cmd.args(["--http", "0"]);
    let marker = "bench-upstream listening on port ";
    let (upstream, text) = Proc::start("bench-upstream", cmd, dir, marker);
    let up_port: u16 = text
        .split(marker)
        .nth(1)
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("upstream port");
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

    // The stack's floor: the bare hyper relay, one event loop per core as
    // redmark runs (logs nothing, so readiness is the port answering).
    let floor_port = free_port();
    let mut cmd = Command::new(built("examples/bench_floor"));
    cmd.args([&floor_port.to_string(), &direct_url, "loops"]);
    let (floor, _) = Proc::start("hyper relay", cmd, dir, "");
    wait_for_port(floor_port);
    let floor_url = format!("http://127.0.0.1:{floor_port}/mcp");

    // redmark with one route to it; the pool allows one session per worker.
    let (max, per) = (concurrency.max(64), concurrency.max(16));
    let (redmark, gateway_url) = start_redmark(
        dir,
        "redmark",
        &format!(
            "url = \"{direct_url}\"\n[route.pool]\nmax_sessions = {max}\nmax_sessions_per_principal = {per}\n"
        ),
        "",
        "",
    );

    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    std::thread::sleep(Duration::from_millis(500));
    let redmark_idle = mem_kib(redmark.child.id(), "VmRSS");
    eprintln!(
        "[bench] {cores} cores, {concurrency} workers, {runs} runs of {warmup:?} warm-up + {secs:?} per path; redmark {}",
        built("redmark").display()
    );

    let params = (concurrency, warmup, secs);
    // The proxy whose CPU time is measured on each path (nginx: its workers).
    let paths = [
        ("direct", Kind::Legacy, &direct_url, None),
        ("nginx", Kind::Legacy, &nginx_url, Some(nginx.child.id())),
        (
            "hyper relay (no work)",
            Kind::Legacy,
            &floor_url,
            Some(floor.child.id()),
        ),
        (
            "redmark",
            Kind::Gateway,
            &gateway_url,
            Some(redmark.child.id()),
        ),
        // The same gateway and call from a 2025-era client: `initialize`,
        // then each call in its session, without the 2026 `_meta`.
        (
            "redmark, 2025-era client",
            Kind::Legacy,
            &gateway_url,
            Some(redmark.child.id()),
        ),
    ];
    // (rps, p50, p99, errors) per path, per run; the proxy's CPU µs per call beside.
    let mut pass: Vec<Vec<(f64, f64, f64, usize)>> = vec![Vec::new(); paths.len()];
    let mut pass_cpu: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
    let mut pass_light: Vec<Vec<(f64, f64, f64, usize)>> = vec![Vec::new(); paths.len()];
    let mut elicit: Vec<Vec<(f64, f64, f64, usize)>> = vec![Vec::new(); 2];
    let mut elicit_cpu: Vec<Vec<f64>> = vec![Vec::new(); 2];
    let mut first_error: Option<String> = None;
    for run in 1..=runs {
        for (i, (name, kind, url, proxy)) in paths.iter().enumerate() {
            let s = rt.block_on(load_measuring(url, *kind, Work::Echo, params, *proxy));
            let cpu = if proxy.is_some() {
                format!(", proxy CPU {:.1} µs/call", s.cpu_us())
            } else {
                String::new()
            };
            eprintln!(
                "[bench] run {run} {name}: {:.0} req/s, p50 {:.2} ms, {} errors{cpu}",
                s.rps(),
                s.pct(50.0),
                s.errors,
            );
            first_error = first_error.or(s.first_error.clone());
            pass[i].push((s.rps(), s.pct(50.0), s.pct(99.0), s.errors));
            pass_cpu[i].push(s.cpu_us());
        }
        // At light load a call's latency is the work along its path, with no
        // queue in front of it: what a hop adds to every call.
        for (i, (name, kind, url, _)) in paths.iter().enumerate().filter(|_| light > 0) {
            let s = rt.block_on(load(url, *kind, Work::Echo, (light, warmup, secs)));
            eprintln!(
                "[bench] run {run} {name}, {light} client(s): {:.0} req/s, p50 {:.3} ms, {} errors",
                s.rps(),
                s.pct(50.0),
                s.errors,
            );
            first_error = first_error.or(s.first_error.clone());
            pass_light[i].push((s.rps(), s.pct(50.0), s.pct(99.0), s.errors));
        }
        for (i, tool) in ["ask", "ask2"].into_iter().enumerate() {
            let s = rt.block_on(load_measuring(
                &gateway_url,
                Kind::Gateway,
                Work::Elicit(tool),
                params,
                Some(redmark.child.id()),
            ));
            eprintln!(
                "[bench] run {run} elicit {tool}: {:.0} ops/s, p50 {:.2} ms, {} errors, redmark CPU {:.1} µs/operation",
                s.rps(),
                s.pct(50.0),
                s.errors,
                s.cpu_us()
            );
            first_error = first_error.or(s.first_error.clone());
            elicit[i].push((s.rps(), s.pct(50.0), s.pct(99.0), s.errors));
            elicit_cpu[i].push(s.cpu_us());
        }
    }
    let redmark_loaded = mem_kib(redmark.child.id(), "VmHWM");
    drop(redmark);

    // The same `ask` with the gather window held to its 20 ms bound (no quiet-time
    // end): what the window costs each question. BENCH_FULL_GATHER=0 skips it
    // (a redmark without `gather_quiet`).
    let mut full_gather: Vec<(f64, f64, f64, usize)> = Vec::new();
    if env_num("BENCH_FULL_GATHER", 1) == 1 {
        let (gw, url) = start_redmark(
            dir,
            "redmark-full-gather",
            &format!(
                "url = \"{direct_url}\"\n[route.pool]\nmax_sessions = {max}\nmax_sessions_per_principal = {per}\n"
            ),
            "[mrtr]\ngather = \"20ms\"\ngather_quiet = \"20ms\"\n",
            "",
        );
        for run in 1..=runs {
            let s = rt.block_on(load(&url, Kind::Gateway, Work::Elicit("ask"), params));
            eprintln!(
                "[bench] run {run} elicit ask, full gather window: {:.0} ops/s, p50 {:.2} ms, {} errors",
                s.rps(),
                s.pct(50.0),
                s.errors
            );
            full_gather.push((s.rps(), s.pct(50.0), s.pct(99.0), s.errors));
        }
        drop(gw);
    }

    eprintln!("[bench] waiting: {waiting_n} over HTTP, {waiting_stdio} over stdio");
    let mut waits = vec![measure_waiting(
        &rt,
        dir,
        "hold, multiplexed HTTP/1.1",
        &format!("url = \"{direct_url}\""),
        "",
        waiting_n,
        64,
    )];
    // The same over HTTP/2 (h2c): each waiting call a stream of its session's one connection.
    waits.push(measure_waiting(
        &rt,
        dir,
        "hold, multiplexed HTTP/2 (h2c)",
        &format!("url = \"{direct_url}\"\nhttp2 = \"prior_knowledge\""),
        "",
        waiting_n,
        64,
    ));
    if waiting_stdio > 0 {
        waits.push(measure_waiting(
            &rt,
            dir,
            "hold, stdio",
            &format!("command = [\"{}\", \"--stdio\"]", fast.display()),
            "",
            waiting_stdio,
            16,
        ));
    }
    // Replay mode: every tool's questions ride in the state; nothing waits in the gateway.
    let replay_policy = dir.join("replay.toml");
    std::fs::write(&replay_policy, "[defaults]\nmode = \"replay\"\n").expect("replay policy");
    waits.push(measure_waiting(
        &rt,
        dir,
        "replay, HTTP",
        &format!("url = \"{direct_url}\""),
        &format!("policy = \"{}\"", replay_policy.display()),
        waiting_n,
        64,
    ));
    drop(rt);

    let med = |rows: &[(f64, f64, f64, usize)]| {
        (
            median(rows.iter().map(|r| r.0).collect()),
            median(rows.iter().map(|r| r.1).collect()),
            median(rows.iter().map(|r| r.2).collect()),
            rows.iter().map(|r| r.3).sum::<usize>(),
        )
    };
    let mut md = String::new();
    macro_rules! out {
        ($($t:tt)*) => {
            let _ = writeln!(md, $($t)*);
        };
    }
    out!("## relay benchmark\n");
    out!(
        "{cores} cores. Upstream: `examples/bench_upstream.rs` (hyper) over Streamable HTTP. \
         {concurrency} concurrent keep-alive clients, {}s measured after {}s warm-up per path; \
         {runs} runs, paths interleaved, medians shown (errors: total over all runs).\n",
        secs.as_secs(),
        warmup.as_secs(),
    );
    out!(
        "| passthrough `tools/call echo` | req/s | p50 ms | p99 ms | errors | req/s vs nginx | req/s vs direct | added p50 vs nginx's | proxy CPU µs per call | vs nginx's |"
    );
    out!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let m: Vec<_> = pass.iter().map(|r| med(r)).collect();
    let cpu: Vec<f64> = pass_cpu.iter().map(|c| median(c.clone())).collect();
    let (d, n, nginx_cpu) = (m[0], m[1], cpu[1]);
    for (((name, _, _, proxy), r), c) in paths.iter().zip(&m).zip(&cpu) {
        let added = if *name == "direct" {
            "".to_owned()
        } else {
            format!("{:.2}x", (r.1 - d.1) / (n.1 - d.1))
        };
        let (cpu_us, cpu_ratio) = if proxy.is_some() {
            (format!("{c:.1}"), format!("{:.2}x", c / nginx_cpu))
        } else {
            (String::new(), String::new())
        };
        out!(
            "| {name} | {:.0} | {:.2} | {:.2} | {} | {:.2}x | {:.2}x | {added} | {cpu_us} | {cpu_ratio} |",
            r.0,
            r.1,
            r.2,
            r.3,
            r.0 / n.0,
            r.0 / d.0
        );
    }
    // The 2025-era client's cost beside the 2026 client's, measured in the same run.
    let (modern, era2025) = (m[3], m[4]);
    out!(
        "\n2025-era client vs 2026-07-28 client through redmark: {:.2}x the rate, {:.2}x the p50, {:.2}x the CPU per call.",
        era2025.0 / modern.0,
        era2025.1 / modern.1,
        cpu[4] / cpu[3]
    );
    if light > 0 {
        out!(
            "\n| passthrough at light load ({light} client(s), one request at a time) | req/s | p50 ms | p99 ms | errors | added p50, ms | added p50 vs nginx's |"
        );
        out!("|---|---:|---:|---:|---:|---:|---:|");
        let m: Vec<_> = pass_light.iter().map(|r| med(r)).collect();
        let (d, n) = (m[0], m[1]);
        for ((name, _, _, _), r) in paths.iter().zip(&m) {
            let (added, ratio) = if *name == "direct" {
                (String::new(), String::new())
            } else {
                (
                    format!("{:.3}", r.1 - d.1),
                    format!("{:.2}x", (r.1 - d.1) / (n.1 - d.1)),
                )
            };
            out!(
                "| {name} | {:.0} | {:.3} | {:.3} | {} | {added} | {ratio} |",
                r.0,
                r.1,
                r.2,
                r.3
            );
        }
    }
    out!(
        "\n| hold-mode elicitation through redmark | complete operations/s | p50 ms (whole operation) | p99 ms | errors | redmark CPU µs per operation |"
    );
    out!("|---|---:|---:|---:|---:|---:|");
    for ((tool, rows), cpu) in [
        "`ask` (one question, 2 requests)",
        "`ask2` (two questions at once, 2 requests)",
    ]
    .iter()
    .zip(&elicit)
    .zip(&elicit_cpu)
    {
        let r = med(rows);
        out!(
            "| {tool} | {:.0} | {:.2} | {:.2} | {} | {:.1} |",
            r.0,
            r.1,
            r.2,
            r.3,
            median(cpu.clone())
        );
    }
    if !full_gather.is_empty() {
        let r = med(&full_gather);
        out!(
            "| `ask`, gather window held to its 20 ms bound (`gather_quiet = \"20ms\"`) | {:.0} | {:.2} | {:.2} | {} | |",
            r.0,
            r.1,
            r.2,
            r.3
        );
    }
    out!(
        "\n| waiting questions | N open | gateway RSS idle → with N, MiB | RSS per question | live heap per question | server processes' RSS | passthrough p50 idle → with N, ms | with N vs idle |"
    );
    out!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mib = |k: u64| k as f64 / 1024.0;
    for w in &waits {
        let per = |full: u64, idle: u64| full.saturating_sub(idle) as f64 / w.opened.max(1) as f64;
        out!(
            "| {} | {} of {} | {:.1} → {:.1} | {:.1} KiB | {:.1} KiB | {:.1} MiB | {:.2} → {:.2} | {:.2}x |",
            w.label,
            w.opened,
            w.n,
            mib(w.idle_kib),
            mib(w.full_kib),
            per(w.full_kib, w.idle_kib),
            per(w.full_heap_kib, w.idle_heap_kib),
            mib(w.servers_kib),
            w.p50_idle,
            w.p50_full,
            w.p50_full / w.p50_idle
        );
        if let Some(e) = &w.error {
            eprintln!("[bench] {}: first error: {e}", w.label);
        }
    }
    out!(
        "\nLoad average at the start (1, 5, 15 min): {}.",
        load_avg
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(", ")
    );
    out!(
        "\nredmark RSS: {:.1} MiB idle, peak {:.1} MiB over the passthrough and elicitation runs. \
         Shared machine: absolute numbers are indicative, the ratios are the point.",
        mib(redmark_idle),
        mib(redmark_loaded)
    );
    if let Some(e) = &first_error {
        out!("\nfirst error: `{e}`");
    }
    print!("{md}");
    let out = root.join("target/bench");
    std::fs::create_dir_all(&out).expect("target/bench");
    std::fs::write(out.join("relay.md"), &md).expect("write target/bench/relay.md");
    eprintln!("[bench] wrote {}", out.join("relay.md").display());

    drop(floor);
    drop(nginx);
    drop(upstream);
}
