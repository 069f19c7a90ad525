//! Who is calling: the identity an authentication step establishes and every
//! layer above it uses (pool keys, requestState binding, policy rules).

use std::sync::Arc;

use serde_json::{Map, Value, json};

/// An authenticated caller: one shared [`Identity`], so handing the caller
/// to the layers above (the pipeline, the pool, the operation, its audit)
/// counts one reference instead of six.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal(Arc<Identity>);

/// Who a [`Principal`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The name sessions, audit records and requestState are bound to. For a
    /// bearer JWT it is `issuer#subject`, so the same subject at two issuers
    /// (or an API key's principal of the same name) is never the same caller.
    pub name: Arc<str>,
    pub groups: Arc<[String]>,
    /// What the credential said about the caller (a token's claims; empty for API keys),
    /// visible to CEL rules as `principal.claims`.
    pub claims: Arc<Claims>,
    /// The token's issuer; `None` for API keys and anonymous callers.
    pub issuer: Option<Arc<str>>,
    /// The subject as the credential names it (the API key's principal, a token's `sub`).
    pub subject: Arc<str>,
    /// Scopes the credential grants (a token's `scope`/`scp`, an API key's `scopes`).
    pub scopes: Arc<[String]>,
}

impl std::ops::Deref for Principal {
    type Target = Identity;
    fn deref(&self) -> &Identity {
        &self.0
    }
}

/// A credential's claims.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Claims(pub Map<String, Value>);

impl Principal {
    pub fn new(name: &str, groups: Vec<String>) -> Self {
        Self(Arc::new(Identity {
            name: Arc::from(name),
            groups: Arc::from(groups),
            claims: Arc::new(Claims::default()),
            issuer: None,
            subject: Arc::from(name),
            scopes: Arc::from(Vec::new()),
        }))
    }

    /// The caller a validated token names: (issuer, subject).
    pub fn from_token(
        issuer: &str,
        subject: &str,
        groups: Vec<String>,
        scopes: Vec<String>,
        claims: Map<String, Value>,
    ) -> Self {
        // An issuer identifier has no fragment (RFC 8414 §2), so `#` cannot
        // occur in it and `issuer#subject` splits one way only.
        Self(Arc::new(Identity {
            name: Arc::from(format!("{issuer}#{subject}")),
            groups: Arc::from(groups),
            claims: Arc::new(Claims(claims)),
            issuer: Some(Arc::from(issuer)),
            subject: Arc::from(subject),
            scopes: Arc::from(scopes),
        }))
    }

    pub fn with_scopes(mut self, scopes: Vec<String>) -> Self {
        Arc::make_mut(&mut self.0).scopes = Arc::from(scopes);
        self
    }

    pub fn with_claims(mut self, claims: Map<String, Value>) -> Self {
        Arc::make_mut(&mut self.0).claims = Arc::new(Claims(claims));
        self
    }

    /// Every request starts as this caller until a step authenticates it,
    /// and without `[auth]` stays it: made once, not per request.
    pub fn anonymous() -> Self {
        static ANONYMOUS: std::sync::OnceLock<Principal> = std::sync::OnceLock::new();
        ANONYMOUS
            .get_or_init(|| Self::new("anonymous", Vec::new()))
            .clone()
    }

    /// True when the credential grants every scope of `needed`.
    pub fn has_scopes<'a>(&self, needed: impl IntoIterator<Item = &'a String>) -> bool {
        needed.into_iter().all(|s| self.scopes.contains(s))
    }

    /// What CEL rules see as `principal`.
    pub fn cel_value(&self) -> Value {
        json!({
            "name": &*self.name,
            "groups": &*self.groups,
            "claims": &self.claims.0,
            "issuer": self.issuer.as_deref().unwrap_or(""),
            "subject": &*self.subject,
            "scopes": &*self.scopes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_subject_at_two_issuers_is_two_principals() {
        let a = Principal::from_token("https://a.example", "alice", vec![], vec![], Map::new());
        let b = Principal::from_token("https://b.example", "alice", vec![], vec![], Map::new());
        let key = Principal::new("alice", vec![]);
        assert_ne!(a.name, b.name);
        assert_ne!(a.name, key.name);
        assert_eq!(&*a.subject, "alice");
        assert_eq!(a.cel_value()["issuer"], "https://a.example");
    }

    /// Every request starts as the one shared anonymous caller: a caller
    /// made from it is a new identity, and the shared one is left as it was.
    #[test]
    fn a_caller_made_from_a_shared_one_leaves_it_unchanged() {
        let shared = Principal::anonymous();
        let scoped = Principal::anonymous().with_scopes(vec!["tools:call".into()]);
        let claimed = Principal::anonymous()
            .with_claims(Map::from_iter([("tenant".to_owned(), Value::from("acme"))]));
        assert!(Principal::anonymous().scopes.is_empty() && shared.scopes.is_empty());
        assert!(Principal::anonymous().claims.0.is_empty());
        assert_eq!(&*scoped.scopes, ["tools:call".to_owned()]);
        assert_eq!(claimed.claims.0["tenant"], "acme");
        assert_eq!(&*scoped.name, "anonymous");
        assert_eq!(shared, Principal::new("anonymous", vec![]));
    }
}
