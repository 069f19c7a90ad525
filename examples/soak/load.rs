//! The client side: the passthrough echo calls and the questions with
//! their fates, every reply checked and counted in the `Tally`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const MODERN: &str = "2026-07-28";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

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
pub(crate) struct Tally {
    pub(crate) designed: BTreeMap<String, u64>,
    pub(crate) errors: BTreeMap<String, (u64, String)>,
    pub(crate) fates: BTreeMap<&'static str, u64>,
    pub(crate) ok: u64,
    pub(crate) pass_lat_us: Vec<u64>,
    pub(crate) open_lat_us: Vec<u64>,
    pub(crate) retry_lat_us: Vec<u64>,
}

pub(crate) type Shared = Arc<Mutex<Tally>>;

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
pub(crate) enum Fate {
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
    pub(crate) fn draw(x: u64) -> Fate {
        match x % 100 {
            0..35 => Fate::Answer,
            35..45 => Fate::Decline,
            45..60 => Fate::Cancel,
            60..75 => Fate::Expire,
            75..85 => Fate::Abandon,
            _ => Fate::Replay,
        }
    }

    pub(crate) fn name(self) -> &'static str {
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
pub(crate) fn mix(mut z: u64) -> u64 {
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

pub(crate) struct Question {
    pub(crate) http: reqwest::Client,
    pub(crate) url: String,
    /// host:port of the gateway, for the abandoning client's raw socket.
    pub(crate) addr: String,
    pub(crate) id: u64,
    pub(crate) fate: Fate,
    /// Before the answer, as a fraction of the TTL (answered fates only).
    pub(crate) think: f64,
    pub(crate) ttl: Duration,
    pub(crate) tally: Shared,
}

impl Question {
    pub(crate) async fn run(self) {
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

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("http client")
}

/// `rate` echo calls per second for `secs`, from `workers` keep-alive clients.
pub(crate) async fn passthrough(
    url: String,
    rate: u64,
    secs: Duration,
    workers: u64,
    t: Shared,
) -> u64 {
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
