//! Single use of a round's `requestState`: the first presentation of a round
//! id wins, every later one is a replay. [`Local`] holds the ids this node has
//! seen (enough for hold mode, whose retries all reach the owning node); a
//! shared store (Redis, `[state] store`) makes the rule hold across replicas,
//! which replay mode needs because any replica may serve any retry.
//!
//! spec 2026-07-28 basic/patterns/mrtr.mdx "Server Requirements":
//! `requestState` is attacker-controlled input; a store that cannot answer
//! refuses the retry (`state_store_unavailable`), never accepts it.

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use dashmap::DashMap;
use tokio::time::Instant;

/// Why a store could not say whether a round id was used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("the state store is unavailable: {0}")]
    Unavailable(String),
}

impl crate::protocol::IntoReject for StoreError {
    fn into_reject(self) -> crate::protocol::Reject {
        crate::protocol::Reject::new(
            crate::protocol::Reason::StateStoreUnavailable,
            format!(
                "{self}; the retry is refused rather than accepted unchecked, try again shortly"
            ),
        )
    }
}

/// Marks round ids used, once.
#[async_trait]
pub trait SingleUse: Send + Sync {
    /// `Ok(true)` the first time `round_id` is presented within `ttl`
    /// (and marks it used), `Ok(false)` every later time.
    async fn first_use(&self, round_id: &str, ttl: Duration) -> Result<bool, StoreError>;
}

/// The round ids this node has seen, each kept until its state expires.
pub struct Local {
    seen: DashMap<String, Instant>,
    /// Bound on remembered ids; past it, expired ids are swept before inserting.
    max_entries: usize,
}

impl Local {
    pub fn new(max_entries: usize) -> Self {
        Self {
            seen: DashMap::new(),
            max_entries,
        }
    }

    /// A store whose expired ids are also swept as time passes, every
    /// [`SWEEP_EVERY`], not only once `max_entries` have piled up: at rest
    /// it holds nothing (on tokio's clock, so paused time in tests).
    pub fn swept(max_entries: usize) -> Arc<Self> {
        let local = Arc::new(Self::new(max_entries));
        tokio::spawn(sweeper(Arc::downgrade(&local)));
        local
    }

    fn sweep(&self, now: Instant) {
        self.seen.retain(|_, until| *until > now);
        // A burst of retries grew the map; a DashMap never shrinks by itself.
        if super::table::far_below(self.seen.len(), self.seen.capacity()) {
            self.seen.shrink_to_fit();
        }
    }

    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// How often a [`Local::swept`] store forgets the ids whose states expired.
pub const SWEEP_EVERY: Duration = Duration::from_secs(5);

async fn sweeper(local: Weak<Local>) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let Some(l) = local.upgrade() else { return };
        l.sweep(Instant::now());
    }
}

#[async_trait]
impl SingleUse for Local {
    async fn first_use(&self, round_id: &str, ttl: Duration) -> Result<bool, StoreError> {
        let now = Instant::now();
        if self.seen.len() >= self.max_entries {
            self.sweep(now);
            if self.seen.len() >= self.max_entries {
                // Refusing is the closed failure: accepting an id we could
                // not remember would allow its replay.
                return Err(StoreError::Unavailable(format!(
                    "{} round ids are remembered, the bound",
                    self.max_entries
                )));
            }
        }
        match self.seen.entry(round_id.to_owned()) {
            dashmap::Entry::Occupied(mut used) if *used.get() <= now => {
                // Expired: its state can no longer open, so this is a new id.
                used.insert(now + ttl);
                Ok(true)
            }
            dashmap::Entry::Occupied(_) => Ok(false),
            dashmap::Entry::Vacant(slot) => {
                slot.insert(now + ttl);
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_id_is_used_once_until_it_expires() {
        let local = Local::new(8);
        let ttl = Duration::from_secs(60);
        assert_eq!(local.first_use("op.1", ttl).await, Ok(true));
        assert_eq!(local.first_use("op.1", ttl).await, Ok(false));
        assert_eq!(local.first_use("op.2", ttl).await, Ok(true));
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(local.first_use("op.1", ttl).await, Ok(true));
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_store_sweeps_then_refuses() {
        let local = Local::new(2);
        let ttl = Duration::from_secs(10);
        assert_eq!(local.first_use("a", ttl).await, Ok(true));
        assert_eq!(local.first_use("b", ttl).await, Ok(true));
        assert!(matches!(
            local.first_use("c", ttl).await,
            Err(StoreError::Unavailable(_))
        ));
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(local.first_use("c", ttl).await, Ok(true));
        assert_eq!(local.len(), 1);
    }

    /// Used ids went only once `max_entries` (262,144 in the engine, some
    /// 26 MB) had piled up: a gateway at rest kept every replay-mode round
    /// id of its busy hour. Now they go as their states expire.
    #[tokio::test(start_paused = true)]
    async fn expired_ids_are_swept_at_rest_not_only_when_full() {
        let local = Local::swept(1_000);
        let ttl = Duration::from_secs(10);
        for i in 0..100 {
            assert_eq!(local.first_use(&format!("op.{i}"), ttl).await, Ok(true));
        }
        tokio::time::sleep(ttl + SWEEP_EVERY * 2).await;
        assert_eq!(local.len(), 0);
        // The sweeper holds no strong reference: the store can go.
        let weak = Arc::downgrade(&local);
        drop(local);
        assert!(weak.upgrade().is_none());
    }

    /// A burst of 10,000 round ids grew the map; once they expire the
    /// sweep gives its room back too, not only the ids.
    #[tokio::test(start_paused = true)]
    async fn a_sweep_gives_back_the_room_of_a_burst() {
        let local = Local::new(20_000);
        let ttl = Duration::from_secs(10);
        for i in 0..10_000 {
            assert_eq!(local.first_use(&format!("op.{i}"), ttl).await, Ok(true));
        }
        assert!(local.seen.capacity() >= 10_000);
        local.sweep(Instant::now() + ttl);
        assert_eq!(local.len(), 0);
        assert!(local.seen.capacity() < 256, "{}", local.seen.capacity());
    }
}
