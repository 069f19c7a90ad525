//! Soak: redmark (release) under a steady mixed load against the fast
//! upstream (`examples/bench_upstream.rs`), then at rest, checked for errors
//! and leaks. Run it with `scripts/soak.sh` (which builds what it needs).
//!
//! For `SOAK_SECONDS` (60) it sends `SOAK_RATE` (1,000) passthrough
//! `tools/call echo` per second and opens `SOAK_QUESTIONS` (10,000) `ask`
//! operations spread evenly over the run. Each question meets a fate drawn
//! at random (seeded, `SOAK_SEED`): answered, declined, cancelled by the
//! person (`action: cancel`), left to expire (`[mrtr] ttl` = `SOAK_TTL_SECONDS`)
//! and then retried late, abandoned by a client that sends its answer and
//! closes the connection at once, or answered twice at the same moment (a
//! replayed state). Every reply is checked: a designed ending (the late
//! retry's `operation_expired`, the replay loser's `state_replayed`) is
//! counted by its `data.reason`; anything else is an error.
//!
//! Gateway RSS, open file descriptors, tokio tasks (`redmark_runtime_tasks`),
//! pending operations and upstream sessions are sampled at start (after a
//! warm-up), through the run (peak), and at the end: once every TTL and the
//! late-retry grace (60 s) have passed, it waits (up to `SOAK_SETTLE_SECONDS`,
//! 150) for the gateway to come back to rest. Exit status 1 on any error or
//! leak: pending operations or leased sessions left, RSS more than 10 % over
//! start, more descriptors or tasks than at start (plus a small slack).
//!
//! Usage: `soak [--redmark BIN] [--upstream BIN]` (default: beside this binary).

// An example may panic on what it cannot do: it is not on a request path.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)]

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const MODERN: &str = "2026-07-28";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// redmark's `LATE_RETRY_GRACE`: how long an ended operation is remembered past its TTL.
const LATE_RETRY_GRACE: Duration = Duration::from_secs(60);
/// How far RSS at rest may sit above start.
const RSS_SLACK: f64 = 0.10;
/// Descriptors and tasks at rest may exceed start by this many (a timer, a log file).
const COUNT_SLACK: i64 = 4;

// --- processes ---------------------------------------------------------------

/// A spawned process, killed and reaped when dropped (also on panic).
struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Proc {
    /// Starts `cmd` with output to `<dir>/<name>.log`; waits for `ready` in it.
    fn start(name: &'static str, mut cmd: Command, dir: &Path, ready: &str) -> (Proc, String) {
        let log = dir.join(format!("{name}.log"));
        let out = File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = cmd.stdin(Stdio::null()).stdout(out).stderr(err).spawn();
        let child = child.unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let mut p = Proc { name, child, log };
        let end = Instant::now() + Duration::from_secs(30);
        while Instant::now() < end {
            let text = std::fs::read_to_string(&p.log).unwrap_or_default();
            if text.contains(ready) {
                return (p, text);
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("{name} exited ({status}) before '{ready}':\n{text}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{name} did not say '{ready}' within 30 s");
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    /// SIGTERM, up to 5 s to exit, then SIGKILL.
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
        eprintln!("[soak] stopped {} (pid {pid})", self.name);
    }
}

/// The text after `marker` in `text`, up to whitespace.
fn after<'a>(text: &'a str, marker: &str) -> &'a str {
    let rest = text.split(marker).nth(1).expect("marker in log");
    rest.split_whitespace().next().unwrap_or_default()
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| v.parse().unwrap_or(default))
}

/// `--flag PATH`, else `NAME` beside this binary (`target/release/examples/soak`
/// has `../redmark`; the upstream example sits beside it).
fn binary(flag: &str, rel: &str) -> PathBuf {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == flag) {
        return PathBuf::from(&args[i + 1]);
    }
    let me = std::env::current_exe().expect("current exe");
    let dir = me.parent().expect("examples dir");
    dir.join(rel)
}

// --- what the gateway process holds --------------------------------------------

