//! The session pool of one route: legacy sessions keyed by (principal,
//! capability profile), leased one operation at a time, or up to
//! `max_operations_per_session` at a time once the route has learned that its
//! server names each push's call by its stream ([`super::mode`]); bounded per
//! route and per principal, reaped when idle, and replaced when they die.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, broadcast};

mod slots;

use super::UpstreamError;
use super::health::Health;
use super::mode::{Mode, RouteMode};
use super::notices::{ListEpochs, Notice, Notices};
use super::session::{Session, Timeouts};
use super::transport;
use crate::config::{PoolConfig, UpstreamConfig, UpstreamTarget};
use crate::protocol::profile::Profile;
use crate::telemetry::metrics::{Metrics, SessionGauges};
use crate::upstream::lock;
use slots::{PoolState, Slot};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    pub principal: Arc<str>,
    pub profile: Profile,
}

/// A transport made by the caller (an in-process server in tests).
pub type Connector = Arc<dyn Fn() -> Result<transport::Link, UpstreamError> + Send + Sync>;

/// How a pool reaches its server: the configured target, or a connector.
#[derive(Clone)]
pub enum Connect {
    Target(UpstreamTarget),
    Custom(Connector),
}

impl From<UpstreamTarget> for Connect {
    fn from(target: UpstreamTarget) -> Self {
        Connect::Target(target)
    }
}

pub struct RoutePool {
    pub route: Arc<str>,
    target: Connect,
    /// `network.transport` and `server.address`, worked out once: every
    /// operation's span names them.
    address: (&'static str, String),
    upstream: UpstreamConfig,
    limits: PoolConfig,
    http: super::client::HttpClient,
    state: Mutex<PoolState>,
    freed: Notify,
    notices: Notices,
    gauges: SessionGauges,
    closed: AtomicBool,
    /// Whether sessions of this route may carry several operations.
    mode: Arc<RouteMode>,
    /// How to tell when each session ever started has fully ended.
    endings: Mutex<Vec<tokio::sync::watch::Receiver<bool>>>,
    /// Whether the upstream can be reached, as the last start found it.
    health: Health,
    /// Resource subscriptions, one holding session per key that has any.
    subscriptions: super::subscriptions::SharedSubscriptions,
}

fn address_of(target: &Connect) -> (&'static str, String) {
    match target {
        Connect::Custom(_) => ("inproc", "in-process".to_owned()),
        Connect::Target(UpstreamTarget::Stdio { program, .. }) => {
            ("pipe", program.display().to_string())
        }
        Connect::Target(UpstreamTarget::Http { url, .. }) => (
            "tcp",
            url::Url::parse(url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned))
                .unwrap_or_default(),
        ),
    }
}

impl RoutePool {
    pub fn new(
        route: Arc<str>,
        target: impl Into<Connect>,
        upstream: UpstreamConfig,
        limits: PoolConfig,
        http: super::client::HttpClient,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let notices = Notices::new(256);
        let target = target.into();
        // stdio has one byte stream for everything: no push ever names its call by transport.
        let start = match &target {
            Connect::Target(UpstreamTarget::Stdio { .. }) => Mode::Exclusive,
            Connect::Target(UpstreamTarget::Http { .. }) | Connect::Custom(_) => Mode::Learning,
        };
        let mode = RouteMode::new(route.clone(), start, metrics.clone());
        let pool = Arc::new(Self {
            route: route.clone(),
            address: address_of(&target),
            target,
            mode,
            upstream,
            limits,
            http,
            state: Mutex::new(PoolState::default()),
            freed: Notify::new(),
            notices,
            gauges: metrics.session_gauges(&route),
            closed: AtomicBool::new(false),
            endings: Mutex::new(Vec::new()),
            health: Health::new(route.clone()),
            subscriptions: Default::default(),
        });
        pool.publish(&lock(&pool.state));
        tokio::spawn(reap(Arc::downgrade(&pool)));
        pool
    }

