//! 2025-era client sessions: the `Mcp-Session-Id` redmark mints at
//! `initialize`, what it remembers, and the bounds on how many are open.
//!
//! What a session must remember for its whole life (route, principal,
//! negotiated version, client capabilities and info) is sealed into its id
//! with the state keys (XChaCha20-Poly1305, as `requestState`), so any
//! replica that holds the keys serves any request of any session, with no
//! stickiness: a replica that meets an id it never saw opens it and adopts
//! the session. What changes during a session (its log level, its calls in
//! flight, when it was last used) lives on the replica that sees it.
//!
//! spec 2025-11-25 basic/transports.mdx "Session Management": "The session
//! ID SHOULD be globally unique and cryptographically secure" and "MUST only
//! contain visible ASCII characters (ranging from 0x21 to 0x7E)": the id is
//! a key id, a dot and base64url, all visible ASCII, around 128 random bits.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dashmap::DashMap;
use foldhash::HashMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::SessionsConfig;
use crate::mrtr::state::{SharedKeyring, principal_digest};
use crate::protocol::profile::Profile;
use crate::protocol::{Reason, Reject};
use crate::upstream::subscriptions::Subscription;

/// The versions a 2025-era client may negotiate, oldest first (spec
/// 2025-11-25 basic/lifecycle.mdx "Version Negotiation": "If the server
/// supports the requested protocol version, it MUST respond with the same
/// version. Otherwise, the server MUST respond with another protocol version
/// it supports. This SHOULD be the latest version supported by the server.").
pub use crate::protocol::LEGACY_VERSIONS;

/// The version `initialize` answers for a client asking `requested`.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| LEGACY_VERSIONS.iter().find(|v| **v == r))
        .copied()
        .unwrap_or(LEGACY_VERSIONS[LEGACY_VERSIONS.len() - 1])
}

/// Longest `clientInfo` kept in a session id: beyond it only its name,
/// title and version are kept, each cut to [`MAX_CLIENT_INFO_TEXT`]
/// characters (icons and descriptions can be long, and the id rides on
/// every request).
const MAX_CLIENT_INFO_BYTES: usize = 1024;
const MAX_CLIENT_INFO_TEXT: usize = 64;

/// What a session id says, sealed. Short names keep the id short.
///
/// Across versions, as for a `requestState` (`mrtr::state::CLAIMS_VERSION`):
/// fields this build does not know are ignored, and a change an older build
/// would misread raises [`SEALED_FORMAT`]; a newer format is an unknown
/// session (404: the client initializes again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Sealed {
    /// Marks a session id (a `requestState` never has it), and its format.
    sid: u8,
    /// 128 random bits, hex: the session's name in logs and tables.
    id: String,
    /// The route it was opened on.
    rt: String,
    /// Hex SHA-256 of the principal (route-scoped).
    pr: String,
    /// The negotiated protocol version.
    pv: String,
    /// The client's `capabilities` from `initialize`.
    caps: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ci: Option<Value>,
    /// Seconds since the Unix epoch after which the id is refused.
    exp: u64,
    /// Whether `initialize` promised `resources.subscribe` (the server has it).
    #[serde(default)]
    rs: bool,
}

const SEALED_FORMAT: u8 = 1;

/// One session as this replica knows it.
#[derive(Debug)]
pub struct Session {
    /// The session's name (not its id: the id is a credential of sorts).
    pub name: String,
    pub route: String,
    principal: String,
    /// The id as the client presents it.
    token: Box<str>,
    pub version: String,
    pub capabilities: Value,
    pub client_info: Option<Value>,
    pub profile: Profile,
    expires: Instant,
    last_seen: Mutex<Instant>,
    /// Set by `logging/setLevel` (spec 2025-11-25 server/utilities/logging.mdx).
    log_level: Mutex<Option<String>>,
    /// Calls in flight, by their JSON-RPC id as text: `notifications/cancelled`
    /// and `DELETE` end them.
    calls: Mutex<HashMap<String, CancellationToken>>,
    /// Cancelled when the session ends: every call in flight ends with it.
    pub ended: CancellationToken,
    /// Whether the session may subscribe to resources (`initialize` said so).
    pub can_subscribe: bool,
    /// `resources/subscribe`d URIs, each with its hold on the route's shared
    /// upstream subscription (a legacy server's; `None` while it is being
    /// made, and for a native server, whose listen carries the URIs). A
    /// native route's standalone stream listens again when they change
    /// (`subscriptions_changed`).
    subscriptions: Mutex<std::collections::BTreeMap<String, Option<Subscription>>>,
    subscriptions_changed: tokio::sync::watch::Sender<u64>,
    /// Whether a task waits to release the subscriptions when the session ends.
    releases_on_end: std::sync::atomic::AtomicBool,
    /// Set while a standalone stream (`GET`) is open on this replica: one at
    /// a time, so no notice is sent twice (spec 2025-11-25
    /// basic/transports.mdx "Multiple Connections": "MUST NOT broadcast the
    /// same message across multiple streams").
    pub standalone: std::sync::atomic::AtomicBool,
}