/// One look at the gateway: from `/proc` and its `/metrics`.
#[derive(Clone, Copy, Default, Debug)]
struct Sample {
    rss_kib: u64,
    fds: i64,
    tasks: i64,
    pending: i64,
    session_ops: i64,
    leased: i64,
    idle: i64,
    connections: i64,
}

impl Sample {
    fn max(self, o: Sample) -> Sample {
        Sample {
            rss_kib: self.rss_kib.max(o.rss_kib),
            fds: self.fds.max(o.fds),
            tasks: self.tasks.max(o.tasks),
            pending: self.pending.max(o.pending),
            session_ops: self.session_ops.max(o.session_ops),
            leased: self.leased.max(o.leased),
            idle: self.idle.max(o.idle),
            connections: self.connections.max(o.connections),
        }
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn fds(pid: u32) -> i64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(-1, |d| d.count() as i64)
}

/// The sum of every series of `name` (with or without labels) in a text exposition.
fn metric(text: &str, name: &str, label: Option<&str>) -> i64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with(' ') || r.starts_with('{'))
        })
        .filter(|l| label.is_none_or(|lb| l.contains(lb)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as i64
}

async fn sample(http: &reqwest::Client, admin: &str, pid: u32) -> Sample {
    let text = match http.get(format!("{admin}/metrics")).send().await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    Sample {
        rss_kib: rss_kib(pid),
        fds: fds(pid),
        tasks: metric(&text, "redmark_runtime_tasks", None),
        pending: metric(&text, "redmark_pending_operations", None),
        session_ops: metric(&text, "redmark_upstream_session_operations", None),
        leased: metric(&text, "redmark_upstream_sessions", Some("state=\"leased\"")),
        idle: metric(&text, "redmark_upstream_sessions", Some("state=\"idle\"")),
        connections: metric(&text, "redmark_client_connections", None),
    }
}

// --- the client side --------------------------------------------------------------

/// How one request ended, as the client saw it.
enum Reply {
    /// A JSON-RPC result.
    Result(Value),
    /// A JSON-RPC error: its `data.reason` (or `code <n>` without one) and message.
    Error(String, String),
    /// No JSON-RPC answer: transport failure, timeout, unparsable body.
    Broken(String),
}

/// The JSON-RPC message answering a request, in a JSON or SSE body.
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

fn call_body(id: u64, params: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

async fn post(http: &reqwest::Client, url: &str, tool: &str, body: String) -> Reply {
    let resp = http
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", MODERN)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", tool)
        .body(body)
        .send()
        .await;
    let resp = match resp {
        Ok(r) => r,
        Err(e) => return Reply::Broken(format!("send: {e}")),
    };
    let status = resp.status();
    let text = match resp.text().await {
        Ok(t) => t,
        Err(e) => return Reply::Broken(format!("HTTP {status}, body: {e}")),
    };
    let Some(v) = parse_response(&text) else {
        return Reply::Broken(format!("HTTP {status}, no JSON-RPC answer: {text:.200}"));
    };
    if let Some(e) = v.get("error") {
        let reason = e["data"]["reason"]
            .as_str()
            .map_or_else(|| format!("code {}", e["code"]), str::to_owned);
        return Reply::Error(reason, format!("HTTP {status}: {e}"));
    }
    if !status.is_success() {
        return Reply::Broken(format!("HTTP {status} with a result: {text:.200}"));
    }
    Reply::Result(v["result"].clone())
}

fn meta(elicit: bool) -> Value {
    let caps = if elicit {
        json!({"elicitation": {"form": {}}})
    } else {
        json!({})
    };
    json!({"io.modelcontextprotocol/protocolVersion": MODERN,
           "io.modelcontextprotocol/clientCapabilities": caps})
}

/// Counts by kind, with the first message of each.
#[derive(Default)]
struct Tally {
    designed: BTreeMap<String, u64>,
    errors: BTreeMap<String, (u64, String)>,
    fates: BTreeMap<&'static str, u64>,
    ok: u64,
    pass_lat_us: Vec<u64>,
    open_lat_us: Vec<u64>,
    retry_lat_us: Vec<u64>,
}

type Shared = Arc<Mutex<Tally>>;

fn error(t: &Shared, kind: &str, msg: String) {
    let mut t = t.lock().unwrap();
    let e = t.errors.entry(kind.to_owned()).or_insert((0, msg));
    e.0 += 1;
}

fn designed(t: &Shared, reason: &str) {
    *t.lock()
        .unwrap()
        .designed
        .entry(reason.to_owned())
        .or_default() += 1;
}

fn ok(t: &Shared) {
    t.lock().unwrap().ok += 1;
}

/// The text of a tool result's first content block.
fn text_of(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap_or("")
}

/// One passthrough `tools/call echo`, checked.
async fn echo(http: &reqwest::Client, url: &str, id: u64, t: &Shared) {
    let msg = format!("soak {id}");
    let params = json!({"name": "echo", "arguments": {"message": msg}, "_meta": meta(false)});
    let started = Instant::now();
    let reply = post(http, url, "echo", call_body(id, &params)).await;
    let us = started.elapsed().as_micros() as u64;
    match reply {
        Reply::Result(r) if text_of(&r) == format!("Echo: {msg}") => {
            let mut t = t.lock().unwrap();
            t.ok += 1;
            t.pass_lat_us.push(us);
        }
        Reply::Result(r) => error(t, "echo: wrong result", r.to_string()),
        Reply::Error(reason, m) => error(t, &format!("echo: {reason}"), m),
        Reply::Broken(m) => error(t, "echo: broken", m),
    }
}

/// What happens to one question.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fate {
    Answer,
    Decline,
    Cancel,
    /// Never answered in time; a late retry hears `operation_expired`.
    Expire,
    /// The answer is sent and the connection closed without reading.
    Abandon,
    /// The same answer twice at once: one result, one `state_replayed`.
    Replay,
}