    /// List-changed and resource-updated notices from every session of this route.
    pub fn notices(&self) -> broadcast::Receiver<Notice> {
        self.notices.subscribe()
    }

    /// The route's shared resource subscriptions (`super::subscriptions`).
    pub(super) fn subscriptions(&self) -> &super::subscriptions::SharedSubscriptions {
        &self.subscriptions
    }

    /// The epochs of this route's lists, moved by its sessions' list-changed notices.
    pub fn list_epochs(&self) -> Arc<ListEpochs> {
        self.notices.epochs().clone()
    }

    pub fn request_timeout(&self) -> Duration {
        self.upstream.request_timeout
    }

    /// `network.transport` and `server.address` of this route's server.
    pub fn address(&self) -> (&'static str, &str) {
        (self.address.0, &self.address.1)
    }

    pub fn call_timeout(&self) -> Duration {
        self.upstream.call_timeout
    }

    /// How long a call given up may take to end on its own (`end_grace`).
    pub fn end_grace(&self) -> Duration {
        self.upstream.end_grace
    }

    /// What this route has learned about sharing its sessions.
    pub fn mode(&self) -> Mode {
        self.mode.get()
    }

    /// Operations one session may carry right now.
    fn per_session(&self) -> usize {
        if self.mode.is_multiplexed() {
            self.limits.max_operations_per_session.max(1)
        } else {
            1
        }
    }

    /// Leases a session for one operation: a place on a started session with
    /// room (one operation each until the route is multiplexed), else a new
    /// session if the limits allow, otherwise waiting up to `lease_timeout`
    /// for room.
    pub async fn acquire(
        self: &Arc<Self>,
        principal: &Arc<str>,
        profile: Profile,
    ) -> Result<Lease, UpstreamError> {
        let key = PoolKey {
            principal: principal.clone(),
            profile,
        };
        let deadline = tokio::time::Instant::now() + self.limits.lease_timeout;
        // The first attempt registers no waiter: most leases find room at
        // once, and registering is a lock on the waiter list both loops share.
        // A lease that has to wait looks again once registered, so a session
        // given back in between is not missed.
        let mut registered = false;
        loop {
            let notified = self.freed.notified();
            tokio::pin!(notified);
            if registered {
                notified.as_mut().enable();
            }
            let mut retired = Vec::new();
            let limit = self.per_session();
            let reserved = {
                let mut st = lock(&self.state);
                if self.closed.load(Ordering::Acquire) {
                    return Err(UpstreamError::ShuttingDown);
                }
                if let Some(session) = st.take(&key, limit, &mut retired) {
                    self.publish(&st);
                    drop(st);
                    retired.iter().for_each(|s| s.close());
                    return Ok(Lease::new(self.clone(), key, session));
                }
                if limit > 1 && st.starting(&key) > 0 {
                    // A shared session of this key is on its way: wait for a
                    // place on it rather than start one per waiting request.
                    false
                } else {
                    let mine = st.per_principal.get(principal).copied().unwrap_or(0);
                    if mine >= self.limits.max_sessions_per_principal {
                        // Make room from this principal's idle sessions of other profiles.
                        if let Some(s) = st.evict(|k| k.principal == key.principal) {
                            retired.push(s);
                        }
                    } else if st.total >= self.limits.max_sessions
                        && let Some(s) = st.evict(|_| true)
                    {
                        retired.push(s);
                    }

                    let mine = st.per_principal.get(principal).copied().unwrap_or(0);
                    let room = st.total < self.limits.max_sessions
                        && mine < self.limits.max_sessions_per_principal;
                    if room {
                        st.total += 1;
                        *st.per_principal.entry(principal.clone()).or_default() += 1;
                        *st.starting.entry(key.clone()).or_default() += 1;
                    }
                    self.publish(&st);
                    room
                }
            };
            retired.iter().for_each(|s| s.close());
            if reserved {
                let started = self.start_session(profile).await;
                let mut st = lock(&self.state);
                st.start_done(&key);
                let out = match started {
                    Ok(session) => {
                        st.add(
                            key.clone(),
                            Slot {
                                session: session.clone(),
                                // Started by this task, so its tasks run where this one does.
                                home: crate::event_loops::current(),
                                ops: 1,
                                since: Instant::now(),
                            },
                        );
                        Ok(Lease::new(self.clone(), key, session))
                    }
                    Err(e) => {
                        st.forget(&key.principal);
                        Err(e)
                    }
                };
                self.publish(&st);
                drop(st);
                // Requests waiting for room: a shared session now has places,
                // or a failed start left room for another attempt.
                self.freed.notify_waiters();
                return out;
            }
            if !registered {
                registered = true;
                continue;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(UpstreamError::Busy(self.limits.lease_timeout));
            }
        }
    }

