//! The audit log: one JSON line per question redmark put to a client
//! (elicitation, sampling, roots), with its outcome and how long a person
//! took to answer. Names and timings only, never the values asked or given.
//!
//! [`AuditSink::record`] never blocks a request: records go through a bounded
//! queue to a dedicated writer thread that appends lines, rotating the file by
//! size; when the queue is full the record is counted in
//! [`AuditSink::dropped`] and discarded. `redmark report` reads the file back.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};

/// `[audit]` in the gateway config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// The JSON-lines file to append to, or `-` for stdout.
    pub path: PathBuf,
    /// Rotate when the file would grow past this many bytes (unset: never).
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Rotated files kept: `path.1` (newest) to `path.<keep>`.
    #[serde(default = "default_keep")]
    pub keep: usize,
    /// Write `sha256:<hex>` of the principal name instead of the name.
    #[serde(default)]
    pub hash_principals: bool,
    /// Records waiting for the writer before new ones are dropped.
    #[serde(default = "default_queue")]
    pub queue: usize,
}

fn default_keep() -> usize {
    5
}

fn default_queue() -> usize {
    4096
}

impl AuditConfig {
    /// A config writing to `path` with the defaults.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        AuditConfig {
            path: path.into(),
            max_bytes: None,
            keep: default_keep(),
            hash_principals: false,
            queue: default_queue(),
        }
    }

    /// What `redmark check` should reject.
    pub fn validate(&self) -> Result<(), String> {
        if self.path.as_os_str().is_empty() {
            return Err("audit.path is empty (use \"-\" for stdout)".into());
        }
        if self.max_bytes == Some(0) {
            return Err("audit.max_bytes must be positive".into());
        }
        if self.queue == 0 {
            return Err("audit.queue must be positive".into());
        }
        Ok(())
    }

    fn is_stdout(&self) -> bool {
        self.path.as_os_str() == "-"
    }
}

/// The kind of question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Method {
    #[serde(rename = "elicitation/create")]
    Elicitation,
    #[serde(rename = "sampling/createMessage")]
    Sampling,
    #[serde(rename = "roots/list")]
    Roots,
}

/// Elicitation mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Form,
    Url,
}

/// How a question ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Accepted,
    Declined,
    Cancelled,
    /// Expired, or the client never came back.
    Unanswered,
    /// Policy refused to put the question to the client.
    Refused,
    /// Policy rejected the answer.
    Invalid,
    /// Authorization denied.
    Denied,
    /// The operation ended otherwise (upstream lost, client disconnected, ...).
    Abandoned,
}

/// One question, one line. Never holds a value asked or answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// RFC 3339 UTC, milliseconds (see [`timestamp`]).
    pub time: String,
    pub route: String,
    pub tool: String,
    /// The principal name; the writer replaces it with `sha256:<hex>` when
    /// `hash_principals` is on.
    pub principal: String,
    /// The operation id.
    pub operation: String,
    /// The input request key.
    pub key: String,
    pub method: Method,
    pub mode: Option<Mode>,
    /// Field names of the form (never values).
    #[serde(default)]
    pub fields: Vec<String>,
    pub outcome: Outcome,
    /// From sending the question to the client to the answer arriving.
    pub answer_ms: Option<u64>,
    /// `ok`, or the policy's `data.reason` (e.g. `policy_invalid_answer`).
    pub verdict: String,
    /// The accepted values were already in the call's arguments ([`redundant`]).
    #[serde(default)]
    pub redundant: bool,
    /// The accepted fields whose value was already in the call's arguments
    /// ([`redundant_fields`]): names only. What `report` weighs per field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redundant_fields: Vec<String>,
    /// The accepted fields whose value was this principal's previous
    /// accepted value for the tool and field (names only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeated_fields: Vec<String>,
    /// Fields offered a remembered answer as their `default` (`remember`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_offered: Vec<String>,
    /// Of those, the ones the person accepted unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_kept: Vec<String>,
    /// Fields whose rules the policy put in the form itself (bounds,
    /// lengths, choices, format, `required`: `shape_questions`), names only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub narrowed: Vec<String>,
    pub trace_id: Option<String>,
    /// This answer broke a rule and the question was asked again with a red
    /// mark: the attempt cost a person's attention, so it is a record of its
    /// own (outcome `invalid`), before the record of how the question ended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reask: bool,
    /// The rule the answer broke (`maximum`, `pattern`, a rule's name), never the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Who asked: `native` for a 2026-07-28 server's own input request;
    /// absent for a legacy server's push that redmark converted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

/// [`AuditRecord::origin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    Native,
    Converted,
}

/// RFC 3339 UTC with milliseconds, as written in [`AuditRecord::time`].
pub fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// `sha256:<hex>` of a principal name.
pub fn hash_principal(name: &str) -> String {
    format!(
        "sha256:{}",
        crate::hex_text::lower(&Sha256::digest(name.as_bytes()))
    )
}

