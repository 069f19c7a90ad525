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
//! leak: pending operations or leased sessions left, live heap objects
//! (jemalloc's `allocated`) more than 10 % + 1 MiB over start, RSS more than
//! `SOAK_RSS_SLACK_PERCENT` (10) over start, more descriptors or tasks than
//! at start (plus a small slack). Live bytes are the leak measure; RSS is the
//! looser backstop, since it also holds the allocator's fragmented pages.
//!
//! With `--rounds N` (`SOAK_ROUNDS`) the load runs N times on the same
//! gateway, resting after each: RSS at rest that stays level from round to
//! round is capacity kept for the next burst; growth per round is a leak.
//! Each sample also splits RSS (anonymous, file-backed) and reads jemalloc's
//! own counters (`redmark_allocator_bytes`): live objects against pages held.
//!
//! Usage: `soak [--redmark BIN] [--upstream BIN] [--rounds N]` (default: beside this binary).

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
/// How far live heap objects at rest (jemalloc's `allocated`) may sit above
/// start: the leak criterion proper. RSS also counts pages the allocator
/// keeps for fragmented slabs after a burst (a short run ends with a few MiB
/// of them, released only as the next load reuses them), live bytes do not.
const LIVE_SLACK: f64 = 0.10;
/// ... plus this much, KiB: start holds only a few MiB of live objects.
const LIVE_FLOOR_KIB: u64 = 1024;
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

/// The value after `--flag` on the command line.
fn flag(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).cloned()
}

/// `--flag PATH`, else `NAME` beside this binary (`target/release/examples/soak`
/// has `../redmark`; the upstream example sits beside it).
fn binary(name: &str, rel: &str) -> PathBuf {
    if let Some(path) = flag(name) {
        return PathBuf::from(path);
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
    /// RSS split: anonymous memory (heap, stacks) and file-backed pages (the binary's code).
    anon_kib: u64,
    file_kib: u64,
    threads: u64,
    /// jemalloc's counters (`redmark_allocator_bytes`), KiB: live objects, resident pages, metadata.
    allocated_kib: u64,
    resident_kib: u64,
    metadata_kib: u64,
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
            anon_kib: self.anon_kib.max(o.anon_kib),
            file_kib: self.file_kib.max(o.file_kib),
            threads: self.threads.max(o.threads),
            allocated_kib: self.allocated_kib.max(o.allocated_kib),
            resident_kib: self.resident_kib.max(o.resident_kib),
            metadata_kib: self.metadata_kib.max(o.metadata_kib),
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

impl std::fmt::Display for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |k: u64| k as f64 / 1024.0;
        write!(
            f,
            "rss {:.1} MiB (anon {:.1}, file {:.1}), jemalloc allocated {:.1} resident {:.1} metadata {:.1}; \
             threads {}, fds {}, tasks {}, pending {}, session ops {}, leased {}, idle {}, connections {}",
            mib(self.rss_kib),
            mib(self.anon_kib),
            mib(self.file_kib),
            mib(self.allocated_kib),
            mib(self.resident_kib),
            mib(self.metadata_kib),
            self.threads,
            self.fds,
            self.tasks,
            self.pending,
            self.session_ops,
            self.leased,
            self.idle,
            self.connections
        )
    }
}

