//! Remembered answers (a field rule `remember = "30d"`): each person's last
//! accepted value for a tool and field, offered as the question's `default`
//! the next time (SEP-1034), so they confirm instead of typing.
//!
//! Kept per principal, tool and field under a digest of the three (the
//! store never sees a name), sealed with the state key (XChaCha20-Poly1305,
//! [`Keyring::seal_payload`]) together with that digest, so a value is
//! opened only for the principal, tool and field it was given for. In this
//! node's memory (bounded, expiring), or in the `[state] store` when one is
//! set, so every replica offers it. Never logged: only field names reach
//! the audit log (`default_offered`, `default_kept`).
//!
//! [`Remembering`] is a question's side of it, the same for questions
//! converted from a legacy server's pushes and a native server's own: the
//! defaults offered before the client sees the question, and the accepted
//! answer kept once the policy has passed it.
//!
//! [`Keyring::seal_payload`]: crate::mrtr::state::Keyring::seal_payload

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::clock::Clock;
use super::convert::Question;
use super::redis_store::Redis;
use super::state::SharedKeyring;
use crate::policy::Policy;
use crate::protocol::Principal;

/// Values one node keeps without a store.
pub const LOCAL_MAX: usize = 65_536;

/// The longest a remembered value may be kept, and its largest size.
pub const MAX_TTL: Duration = crate::policy::MAX_REMEMBER;
pub const MAX_VALUE_BYTES: usize = 4096;

#[derive(Serialize, Deserialize)]
struct Sealed {
    /// The digest it was stored under: a value moved to another key is refused.
    at: String,
    value: Value,
}

pub struct Remembered {
    keys: Arc<SharedKeyring>,
    clock: Clock,
    /// digest → (sealed value, expiry in unix ms).
    local: dashmap::DashMap<String, (String, u64)>,
    max: usize,
    store: OnceLock<Arc<Redis>>,
}

/// The digest a value is kept under.
pub fn digest(route: &str, principal: &str, tool: &str, field: &str) -> String {
    let mut h = Sha256::new();
    for part in ["redmark remember", route, principal, tool, field] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    crate::hex_text::lower(&h.finalize())
}

impl Remembered {
    pub fn new(keys: Arc<SharedKeyring>, clock: Clock, max: usize) -> Self {
        Remembered {
            keys,
            clock,
            local: dashmap::DashMap::new(),
            max,
            store: OnceLock::new(),
        }
    }

    /// Keeps values in the shared store from now on.
    pub fn share_with(&self, store: Arc<Redis>) {
        let _ = self.store.set(store);
    }

    /// The value remembered under `at`, if any (and still fresh, and sealed
    /// for `at` under a key this gateway holds).
    pub async fn get(&self, at: &str) -> Option<Value> {
        let sealed = match self.store.get() {
            Some(store) => match store.remembered(at).await {
                Ok(v) => v?,
                Err(e) => {
                    tracing::warn!(error = %e, "remembered answers: the store did not answer; no default offered");
                    return None;
                }
            },
            None => {
                let now = self.clock.unix_now_ms();
                let entry = self.local.get(at)?;
                if entry.1 <= now {
                    drop(entry);
                    self.local.remove(at);
                    return None;
                }
                entry.0.clone()
            }
        };
        let plain = self.keys.current().open_payload(&sealed).ok()?;
        let s: Sealed = serde_json::from_slice(&plain).ok()?;
        (s.at == at).then_some(s.value)
    }

    /// Remembers `value` under `at` for `ttl`. A value larger than
    /// [`MAX_VALUE_BYTES`] is not kept.
    pub async fn put(&self, at: &str, value: &Value, ttl: Duration) {
        let plain = match serde_json::to_vec(&Sealed {
            at: at.to_owned(),
            value: value.clone(),
        }) {
            Ok(p) if p.len() <= MAX_VALUE_BYTES => p,
            _ => return,
        };
        let sealed = self.keys.current().seal_payload(&plain);
        let ttl = ttl.min(MAX_TTL);
        match self.store.get() {
            Some(store) => {
                if let Err(e) = store.remember(at, &sealed, ttl).await {
                    tracing::warn!(error = %e, "remembered answers: the store did not answer; the answer is not remembered");
                }
            }
            None => {
                let now = self.clock.unix_now_ms();
                if self.local.len() >= self.max && !self.local.contains_key(at) {
                    self.local.retain(|_, (_, expiry)| *expiry > now);
                    if self.local.len() >= self.max {
                        return;
                    }
                }
                let expiry = now.saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
                self.local.insert(at.to_owned(), (sealed, expiry));
            }
        }
    }
}