/// Whether an accepted answer only repeated what the call already carried.
///
/// True when `content` has at least one field and every field is already
/// known from `arguments`: either the top-level argument of the same name has
/// an equal JSON value, or the field is a non-empty string equal (trimmed,
/// case-insensitive) to a string anywhere in the arguments, at any depth
/// (`room_id: "mercury"` after `location: "Mercury"`). Free text that merely
/// contains the value does not count: the rule undercounts rather than blames
/// a question that may have been needed.
pub fn redundant(arguments: &Value, content: &Map<String, Value>) -> bool {
    !content.is_empty()
        && content
            .iter()
            .all(|(name, value)| field_known(arguments, name, value))
}

/// The fields of an accepted answer whose value the call already carried
/// (the same test as [`redundant`], field by field), in the answer's order.
pub fn redundant_fields(arguments: &Value, content: &Map<String, Value>) -> Vec<String> {
    content
        .iter()
        .filter(|(name, value)| field_known(arguments, name, value))
        .map(|(name, _)| name.clone())
        .collect()
}

fn field_known(arguments: &Value, name: &str, value: &Value) -> bool {
    arguments.get(name) == Some(value)
        || value
            .as_str()
            .map(|s| s.trim().to_lowercase())
            .is_some_and(|s| !s.is_empty() && holds_string(arguments, &s))
}

fn holds_string(v: &Value, lower: &str) -> bool {
    match v {
        Value::String(s) => s.trim().to_lowercase() == lower,
        Value::Array(items) => items.iter().any(|i| holds_string(i, lower)),
        Value::Object(map) => map.values().any(|i| holds_string(i, lower)),
        _ => false,
    }
}

/// `path.<n>`: the n-th rotated file (1 is the newest).
pub fn rotated(path: &Path, n: usize) -> PathBuf {
    let mut s = OsString::from(path.as_os_str());
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("the audit writer has stopped")]
    Closed,
    #[error("audit log: {0}")]
    Io(io::Error),
}

// Not `#[from]`: the message says the cause, so it is not also the `source()`.
impl From<io::Error> for AuditError {
    fn from(e: io::Error) -> Self {
        AuditError::Io(e)
    }
}

enum Msg {
    Record(Box<AuditRecord>),
    Flush(oneshot::Sender<io::Result<()>>),
    Close(oneshot::Sender<io::Result<()>>),
}

struct Shared {
    tx: mpsc::Sender<Msg>,
    /// Set by `close`: later records are dropped (and counted) at once.
    closed: std::sync::atomic::AtomicBool,
    dropped: AtomicU64,
    write_errors: Arc<AtomicU64>,
    /// The file written (`None`: stdout), for the admin listener's `/report`.
    path: Option<PathBuf>,
}

/// Where audit records go. Cheap to clone; [`AuditSink::disabled`] records nothing.
#[derive(Clone, Default)]
pub struct AuditSink {
    shared: Option<Arc<Shared>>,
}

