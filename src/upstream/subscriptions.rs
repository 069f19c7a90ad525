//! Resource subscriptions on a legacy route, shared per (principal,
//! capability profile): one upstream session holds every URI any listener of
//! that key subscribed to (a 2025-era session's `resources/subscribe`, a
//! 2026-07-28 `subscriptions/listen` naming `resourceSubscriptions`), each
//! URI subscribed once however many listeners want it.
//!
//! Why per principal and profile, not per route: a legacy server answers
//! `resources/subscribe` within the session that asks, and a session of the
//! pool speaks for one principal (its credentials, what the server lets it
//! see). Sharing one subscription across principals would let bob's listener
//! ride on alice's right to subscribe. Within one key the sessions are
//! interchangeable, which is what the call pool already assumes.
//!
//! Why a lease and not a session of its own: the holder takes one place of
//! the key's pool ([`RoutePool::acquire`]) while any URI is held, and gives
//! it back when the last one is released, so `max_sessions` and
//! `max_sessions_per_principal` still bound every upstream session. Idle
//! listeners without subscriptions hold nothing: they hear the route's
//! notices ([`super::notices`]), which every session of the route feeds.
//!
//! A change sends the server only that change: the first listener of a URI
//! subscribes it, the last one to leave unsubscribes it, nothing else is
//! re-sent. Only when the holding session died are the URIs still wanted
//! subscribed again, on its replacement (the server forgot them with it).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use foldhash::HashMap;
use serde_json::json;

use super::UpstreamError;
use super::lock;
use super::pool::{Lease, PoolKey, RoutePool};
use crate::jsonrpc::ErrorObject;
use crate::protocol::profile::Profile;

/// How long releasing a URI waits for the server's answer to `resources/unsubscribe`.
const UNSUBSCRIBE_WAIT: Duration = Duration::from_secs(5);

/// The route's holders, one per key with URIs held.
#[derive(Default)]
pub struct SharedSubscriptions {
    holders: Mutex<HashMap<PoolKey, Arc<Holder>>>,
}

#[derive(Default)]
struct Holder {
    /// Serialises this key's subscribes and unsubscribes, so the server sees
    /// them in the order listeners asked and counts never race.
    state: tokio::sync::Mutex<Held>,
}

#[derive(Default)]
struct Held {
    lease: Option<Lease>,
    /// Listeners per URI.
    uris: HashMap<String, usize>,
    /// Taken off the route's table (its last URI was released): a listener
    /// that found it there just before looks again.
    retired: bool,
}

/// Why a subscription was not made.
#[derive(Debug)]
pub enum SubscribeError {
    /// No session could be had, or it did not answer.
    Upstream(UpstreamError),
    /// The server answered `resources/subscribe` with an error.
    Refused(ErrorObject),
}

/// One listener's hold on one URI; [`Subscription::release`] or dropping
/// it releases the URI (the server hears `resources/unsubscribe` when it
/// was the last).
pub struct Subscription {
    pool: Arc<RoutePool>,
    holder: Arc<Holder>,
    key: PoolKey,
    /// `None` once released.
    uri: Option<String>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("uri", &self.uri)
            .finish_non_exhaustive()
    }
}

impl RoutePool {
    /// Subscribes `uri` for `principal` and `profile` (on the server only if
    /// no listener of that key holds it yet).
    pub async fn subscribe(
        self: &Arc<Self>,
        principal: &Arc<str>,
        profile: Profile,
        uri: &str,
    ) -> Result<Subscription, SubscribeError> {
        let key = PoolKey {
            principal: principal.clone(),
            profile,
        };
        loop {
            let holder = lock(&self.subscriptions().holders)
                .entry(key.clone())
                .or_default()
                .clone();
            let mut held = holder.state.lock().await;
            if held.retired {
                continue;
            }
            if let Some(n) = held.uris.get_mut(uri) {
                *n += 1;
            } else {
                if let Err(e) = self.holding_session(&key, &mut held).await {
                    self.retire_if_empty(&key, &holder, &mut held);
                    return Err(SubscribeError::Upstream(e));
                }
                let Some(lease) = held.lease.as_ref() else {
                    return Err(SubscribeError::Upstream(UpstreamError::Lost(
                        "no session holds the subscriptions".into(),
                    )));
                };
                match self.subscribe_on(lease, uri).await {
                    Ok(Ok(_)) => {
                        held.uris.insert(uri.to_owned(), 1);
                    }
                    Ok(Err(e)) => {
                        self.retire_if_empty(&key, &holder, &mut held);
                        return Err(SubscribeError::Refused(e));
                    }
                    Err(e) => {
                        self.retire_if_empty(&key, &holder, &mut held);
                        return Err(SubscribeError::Upstream(e));
                    }
                }
            }
            drop(held);
            return Ok(Subscription {
                pool: self.clone(),
                holder,
                key,
                uri: Some(uri.to_owned()),
            });
        }
    }

