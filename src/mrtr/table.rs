//! The pending table: operations waiting for their client's retry, found by
//! operation id, bounded per principal, and a short memory of how recently
//! ended operations ended (so a late retry hears why, not just "unknown").
//!
//! That memory is bounded three ways: in count ([`MAX_TOMBSTONES`]), in time
//! (each entry until its `until`, pruned as time passes by a sweeper and on
//! every insert and lookup), and in bytes: a result or error larger than
//! [`MAX_KEPT_BYTES_EACH`] is not kept at all, and past [`MAX_KEPT_BYTES`]
//! in all the oldest kept results are let go. What is left of an ending
//! whose result was let go is its outcome: a late retry that would have got
//! the result gets `operation_unknown` with `data.outcome` saying how it ended.

use std::collections::VecDeque;

use foldhash::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use dashmap::DashMap;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Where a retry reaches its waiting operation ([`Entry::resume`]).
pub type ResumeSender = futures::channel::mpsc::Sender<Box<Resume>>;
/// The operation's end of [`ResumeSender`].
pub type ResumeReceiver = futures::channel::mpsc::Receiver<Box<Resume>>;

use super::ending::Ending;
use super::outgoing::Outgoing;
use crate::jsonrpc::Id;
use crate::protocol::shape::Stamp;
use crate::protocol::{Method, Reason, Reject, RequestContext};
use crate::telemetry::metrics::Metrics;

/// Most ended operations remembered at once.
pub const MAX_TOMBSTONES: usize = 10_000;

/// The largest ending (result, error, `serverInfo`) kept for a late retry, in JSON bytes.
pub const MAX_KEPT_BYTES_EACH: usize = 64 * 1024;

/// The most JSON bytes of endings kept for late retries in all.
pub const MAX_KEPT_BYTES: usize = 16 * 1024 * 1024;

/// How often expired memories are swept away.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// What an ended operation's memory costs when all it keeps is its outcome.
const STUB_BYTES: usize = 256;

/// Room for this many entries is kept however quiet it gets.
const MIN_ROOM: usize = 64;

/// Whether a map or queue holding `len` entries in room for `capacity`
/// should give the room back: a burst of thousands of operations grows it,
/// and neither `HashMap` nor `DashMap` ever shrinks by itself, so at rest
/// the table would keep the peak's buckets for good. A quarter full, with a
/// floor, so a steady load does not grow and shrink it on every sweep.
pub(crate) fn far_below(len: usize, capacity: usize) -> bool {
    capacity > MIN_ROOM && len.saturating_mul(4) < capacity
}

/// The room to shrink to: twice what is held, so the next few inserts fit.
fn room_for(len: usize) -> usize {
    len.saturating_mul(2).max(MIN_ROOM)
}

/// A client's retry, handed to the operation it resumes.
#[derive(Debug)]
pub struct Resume {
    pub round: u32,
    pub responses: Map<String, Value>,
    pub ctx: RequestContext,
    /// The JSON-RPC id of the retry, and where its answer goes.
    pub id: Id,
    pub client: mpsc::Sender<Outgoing>,
}

#[derive(Debug, Clone)]
pub struct Entry {
    /// A `futures` channel of boxes, not tokio's: tokio's allocates its
    /// slots 32 at a time and pads its halves to cache lines (about 800 bytes
    /// before any message), and a waiting operation keeps its queue for as
    /// long as it waits.
    pub resume: ResumeSender,
    pub principal: String,
}

/// How an operation ended, handed to [`Table::end`].
#[derive(Debug, Clone)]
pub struct Tombstone {
    pub ending: Ending,
    /// The last round whose state was consumed.
    pub consumed_round: u32,
    pub until: Instant,
    /// The server's `serverInfo`, for a result delivered after the fact.
    pub server_info: Arc<crate::protocol::shape::ServerInfo>,
}

/// What the table keeps of an ending: all of it within the byte bounds,
/// only its outcome beyond them.
#[derive(Debug, Clone)]
enum Kept {
    Whole {
        ending: Ending,
        server_info: Arc<crate::protocol::shape::ServerInfo>,
    },
    Outcome(&'static str),
}

/// The memory of one ended operation.
#[derive(Debug, Clone)]
struct Remembered {
    kept: Kept,
    consumed_round: u32,
    until: Instant,
    /// JSON bytes of what is kept whole (0 once only the outcome is).
    bytes: usize,
}

/// An ended operation, as a late retry finds it.
#[derive(Debug, Clone)]
pub struct Ended {
    kept: Kept,
}

impl Ended {
    /// The answer a late retry of this operation gets; `None`: nobody was
    /// left to answer (it ended with its client gone) and the retry is
    /// answered as for an unknown operation.
    pub fn reply(
        &self,
        method: Method,
        id: &Id,
        stamp: impl FnOnce(&Arc<crate::protocol::shape::ServerInfo>) -> Stamp,
    ) -> Option<Outgoing> {
        match &self.kept {
            Kept::Whole {
                ending,
                server_info,
            } => ending.reply(method, id, &stamp(server_info)),
            Kept::Outcome("client_disconnected") => None,
            Kept::Outcome(outcome) => {
                let r = Reject::new(
                    Reason::OperationUnknown,
                    format!(
                        "the operation ended ({outcome}) and its answer was too large to keep for a late retry"
                    ),
                )
                .with("outcome", *outcome);
                Some(Outgoing::reject(Some(id), &r))
            }
        }
    }

