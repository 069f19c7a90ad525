//! A session's resource subscriptions (spec 2025-11-25 server/resources.mdx
//! "Subscriptions"): at most [`MAX_SUBSCRIPTIONS`], each URI at most
//! [`super::MAX_SUBSCRIPTION_URI_BYTES`], each held on the route's shared upstream
//! subscription (`upstream::subscriptions`) for as long as the session
//! keeps it.

use std::sync::{Arc, PoisonError};

use super::Session;
use super::bounds::{MAX_SUBSCRIPTIONS, check_subscription_uri};
use crate::protocol::{Reason, Reject};
use crate::upstream::subscriptions::Subscription;

impl Session {
    /// Takes a place for a subscription to `uri`: `Ok(true)` when it is
    /// new (the caller then subscribes upstream and [`Session::hold`]s it),
    /// `Ok(false)` when the session holds it already; refused beyond
    /// [`MAX_SUBSCRIPTIONS`] or [`super::MAX_SUBSCRIPTION_URI_BYTES`].
    pub fn reserve_subscription(&self, uri: &str) -> Result<bool, Reject> {
        check_subscription_uri(uri)?;
        let fresh = {
            let mut subs = self
                .subscriptions
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if subs.contains_key(uri) {
                return Ok(false);
            }
            if subs.len() >= MAX_SUBSCRIPTIONS {
                return Err(Reject::new(
                    Reason::TooManySubscriptions,
                    format!(
                        "this session holds {MAX_SUBSCRIPTIONS} resource subscriptions already (the most one session may); unsubscribe one first"
                    ),
                ));
            }
            subs.insert(uri.to_owned(), None).is_none()
        };
        if fresh {
            self.subscriptions_changed.send_modify(|n| *n += 1);
        }
        Ok(fresh)
    }

    /// Keeps the upstream hold of a reserved subscription until it is
    /// unsubscribed or the session ends (an unsubscribe that came first
    /// leaves nothing to keep: the hold is released at once).
    pub fn hold(self: &Arc<Self>, held: Subscription) {
        {
            let mut subs = self
                .subscriptions
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match subs.get_mut(held.uri()) {
                Some(slot) if !self.ended.is_cancelled() => *slot = Some(held),
                _ => return,
            }
        }
        if !self
            .releases_on_end
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            // The session's end releases its holds, even while something
            // (a stream on its way out) still holds the session itself.
            let session = Arc::downgrade(self);
            let ended = self.ended.clone();
            tokio::spawn(async move {
                ended.cancelled().await;
                if let Some(s) = session.upgrade() {
                    let gone = std::mem::take(
                        &mut *s
                            .subscriptions
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner),
                    );
                    drop(gone);
                }
            });
        }
    }

    /// Ends the subscription to `uri`: its upstream hold, for the caller to
    /// release (`None` when the session had none, or it was not made yet).
    pub fn unsubscribe(&self, uri: &str) -> Option<Subscription> {
        let gone = self
            .subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uri);
        if gone.is_some() {
            self.subscriptions_changed.send_modify(|n| *n += 1);
        }
        gone.flatten()
    }

    pub fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(uri)
    }

    pub fn subscriptions(&self) -> Vec<String> {
        self.subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }
}
