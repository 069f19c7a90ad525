//! The pending table: operations waiting for their client's retry, found by
//! operation id, bounded per principal, and a short memory of how recently
//! ended operations ended (so a late retry hears why, not just "unknown").

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::ending::Ending;
use super::outgoing::Outgoing;
use crate::jsonrpc::Id;
use crate::protocol::RequestContext;
use crate::telemetry::metrics::Metrics;

/// Most ended operations remembered at once.
const MAX_TOMBSTONES: usize = 10_000;

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
    pub resume: mpsc::Sender<Resume>,
    pub principal: String,
}

#[derive(Debug, Clone)]
pub struct Tombstone {
    pub ending: Ending,
    /// The last round whose state was consumed.
    pub consumed_round: u32,
    pub until: Instant,
    /// The server's `serverInfo`, for a result delivered after the fact.
    pub server_info: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this principal already has {0} operations waiting for answers")]
pub struct TooManyPending(pub usize);

pub struct Table {
    live: DashMap<String, Entry>,
    per_principal: DashMap<String, usize>,
    ended: Mutex<HashMap<String, Tombstone>>,
    max_per_principal: usize,
    metrics: Arc<Metrics>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Table {
    pub fn new(max_per_principal: usize, metrics: Arc<Metrics>) -> Self {
        metrics.set_pending(0);
        Self {
            live: DashMap::new(),
            per_principal: DashMap::new(),
            ended: Mutex::new(HashMap::new()),
            max_per_principal,
            metrics,
        }
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
        if ended.len() >= MAX_TOMBSTONES {
            let now = Instant::now();
            ended.retain(|_, t| t.until > now);
            if ended.len() >= MAX_TOMBSTONES {
                // Still full of live memories: forget the oldest half rather than grow.
                let mut by_age: Vec<(String, Instant)> =
                    ended.iter().map(|(k, t)| (k.clone(), t.until)).collect();
                by_age.sort_by_key(|(_, until)| *until);
                for (k, _) in by_age.into_iter().take(MAX_TOMBSTONES / 2) {
                    ended.remove(&k);
                }
            }
        }
        ended.insert(op.to_owned(), tombstone);
    }

    pub fn tombstone(&self, op: &str) -> Option<Tombstone> {
        let ended = lock(&self.ended);
        ended.get(op).filter(|t| t.until > Instant::now()).cloned()
    }

    /// Uses `round`'s state of an ended operation; false when it was used already.
    pub fn consume(&self, op: &str, round: u32) -> bool {
        let mut ended = lock(&self.ended);
        match ended.get_mut(op) {
            Some(t) if round > t.consumed_round => {
                t.consumed_round = round;
                true
            }
            _ => false,
        }
    }

    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}