impl Session {
    pub fn log_level(&self) -> Option<String> {
        self.log_level
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn set_log_level(&self, level: String) {
        *self
            .log_level
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(level);
    }

    /// Registers a call in flight under its JSON-RPC id; the token ends it.
    /// The guard takes it off the table when the call ends.
    pub fn call(self: &Arc<Self>, id: String) -> CallGuard {
        let token = self.ended.child_token();
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), token.clone());
        CallGuard {
            session: Arc::downgrade(self),
            id,
            token,
        }
    }

    /// Ends the call with this JSON-RPC id (`notifications/cancelled`); false if none.
    pub fn cancel_call(&self, id: &str) -> bool {
        let token = self
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        token.map(|t| t.cancel()).is_some()
    }

    pub fn calls_in_flight(&self) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// How long the session's id is still honoured.
    pub fn lifetime_left(&self) -> Duration {
        self.expires.saturating_duration_since(Instant::now())
    }

    /// Turns when the subscribed URIs change.
    pub fn watch_subscriptions(&self) -> tokio::sync::watch::Receiver<u64> {
        self.subscriptions_changed.subscribe()
    }

    fn touch(&self, now: Instant) {
        *self
            .last_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = now;
    }

    fn idle_since(&self) -> Instant {
        *self
            .last_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A call's place in its session's table, removed when the call ends.
pub struct CallGuard {
    session: Weak<Session>,
    id: String,
    pub token: CancellationToken,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Some(s) = self.session.upgrade() {
            s.calls
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&self.id);
        }
    }
}

/// The sessions this replica holds, and the ended ones it must keep refusing.
pub struct Sessions {
    pub(super) keys: Arc<SharedKeyring>,
    /// This replica's node id and its advertised internal address
    /// (`[cluster] advertise`), sealed into every pushed question's id so an
    /// answer that lands on another replica is forwarded here.
    pub(super) node: String,
    pub(super) advertise: Option<String>,
    /// `redmark_client_sessions`: how many this replica holds.
    gauge: prometheus_client::metrics::gauge::Gauge,
    config: Mutex<SessionsConfig>,
    live: DashMap<String, Arc<Session>>,
    /// The live sessions by their id as presented: a session's later
    /// requests are found without opening the id again (its seal was checked
    /// when the session was opened or adopted here).
    by_token: DashMap<Box<str>, Arc<Session>>,
    per_principal: DashMap<String, usize>,
    /// Held while a session is admitted (opened or adopted), so two admissions
    /// never both take the last place, nor both evict for it.
    admission: Mutex<()>,
    /// No `[auth]`: every caller is the one anonymous principal, so
    /// `max_per_principal` would let one client lock every other out; only
    /// `max_total` bounds them (with the same eviction).
    open_to_all: std::sync::atomic::AtomicBool,
    /// Ended sessions (deleted, idle), until their sealed lifetime runs out:
    /// their ids still open, and must get 404.
    ended: DashMap<String, Instant>,
    /// Questions pushed to clients, waiting for their answers, by the
    /// JSON-RPC id they were pushed with.
    pub(super) answers: DashMap<String, super::answers::Waiting>,
    /// `[state] store`: where a session's log level and its end by `DELETE`
    /// are kept for every replica. Without it they are this replica's.
    shared: std::sync::OnceLock<Arc<crate::mrtr::redis_store::Redis>>,
}

/// Ended sessions remembered at most; past it the oldest are forgotten
/// (their ids then open again for their own principal only).
const MAX_ENDED: usize = 262_144;

/// Why a session id is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("this MCP session is not known here: it ended, expired, or was never opened")]
    Unknown,
    #[error("the principal holds {0} sessions already ([sessions] max_per_principal)")]
    TooManyForPrincipal(usize),
    #[error("this replica holds {0} sessions already ([sessions] max_total)")]
    Full(usize),
}

/// How long a client refused for want of room is told to wait (`Retry-After`):
/// the refusal means every session in the way has a call in flight.
pub const RETRY_AFTER_SECS: u64 = 5;

impl SessionError {
    pub fn reject(self) -> Reject {
        let (reason, hint) = match self {
            SessionError::Unknown => (
                Reason::SessionUnknown,
                "; send `initialize` to start a new session",
            ),
            SessionError::TooManyForPrincipal(_) => (
                Reason::TooManySessions,
                "; every one of them has a call in flight: retry once one ends",
            ),
            SessionError::Full(_) => (
                Reason::SessionsFull,
                "; every one of them has a call in flight: try another replica or later",
            ),
        };
        Reject::new(reason, format!("{self}{hint}"))
    }
}