    /// Starts one session; its success or failure is what `/readyz` reports.
    async fn start_session(&self, profile: Profile) -> Result<Arc<Session>, UpstreamError> {
        let started = self.connect_and_start(profile).await;
        match &started {
            Ok(s) => {
                self.health.up();
                tracing::info!(route = %self.route, session = s.local_id, profile = %profile.label(), version = %s.init.protocol_version, "upstream session started");
            }
            // Logged at ERROR by `health` once per change of state, not once per request.
            Err(e) => {
                self.health.down(e);
                tracing::debug!(route = %self.route, profile = %profile.label(), error = %e, "upstream session failed to start");
            }
        }
        started
    }

    async fn connect_and_start(&self, profile: Profile) -> Result<Arc<Session>, UpstreamError> {
        let max = self.upstream.max_message_bytes;
        let link = match &self.target {
            Connect::Custom(connect) => connect()?,
            Connect::Target(UpstreamTarget::Stdio {
                program,
                args,
                env,
                cwd,
            }) => transport::stdio::spawn(program, args, env, cwd, self.route.clone(), max)?,
            Connect::Target(UpstreamTarget::Http { url, headers }) => {
                // A session that may speak HTTP/2 gets its own connection (see `client`).
                let http = match super::client::for_session(self.upstream.http2, url) {
                    Some(own) => own.map_err(UpstreamError::Unavailable)?,
                    None => self.http.clone(),
                };
                transport::http::connect(http, url, headers, self.route.clone(), max)?
            }
        };
        let started = Session::start(
            link,
            self.route.clone(),
            profile,
            self.notices.clone(),
            Timeouts {
                init: self.upstream.init_timeout,
                write: self.upstream.request_timeout,
            },
            self.mode.clone(),
        )
        .await;
        if let Ok(session) = &started {
            let mut endings = lock(&self.endings);
            endings.retain(|e| !*e.borrow());
            endings.push(session.ended());
        }
        started
    }

    /// Whether this route's upstream can be reached, as the last start found it.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// Learns whether the upstream can be reached by starting a throwaway
    /// session (the empty capability profile) and closing it, unless the
    /// route is up, the pool is shut down, or a probe ran within the last
    /// second. `/readyz` calls it, so a route that is down comes back up
    /// without a client having to fail first.
    pub fn probe(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        if self.closed.load(Ordering::Acquire)
            || self.health.snapshot().state == super::health::State::Up
        {
            return None;
        }
        let pool = self.clone();
        Some(tokio::spawn(async move {
            let Some(_slot) = pool.health.claim_probe() else {
                return;
            };
            if let Ok(session) = pool.start_session(Profile::default()).await {
                session.close();
            }
        }))
    }