impl Fate {
    /// Answer 35 %, decline 10 %, cancel 15 %, expire 15 %, abandon 10 %, replay 15 %.
    fn draw(x: u64) -> Fate {
        match x % 100 {
            0..35 => Fate::Answer,
            35..45 => Fate::Decline,
            45..60 => Fate::Cancel,
            60..75 => Fate::Expire,
            75..85 => Fate::Abandon,
            _ => Fate::Replay,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Fate::Answer => "answered",
            Fate::Decline => "declined",
            Fate::Cancel => "cancelled",
            Fate::Expire => "expired",
            Fate::Abandon => "abandoned",
            Fate::Replay => "replayed",
        }
    }
}

/// splitmix64: a seeded, reproducible stream of draws.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The answer to every question of `asked`, as `inputResponses`.
fn answers(asked: &Value, action: &str) -> Value {
    let obj = asked.as_object().map(|m| {
        m.keys()
            .map(|k| {
                let a = if action == "accept" {
                    json!({"action": "accept", "content": {"name": "soak"}})
                } else {
                    json!({"action": action})
                };
                (k.clone(), a)
            })
            .collect::<serde_json::Map<_, _>>()
    });
    Value::Object(obj.unwrap_or_default())
}

struct Question {
    http: reqwest::Client,
    url: String,
    /// host:port of the gateway, for the abandoning client's raw socket.
    addr: String,
    id: u64,
    fate: Fate,
    /// Before the answer, as a fraction of the TTL (answered fates only).
    think: f64,
    ttl: Duration,
    tally: Shared,
}

