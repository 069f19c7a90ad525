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
use crate::policy::answer::{self, Subject};
use crate::policy::{Policy, guard};
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
    /// The call's arguments (CEL's `tool.arguments`, for judging an offer).
    pub arguments: &'a Value,
}

impl Remembering<'_> {
    /// The fields of the form `schema` with a `remember` rule, and how long
    /// each is kept. A field the guard would call secret by its schema
    /// (`format: password`, a secret-looking title or description) is never
    /// among them, whatever `secret_fields` lets through: the policy file
    /// can refuse `remember` on a secret-looking name, but only the
    /// question shows what the server asks for under that name.
    fn rules(&self, schema: &Value) -> Vec<(String, Duration)> {
        let Some(rules) = self.policy.tool(self.tool).map(|t| &t.fields) else {
            return Vec::new();
        };
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            return Vec::new();
        };
        props
            .iter()
            .filter(|(field, property)| !guard::looks_secret(field, property))
            .filter_map(|(field, _)| Some((field.clone(), rules.get(field)?.remember?)))
            .collect()
    }

    /// Whether anything of this call could be remembered: checked before a
    /// question's schema is read, which most questions never need.
    fn applies(&self) -> bool {
        // Every anonymous caller is one principal: remembering would show
        // one person's answer to another.
        *self.principal != Principal::anonymous()
            && self
                .policy
                .tool(self.tool)
                .is_some_and(|t| t.fields.values().any(|r| r.remember.is_some()))
    }

    fn at(&self, field: &str) -> String {
        digest(self.route, &self.principal.name, self.tool, field)
    }

    /// Offers this person's remembered values as the defaults of `q` (a
    /// form-mode elicitation; any other question is left as it is), each
    /// only where the policy in force and the question's own schema would
    /// accept it as an answer ([`answer::offerable`]): a rule narrowed since
    /// the value was kept leaves the field blank rather than pre-filled
    /// with a value that confirming would be refused.
    pub async fn offer(&self, q: &mut Question) {
        if !self.applies() {
            return;
        }
        let Some(schema) = q.schema() else {
            return;
        };
        let fields = self.rules(&schema);
        if fields.is_empty() {
            return;
        }
        let subject = Subject {
            principal: self.principal,
            tool: self.tool,
            arguments: self.arguments,
        };
        let mut defaults = Vec::new();
        for (field, _) in fields {
            if let Some(v) = self.remembered.get(&self.at(&field)).await
                && answer::offerable(self.policy, &subject, &schema, &field, &v)
            {
                defaults.push((field, v));
            }
        }
        q.offer_defaults(defaults);
    }

    /// Remembers the accepted values of the fields of `q` with a `remember`
    /// rule (`answer` already held to the policy).
    pub async fn keep(&self, q: &Question, answer: &Value) {
        if answer.get("action").and_then(Value::as_str) != Some("accept") {
            return;
        }
        let Some(content) = answer.get("content").and_then(Value::as_object) else {
            return;
        };
        if !self.applies() {
            return;
        }
        let Some(schema) = q.schema() else {
            return;
        };
        for (field, ttl) in self.rules(&schema) {
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

    /// A form asking `field` with `property` as its schema.
    fn form(field: &str, property: Value) -> Question {
        let request = json!({"method": "elicitation/create", "params": {
            "message": "?",
            "requestedSchema": {"type": "object", "properties": {field: property}},
        }});
        crate::mrtr::convert::input_request("k", &request).unwrap()
    }

    fn policy(text: &str) -> Policy {
        Policy::parse(text, "policy.toml").unwrap()
    }

    /// Alice's remembered answers for `create_invoice`, called with `arguments`.
    fn alices<'a>(
        r: &'a Remembered,
        policy: &'a Policy,
        alice: &'a Principal,
        arguments: &'a Value,
    ) -> Remembering<'a> {
        Remembering {
            remembered: r,
            policy,
            route: "main",
            principal: alice,
            tool: "create_invoice",
            arguments,
        }
    }

    /// What `policy` offers alice for `field` in `q`'s form (the value kept
    /// in `r` before), as the default `q` then carries.
    async fn offered(
        r: &Remembered,
        policy: &Policy,
        mut q: Question,
        field: &str,
    ) -> Option<Value> {
        let (alice, arguments) = (Principal::new("alice", vec![]), json!({"amount": 5000}));
        alices(r, policy, &alice, &arguments).offer(&mut q).await;
        q.schema()?["properties"][field].get("default").cloned()
    }

    async fn keep(r: &Remembered, policy: &Policy, q: &Question, content: Value) {
        let (alice, arguments) = (Principal::new("alice", vec![]), json!({}));
        alices(r, policy, &alice, &arguments)
            .keep(q, &json!({"action": "accept", "content": content}))
            .await;
    }

    const CURRENCY: &str = "[tool.create_invoice.fields.currency]\nremember = \"30d\"\n";

    #[tokio::test(start_paused = true)]
    async fn a_value_is_offered_only_where_the_policy_and_the_schema_accept_it() {
        let r = remembered(8);
        let string = || json!({"type": "string"});
        let wide = policy(&format!("{CURRENCY}enum = [\"EUR\", \"GBP\", \"USD\"]\n"));
        keep(
            &r,
            &wide,
            &form("currency", string()),
            json!({"currency": "USD"}),
        )
        .await;
        let offer = |p: &Policy, property: Value| {
            let p = p.clone();
            let r = &r;
            async move { offered(r, &p, form("currency", property), "currency").await }
        };
        assert_eq!(offer(&wide, string()).await, Some(json!("USD")));
        // The policy narrowed since (a reload): not offered.
        let narrow = policy(&format!("{CURRENCY}enum = [\"EUR\", \"GBP\"]\n"));
        assert_eq!(offer(&narrow, string()).await, None);
        for rule in [
            "max_length = 2\n",
            "pattern = \"^E\"\n",
            "format = \"email\"\n",
            "minimum = 1\n",
            // Judged at ask time: it reads only the value and the principal.
            "authz = 'value != \"USD\" || \"finance\" in principal.groups'\n",
            "authz = 'tool.arguments.amount <= 100 || value != \"USD\"'\n",
            // A rule that fails refuses the answer (policy_error): no default.
            "authz = 'value.nope'\n",
        ] {
            let p = policy(&format!("{CURRENCY}{rule}"));
            assert_eq!(offer(&p, string()).await, None, "{rule}");
        }
        // A rule on the rest of the answer is judged with the answer only.
        let later = policy(&format!(
            "{CURRENCY}authz = 'content.amount <= 100 || value != \"USD\"'\n"
        ));
        assert_eq!(offer(&later, string()).await, Some(json!("USD")));
        // The question's own schema must accept it too.
        for property in [
            json!({"type": "string", "enum": ["EUR", "GBP"]}),
            json!({"type": "string", "oneOf": [{"const": "EUR", "title": "Euro"}]}),
            json!({"type": "string", "maxLength": 2}),
            json!({"type": "string", "format": "date"}),
            json!({"type": "number"}),
        ] {
            assert_eq!(offer(&wide, property.clone()).await, None, "{property}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_field_secret_by_its_schema_is_never_kept_nor_offered() {
        let r = remembered(8);
        // `secret_fields = "allow"` lets such forms reach a person; their
        // answers are still never stored.
        let p = policy(
            "[defaults]\nsecret_fields = \"allow\"\n\
             [tool.create_invoice.fields.pin]\nremember = \"30d\"\n",
        );
        for property in [
            json!({"type": "string", "format": "password"}),
            json!({"type": "string", "title": "Password"}),
            json!({"type": "string", "description": "Your card's security code"}),
        ] {
            keep(
                &r,
                &p,
                &form("pin", property.clone()),
                json!({"pin": "1234"}),
            )
            .await;
            assert!(r.local.is_empty(), "kept for {property}");
        }
        // Kept from a plain form, never offered to one that asks it as a secret.
        keep(
            &r,
            &p,
            &form("pin", json!({"type": "string"})),
            json!({"pin": "1234"}),
        )
        .await;
        assert_eq!(r.local.len(), 1);
        let plain = form("pin", json!({"type": "string"}));
        assert_eq!(offered(&r, &p, plain, "pin").await, Some(json!("1234")));
        let secret = form(
            "pin",
            json!({"type": "string", "format": "password", "title": "Password"}),
        );
        assert_eq!(offered(&r, &p, secret, "pin").await, None);
    }
}
