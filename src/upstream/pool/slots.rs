//! The pool's bookkeeping under its lock: the started sessions of each key
//! (slots) and the operations riding each, the sessions starting, and the
//! counts the gauges show, kept as the slots change.

use foldhash::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::PoolKey;
use crate::upstream::session::Session;

/// One started session of a key: how many operations ride it, and since
/// when it has had none.
pub(super) struct Slot {
    pub(super) session: Arc<Session>,
    /// The event loop the session's tasks run on (`None`: off the loops).
    pub(super) home: Option<usize>,
    pub(super) ops: usize,
    pub(super) since: Instant,
}

#[derive(Default)]
pub(super) struct PoolState {
    /// Started sessions by key, idle (no operation) or leased.
    pub(super) sessions: HashMap<PoolKey, Vec<Slot>>,
    /// What the gauges show, kept as the slots change: counting them again
    /// at every lease and give-back was a walk over every session (and an
    /// atomic read of each) on every call, under the lock both loops take.
    pub(super) counts: Counts,
    /// Sessions that exist: idle, leased or starting.
    pub(super) total: usize,
    pub(super) per_principal: HashMap<Arc<str>, usize>,
    /// Sessions starting, by key (shared routes wait for them rather than start more).
    pub(super) starting: HashMap<PoolKey, usize>,
}

impl PoolState {
    pub(super) fn forget(&mut self, principal: &Arc<str>) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.per_principal.get_mut(principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_principal.remove(principal);
            }
        }
    }

    /// The counts walked from the slots: what [`Counts`] must always equal.
    #[cfg(debug_assertions)]
    pub(super) fn recount(&self) -> Counts {
        let slots = self.sessions.values().flatten();
        let (mut c, mut leased, mut operations) = (0, 0, 0);
        for s in slots {
            c += 1;
            leased += usize::from(s.ops > 0);
            operations += s.ops;
        }
        Counts {
            slots: c,
            leased,
            operations,
        }
    }

    pub(super) fn idle_count(&self) -> usize {
        self.counts.slots - self.counts.leased
    }

    pub(super) fn leased_count(&self) -> usize {
        self.counts.leased
    }

    /// Takes out every slot `gone` picks, the counts kept, and returns their
    /// sessions for the caller to close outside the lock.
    pub(super) fn remove_where(&mut self, gone: impl Fn(&Slot) -> bool) -> Vec<Arc<Session>> {
        let mut out = Vec::new();
        let keys: Vec<PoolKey> = self.sessions.keys().cloned().collect();
        for key in keys {
            let Some(list) = self.sessions.get_mut(&key) else {
                continue;
            };
            let (left, kept): (Vec<_>, Vec<_>) = list.drain(..).partition(&gone);
            *list = kept;
            if list.is_empty() {
                self.sessions.remove(&key);
            }
            for s in left {
                self.slot_gone(&s);
                self.forget(&key.principal);
                out.push(s.session);
            }
        }
        out
    }

    /// A slot left the pool (closed, evicted, reaped).
    pub(super) fn slot_gone(&mut self, slot: &Slot) {
        self.counts.slots = self.counts.slots.saturating_sub(1);
        if slot.ops > 0 {
            self.counts.leased = self.counts.leased.saturating_sub(1);
            self.counts.operations = self.counts.operations.saturating_sub(slot.ops);
        }
    }

    /// A started session joins under `key`, carrying its first operation.
    pub(super) fn add(&mut self, key: PoolKey, slot: Slot) {
        self.counts.slots += 1;
        if slot.ops > 0 {
            self.counts.leased += 1;
            self.counts.operations += slot.ops;
        }
        self.sessions.entry(key).or_default().push(slot);
    }

    pub(super) fn starting(&self, key: &PoolKey) -> usize {
        self.starting.get(key).copied().unwrap_or(0)
    }

    pub(super) fn start_done(&mut self, key: &PoolKey) {
        if let Some(n) = self.starting.get_mut(key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.starting.remove(key);
            }
        }
    }

    /// Removes the slot of `session` under `key`.
    pub(super) fn remove(&mut self, key: &PoolKey, session: &Arc<Session>) -> Option<Slot> {
        let list = self.sessions.get_mut(key)?;
        let at = list.iter().position(|s| Arc::ptr_eq(&s.session, session))?;
        let slot = list.swap_remove(at);
        if list.is_empty() {
            self.sessions.remove(key);
        }
        self.slot_gone(&slot);
        Some(slot)
    }

    /// Removes the oldest idle session matching `filter`, to make room.
    pub(super) fn evict(&mut self, filter: impl Fn(&PoolKey) -> bool) -> Option<Arc<Session>> {
        let (key, session) = self
            .sessions
            .iter()
            .filter(|(k, _)| filter(k))
            .flat_map(|(k, list)| list.iter().filter(|s| s.ops == 0).map(move |s| (k, s)))
            .min_by_key(|(_, s)| s.since)
            .map(|(k, s)| (k.clone(), s.session.clone()))?;
        self.remove(&key, &session)?;
        self.forget(&key.principal);
        Some(session)
    }

    /// Takes a place on a started session of `key` with room for one more
    /// operation (`limit` each), the busiest first so that shared sessions
    /// fill before idle ones are used, and one on this task's own event loop
    /// before one on another (that works as well, but every hand-off to it
    /// wakes that loop's thread); idle sessions no longer fit for use are
    /// handed back to be closed. Sessions one operation each (`limit` 1) are
    /// all alike once idle: the first idle one at home is taken, without
    /// looking at the rest.
    pub(super) fn take(
        &mut self,
        key: &PoolKey,
        limit: usize,
        retired: &mut Vec<Arc<Session>>,
    ) -> Option<Arc<Session>> {
        let list = self.sessions.get_mut(key)?;
        let here = crate::event_loops::current();
        let mut gone = Vec::new();
        let mut best: Option<(usize, (bool, usize))> = None;
        let mut at = 0;
        while at < list.len() {
            let s = &list[at];
            // Full sessions are passed over unread: each `is_reusable` is an
            // atomic read of state another loop writes.
            if s.ops >= limit {
                at += 1;
                continue;
            }
            if !s.session.is_reusable() {
                if s.ops == 0 {
                    gone.push(list.swap_remove(at));
                } else {
                    at += 1;
                }
                continue;
            }
            let rank = (s.home == here, s.ops);
            if best.is_none_or(|(_, b)| rank >= b) {
                best = Some((at, rank));
            }
            if limit == 1 && rank.0 {
                break;
            }
            at += 1;
        }
        let chosen = best.map(|(at, _)| {
            let s = &mut list[at];
            s.ops += 1;
            (s.ops == 1, s.session.clone())
        });
        if list.is_empty() {
            self.sessions.remove(key);
        }
        for slot in gone {
            self.slot_gone(&slot);
            self.forget(&key.principal);
            retired.push(slot.session);
        }
        chosen.map(|(was_idle, session)| {
            self.counts.operations += 1;
            self.counts.leased += usize::from(was_idle);
            session
        })
    }
}

/// Sessions and operations, as the gauges show them.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct Counts {
    /// Started sessions (idle or leased).
    slots: usize,
    /// Sessions with at least one operation.
    pub(super) leased: usize,
    /// Operations on all of them.
    pub(super) operations: usize,
}