impl Question {
    async fn run(self) {
        let t = &self.tally;
        *t.lock().unwrap().fates.entry(self.fate.name()).or_default() += 1;
        let mut params = json!({"name": "ask", "arguments": {}, "_meta": meta(true)});
        let started = Instant::now();
        let reply = post(
            &self.http,
            &self.url,
            "ask",
            call_body(self.id * 4, &params),
        )
        .await;
        let us = started.elapsed().as_micros() as u64;
        let asked = match reply {
            Reply::Result(r) if r["resultType"] == "input_required" => r,
            Reply::Result(r) => return error(t, "ask: not asked", r.to_string()),
            Reply::Error(reason, m) => return error(t, &format!("ask: {reason}"), m),
            Reply::Broken(m) => return error(t, "ask: broken", m),
        };
        t.lock().unwrap().open_lat_us.push(us);
        ok(t);
        let (action, want) = match self.fate {
            Fate::Decline => ("decline", "?"),
            Fate::Cancel => ("cancel", "?"),
            _ => ("accept", "soak"),
        };
        params["inputResponses"] = answers(&asked["inputRequests"], action);
        params["requestState"] = asked["requestState"].clone();
        let wait = if self.fate == Fate::Expire {
            // Past the TTL, well inside the grace minute that remembers the ending.
            self.ttl + Duration::from_secs(2)
        } else {
            self.ttl.mul_f64(self.think)
        };
        tokio::time::sleep(wait).await;
        let body = call_body(self.id * 4 + 1, &params);
        match self.fate {
            Fate::Abandon => self.abandon(&body).await,
            Fate::Replay => {
                let (a, b) = tokio::join!(
                    post(&self.http, &self.url, "ask", body.clone()),
                    post(&self.http, &self.url, "ask", body)
                );
                let (mut results, mut replayed) = (0, 0);
                for r in [a, b] {
                    match r {
                        Reply::Result(r) if text_of(&r) == want => results += 1,
                        Reply::Error(reason, _) if reason == "state_replayed" => replayed += 1,
                        Reply::Result(r) => error(t, "replay: wrong result", r.to_string()),
                        Reply::Error(reason, m) => error(t, &format!("replay: {reason}"), m),
                        Reply::Broken(m) => error(t, "replay: broken", m),
                    }
                }
                if (results, replayed) == (1, 1) {
                    ok(t);
                    designed(t, "state_replayed");
                } else if results + replayed == 2 {
                    error(
                        t,
                        "replay: not one result and one state_replayed",
                        format!("{results} results, {replayed} state_replayed"),
                    );
                }
            }
            Fate::Expire => match post(&self.http, &self.url, "ask", body).await {
                Reply::Error(reason, _) if reason == "operation_expired" => {
                    designed(t, "operation_expired");
                }
                Reply::Result(r) => error(t, "late retry: a result", r.to_string()),
                Reply::Error(reason, m) => error(t, &format!("late retry: {reason}"), m),
                Reply::Broken(m) => error(t, "late retry: broken", m),
            },
            Fate::Answer | Fate::Decline | Fate::Cancel => {
                let started = Instant::now();
                let reply = post(&self.http, &self.url, "ask", body).await;
                let us = started.elapsed().as_micros() as u64;
                match reply {
                    Reply::Result(r) if text_of(&r) == want => {
                        t.lock().unwrap().retry_lat_us.push(us);
                        ok(t);
                    }
                    Reply::Result(r) => error(t, "retry: wrong result", r.to_string()),
                    Reply::Error(reason, m) => error(t, &format!("retry: {reason}"), m),
                    Reply::Broken(m) => error(t, "retry: broken", m),
                }
            }
        }
    }

    /// Sends the retry on a socket of its own and closes it within a few
    /// milliseconds, without reading: a client that went away mid-answer.
    async fn abandon(&self, body: &str) {
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: ask\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        match tokio::net::TcpStream::connect(&self.addr).await {
            Ok(mut s) => {
                let sent = s.write_all(head.as_bytes()).await;
                let sent = sent.and(s.write_all(body.as_bytes()).await);
                if let Err(e) = sent {
                    return error(&self.tally, "abandon: write", e.to_string());
                }
                let ms = (self.think * 1000.0) as u64 % 4;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                drop(s);
                ok(&self.tally);
            }
            Err(e) => error(&self.tally, "abandon: connect", e.to_string()),
        }
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("http client")
}

/// `rate` echo calls per second for `secs`, from `workers` keep-alive clients.
async fn passthrough(url: String, rate: u64, secs: Duration, workers: u64, t: Shared) -> u64 {
    let period = Duration::from_secs_f64(workers as f64 / rate.max(1) as f64);
    let end = Instant::now() + secs;
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (url, t) = (url.clone(), t.clone());
        tasks.push(tokio::spawn(async move {
            let http = client();
            let offset = period.mul_f64(w as f64 / workers as f64);
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + offset, period);
            let mut sent = 0u64;
            while Instant::now() < end {
                tick.tick().await;
                echo(&http, &url, w * 10_000_000 + sent, &t).await;
                sent += 1;
            }
            sent
        }));
    }
    let mut sent = 0;
    for task in tasks {
        sent += task.await.expect("passthrough worker");
    }
    sent
}