    /// How the operation ended (`redmark_operations_total{outcome}`).
    pub fn outcome(&self) -> &'static str {
        match &self.kept {
            Kept::Whole { ending, .. } => ending.outcome(),
            Kept::Outcome(o) => o,
        }
    }
}

/// Counts the bytes written to it.
struct Count(usize);

impl std::io::Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn json_bytes<T: serde::Serialize>(v: &T) -> usize {
    let mut n = Count(0);
    match serde_json::to_writer(&mut n, v) {
        Ok(()) => n.0,
        Err(_) => usize::MAX,
    }
}

/// The JSON bytes an ending holds on to, roughly: what the server sent in it.
fn ending_bytes(ending: &Ending) -> usize {
    let payload = match ending {
        Ending::Completed { result, .. } => json_bytes(result),
        Ending::UpstreamError(e) => json_bytes(e),
        Ending::MissingCapability(needs) => json_bytes(needs),
        Ending::UpstreamLost(why) => why.len(),
        Ending::PolicyRefused { message, .. }
        | Ending::PolicyInvalid { message, .. }
        | Ending::PolicyDenied { message, .. }
        | Ending::PolicyError { message, .. } => message.len(),
        Ending::ModelOwned { guidance, .. } => guidance.len(),
        _ => 0,
    };
    payload.saturating_add(STUB_BYTES)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this principal already has {0} operations waiting for answers")]
pub struct TooManyPending(pub usize);

pub struct Table {
    live: DashMap<String, Entry>,
    per_principal: DashMap<String, usize>,
    ended: Mutex<Memory>,
    max_per_principal: usize,
    metrics: Arc<Metrics>,
}

/// Ended operations by id, and the order they ended in (their `until`s ascend).
#[derive(Default)]
struct Memory {
    by_op: HashMap<String, Remembered>,
    order: VecDeque<String>,
    /// JSON bytes kept whole, in all.
    bytes: usize,
}

impl Memory {
    /// Forgets every memory whose time has passed (the oldest come first).
    fn prune(&mut self, now: Instant) {
        while let Some(op) = self.order.front() {
            match self.by_op.get(op) {
                Some(r) if r.until > now => return,
                Some(_) => {
                    if let Some(r) = self.by_op.remove(op) {
                        self.bytes = self.bytes.saturating_sub(r.bytes);
                    }
                }
                None => {}
            }
            self.order.pop_front();
        }
    }

    /// Gives back the room a burst left once the memories in it are gone.
    fn shrink(&mut self) {
        if far_below(self.by_op.len(), self.by_op.capacity()) {
            self.by_op.shrink_to(room_for(self.by_op.len()));
        }
        if far_below(self.order.len(), self.order.capacity()) {
            self.order.shrink_to(room_for(self.order.len()));
        }
    }

    fn forget_oldest(&mut self) {
        if let Some(op) = self.order.pop_front()
            && let Some(r) = self.by_op.remove(&op)
        {
            self.bytes = self.bytes.saturating_sub(r.bytes);
        }
    }

    /// Lets go of the oldest results kept whole until `room` more bytes fit.
    fn make_room(&mut self, room: usize) {
        let mut i = 0;
        while self.bytes.saturating_add(room) > MAX_KEPT_BYTES && i < self.order.len() {
            if let Some(r) = self.order.get(i).and_then(|op| self.by_op.get_mut(op))
                && r.bytes > 0
            {
                let outcome = match &r.kept {
                    Kept::Whole { ending, .. } => ending.outcome(),
                    Kept::Outcome(o) => o,
                };
                r.kept = Kept::Outcome(outcome);
                self.bytes = self.bytes.saturating_sub(r.bytes);
                r.bytes = 0;
            }
            i += 1;
        }
    }

    fn insert(&mut self, op: &str, t: Tombstone) {
        let bytes = ending_bytes(&t.ending).saturating_add(json_bytes(&*t.server_info));
        let (kept, bytes) = if bytes > MAX_KEPT_BYTES_EACH {
            (Kept::Outcome(t.ending.outcome()), 0)
        } else {
            self.make_room(bytes);
            let kept = Kept::Whole {
                ending: t.ending,
                server_info: t.server_info,
            };
            (kept, bytes)
        };
        if let Some(old) = self.by_op.remove(op) {
            self.bytes = self.bytes.saturating_sub(old.bytes);
            self.order.retain(|o| o != op);
        }
        while self.by_op.len() >= MAX_TOMBSTONES {
            self.forget_oldest();
        }
        self.bytes = self.bytes.saturating_add(bytes);
        self.order.push_back(op.to_owned());
        self.by_op.insert(
            op.to_owned(),
            Remembered {
                kept,
                consumed_round: t.consumed_round,
                until: t.until,
                bytes,
            },
        );
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Table {
    /// A table whose memories of ended operations are swept as time passes
    /// (on tokio's clock, so paused time in tests); spawns the sweeper.
    pub fn new(max_per_principal: usize, metrics: Arc<Metrics>) -> Arc<Self> {
        metrics.set_pending(0);
        let table = Arc::new(Self {
            live: DashMap::new(),
            per_principal: DashMap::new(),
            ended: Mutex::new(Memory::default()),
            max_per_principal,
            metrics,
        });
        tokio::spawn(sweep(Arc::downgrade(&table)));
        table
    }

    pub fn insert(&self, op: &str, entry: Entry) -> Result<(), TooManyPending> {
        {
            let mut count = self
                .per_principal
                .entry(entry.principal.clone())
                .or_insert(0);
            if *count >= self.max_per_principal {
                return Err(TooManyPending(self.max_per_principal));
            }
            *count += 1;
        }
        self.live.insert(op.to_owned(), entry);
        self.metrics.set_pending(self.live.len());
        Ok(())
    }

    pub fn get(&self, op: &str) -> Option<Entry> {
        self.live.get(op).map(|e| e.clone())
    }

    /// Removes a live operation (if registered) and remembers how it ended.
    pub fn end(&self, op: &str, tombstone: Tombstone) {
        if let Some((_, entry)) = self.live.remove(op) {
            let empty = match self.per_principal.get_mut(&entry.principal) {
                Some(mut n) => {
                    *n = n.saturating_sub(1);
                    *n == 0
                }
                None => false,
            };
            if empty {
                self.per_principal
                    .remove_if(&entry.principal, |_, n| *n == 0);
            }
        }
        self.metrics.set_pending(self.live.len());
        let mut ended = lock(&self.ended);
        ended.prune(Instant::now());
        ended.insert(op, tombstone);
    }

    /// How an operation that ended recently ended.
    pub fn tombstone(&self, op: &str) -> Option<Ended> {
        let mut ended = lock(&self.ended);
        ended.prune(Instant::now());
        ended.by_op.get(op).map(|r| Ended {
            kept: r.kept.clone(),
        })
    }

    /// Uses `round`'s state of an ended operation; false when it was used already.
    pub fn consume(&self, op: &str, round: u32) -> bool {
        let mut ended = lock(&self.ended);
        match ended.by_op.get_mut(op) {
            Some(t) if round > t.consumed_round => {
                t.consumed_round = round;
                true
            }
            _ => false,
        }
    }

    /// Forgets the memories whose time has passed, and gives back the room
    /// a burst left in the table (the sweeper's work, every [`SWEEP_EVERY`]).
    pub fn prune(&self) {
        let mut ended = lock(&self.ended);
        ended.prune(Instant::now());
        ended.shrink();
        drop(ended);
        if far_below(self.live.len(), self.live.capacity()) {
            self.live.shrink_to_fit();
        }
        if far_below(self.per_principal.len(), self.per_principal.capacity()) {
            self.per_principal.shrink_to_fit();
        }
    }

    /// Room in the table's maps: live operations, and memories of ended ones.
    pub fn capacity(&self) -> (usize, usize) {
        (self.live.capacity(), lock(&self.ended).by_op.capacity())
    }

    /// Ended operations remembered, and the JSON bytes of endings kept whole.
    pub fn remembered(&self) -> (usize, usize) {
        let ended = lock(&self.ended);
        (ended.by_op.len(), ended.bytes)
    }

    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}

/// Prunes `table`'s expired memories every [`SWEEP_EVERY`] while it exists.
async fn sweep(table: Weak<Table>) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let Some(t) = table.upgrade() else { return };
        t.prune();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::shape::CacheScope;

    fn table() -> Arc<Table> {
        Table::new(8, Arc::new(Metrics::new()))
    }

    fn completed(text: &str) -> Tombstone {
        Tombstone {
            ending: Ending::Completed {
                result: json!({"content": [{"type": "text", "text": text}]}).into(),
                declined: false,
                cancelled: false,
            },
            consumed_round: 0,
            until: Instant::now() + Duration::from_secs(60),
            server_info: Arc::new(crate::protocol::shape::ServerInfo::new(
                json!({"name": "s", "version": "1"}),
            )),
        }
    }

    fn stamp(info: &Arc<crate::protocol::shape::ServerInfo>) -> Stamp {
        Stamp {
            server_info: Arc::clone(info),
            ttl_ms: 0,
            scope: CacheScope::Public,
        }
    }

    fn body(out: Option<Outgoing>) -> Value {
        match out {
            Some(Outgoing::Final { body, .. }) => body.to_value(),
            other => panic!("a final answer, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_small_result_is_kept_and_a_large_one_only_as_its_outcome() {
        let t = table();
        t.end("small", completed("hi"));
        t.end("large", completed(&"x".repeat(MAX_KEPT_BYTES_EACH)));
        let id = Id::Number(1);
        let small = t.tombstone("small").unwrap_or_else(|| panic!("kept"));
        let b = body(small.reply(Method::ToolsCall, &id, stamp));
        assert_eq!(b["result"]["content"][0]["text"], "hi", "{b}");
        let large = t.tombstone("large").unwrap_or_else(|| panic!("kept"));
        assert_eq!(large.outcome(), "completed");
        let b = body(large.reply(Method::ToolsCall, &id, stamp));
        assert_eq!(b["error"]["data"]["reason"], "operation_unknown", "{b}");
        assert_eq!(b["error"]["data"]["outcome"], "completed", "{b}");
        let (count, bytes) = t.remembered();
        assert_eq!(count, 2);
        assert!(bytes < 1024, "only the small one is kept whole: {bytes}");
    }

    #[tokio::test(start_paused = true)]
    async fn kept_results_never_exceed_the_byte_bound_in_all() {
        let t = table();
        let each = "x".repeat(MAX_KEPT_BYTES_EACH - 1024);
        for i in 0..(2 * MAX_KEPT_BYTES / MAX_KEPT_BYTES_EACH) {
            t.end(&format!("op{i}"), completed(&each));
            assert!(t.remembered().1 <= MAX_KEPT_BYTES);
        }
        // The newest is whole; the oldest kept only its outcome.
        let id = Id::Number(1);
        let last = format!("op{}", 2 * MAX_KEPT_BYTES / MAX_KEPT_BYTES_EACH - 1);
        let b = body(
            t.tombstone(&last)
                .and_then(|e| e.reply(Method::ToolsCall, &id, stamp)),
        );
        assert!(b.get("result").is_some(), "{b}");
        let b = body(
            t.tombstone("op0")
                .and_then(|e| e.reply(Method::ToolsCall, &id, stamp)),
        );
        assert_eq!(b["error"]["data"]["outcome"], "completed", "{b}");
    }

    #[tokio::test(start_paused = true)]
    async fn expired_memories_are_swept_as_time_passes() {
        let t = table();
        for i in 0..100 {
            t.end(&format!("op{i}"), completed("hi"));
        }
        assert_eq!(t.remembered().0, 100);
        // Nothing else happens: no insert, no lookup. The sweeper alone prunes.
        tokio::time::sleep(Duration::from_secs(60) + SWEEP_EVERY * 2).await;
        assert_eq!(t.remembered(), (0, 0));
    }

    #[test]
    fn room_is_given_back_only_far_below_capacity() {
        assert!(!far_below(0, MIN_ROOM), "the floor is kept");
        assert!(far_below(0, 16_384));
        assert!(far_below(4_095, 16_384));
        assert!(!far_below(4_096, 16_384), "a quarter full keeps its room");
        assert!(!far_below(usize::MAX, usize::MAX));
        assert_eq!(room_for(0), MIN_ROOM);
        assert_eq!(room_for(1_000), 2_000);
    }

    /// A burst of 10,000 operations grew the maps to that size; once their
    /// memories have expired the sweeper gives the room back.
    #[tokio::test(start_paused = true)]
    async fn a_burst_leaves_no_room_behind_once_swept() {
        let t = Table::new(20_000, Arc::new(Metrics::new()));
        let (tx, _rx) = futures::channel::mpsc::channel(1);
        for i in 0..10_000 {
            let entry = Entry {
                resume: tx.clone(),
                principal: "p".into(),
            };
            t.insert(&format!("op{i}"), entry)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        for i in 0..10_000 {
            t.end(&format!("op{i}"), completed("hi"));
        }
        let (live, ended) = t.capacity();
        assert!(live >= 10_000 && ended >= 10_000, "{live} {ended}");
        tokio::time::sleep(Duration::from_secs(60) + SWEEP_EVERY * 2).await;
        assert_eq!(t.remembered(), (0, 0));
        let (live, ended) = t.capacity();
        assert!(live <= 4 * MIN_ROOM, "live operations keep room for {live}");
        assert!(ended <= 4 * MIN_ROOM, "ended ones keep room for {ended}");
    }
}
