//! Whether a route can reach its upstream, as the last session start (or
//! readiness probe) found it: `unknown` until the first start, `up` after one
//! that initialized, `down` with the last error after one that did not. The
//! admin listener's `/readyz` reads it; the pool writes it. A change of state
//! is logged once (ERROR when it goes down, INFO when it comes back), never
//! once per request, so a missing binary is one line, not a flood.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use tokio::sync::watch;

use super::UpstreamError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// No session has been started yet.
    Unknown,
    Up,
    Down,
}

/// One route's reachability, as `/readyz` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    pub state: State,
    /// The error of the last start that failed (kept after recovery, so an
    /// operator can see what happened last).
    pub last_error: Option<String>,
    /// The `data.reason` clients got for it.
    pub last_reason: Option<&'static str>,
    /// When the state last changed, as RFC 3339.
    #[serde(serialize_with = "rfc3339")]
    pub since: SystemTime,
}

fn rfc3339<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_rfc3339_seconds(*t))
}

/// The reachability of one route's upstream.
pub struct Health {
    route: std::sync::Arc<str>,
    tx: watch::Sender<Snapshot>,
    probes: Mutex<Probes>,
}

/// One probe at a time, and at most one per [`PROBE_INTERVAL`].
#[derive(Default)]
struct Probes {
    running: bool,
    last: Option<Instant>,
}

/// The least time between two probes of one route: `/readyz` may be asked
/// often (every few seconds per replica), a probe starts a process.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);

impl Health {
    pub fn new(route: std::sync::Arc<str>) -> Self {
        let (tx, _) = watch::channel(Snapshot {
            state: State::Unknown,
            last_error: None,
            last_reason: None,
            since: SystemTime::now(),
        });
        Self {
            route,
            tx,
            probes: Mutex::new(Probes::default()),
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        self.tx.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Snapshot> {
        self.tx.subscribe()
    }

    /// A session started and initialized.
    pub fn up(&self) {
        let route = &self.route;
        self.tx.send_if_modified(|s| {
            if s.state == State::Up {
                return false;
            }
            if s.state == State::Down {
                tracing::info!(route = %route, "upstream reachable again");
            }
            s.state = State::Up;
            s.since = SystemTime::now();
            true
        });
    }

    /// A session failed to start or to initialize. Shutting down is not the
    /// upstream's fault and changes nothing.
    pub fn down(&self, error: &UpstreamError) {
        if matches!(error, UpstreamError::ShuttingDown) {
            return;
        }
        let route = &self.route;
        let text = error.to_string();
        let reason = error.reason().as_str();
        self.tx.send_if_modified(|s| {
            let changed = s.state != State::Down;
            if changed {
                tracing::error!(route = %route, reason, error = %text, "upstream cannot be reached: the route is not ready");
                s.state = State::Down;
                s.since = SystemTime::now();
            } else {
                tracing::debug!(route = %route, reason, error = %text, "upstream still cannot be reached");
            }
            let text_changed = s.last_error.as_deref() != Some(text.as_str());
            s.last_error = Some(text);
            s.last_reason = Some(reason);
            changed || text_changed
        });
    }

    /// Claims the one probe slot: `None` while another probe runs or one
    /// started less than [`PROBE_INTERVAL`] ago.
    pub fn claim_probe(&self) -> Option<ProbeSlot<'_>> {
        let mut p = self.probes();
        let now = Instant::now();
        if p.running
            || p.last
                .is_some_and(|at| now.duration_since(at) < PROBE_INTERVAL)
        {
            return None;
        }
        p.running = true;
        p.last = Some(now);
        Some(ProbeSlot(self))
    }

    fn probes(&self) -> std::sync::MutexGuard<'_, Probes> {
        self.probes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Held while a probe runs; frees the slot on drop.
pub struct ProbeSlot<'h>(&'h Health);

impl Drop for ProbeSlot<'_> {
    fn drop(&mut self) {
        self.0.probes().running = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_change_once_and_keep_the_last_error() {
        let h = Health::new("r".into());
        assert_eq!(h.snapshot().state, State::Unknown);
        let mut rx = h.subscribe();
        h.down(&UpstreamError::Unavailable("no such file".into()));
        assert!(rx.has_changed().unwrap());
        rx.mark_unchanged();
        let s = h.snapshot();
        assert_eq!(s.state, State::Down);
        assert_eq!(s.last_reason, Some("upstream_unavailable"));
        assert!(s.last_error.unwrap().contains("no such file"));
        h.down(&UpstreamError::Unavailable("no such file".into()));
        assert!(
            !rx.has_changed().unwrap(),
            "the same failure again is no change"
        );
        h.down(&UpstreamError::ShuttingDown);
        assert_eq!(h.snapshot().state, State::Down);
        h.up();
        let s = h.snapshot();
        assert_eq!(s.state, State::Up);
        assert!(s.last_error.is_some());
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["state"], "up");
        assert!(json["since"].as_str().unwrap().ends_with('Z'));
    }

    #[test]
    fn one_probe_at_a_time_and_at_most_one_a_second() {
        let h = Health::new("r".into());
        let slot = h.claim_probe();
        assert!(slot.is_some());
        assert!(h.claim_probe().is_none(), "one runs");
        drop(slot);
        assert!(h.claim_probe().is_none(), "one ran just now");
        h.probes().last = Instant::now().checked_sub(PROBE_INTERVAL);
        assert!(h.claim_probe().is_some());
    }
}
