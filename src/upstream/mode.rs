//! How many operations one upstream session of a route may carry, learned
//! from the server: exclusive (one operation each) until a push has been seen
//! on the response stream of the call it belongs to, multiplexed from then on;
//! exclusive for good once a push arrives on the standalone GET stream (or
//! when the transport has no per-call streams at all, as stdio).
//!
//! Attribution is never a guess: on a multiplexed session a push reaches an
//! operation only through the stream of that operation's own call.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::telemetry::metrics::Metrics;

/// What a route knows about where its server sends pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Nothing seen yet: sessions are exclusive.
    Learning,
    /// Pushes ride the stream of their call: sessions are shared.
    Multiplexed,
    /// Pushes arrive where no call owns them (the GET stream, stdio): sessions
    /// stay exclusive, for good.
    Exclusive,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Learning, Mode::Multiplexed, Mode::Exclusive];

    /// The `mode` label on `/metrics`.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Learning => "learning",
            Mode::Multiplexed => "multiplexed",
            Mode::Exclusive => "exclusive",
        }
    }

    fn from_u8(n: u8) -> Mode {
        match n {
            1 => Mode::Multiplexed,
            2 => Mode::Exclusive,
            _ => Mode::Learning,
        }
    }

    fn as_u8(self) -> u8 {
        match self {
            Mode::Learning => 0,
            Mode::Multiplexed => 1,
            Mode::Exclusive => 2,
        }
    }
}

/// The learned mode of one route, shared by its pool and every session.
pub struct RouteMode {
    route: Arc<str>,
    mode: AtomicU8,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for RouteMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteMode")
            .field("route", &self.route)
            .field("mode", &self.get())
            .finish()
    }
}

impl RouteMode {
    pub fn new(route: Arc<str>, start: Mode, metrics: Arc<Metrics>) -> Arc<Self> {
        let mode = Arc::new(Self {
            route,
            mode: AtomicU8::new(start.as_u8()),
            metrics,
        });
        mode.publish(start);
        mode
    }

    pub fn get(&self) -> Mode {
        Mode::from_u8(self.mode.load(Ordering::Acquire))
    }

    pub fn is_multiplexed(&self) -> bool {
        self.get() == Mode::Multiplexed
    }

    /// A push arrived on the response stream of the call it belongs to.
    pub fn saw_push_on_call_stream(&self) {
        if self
            .mode
            .compare_exchange(
                Mode::Learning.as_u8(),
                Mode::Multiplexed.as_u8(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            tracing::info!(route = %self.route, mode = Mode::Multiplexed.label(), "upstream pushes on each call's own stream: sessions are shared by several operations");
            self.publish(Mode::Multiplexed);
        }
    }

    /// A push arrived on the standalone stream: no call owns it by transport.
    pub fn saw_push_on_standalone(&self) {
        let before = Mode::from_u8(self.mode.swap(Mode::Exclusive.as_u8(), Ordering::AcqRel));
        if before != Mode::Exclusive {
            tracing::info!(route = %self.route, mode = Mode::Exclusive.label(), was = before.label(), "upstream pushes on its standalone stream: sessions stay one operation each");
            self.publish(Mode::Exclusive);
        }
    }

    fn publish(&self, now: Mode) {
        self.metrics.set_session_mode(&self.route, now.label());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(start: Mode) -> (Arc<RouteMode>, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::new());
        (RouteMode::new("r".into(), start, metrics.clone()), metrics)
    }

    #[test]
    fn a_push_on_a_call_stream_teaches_multiplexing_once() {
        let (m, metrics) = mode(Mode::Learning);
        assert_eq!(m.get(), Mode::Learning);
        m.saw_push_on_call_stream();
        m.saw_push_on_call_stream();
        assert_eq!(m.get(), Mode::Multiplexed);
        let text = metrics.render();
        assert!(
            text.contains(r#"redmark_upstream_session_mode{route="r",mode="multiplexed"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"redmark_upstream_session_mode{route="r",mode="learning"} 0"#),
            "{text}"
        );
    }

    #[test]
    fn a_standalone_push_pins_exclusive_even_after_learning() {
        let (m, metrics) = mode(Mode::Learning);
        m.saw_push_on_call_stream();
        m.saw_push_on_standalone();
        m.saw_push_on_call_stream();
        assert_eq!(m.get(), Mode::Exclusive, "exclusive is for good");
        let text = metrics.render();
        assert!(
            text.contains(r#"redmark_upstream_session_mode{route="r",mode="exclusive"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"redmark_upstream_session_mode{route="r",mode="multiplexed"} 0"#),
            "{text}"
        );
    }
}