/// Nearest-rank percentile in milliseconds.
fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The gateway's config: one route to the fast upstream, a short TTL, room
/// for every question, idle sessions let go soon.
fn config(upstream_port: u16, ttl: Duration, questions: u64) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
         [mrtr]\nttl = \"{ttl}ms\"\nmax_pending_per_principal = {pending}\n\
         [[route]]\nname = \"soak\"\npath = \"/mcp\"\n\
         [route.upstream]\nurl = \"http://127.0.0.1:{upstream_port}/mcp\"\n\
         [route.pool]\nmax_sessions = 1024\nmax_sessions_per_principal = 1024\n\
         idle_timeout = \"10s\"\n",
        ttl = ttl.as_millis(),
        pending = questions + 1000,
    )
}

#[allow(clippy::too_many_lines)]
fn main() {
    let secs = Duration::from_secs(env_num("SOAK_SECONDS", 60).max(1));
    let rate = env_num("SOAK_RATE", 1000);
    let questions = env_num("SOAK_QUESTIONS", 10_000);
    let default_ttl = (secs.as_secs() / 6).clamp(3, 30);
    let ttl = Duration::from_secs(env_num("SOAK_TTL_SECONDS", default_ttl).max(1));
    let seed = env_num("SOAK_SEED", 1);
    let settle = Duration::from_secs(env_num("SOAK_SETTLE_SECONDS", 150));
    let workers = env_num("SOAK_WORKERS", 32).clamp(1, 512);
    // SOAK_ONLY=answered|declined|cancelled|expired|abandoned|replayed: every question meets that fate.
    let only = std::env::var("SOAK_ONLY").ok().map(|name| {
        let all = [
            Fate::Answer,
            Fate::Decline,
            Fate::Cancel,
            Fate::Expire,
            Fate::Abandon,
            Fate::Replay,
        ];
        all.into_iter()
            .find(|f| f.name() == name)
            .unwrap_or_else(|| panic!("SOAK_ONLY={name}: not a fate"))
    });
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();

    let mut cmd = Command::new(binary("--upstream", "bench_upstream"));
    cmd.args(["--http", "0"]);
    let marker = "bench-upstream listening on port ";
    let (upstream, text) = Proc::start("bench-upstream", cmd, dir, marker);
    let up_port: u16 = after(&text, marker).parse().expect("upstream port");

    let file = dir.join("soak.toml");
    std::fs::write(&file, config(up_port, ttl, questions)).expect("write config");
    let redmark_bin = binary("--redmark", "../redmark");
    let mut cmd = Command::new(&redmark_bin);
    cmd.arg("serve").arg("--config").arg(&file);
    cmd.env(
        "RUST_LOG",
        std::env::var("RUST_LOG").unwrap_or("warn".into()),
    );
    let (gw, text) = Proc::start("redmark", cmd, dir, "redmark admin on http://");
    let addr = after(&text, "redmark listening on http://").to_owned();
    let admin = format!("http://{}", after(&text, "redmark admin on http://"));
    let url = format!("http://{addr}/mcp");
    let pid = gw.pid();
    eprintln!(
        "[soak] {}: {secs:?} of {rate} echo/s and {questions} questions, ttl {ttl:?}, seed {seed}, load average {}",
        redmark_bin.display(),
        loadavg()
    );

    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let tally: Shared = Arc::default();
    let scrape = rt.block_on(async { client() });

    // Warm-up: the route learns its session mode, allocators and pools fill
    // to their working size; then the clients close and the gateway rests.
    rt.block_on(async {
        let warm: Shared = Arc::default();
        passthrough(url.clone(), 500, Duration::from_secs(2), 8, warm.clone()).await;
        let mut set = tokio::task::JoinSet::new();
        for i in 0..60 {
            let fate = [Fate::Answer, Fate::Decline, Fate::Cancel, Fate::Replay][i % 4];
            set.spawn(
                Question {
                    http: client(),
                    url: url.clone(),
                    addr: addr.clone(),
                    id: 900_000_000 + i as u64,
                    fate,
                    think: 0.0,
                    ttl,
                    tally: warm.clone(),
                }
                .run(),
            );
        }
        while set.join_next().await.is_some() {}
        let w = warm.lock().unwrap();
        assert!(w.errors.is_empty(), "warm-up errors: {:?}", w.errors);
    });
    std::thread::sleep(Duration::from_secs(2));
    let start = rt.block_on(sample(&scrape, &admin, pid));
    eprintln!("[soak] start: {start:?}");

    // The run: passthrough, questions opened at an even pace, a sampler.
    let running = Arc::new(AtomicBool::new(true));
    let peak = Arc::new(Mutex::new(start));
    let began = Instant::now();
    let (sent, opened) = rt.block_on(async {
        let sampler = {
            let (running, peak, scrape, admin) =
                (running.clone(), peak.clone(), scrape.clone(), admin.clone());
            tokio::spawn(async move {
                let mut last_log = Instant::now();
                while running.load(Ordering::Relaxed) {
                    let s = sample(&scrape, &admin, pid).await;
                    let p = {
                        let mut p = peak.lock().unwrap();
                        *p = p.max(s);
                        *p
                    };
                    if last_log.elapsed() >= Duration::from_secs(5) {
                        last_log = Instant::now();
                        eprintln!(
                            "[soak] t={:.0}s now {s:?} (peak rss {} KiB)",
                            began.elapsed().as_secs_f64(),
                            p.rss_kib
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            })
        };
        let pass = tokio::spawn(passthrough(url.clone(), rate, secs, workers, tally.clone()));
        let http = client();
        let mut set = tokio::task::JoinSet::new();
        let period = secs.div_f64(questions.max(1) as f64);
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        for i in 0..questions {
            tick.tick().await;
            let draw = mix(seed ^ mix(i));
            set.spawn(
                Question {
                    http: http.clone(),
                    url: url.clone(),
                    addr: addr.clone(),
                    id: i,
                    fate: only.unwrap_or(Fate::draw(draw)),
                    think: (draw >> 32) as f64 / f64::from(u32::MAX) * 0.8,
                    ttl,
                    tally: tally.clone(),
                }
                .run(),
            );
        }
        let sent = pass.await.expect("passthrough");
        while set.join_next().await.is_some() {}
        running.store(false, Ordering::Relaxed);
        sampler.await.expect("sampler");
        (sent, questions)
    });
    let ran = began.elapsed();
    let peak = *peak.lock().unwrap();

    // At rest: every TTL and the grace minute passed; wait for the gateway to settle.
    let rest_from = Instant::now();
    let earliest = began + secs + ttl + LATE_RETRY_GRACE + Duration::from_secs(6);
    // `SOAK_RSS_SLACK_PERCENT` (default 10): CI's short run allows more, see `.ci/run`.
    let slack = env_num("SOAK_RSS_SLACK_PERCENT", (RSS_SLACK * 100.0) as u64) as f64 / 100.0;
    let rss_bound = (start.rss_kib as f64 * (1.0 + slack)) as u64;
    let at_rest = |s: &Sample| {
        s.pending == 0
            && s.session_ops == 0
            && s.leased == 0
            && s.rss_kib <= rss_bound
            && s.fds <= start.fds + COUNT_SLACK
            && s.tasks <= start.tasks + COUNT_SLACK
    };
    let mut end = rt.block_on(sample(&scrape, &admin, pid));
    let deadline = earliest.max(Instant::now()) + settle;
    eprintln!(
        "[soak] run done in {:.1}s; resting until every TTL and the grace minute passed ({:.0}s)",
        ran.as_secs_f64(),
        earliest
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
    );
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(1));
        end = rt.block_on(sample(&scrape, &admin, pid));
        if Instant::now() >= earliest && at_rest(&end) {
            break;
        }
        if rest_from.elapsed().as_secs().is_multiple_of(10) {
            eprintln!(
                "[soak] resting {:.0}s: {end:?}",
                rest_from.elapsed().as_secs_f64()
            );
        }
    }
    let rested = rest_from.elapsed();
    let gw_log = std::fs::metadata(&gw.log).map_or(0, |m| m.len());
    let gw_lines = std::fs::read_to_string(&gw.log).map_or(0, |t| t.lines().count());
    drop(rt);

    // The report.
    let mut guard = tally.lock().unwrap();
    let t = &mut *guard;
    for v in [&mut t.pass_lat_us, &mut t.open_lat_us, &mut t.retry_lat_us] {
        v.sort_unstable();
    }
    let errors: u64 = t.errors.values().map(|e| e.0).sum();
    let mib = |k: u64| k as f64 / 1024.0;
    println!("## soak\n");
    println!(
        "{:.0} s of load ({sent} echo calls, {:.0}/s; {opened} questions, ttl {} s), seed {seed}, load average {}",
        secs.as_secs_f64(),
        t.pass_lat_us.len() as f64 / secs.as_secs_f64(),
        ttl.as_secs(),
        loadavg()
    );
    println!(
        "fates: {}",
        t.fates
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "replies as designed: {} ok; designed endings: {}",
        t.ok,
        if t.designed.is_empty() {
            "none".to_owned()
        } else {
            t.designed
                .iter()
                .map(|(k, v)| format!("`{k}` {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    println!("errors: {errors}");
    for (kind, (n, first)) in &t.errors {
        println!("  {n} x {kind}: {first:.300}");
    }
    println!(
        "latency ms (p50 / p99): passthrough {:.2} / {:.2}; ask (first round) {:.2} / {:.2}; answer {:.2} / {:.2}",
        pct(&t.pass_lat_us, 50.0),
        pct(&t.pass_lat_us, 99.0),
        pct(&t.open_lat_us, 50.0),
        pct(&t.open_lat_us, 99.0),
        pct(&t.retry_lat_us, 50.0),
        pct(&t.retry_lat_us, 99.0),
    );
    println!("\n| gateway | start | peak | end |\n|---|---:|---:|---:|");
    println!(
        "| RSS MiB | {:.1} | {:.1} | {:.1} |",
        mib(start.rss_kib),
        mib(peak.rss_kib),
        mib(end.rss_kib)
    );
    for (name, f) in [
        ("open fds", (|s: &Sample| s.fds) as fn(&Sample) -> i64),
        ("tokio tasks", |s| s.tasks),
        ("pending operations", |s| s.pending),
        ("operations on sessions", |s| s.session_ops),
        ("sessions leased", |s| s.leased),
        ("sessions idle", |s| s.idle),
        ("client connections", |s| s.connections),
    ] {
        println!("| {name} | {} | {} | {} |", f(&start), f(&peak), f(&end));
    }
    println!(
        "\nend sampled {:.0} s after the load stopped; gateway log: {gw_lines} lines, {gw_log} bytes",
        rested.as_secs_f64() + (ran.saturating_sub(secs)).as_secs_f64()
    );

    let mut failed = Vec::new();
    if errors > 0 {
        failed.push(format!("{errors} unexpected errors"));
    }
    if t.pass_lat_us.is_empty() || t.open_lat_us.is_empty() {
        failed.push("no successful requests".to_owned());
    }
    if !at_rest(&end) {
        failed.push(format!(
            "not back at rest after {:.0} s: {end:?} (start {start:?}, RSS bound {rss_bound} KiB)",
            rested.as_secs_f64()
        ));
    }
    drop(guard);
    drop(gw);
    drop(upstream);
    if failed.is_empty() {
        println!("\nsoak: ok");
    } else {
        println!("\nsoak: FAILED: {}", failed.join("; "));
        std::process::exit(1);
    }
}
