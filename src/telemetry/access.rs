//! The access log: one INFO line per client request, after its response
//! (for an SSE stream, when its final message is sent): route, method, tool
//! or URI, principal, HTTP status, the JSON-RPC outcome (`complete`,
//! `input_required`, `ok`, or the error's `data.reason`), duration, and, for
//! calls, the operation id, the round and the trace id when traced.
//!
//! `[log] access` sends it to stderr with the other logs (target
//! `redmark::access`, so `RUST_LOG=redmark::access=off` silences it too), to
//! a file of its own as JSON lines, or nowhere. Writing to a file never
//! blocks a request: lines go through a bounded queue to a writer thread;
//! when the queue is full the line is dropped and counted. At shutdown
//! [`AccessLog::close`] waits (bounded) until every queued line is on disk.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};

use serde::{Deserialize, Serialize};

/// `[log]` in the gateway config.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// `"stderr"` (the default), `"off"`, or a file path (relative to the
    /// config file) to append JSON lines to.
    #[serde(default)]
    pub access: AccessTarget,
}

/// Where access lines go.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema)]
#[serde(from = "String")]
pub enum AccessTarget {
    #[default]
    Stderr,
    Off,
    File(PathBuf),
}

impl From<String> for AccessTarget {
    fn from(s: String) -> Self {
        match s.as_str() {
            "stderr" | "" => AccessTarget::Stderr,
            "off" => AccessTarget::Off,
            _ => AccessTarget::File(PathBuf::from(s)),
        }
    }
}

/// Lines waiting for the file writer before new ones are dropped.
const QUEUE: usize = 4096;

/// One request, as the access log records it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry<'a> {
    pub route: &'a str,
    /// The JSON-RPC method as sent (`-` when the body was not read).
    pub method: &'a str,
    /// The tool or prompt name, or the resource URI.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    pub principal: &'a str,
    pub status: u16,
    pub outcome: &'a str,
    pub duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<&'a str>,
}

/// A duration in milliseconds to the microsecond: `8.091`, not the
/// `8.090678000000001` a float of the nanoseconds prints.
pub fn millis(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The access log's sink.
pub struct AccessLog {
    sink: Sink,
    dropped: AtomicU64,
}

enum Sink {
    Off,
    Stderr,
    File(SyncSender<Item>),
}

/// What the file writer's queue carries.
enum Item {
    Line(String),
    /// Write everything queued before this, flush, then say so.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// How long shutdown waits for the access file to take its queued lines.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl AccessLog {
    pub fn off() -> Self {
        Self::with(Sink::Off)
    }

    pub fn stderr() -> Self {
        Self::with(Sink::Stderr)
    }

    fn with(sink: Sink) -> Self {
        Self {
            sink,
            dropped: AtomicU64::new(0),
        }
    }

    /// The sink `target` names; a relative file path resolves against `base`.
    pub fn start(target: &AccessTarget, base: &Path) -> std::io::Result<Self> {
        match target {
            AccessTarget::Off => Ok(Self::off()),
            AccessTarget::Stderr => Ok(Self::stderr()),
            AccessTarget::File(path) => {
                let path = base.join(path);
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)?;
                let (tx, rx) = std::sync::mpsc::sync_channel::<Item>(QUEUE);
                std::thread::Builder::new()
                    .name("redmark-access".into())
                    .spawn(move || write_lines(&rx, file))?;
                Ok(Self::with(Sink::File(tx)))
            }
        }
    }

    /// Waits until every line recorded so far is written and flushed (at
    /// most [`CLOSE_WAIT`]: a stuck disk must not keep the process alive).
    /// A no-op for stderr and off.
    pub async fn close(&self) {
        let Sink::File(tx) = &self.sink else { return };
        let (ack, written) = tokio::sync::oneshot::channel();
        let tx = tx.clone();
        // `send` blocks while the queue is full: not on an event loop.
        let queued = tokio::task::spawn_blocking(move || tx.send(Item::Flush(ack)).is_ok());
        let flushed = async { queued.await.unwrap_or(false) && written.await.is_ok() };
        match tokio::time::timeout(CLOSE_WAIT, flushed).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!("the access log writer is gone; queued lines are lost"),
            Err(_) => {
                tracing::warn!(wait = ?CLOSE_WAIT, "the access log file did not take its queued lines in time");
            }
        }
    }

    /// Lines dropped because the file writer fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Whether a line would be written anywhere: off, or stderr below the
    /// log filter's level, writes nothing, so the caller need not gather one.
    pub fn writes(&self) -> bool {
        match &self.sink {
            Sink::Off => false,
            // As an event: the log layer takes events only, and `enabled!`
            // would otherwise ask about a hint, which it refuses.
            Sink::Stderr => tracing::enabled!(
                kind: tracing::metadata::Kind::EVENT,
                target: "redmark::access",
                tracing::Level::INFO
            ),
            Sink::File(_) => true,
        }
    }

    pub fn record(&self, e: &Entry<'_>) {
        match &self.sink {
            Sink::Off => {}
            Sink::Stderr => {
                tracing::info!(
                    target: "redmark::access",
                    route = e.route,
                    method = e.method,
                    name = e.name,
                    principal = e.principal,
                    status = e.status,
                    outcome = e.outcome,
                    duration_ms = e.duration_ms,
                    operation = e.operation,
                    round = e.round,
                    trace_id = e.trace_id,
                    "request"
                );
            }
            Sink::File(tx) => {
                let mut line = serde_json::to_value(e).unwrap_or_default();
                if let Some(obj) = line.as_object_mut() {
                    obj.insert(
                        "time".into(),
                        humantime::format_rfc3339_millis(std::time::SystemTime::now())
                            .to_string()
                            .into(),
                    );
                }
                match tx.try_send(Item::Line(line.to_string())) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                        if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                            tracing::warn!("the access log file is not keeping up; dropping lines");
                        }
                    }
                }
            }
        }
    }
}

