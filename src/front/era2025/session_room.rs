//! Room for one more 2025-era session: at `[sessions] max_per_principal`
//! the principal's least recently used idle session ends, at `max_total`
//! the replica's; refused (429 / 503 with `Retry-After`) only when every
//! session in the way has a call in flight. Without `[auth]` the one
//! anonymous principal is bounded by `max_total` alone.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Session, SessionError, Sessions};
use crate::config::SessionsConfig;

impl Sessions {
    /// Whether the gateway authenticates nobody (no `[auth]`): then the
    /// anonymous principal is bounded by `max_total` alone.
    pub fn set_open_to_all(&self, anonymous: bool) {
        self.open_to_all.store(anonymous, Ordering::Relaxed);
    }

    /// Whether `max_per_principal` bounds `principal`'s sessions.
    fn bounded_per_principal(&self, principal: &str) -> bool {
        !(self.open_to_all.load(Ordering::Relaxed)
            && principal == crate::protocol::Principal::anonymous().name.as_ref())
    }

    /// Makes room for one more session of `principal` (being opened, or
    /// adopted from another replica's id): at `max_per_principal`, the
    /// principal's least recently used idle session ends; at `max_total`,
    /// the replica's. A client whose session ends so gets 404 on its next
    /// request and initializes again, as the spec tells it to (2025-11-25
    /// basic/transports.mdx "Session Management"); clients that never
    /// `DELETE` (allowed: it is a SHOULD) so never meet a wall. Refused
    /// only when every session in the way has a call in flight. Called
    /// with `admission` held.
    pub(super) fn make_room(
        &self,
        principal: &str,
        config: &SessionsConfig,
    ) -> Result<(), SessionError> {
        if self.bounded_per_principal(principal) {
            while self.per_principal.get(principal).map_or(0, |n| *n) >= config.max_per_principal {
                let Some(lru) = self.least_recently_used(|s| s.principal == principal) else {
                    return Err(SessionError::TooManyForPrincipal(config.max_per_principal));
                };
                tracing::info!(session = %lru.name, route = %lru.route, "2025-era session ended to make room for its principal's new one (least recently used, idle; [sessions] max_per_principal)");
                self.end(&lru);
            }
        }
        while self.live.len() >= config.max_total {
            let Some(lru) = self.least_recently_used(|_| true) else {
                return Err(SessionError::Full(config.max_total));
            };
            tracing::info!(session = %lru.name, route = %lru.route, "2025-era session ended to make room (least recently used, idle; [sessions] max_total)");
            self.end(&lru);
        }
        Ok(())
    }

    /// The idle session (no call in flight) that `pick` accepts and that was
    /// used least recently.
    fn least_recently_used(&self, pick: impl Fn(&Session) -> bool) -> Option<Arc<Session>> {
        self.live
            .iter()
            .filter(|s| pick(s) && s.calls_in_flight() == 0)
            // Out of the map's guard at once: no shard stays locked while others are read.
            .map(|s| (s.idle_since(), s.value().clone()))
            .min_by_key(|(since, _)| *since)
            .map(|(_, s)| s)
    }
}
