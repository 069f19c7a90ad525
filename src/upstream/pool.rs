//! The session pool of one route: legacy sessions keyed by (principal,
//! capability profile), leased one operation at a time, bounded per route and
//! per principal, reaped when idle, and replaced when they die.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, broadcast};

use super::UpstreamError;
use super::health::Health;
use super::session::{Notice, Session, Timeouts};
use super::transport;
use crate::config::{PoolConfig, UpstreamConfig, UpstreamTarget};
use crate::protocol::profile::Profile;
use crate::telemetry::metrics::Metrics;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    pub principal: Arc<str>,
    pub profile: Profile,
}

/// Idle sessions of one key, with the time each was returned.
type IdleList = Vec<(Arc<Session>, Instant)>;

#[derive(Default)]
struct PoolState {
    idle: HashMap<PoolKey, IdleList>,
    /// Sessions that exist: idle, leased or starting.
    total: usize,
    per_principal: HashMap<Arc<str>, usize>,
    leased: usize,
}

impl PoolState {
    fn forget(&mut self, principal: &Arc<str>) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.per_principal.get_mut(principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_principal.remove(principal);
            }
        }
    }

    fn idle_count(&self) -> usize {
        self.idle.values().map(Vec::len).sum()
    }

    /// Removes the oldest idle session matching `filter`, to make room.
    fn evict(&mut self, filter: impl Fn(&PoolKey) -> bool) -> Option<Arc<Session>> {
        let (key, _) = self
            .idle
            .iter()
            .filter(|(k, list)| filter(k) && !list.is_empty())
            .filter_map(|(k, list)| list.first().map(|(_, at)| (k.clone(), *at)))
            .min_by_key(|(_, at)| *at)?;
        let list = self.idle.get_mut(&key)?;
        let (session, _) = list.remove(0);
        if list.is_empty() {
            self.idle.remove(&key);
        }
        self.forget(&key.principal);
        Some(session)
    }
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
    upstream: UpstreamConfig,
    limits: PoolConfig,
    http: reqwest::Client,
    state: Mutex<PoolState>,
    freed: Notify,
    notices: broadcast::Sender<Notice>,
    metrics: Arc<Metrics>,
    closed: AtomicBool,
    /// How to tell when each session ever started has fully ended.
    endings: Mutex<Vec<tokio::sync::watch::Receiver<bool>>>,
    /// Whether the upstream can be reached, as the last start found it.
    health: Health,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl RoutePool {
    pub fn new(
        route: Arc<str>,
        target: impl Into<Connect>,
        upstream: UpstreamConfig,
        limits: PoolConfig,
        http: reqwest::Client,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let (notices, _) = broadcast::channel(256);
        let pool = Arc::new(Self {
            route: route.clone(),
            target: target.into(),
            upstream,
            limits,
            http,
            state: Mutex::new(PoolState::default()),
            freed: Notify::new(),
            notices,
            metrics,
            closed: AtomicBool::new(false),
            endings: Mutex::new(Vec::new()),
            health: Health::new(route.clone()),
        });
        pool.publish(&lock(&pool.state));
        tokio::spawn(reap(Arc::downgrade(&pool)));
        pool
    }

    /// List-changed and resource-updated notices from every session of this route.
    pub fn notices(&self) -> broadcast::Receiver<Notice> {
        self.notices.subscribe()
    }

    pub fn request_timeout(&self) -> Duration {
        self.upstream.request_timeout
    }

    /// `network.transport` and `server.address` of this route's server.
    pub fn address(&self) -> (&'static str, String) {
        match &self.target {
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

    pub fn call_timeout(&self) -> Duration {
        self.upstream.call_timeout
    }

    /// Leases a session for one operation, starting one if the limits allow,
    /// otherwise waiting up to `lease_timeout` for one to come back.
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
        loop {
            let notified = self.freed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let mut retired = Vec::new();
            let reserved = {
                let mut st = lock(&self.state);
                if self.closed.load(Ordering::Acquire) {
                    return Err(UpstreamError::ShuttingDown);
                }
                while let Some((session, _)) = st.idle.get_mut(&key).and_then(Vec::pop) {
                    if session.is_reusable() {
                        st.leased += 1;
                        self.publish(&st);
                        return Ok(Lease::new(self.clone(), key, session));
                    }
                    st.forget(&key.principal);
                    retired.push(session);
                }
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
                    st.leased += 1;
                }
                self.publish(&st);
                room
            };
            retired.iter().for_each(|s| s.close());
            if reserved {
                return match self.start_session(profile).await {
                    Ok(session) => Ok(Lease::new(self.clone(), key, session)),
                    Err(e) => {
                        let mut st = lock(&self.state);
                        st.forget(&key.principal);
                        st.leased = st.leased.saturating_sub(1);
                        self.publish(&st);
                        drop(st);
                        self.freed.notify_waiters();
                        Err(e)
                    }
                };
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
                transport::http::connect(self.http.clone(), url, headers, self.route.clone(), max)?
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

    fn give_back(&self, key: PoolKey, session: Arc<Session>) {
        let mut st = lock(&self.state);
        st.leased = st.leased.saturating_sub(1);
        let keep = session.is_reusable() && !self.closed.load(Ordering::Acquire);
        let retired = if keep {
            st.idle
                .entry(key)
                .or_default()
                .push((session, Instant::now()));
            None
        } else {
            st.forget(&key.principal);
            Some(session)
        };
        self.publish(&st);
        drop(st);
        if let Some(session) = retired {
            session.close();
        }
        self.freed.notify_waiters();
    }

    fn publish(&self, st: &PoolState) {
        self.metrics
            .set_sessions(&self.route, st.idle_count(), st.leased);
    }

    /// Closes every idle session and refuses new leases; leased sessions close when returned.
    pub fn shutdown(&self) {
        self.closed.store(true, Ordering::Release);
        let idle: Vec<Arc<Session>> = {
            let mut st = lock(&self.state);
            let all: Vec<(PoolKey, IdleList)> = st.idle.drain().collect();
            let mut out = Vec::new();
            for (key, list) in all {
                for (s, _) in list {
                    st.forget(&key.principal);
                    out.push(s);
                }
            }
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
        (st.idle_count(), st.leased)
    }

    fn reap_idle(&self) {
        let now = Instant::now();
        let expired: Vec<Arc<Session>> = {
            let mut st = lock(&self.state);
            let mut out = Vec::new();
            let keys: Vec<PoolKey> = st.idle.keys().cloned().collect();
            for key in keys {
                let Some(list) = st.idle.get_mut(&key) else {
                    continue;
                };
                let (gone, kept): (Vec<_>, Vec<_>) = list.drain(..).partition(|(s, at)| {
                    !s.is_reusable() || now.duration_since(*at) >= self.limits.idle_timeout
                });
                *list = kept;
                if list.is_empty() {
                    st.idle.remove(&key);
                }
                for (s, _) in gone {
                    st.forget(&key.principal);
                    out.push(s);
                }
            }
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

/// A session held for one operation; returned to the pool (or retired) on drop.
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
        self.pool.give_back(self.key.clone(), self.session.clone());
    }
}