/// One principal's remembered answers for one tool on one route, as a
/// question of that call offers and keeps them.
pub struct Remembering<'a> {
    pub remembered: &'a Remembered,
    pub policy: &'a Policy,
    pub route: &'a str,
    pub principal: &'a Principal,
    pub tool: &'a str,
}

impl Remembering<'_> {
    /// The fields among `names` with a `remember` rule, and how long each is kept.
    fn rules(&self, names: &[String]) -> Vec<(String, Duration)> {
        // Every anonymous caller is one principal: remembering would show
        // one person's answer to another.
        if *self.principal == Principal::anonymous() {
            return Vec::new();
        }
        let Some(rules) = self.policy.tool(self.tool).map(|t| &t.fields) else {
            return Vec::new();
        };
        names
            .iter()
            .filter_map(|f| Some((f.clone(), rules.get(f)?.remember?)))
            .collect()
    }

    fn at(&self, field: &str) -> String {
        digest(self.route, &self.principal.name, self.tool, field)
    }

    /// Offers this person's remembered values as the defaults of `q` (a
    /// form-mode elicitation; any other question is left as it is).
    pub async fn offer(&self, q: &mut Question) {
        let fields = self.rules(&q.field_names());
        if fields.is_empty() {
            return;
        }
        let mut defaults = Vec::new();
        for (field, _) in fields {
            if let Some(v) = self.remembered.get(&self.at(&field)).await {
                defaults.push((field, v));
            }
        }
        q.offer_defaults(defaults);
    }

    /// Remembers the accepted values of the fields with a `remember` rule
    /// (`answer` already held to the policy).
    pub async fn keep(&self, answer: &Value) {
        if answer.get("action").and_then(Value::as_str) != Some("accept") {
            return;
        }
        let Some(content) = answer.get("content").and_then(Value::as_object) else {
            return;
        };
        let names: Vec<String> = content.keys().cloned().collect();
        for (field, ttl) in self.rules(&names) {
            if let Some(v) = content.get(&field) {
                self.remembered.put(&self.at(&field), v, ttl).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mrtr::state::Keyring;
    use serde_json::json;

    fn remembered(max: usize) -> Remembered {
        Remembered::new(
            Arc::new(SharedKeyring::new(Keyring::ephemeral())),
            Clock::following_tokio(),
            max,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_value_is_kept_per_principal_and_expires() {
        let r = remembered(8);
        let alice = digest("rooms", "alice", "create_invoice", "currency");
        let bob = digest("rooms", "bob", "create_invoice", "currency");
        r.put(&alice, &json!("EUR"), Duration::from_secs(60)).await;
        assert_eq!(r.get(&alice).await, Some(json!("EUR")));
        assert_eq!(r.get(&bob).await, None);
        // Sealed, never the value in clear.
        let sealed = r.local.get(&alice).unwrap().0.clone();
        assert!(!sealed.contains("EUR"), "{sealed}");
        // Moved under another principal's digest: refused.
        r.local.insert(bob.clone(), (sealed, u64::MAX));
        assert_eq!(r.get(&bob).await, None);
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(r.get(&alice).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn it_is_bounded() {
        let r = remembered(2);
        for p in ["a", "b", "c"] {
            r.put(
                &digest("r", p, "t", "f"),
                &json!(1),
                Duration::from_secs(60),
            )
            .await;
        }
        assert_eq!(r.local.len(), 2);
        let big = json!("x".repeat(MAX_VALUE_BYTES));
        let at = digest("r", "a", "t", "g");
        r.put(&at, &big, Duration::from_secs(60)).await;
        assert_eq!(r.get(&at).await, None);
    }
}