/// Appends each line, flushing whenever the queue runs dry or a flush is asked for.
fn write_lines(rx: &std::sync::mpsc::Receiver<Item>, file: std::fs::File) {
    let mut out = BufWriter::new(file);
    while let Ok(first) = rx.recv() {
        let mut ok = true;
        let mut acks = Vec::new();
        for item in std::iter::once(first).chain(std::iter::from_fn(|| rx.try_recv().ok())) {
            match item {
                Item::Line(line) => ok &= writeln!(out, "{line}").is_ok(),
                Item::Flush(ack) => acks.push(ack),
            }
        }
        if !(ok && out.flush().is_ok()) {
            tracing::warn!("writing the access log failed");
        }
        for ack in acks {
            let _ = ack.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry<'static> {
        Entry {
            route: "rooms",
            method: "tools/call",
            name: Some("book_room"),
            principal: "alice",
            status: 200,
            outcome: "input_required",
            duration_ms: 12.5,
            operation: Some("ab12"),
            round: Some(1),
            trace_id: None,
        }
    }

    #[test]
    fn targets_read_from_strings() {
        let c: LogConfig = toml::from_str("access = \"off\"").unwrap();
        assert_eq!(c.access, AccessTarget::Off);
        let c: LogConfig = toml::from_str("").unwrap();
        assert_eq!(c.access, AccessTarget::Stderr);
        let c: LogConfig = toml::from_str("access = \"logs/access.jsonl\"").unwrap();
        assert_eq!(c.access, AccessTarget::File("logs/access.jsonl".into()));
        assert!(toml::from_str::<LogConfig>("acess = \"off\"").is_err());
    }

    #[test]
    fn a_file_gets_one_typed_json_line_per_request() {
        let dir = tempfile::tempdir().unwrap();
        let log = AccessLog::start(&AccessTarget::File("a.jsonl".into()), dir.path()).unwrap();
        log.record(&entry());
        log.record(&Entry {
            name: None,
            operation: None,
            round: None,
            status: 400,
            outcome: "header_missing",
            ..entry()
        });
        drop(log);
        let path = dir.path().join("a.jsonl");
        let text = (0..200)
            .find_map(|_| {
                let t = std::fs::read_to_string(&path).unwrap_or_default();
                if t.lines().count() == 2 {
                    Some(t)
                } else {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    None
                }
            })
            .unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["status"], 200);
        assert_eq!(lines[0]["round"], 1);
        assert_eq!(lines[0]["duration_ms"], 12.5);
        assert_eq!(lines[0]["name"], "book_room");
        assert!(lines[0].get("trace_id").is_none(), "no empty trace id");
        assert!(lines[0]["time"].as_str().unwrap().ends_with('Z'));
        assert_eq!(lines[1]["outcome"], "header_missing");
        assert!(lines[1].get("operation").is_none());
    }

    #[tokio::test]
    async fn close_returns_once_every_recorded_line_is_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let log = AccessLog::start(&AccessTarget::File("a.jsonl".into()), dir.path()).unwrap();
        for _ in 0..1000 {
            log.record(&entry());
        }
        log.close().await;
        // No waiting here: close has already seen the lines flushed.
        let text = std::fs::read_to_string(dir.path().join("a.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 1000);
        assert_eq!(log.dropped(), 0);
        // Off and stderr have nothing to wait for.
        AccessLog::off().close().await;
    }

    #[test]
    fn durations_are_written_to_the_microsecond() {
        use std::time::Duration;
        assert_eq!(
            millis(Duration::from_nanos(27_375_894)).to_string(),
            "27.376"
        );
        assert_eq!(millis(Duration::from_nanos(8_090_678)).to_string(), "8.091");
        assert_eq!(millis(Duration::from_nanos(400)).to_string(), "0");
        assert_eq!(millis(Duration::from_secs(3600)).to_string(), "3600000");
    }
}