/// `field` of `/proc/<pid>/status` (`VmRSS`, `RssAnon`, `Threads`): its number.
fn status(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))
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
    let alloc = |kind: &str| {
        let label = format!("kind=\"{kind}\"");
        (metric(&text, "redmark_allocator_bytes", Some(&label)) / 1024) as u64
    };
    Sample {
        rss_kib: status(pid, "VmRSS"),
        anon_kib: status(pid, "RssAnon"),
        file_kib: status(pid, "RssFile"),
        threads: status(pid, "Threads"),
        allocated_kib: alloc("allocated"),
        resident_kib: alloc("resident"),
        metadata_kib: alloc("metadata"),
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

/// What one run is: the load, the gateway it goes to, and how it is judged.
struct Soak {
    secs: Duration,
    rate: u64,
    questions: u64,
    ttl: Duration,
    seed: u64,
    workers: u64,
    only: Option<Fate>,
    url: String,
    addr: String,
    admin: String,
    pid: u32,
    scrape: reqwest::Client,
}

impl Soak {
    async fn sample(&self) -> Sample {
        sample(&self.scrape, &self.admin, self.pid).await
    }

    /// Warm-up: the route learns its session mode, allocators and pools fill
    /// to their working size; then the clients close and the gateway rests.
    async fn warm_up(&self) {
        let warm: Shared = Arc::default();
        passthrough(
            self.url.clone(),
            500,
            Duration::from_secs(2),
            8,
            warm.clone(),
        )
        .await;
        let mut set = tokio::task::JoinSet::new();
        for i in 0..60 {
            let fate = [Fate::Answer, Fate::Decline, Fate::Cancel, Fate::Replay][i % 4];
            set.spawn(
                self.question(900_000_000 + i as u64, fate, 0.0, &warm)
                    .run(),
            );
        }
        while set.join_next().await.is_some() {}
        let w = warm.lock().unwrap();
        assert!(w.errors.is_empty(), "warm-up errors: {:?}", w.errors);
    }

    fn question(&self, id: u64, fate: Fate, think: f64, tally: &Shared) -> Question {
        Question {
            http: client(),
            url: self.url.clone(),
            addr: self.addr.clone(),
            id,
            fate,
            think,
            ttl: self.ttl,
            tally: tally.clone(),
        }
    }

    /// One round of load: passthrough and questions opened at an even pace,
    /// sampled into `peak`. Round `r` draws the same fates as round 0 under
    /// other ids, so rounds can be compared. Returns the echo calls sent.
    async fn round(&self, r: u64, tally: &Shared, peak: &Arc<Mutex<Sample>>) -> u64 {
        let running = Arc::new(AtomicBool::new(true));
        let began = Instant::now();
        let sampler = {
            let (running, peak, scrape, admin, pid) = (
                running.clone(),
                peak.clone(),
                self.scrape.clone(),
                self.admin.clone(),
                self.pid,
            );
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
                            "[soak] round {} t={:.0}s: {s} (peak rss {} KiB)",
                            r + 1,
                            began.elapsed().as_secs_f64(),
                            p.rss_kib
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            })
        };
        let pass = tokio::spawn(passthrough(
            self.url.clone(),
            self.rate,
            self.secs,
            self.workers,
            tally.clone(),
        ));
        let http = client();
        let mut set = tokio::task::JoinSet::new();
        let period = self.secs.div_f64(self.questions.max(1) as f64);
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        for i in 0..self.questions {
            tick.tick().await;
            let draw = mix(self.seed ^ mix(i));
            let fate = self.only.unwrap_or(Fate::draw(draw));
            let think = (draw >> 32) as f64 / f64::from(u32::MAX) * 0.8;
            let mut q = self.question(r * self.questions + i, fate, think, tally);
            q.http = http.clone();
            set.spawn(q.run());
        }
        let sent = pass.await.expect("passthrough");
        while set.join_next().await.is_some() {}
        running.store(false, Ordering::Relaxed);
        sampler.await.expect("sampler");
        sent
    }

    /// At rest: once every TTL of the round that began at `began` and the
    /// grace minute have passed, waits up to `settle` for `at_rest`. Returns
    /// the last sample and how long after the load it was taken.
    async fn rest(
        &self,
        began: Instant,
        settle: Duration,
        at_rest: impl Fn(&Sample) -> bool,
    ) -> (Sample, Duration) {
        let load_end = began + self.secs;
        let earliest = load_end + self.ttl + LATE_RETRY_GRACE + Duration::from_secs(6);
        let deadline = earliest.max(Instant::now()) + settle;
        eprintln!(
            "[soak] load done in {:.1}s; resting until every TTL and the grace minute passed ({:.0}s)",
            began.elapsed().as_secs_f64(),
            earliest
                .saturating_duration_since(Instant::now())
                .as_secs_f64()
        );
        let mut end = self.sample().await;
        let mut logged = Instant::now();
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_secs(1)).await;
            end = self.sample().await;
            if Instant::now() >= earliest && at_rest(&end) {
                break;
            }
            if logged.elapsed() >= Duration::from_secs(10) {
                logged = Instant::now();
                eprintln!(
                    "[soak] resting {:.0}s: {end}",
                    load_end.elapsed().as_secs_f64()
                );
            }
        }
        (end, load_end.elapsed())
    }
}

