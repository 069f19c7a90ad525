//! How many bytes of request bodies are held in memory: per connection and
//! in all (issue 42). `max_body_bytes` bounds one body; HTTP/2 carries up
//! to 200 streams on one connection, and each body is buffered whole before
//! it is parsed, so one connection with 100 unfinished 3.9 MiB bodies held
//! 390 MiB until `body_read_timeout`. Now every byte the `body` step buffers
//! is leased first, from its connection's budget
//! ([`CONNECTION_BODIES`] × `max_body_bytes`) and from the listener's
//! (`[server] max_body_memory`); a body that would go past either is
//! refused at once with 503 `body_memory_exhausted` (`data.scope`:
//! `connection` or `total`) and its bytes are let go. A lease is returned
//! when its request's pipeline context is dropped.
//!
//! `redmark_request_body_bytes` is what the listener holds now.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus_client::metrics::gauge::Gauge;

/// One connection may hold this many bodies of `max_body_bytes` at once:
/// enough for a client's concurrent calls, far from HTTP/2's 200 streams.
pub const CONNECTION_BODIES: usize = 4;

/// Which budget a body would have gone past.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Exhausted {
    #[error("this connection's request bodies")]
    Connection,
    #[error("every connection's request bodies together")]
    Total,
}

impl Exhausted {
    /// `data.scope` of the refusal.
    pub fn scope(self) -> &'static str {
        match self {
            Exhausted::Connection => "connection",
            Exhausted::Total => "total",
        }
    }
}

/// Bytes in use against a cap, taken only while they fit.
#[derive(Debug, Default)]
struct Pool {
    used: AtomicUsize,
}

impl Pool {
    /// Takes `n` bytes if `used + n` stays within `cap`.
    fn take(&self, n: usize, cap: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|&after| after <= cap)
            })
            .is_ok()
    }

    fn give(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// The listener's budget, shared by its connections.
#[derive(Debug, Clone)]
pub struct BodyBudget {
    total: Arc<Pool>,
    cap: usize,
    /// `redmark_request_body_bytes`, when the listener is counted.
    gauge: Option<Gauge>,
}

impl BodyBudget {
    /// At most `cap` bytes of bodies in all.
    pub fn new(cap: usize, gauge: Option<Gauge>) -> Self {
        Self {
            total: Arc::default(),
            cap,
            gauge,
        }
    }

    /// The budget of one new connection, which each of its requests carries
    /// (as a request extension) to the `body` step.
    pub fn connection(&self) -> ConnectionBudget {
        ConnectionBudget {
            listener: self.clone(),
            conn: Arc::default(),
        }
    }

    /// Bytes held now, in all.
    pub fn used(&self) -> usize {
        self.total.used.load(Ordering::Acquire)
    }
}

/// One connection's budget, within its listener's.
#[derive(Debug, Clone)]
pub struct ConnectionBudget {
    listener: BodyBudget,
    conn: Arc<Pool>,
}

impl ConnectionBudget {
    /// An empty lease for one request's body; `max_body_bytes` sets the
    /// connection's share ([`CONNECTION_BODIES`] of them).
    pub fn lease(&self, max_body_bytes: usize) -> Lease {
        Lease {
            budget: self.clone(),
            conn_cap: max_body_bytes.saturating_mul(CONNECTION_BODIES),
            bytes: 0,
        }
    }
}

/// Bytes one request's body holds; given back when dropped.
#[derive(Debug)]
pub struct Lease {
    budget: ConnectionBudget,
    conn_cap: usize,
    bytes: usize,
}

impl Lease {
    /// Takes `n` more bytes from the connection's and the listener's
    /// budgets, or neither.
    pub fn grow(&mut self, n: usize) -> Result<(), Exhausted> {
        let b = &self.budget;
        if !b.conn.take(n, self.conn_cap) {
            return Err(Exhausted::Connection);
        }
        if !b.listener.total.take(n, b.listener.cap) {
            b.conn.give(n);
            return Err(Exhausted::Total);
        }
        self.bytes += n;
        if let Some(g) = &b.listener.gauge {
            g.inc_by(i64::try_from(n).unwrap_or(i64::MAX));
        }
        Ok(())
    }

    /// Bytes held by this lease.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        let b = &self.budget;
        b.conn.give(self.bytes);
        b.listener.total.give(self.bytes);
        if let Some(g) = &b.listener.gauge {
            g.dec_by(i64::try_from(self.bytes).unwrap_or(i64::MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_holds_at_most_its_share_and_all_at_most_the_total() {
        let gauge = Gauge::default();
        let budget = BodyBudget::new(10_000, Some(gauge.clone()));
        let one = budget.connection();
        // max_body_bytes 1,000: a connection may hold 4,000.
        let mut leases: Vec<Lease> = (0..4).map(|_| one.lease(1_000)).collect();
        for l in &mut leases {
            assert_eq!(l.grow(1_000), Ok(()));
        }
        let mut fifth = one.lease(1_000);
        assert_eq!(fifth.grow(1), Err(Exhausted::Connection));
        assert_eq!(budget.used(), 4_000);
        // Other connections share the rest of the total.
        let two = budget.connection();
        let three = budget.connection();
        let mut a = two.lease(4_000);
        assert_eq!(a.grow(4_000), Ok(()));
        let mut b = three.lease(4_000);
        assert_eq!(b.grow(2_000), Ok(()));
        assert_eq!(b.grow(1), Err(Exhausted::Total), "10,000 in all");
        assert_eq!(gauge.get(), 10_000);
        // A refused grow takes nothing: the connection's share is intact.
        assert_eq!(b.bytes(), 2_000);
        drop(leases);
        drop(fifth);
        assert_eq!(budget.used(), 6_000);
        let mut again = one.lease(1_000);
        assert_eq!(again.grow(1_000), Ok(()), "a connection's bytes come back");
        drop((a, b, again));
        assert_eq!((budget.used(), gauge.get()), (0, 0));
    }
}