impl std::fmt::Debug for AuditSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditSink")
            .field("enabled", &self.is_enabled())
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl AuditSink {
    pub fn disabled() -> Self {
        AuditSink { shared: None }
    }

    /// Opens (appending to) the file, or stdout for `-`, and starts the writer thread.
    pub fn start(cfg: &AuditConfig) -> Result<AuditSink, io::Error> {
        let file = if cfg.is_stdout() {
            None
        } else {
            let size = fs::metadata(&cfg.path).map(|m| m.len()).unwrap_or(0);
            Some(FileState {
                path: cfg.path.clone(),
                size,
                max_bytes: cfg.max_bytes,
                keep: cfg.keep,
            })
        };
        let out: Box<dyn Write + Send> = match &file {
            Some(f) => Box::new(BufWriter::new(open_append(&f.path)?)),
            None => Box::new(io::stdout()),
        };
        let path = (!cfg.is_stdout()).then(|| cfg.path.clone());
        Self::spawn(out, file, cfg.hash_principals, cfg.queue, path)
    }

    fn spawn(
        out: Box<dyn Write + Send>,
        file: Option<FileState>,
        hash: bool,
        queue: usize,
        path: Option<PathBuf>,
    ) -> Result<AuditSink, io::Error> {
        let (tx, rx) = mpsc::channel(queue.max(1));
        let write_errors = Arc::new(AtomicU64::new(0));
        let writer = Writer {
            out,
            file,
            hash,
            errors: write_errors.clone(),
        };
        std::thread::Builder::new()
            .name("redmark-audit".into())
            .spawn(move || writer.run(rx))?;
        Ok(AuditSink {
            shared: Some(Arc::new(Shared {
                tx,
                closed: std::sync::atomic::AtomicBool::new(false),
                dropped: AtomicU64::new(0),
                write_errors,
                path,
            })),
        })
    }

    /// The audit file, when records go to one (not stdout).
    pub fn path(&self) -> Option<&Path> {
        self.shared.as_ref().and_then(|s| s.path.as_deref())
    }

    pub fn is_enabled(&self) -> bool {
        self.shared.is_some()
    }

    /// Queues a record; never waits. A full queue or a stopped writer counts it as dropped.
    pub fn record(&self, record: AuditRecord) {
        if let Some(s) = &self.shared
            && (s.closed.load(Ordering::Acquire)
                || s.tx.try_send(Msg::Record(Box::new(record))).is_err())
        {
            s.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records discarded because the queue was full or the writer had stopped.
    pub fn dropped(&self) -> u64 {
        self.shared
            .as_ref()
            .map_or(0, |s| s.dropped.load(Ordering::Relaxed))
    }

    /// Records (or rotations) that failed to reach the file.
    pub fn write_errors(&self) -> u64 {
        self.shared
            .as_ref()
            .map_or(0, |s| s.write_errors.load(Ordering::Relaxed))
    }

    /// Waits until every record queued before this call is written and flushed.
    pub async fn flush(&self) -> Result<(), AuditError> {
        self.request(Msg::Flush).await
    }

    /// Flushes and stops the writer (shutdown); later records count as dropped.
    pub async fn close(&self) -> Result<(), AuditError> {
        // The writer acknowledges before it drops its queue: without the flag a
        // record sent in between would be queued, never written and never counted.
        if let Some(s) = &self.shared {
            s.closed.store(true, Ordering::Release);
        }
        self.request(Msg::Close).await
    }

    async fn request(
        &self,
        msg: fn(oneshot::Sender<io::Result<()>>) -> Msg,
    ) -> Result<(), AuditError> {
        let Some(s) = &self.shared else {
            return Ok(());
        };
        let (ack, done) = oneshot::channel();
        s.tx.send(msg(ack)).await.map_err(|_| AuditError::Closed)?;
        Ok(done.await.map_err(|_| AuditError::Closed)??)
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

struct FileState {
    path: PathBuf,
    size: u64,
    max_bytes: Option<u64>,
    keep: usize,
}

struct Writer {
    out: Box<dyn Write + Send>,
    file: Option<FileState>,
    hash: bool,
    errors: Arc<AtomicU64>,
}

impl Writer {
    fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        while let Some(msg) = rx.blocking_recv() {
            match msg {
                Msg::Record(r) => self.write(*r),
                Msg::Flush(ack) => {
                    let _ = ack.send(self.out.flush());
                }
                Msg::Close(ack) => {
                    let _ = ack.send(self.out.flush());
                    return;
                }
            }
            if rx.is_empty() {
                let r = self.out.flush();
                self.check(r);
            }
        }
        let r = self.out.flush();
        self.check(r);
    }

    fn check(&self, r: io::Result<()>) {
        if let Err(e) = r {
            self.errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, "audit log write failed");
        }
    }

    fn write(&mut self, mut record: AuditRecord) {
        if self.hash && !record.principal.starts_with("sha256:") {
            record.principal = hash_principal(&record.principal);
        }
        let mut line = match serde_json::to_vec(&record) {
            Ok(l) => l,
            Err(e) => return self.check(Err(io::Error::other(e))),
        };
        line.push(b'\n');
        let len = line.len() as u64;
        if let Some(f) = &self.file
            && f.max_bytes
                .is_some_and(|max| f.size > 0 && f.size + len > max)
        {
            let r = self.rotate();
            if r.is_err()
                && let Some(f) = &mut self.file
            {
                f.size = 0; // retry after another max_bytes, not on every line
            }
            self.check(r);
        }
        let r = self.out.write_all(&line);
        if r.is_ok()
            && let Some(f) = &mut self.file
        {
            f.size += len;
        }
        self.check(r);
    }

    /// `path` → `path.1` → … → `path.<keep>` (the oldest is removed), then a fresh `path`.
    fn rotate(&mut self) -> io::Result<()> {
        self.out.flush()?;
        let Some(f) = &mut self.file else {
            return Ok(());
        };
        if f.keep == 0 {
            fs::remove_file(&f.path)?;
        } else {
            match fs::remove_file(rotated(&f.path, f.keep)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            for n in (1..f.keep).rev() {
                let from = rotated(&f.path, n);
                if from.exists() {
                    fs::rename(&from, rotated(&f.path, n + 1))?;
                }
            }
            fs::rename(&f.path, rotated(&f.path, 1))?;
        }
        self.out = Box::new(BufWriter::new(open_append(&f.path)?));
        f.size = 0;
        Ok(())
    }
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