    /// One operation is done with `session`; the session goes idle (or is
    /// retired) once its last operation is done.
    fn give_back(&self, key: &PoolKey, session: &Arc<Session>) {
        let mut st = lock(&self.state);
        let closed = self.closed.load(Ordering::Acquire);
        let mut retired = None;
        let mut idle_now = false;
        if let Some(slot) = st
            .sessions
            .get_mut(key)
            .and_then(|list| list.iter_mut().find(|s| Arc::ptr_eq(&s.session, session)))
            && slot.ops > 0
        {
            slot.ops -= 1;
            if slot.ops == 0 {
                slot.since = Instant::now();
                idle_now = true;
            }
            st.counts.operations = st.counts.operations.saturating_sub(1);
            if idle_now {
                st.counts.leased = st.counts.leased.saturating_sub(1);
            }
        }
        if idle_now && (closed || !session.is_reusable()) {
            retired = st.remove(key, session).map(|s| s.session);
            if retired.is_some() {
                st.forget(&key.principal);
            }
        }
        self.publish(&st);
        drop(st);
        if let Some(session) = retired {
            session.close();
        }
        self.freed.notify_waiters();
    }

    fn publish(&self, st: &PoolState) {
        #[cfg(debug_assertions)]
        debug_assert_eq!(st.counts, st.recount(), "the pool's counts drifted");
        self.gauges
            .set(st.idle_count(), st.leased_count(), st.counts.operations);
    }

    /// Closes every idle session and refuses new leases; leased sessions close
    /// when their last operation is done.
    pub fn shutdown(&self) {
        self.closed.store(true, Ordering::Release);
        self.drop_subscriptions();
        let idle: Vec<Arc<Session>> = {
            let mut st = lock(&self.state);
            let out = st.remove_where(|s| s.ops == 0);
            self.publish(&st);
            out
        };
        idle.iter().for_each(|s| s.close());
        self.freed.notify_waiters();
    }

    /// Waits (at most `limit`) until every session of this route has ended:
    /// stdio processes reaped, HTTP sessions deleted.
    pub async fn wait_ended(&self, limit: Duration) {
        let endings: Vec<_> = lock(&self.endings).clone();
        let all = futures::future::join_all(endings.into_iter().map(|mut e| async move {
            let _ = e.wait_for(|ended| *ended).await;
        }));
        if tokio::time::timeout(limit, all).await.is_err() {
            tracing::warn!(route = %self.route, "some upstream sessions did not end in time");
        }
    }

    /// Sessions (idle, leased) right now.
    pub fn counts(&self) -> (usize, usize) {
        let st = lock(&self.state);
        (st.idle_count(), st.leased_count())
    }

    fn reap_idle(&self) {
        let now = Instant::now();
        let expired: Vec<Arc<Session>> = {
            let mut st = lock(&self.state);
            let out = st.remove_where(|s| {
                s.ops == 0
                    && (!s.session.is_reusable()
                        || now.duration_since(s.since) >= self.limits.idle_timeout)
            });
            if !out.is_empty() {
                self.publish(&st);
            }
            out
        };
        if !expired.is_empty() {
            tracing::debug!(route = %self.route, count = expired.len(), "reaped idle upstream sessions");
            expired.iter().for_each(|s| s.close());
            self.freed.notify_waiters();
        }
    }
}

async fn reap(pool: std::sync::Weak<RoutePool>) {
    let every = match pool.upgrade() {
        Some(p) => {
            (p.limits.idle_timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(30))
        }
        None => return,
    };
    loop {
        tokio::time::sleep(every).await;
        let Some(p) = pool.upgrade() else { return };
        if p.closed.load(Ordering::Acquire) {
            return;
        }
        p.reap_idle();
    }
}

/// A place on a session for one operation (the whole session unless the
/// route is multiplexed); given back to the pool on drop.
pub struct Lease {
    pool: Arc<RoutePool>,
    key: PoolKey,
    session: Arc<Session>,
}

impl Lease {
    fn new(pool: Arc<RoutePool>, key: PoolKey, session: Arc<Session>) -> Self {
        Self { pool, key, session }
    }

    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.pool.give_back(&self.key, &self.session);
    }
}

#[cfg(test)]
mod tests;