#[allow(clippy::too_many_lines)]
fn main() {
    let secs = Duration::from_secs(env_num("SOAK_SECONDS", 60).max(1));
    let questions = env_num("SOAK_QUESTIONS", 10_000);
    let default_ttl = (secs.as_secs() / 6).clamp(3, 30);
    let ttl = Duration::from_secs(env_num("SOAK_TTL_SECONDS", default_ttl).max(1));
    let settle = Duration::from_secs(env_num("SOAK_SETTLE_SECONDS", 150));
    // `--rounds N` (or SOAK_ROUNDS): the load N times on the same gateway, resting
    // after each: RSS that comes back to the same level is capacity, growth a leak.
    let rounds = flag("--rounds").map_or_else(
        || env_num("SOAK_ROUNDS", 1),
        |v| v.parse().expect("--rounds N"),
    );
    let rounds = rounds.clamp(1, 100);
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
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let soak = Soak {
        secs,
        rate: env_num("SOAK_RATE", 1000),
        questions,
        ttl,
        seed: env_num("SOAK_SEED", 1),
        workers: env_num("SOAK_WORKERS", 32).clamp(1, 512),
        only,
        url: format!("http://{addr}/mcp"),
        admin: format!("http://{}", after(&text, "redmark admin on http://")),
        addr,
        pid: gw.pid(),
        scrape: rt.block_on(async { client() }),
    };
    eprintln!(
        "[soak] {}: {rounds} x {secs:?} of {} echo/s and {questions} questions, ttl {ttl:?}, seed {}, load average {}",
        redmark_bin.display(),
        soak.rate,
        soak.seed,
        loadavg()
    );

    rt.block_on(soak.warm_up());
    std::thread::sleep(Duration::from_secs(2));
    let start = rt.block_on(soak.sample());
    eprintln!("[soak] start: {start}");

    // `SOAK_RSS_SLACK_PERCENT` (default 10): CI's short run allows more, see `.ci/run`.
    let slack = env_num("SOAK_RSS_SLACK_PERCENT", (RSS_SLACK * 100.0) as u64) as f64 / 100.0;
    let rss_bound = (start.rss_kib as f64 * (1.0 + slack)) as u64;
    // Zero under `--features system-allocator` (no jemalloc counters): then RSS alone judges.
    let live_bound = (start.allocated_kib as f64 * (1.0 + LIVE_SLACK)) as u64 + LIVE_FLOOR_KIB;
    let at_rest = |s: &Sample| {
        s.pending == 0
            && s.session_ops == 0
            && s.leased == 0
            && s.allocated_kib <= live_bound
            && s.rss_kib <= rss_bound
            && s.fds <= start.fds + COUNT_SLACK
            && s.tasks <= start.tasks + COUNT_SLACK
    };
    let tally: Shared = Arc::default();
    let peak = Arc::new(Mutex::new(start));
    let mut sent = 0;
    let mut ends = Vec::new();
    for r in 0..rounds {
        let began = Instant::now();
        sent += rt.block_on(soak.round(r, &tally, &peak));
        let (end, after_load) = rt.block_on(soak.rest(began, settle, at_rest));
        eprintln!(
            "[soak] after round {} ({:.0}s after its load): {end}",
            r + 1,
            after_load.as_secs_f64()
        );
        ends.push((end, after_load));
    }
    let peak = *peak.lock().unwrap();
    let gw_log = std::fs::metadata(&gw.log).map_or(0, |m| m.len());
    let gw_lines = std::fs::read_to_string(&gw.log).map_or(0, |t| t.lines().count());
    drop(rt);

    let (end, after_load) = *ends.last().expect("one round at least");
    let errors = report(&soak, rounds, &tally, sent, (&start, &peak, &ends));
    println!(
        "\nend sampled {:.0} s after the load stopped; gateway log: {gw_lines} lines, {gw_log} bytes",
        after_load.as_secs_f64()
    );

    let mut failed = Vec::new();
    if errors > 0 {
        failed.push(format!("{errors} unexpected errors"));
    }
    if !at_rest(&end) {
        failed.push(format!(
            "not back at rest {:.0} s after the load: {end} (start {start}, bounds: live {live_bound} KiB, RSS {rss_bound} KiB)",
            after_load.as_secs_f64()
        ));
    }
    drop(gw);
    drop(upstream);
    if failed.is_empty() {
        println!("\nsoak: ok");
    } else {
        println!("\nsoak: FAILED: {}", failed.join("; "));
        std::process::exit(1);
    }
}