/// What `initialize` tells a new session.
pub struct Opening<'a> {
    pub route: &'a str,
    pub principal: &'a str,
    pub version: &'a str,
    pub capabilities: Value,
    pub client_info: Option<Value>,
    /// `initialize` promised `resources.subscribe`.
    pub can_subscribe: bool,
}

impl Sessions {
    pub fn new(
        keys: Arc<SharedKeyring>,
        config: SessionsConfig,
        node: String,
        advertise: Option<String>,
        gauge: prometheus_client::metrics::gauge::Gauge,
    ) -> Arc<Self> {
        let sessions = Arc::new(Self {
            keys,
            node,
            advertise,
            gauge,
            config: Mutex::new(config),
            live: DashMap::new(),
            by_token: DashMap::new(),
            per_principal: DashMap::new(),
            admission: Mutex::new(()),
            open_to_all: std::sync::atomic::AtomicBool::new(false),
            ended: DashMap::new(),
            answers: DashMap::new(),
            shared: std::sync::OnceLock::new(),
        });
        tokio::spawn(reaper(Arc::downgrade(&sessions)));
        sessions
    }

    /// Keeps what a session changes where every replica finds it
    /// (`[state] store`), from now on.
    pub fn share_with(&self, store: Arc<crate::mrtr::redis_store::Redis>) {
        let _ = self.shared.set(store);
    }

    pub fn shared(&self) -> Option<&Arc<crate::mrtr::redis_store::Redis>> {
        self.shared.get()
    }

    /// A reloaded `[sessions]` applies to the next check.
    pub fn configure(&self, config: SessionsConfig) {
        *self.config.lock().unwrap_or_else(PoisonError::into_inner) = config;
    }