    /// `resources/subscribe` of one URI on the holding session.
    async fn subscribe_on(
        &self,
        lease: &Lease,
        uri: &str,
    ) -> Result<Result<serde_json::Value, ErrorObject>, UpstreamError> {
        lease
            .session()
            .request(
                "resources/subscribe",
                Some(json!({"uri": uri})),
                self.request_timeout(),
            )
            .await
    }

    /// Makes sure `held` has a live session: leases one when it has none,
    /// and replaces a dead one, subscribing again the URIs still wanted.
    async fn holding_session(
        self: &Arc<Self>,
        key: &PoolKey,
        held: &mut Held,
    ) -> Result<(), UpstreamError> {
        if held.lease.as_ref().is_some_and(|l| l.session().is_alive()) {
            return Ok(());
        }
        held.lease = None;
        let lease = self.acquire(&key.principal, key.profile).await?;
        for uri in held.uris.keys() {
            if !matches!(self.subscribe_on(&lease, uri).await, Ok(Ok(_))) {
                tracing::warn!(route = %self.route, uri, "a resource subscription could not be renewed on a new upstream session");
            }
        }
        held.lease = Some(lease);
        Ok(())
    }

    /// With no URI left, gives the session back and takes the holder off
    /// the route's table.
    fn retire_if_empty(&self, key: &PoolKey, holder: &Arc<Holder>, held: &mut Held) {
        if !held.uris.is_empty() {
            return;
        }
        held.lease = None;
        held.retired = true;
        let mut holders = lock(&self.subscriptions().holders);
        if holders.get(key).is_some_and(|h| Arc::ptr_eq(h, holder)) {
            holders.remove(key);
        }
    }

    /// Shutdown: every holder gives its session back now (the pool closes
    /// it), as a listen ends at shutdown; the holds still out release
    /// nothing later. A holder busy subscribing at this very moment gives
    /// its session back when its listeners leave.
    pub(super) fn drop_subscriptions(&self) {
        let holders: Vec<Arc<Holder>> = lock(&self.subscriptions().holders)
            .drain()
            .map(|(_, h)| h)
            .collect();
        for holder in holders {
            if let Ok(mut held) = holder.state.try_lock() {
                held.uris.clear();
                held.lease = None;
                held.retired = true;
            }
        }
    }
}

impl Subscription {
    pub fn uri(&self) -> &str {
        self.uri.as_deref().unwrap_or_default()
    }

    /// Releases the URI now: when this was its last listener, the server
    /// has answered `resources/unsubscribe` by the time this returns.
    pub async fn release(mut self) {
        if let Some(uri) = self.uri.take() {
            Self::release_uri(
                self.pool.clone(),
                self.holder.clone(),
                self.key.clone(),
                uri,
            )
            .await;
        }
    }

    async fn release_uri(pool: Arc<RoutePool>, holder: Arc<Holder>, key: PoolKey, uri: String) {
        let mut held = holder.state.lock().await;
        let last = match held.uris.get_mut(&uri) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                held.uris.remove(&uri);
                true
            }
            None => false,
        };
        if last && let Some(lease) = held.lease.as_ref().filter(|l| l.session().is_alive()) {
            let _ = lease
                .session()
                .request(
                    "resources/unsubscribe",
                    Some(json!({"uri": uri})),
                    UNSUBSCRIBE_WAIT,
                )
                .await;
        }
        pool.retire_if_empty(&key, &holder, &mut held);
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // The release talks to the server: it runs on its own task. Without
        // a runtime (the process is ending) the sessions end with it anyway.
        if let Some(uri) = self.uri.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(Subscription::release_uri(
                self.pool.clone(),
                self.holder.clone(),
                self.key.clone(),
                uri,
            ));
        }
    }
}