/// Prints the report; returns the number of unexpected errors (a run
/// without a single successful request counts as one).
fn report(
    soak: &Soak,
    rounds: u64,
    tally: &Shared,
    sent: u64,
    (start, peak, ends): (&Sample, &Sample, &[(Sample, Duration)]),
) -> u64 {
    let mut guard = tally.lock().unwrap();
    let t = &mut *guard;
    for v in [&mut t.pass_lat_us, &mut t.open_lat_us, &mut t.retry_lat_us] {
        v.sort_unstable();
    }
    let mut errors: u64 = t.errors.values().map(|e| e.0).sum();
    if t.pass_lat_us.is_empty() || t.open_lat_us.is_empty() {
        errors += 1;
        t.errors
            .insert("no successful requests".into(), (1, String::new()));
    }
    let load = soak.secs.as_secs_f64() * rounds as f64;
    println!("## soak\n");
    println!(
        "{rounds} x {:.0} s of load ({sent} echo calls, {:.0}/s; {} questions, ttl {} s), seed {}, load average {}",
        soak.secs.as_secs_f64(),
        t.pass_lat_us.len() as f64 / load,
        soak.questions * rounds,
        soak.ttl.as_secs(),
        soak.seed,
        loadavg()
    );
    let list = |m: &mut dyn Iterator<Item = String>| m.collect::<Vec<_>>().join(", ");
    println!(
        "fates: {}",
        list(&mut t.fates.iter().map(|(k, v)| format!("{k} {v}")))
    );
    println!(
        "replies as designed: {} ok; designed endings: {}",
        t.ok,
        list(&mut t.designed.iter().map(|(k, v)| format!("`{k}` {v}")))
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
    let heads: Vec<String> = if ends.len() == 1 {
        vec!["end".into()]
    } else {
        (1..=ends.len())
            .map(|r| format!("after round {r}"))
            .collect()
    };
    println!(
        "\n| gateway | start | peak | {} |\n|---|---:|---:|{}",
        heads.join(" | "),
        "---:|".repeat(ends.len())
    );
    fn mib(k: u64) -> String {
        format!("{:.1}", k as f64 / 1024.0)
    }
    type Row = (&'static str, fn(&Sample) -> String);
    let rows: [Row; 14] = [
        ("RSS MiB", |s| mib(s.rss_kib)),
        ("RSS anonymous MiB", |s| mib(s.anon_kib)),
        ("RSS file MiB", |s| mib(s.file_kib)),
        ("jemalloc allocated MiB", |s| mib(s.allocated_kib)),
        ("jemalloc resident MiB", |s| mib(s.resident_kib)),
        ("jemalloc metadata MiB", |s| mib(s.metadata_kib)),
        ("threads", |s| s.threads.to_string()),
        ("open fds", |s| s.fds.to_string()),
        ("tokio tasks", |s| s.tasks.to_string()),
        ("pending operations", |s| s.pending.to_string()),
        ("operations on sessions", |s| s.session_ops.to_string()),
        ("sessions leased", |s| s.leased.to_string()),
        ("sessions idle", |s| s.idle.to_string()),
        ("client connections", |s| s.connections.to_string()),
    ];
    for (name, f) in rows {
        let after: Vec<String> = ends.iter().map(|(e, _)| f(e)).collect();
        println!(
            "| {name} | {} | {} | {} |",
            f(start),
            f(peak),
            after.join(" | ")
        );
    }
    errors
}