    fn config(&self) -> SessionsConfig {
        self.config
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Opens a session: its id, and the session as this replica holds it.
    pub fn open(&self, opening: Opening<'_>) -> Result<(String, Arc<Session>), SessionError> {
        let config = self.config();
        let _admitting = self
            .admission
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.make_room(opening.principal, &config)?;
        let client_info = opening.client_info.map(short_client_info);
        let now_unix = unix_now();
        let sealed = Sealed {
            sid: SEALED_FORMAT,
            id: hex::encode(rand::random::<[u8; 16]>()),
            rt: opening.route.to_owned(),
            pr: principal_digest(opening.route, opening.principal),
            pv: opening.version.to_owned(),
            caps: opening.capabilities,
            ci: client_info,
            exp: (now_unix + config.max_lifetime).as_secs(),
            rs: opening.can_subscribe,
        };
        let token = self
            .keys
            .seal_payload(&serde_json::to_vec(&sealed).unwrap_or_default());
        let session = self.adopt(sealed, &token, opening.principal, config.max_lifetime);
        Ok((token, session))
    }

    /// The session a request names, checked: sealed by these keys, not
    /// expired or ended, opened on this route by this principal. Any failure
    /// is the same 404, so an id tells a stranger nothing.
    pub fn find(
        &self,
        token: &str,
        route: &str,
        principal: &str,
    ) -> Result<Arc<Session>, SessionError> {
        let now = Instant::now();
        if let Some(known) = self.by_token.get(token)
            && known.route == route
            && known.principal == principal
            && known.expires > now
            && !known.ended.is_cancelled()
        {
            known.touch(now);
            return Ok(known.clone());
        }
        let plain = self
            .keys
            .open_payload(token)
            .map_err(|_| SessionError::Unknown)?;
        let sealed: Sealed = serde_json::from_slice(&plain).map_err(|_| SessionError::Unknown)?;
        if sealed.sid > SEALED_FORMAT {
            tracing::warn!(
                route,
                format = sealed.sid,
                "a session id from a newer replica was refused: finish the upgrade"
            );
        }
        if sealed.sid != SEALED_FORMAT
            || sealed.rt != route
            || sealed.pr != principal_digest(route, principal)
        {
            return Err(SessionError::Unknown);
        }
        let now_unix = unix_now().as_secs();
        if now_unix >= sealed.exp || self.ended.contains_key(&sealed.id) {
            return Err(SessionError::Unknown);
        }
        if let Some(live) = self.live.get(&sealed.id) {
            live.touch(Instant::now());
            return Ok(live.clone());
        }
        // Opened by another replica (or by this one before a restart): adopt
        // it within the same bounds as a new one, `max_per_principal`
        // included (else a principal could hold any number here by opening
        // them elsewhere).
        let config = self.config();
        let _admitting = self
            .admission
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(live) = self.live.get(&sealed.id) {
            return Ok(live.clone());
        }
        self.make_room(principal, &config)?;
        let left = Duration::from_secs(sealed.exp.saturating_sub(now_unix));
        Ok(self.adopt(sealed, token, principal, left))
    }

    fn adopt(&self, sealed: Sealed, token: &str, principal: &str, left: Duration) -> Arc<Session> {
        let now = Instant::now();
        let profile = Profile::from_client_capabilities(&sealed.caps);
        let session = Arc::new(Session {
            name: sealed.id.clone(),
            route: sealed.rt,
            principal: principal.to_owned(),
            token: token.into(),
            version: sealed.pv,
            capabilities: sealed.caps,
            client_info: sealed.ci,
            profile,
            expires: now + left,
            last_seen: Mutex::new(now),
            log_level: Mutex::new(None),
            calls: Mutex::new(HashMap::default()),
            ended: CancellationToken::new(),
            can_subscribe: sealed.rs,
            subscriptions: Mutex::new(std::collections::BTreeMap::new()),
            subscriptions_changed: tokio::sync::watch::Sender::new(0),
            releases_on_end: std::sync::atomic::AtomicBool::new(false),
            standalone: std::sync::atomic::AtomicBool::new(false),
        });
        let entry = self.live.entry(sealed.id);
        match entry {
            dashmap::Entry::Occupied(o) => o.get().clone(),
            dashmap::Entry::Vacant(v) => {
                *self.per_principal.entry(principal.to_owned()).or_insert(0) += 1;
                self.by_token.insert(session.token.clone(), session.clone());
                v.insert(session.clone());
                self.count();
                session
            }
        }
    }

    /// Ends a session (`DELETE`, idle, shutdown): its calls in flight end,
    /// and its id gets 404 from now on.
    pub fn end(&self, session: &Session) {
        self.forget(&session.name, session.expires);
    }

    fn forget(&self, name: &str, until: Instant) {
        if let Some((_, s)) = self.live.remove(name) {
            self.by_token.remove(&s.token);
            s.ended.cancel();
            self.count();
            if let dashmap::Entry::Occupied(mut n) = self.per_principal.entry(s.principal.clone()) {
                *n.get_mut() -= 1;
                if *n.get() == 0 {
                    n.remove();
                }
            }
        }
        if self.ended.len() >= MAX_ENDED {
            self.sweep_ended(Instant::now());
        }
        if self.ended.len() < MAX_ENDED {
            self.ended.insert(name.to_owned(), until);
        }
    }

    fn count(&self) {
        self.gauge
            .set(i64::try_from(self.live.len()).unwrap_or(i64::MAX));
    }

    fn sweep_ended(&self, now: Instant) {
        self.ended.retain(|_, until| *until > now);
    }

    /// Ends the sessions idle past `[sessions] idle_timeout` (and those past
    /// their lifetime); a session with a call in flight is not idle.
    fn reap(&self, now: Instant) {
        let idle = self.config().idle_timeout;
        let stale: Vec<(String, Instant)> = self
            .live
            .iter()
            .filter(|s| {
                s.expires <= now || (s.calls_in_flight() == 0 && s.idle_since() + idle <= now)
            })
            .map(|s| (s.name.clone(), s.expires))
            .collect();
        for (name, until) in stale {
            tracing::debug!(session = %name, "2025-era session ended (idle)");
            self.forget(&name, until);
        }
        self.sweep_ended(now);
    }
}

/// The wall clock, as sealed ids carry it (their expiry is absolute).
fn unix_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
}

/// How often idle sessions are looked for.
const REAP_EVERY: Duration = Duration::from_secs(5);

async fn reaper(sessions: Weak<Sessions>) {
    let mut tick = tokio::time::interval(REAP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(s) = sessions.upgrade() else { return };
        s.reap(Instant::now());
    }
}

/// `clientInfo` as kept in the id: whole when short, else its name, title and version.
fn short_client_info(info: Value) -> Value {
    let len = serde_json::to_vec(&info).map_or(usize::MAX, |b| b.len());
    if len <= MAX_CLIENT_INFO_BYTES {
        return info;
    }
    let mut kept = serde_json::Map::new();
    for key in ["name", "title", "version"] {
        if let Some(Value::String(s)) = info.get(key) {
            kept.insert(
                key.to_owned(),
                Value::String(s.chars().take(MAX_CLIENT_INFO_TEXT).collect()),
            );
        }
    }
    Value::Object(kept)
}

#[path = "session_bounds.rs"]
mod bounds;
#[path = "session_room.rs"]
mod room;
#[path = "session_subscriptions.rs"]
mod subscriptions;

pub use bounds::*;

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
