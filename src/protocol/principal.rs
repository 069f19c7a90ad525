//! Who is calling: the identity an authentication step establishes and every
//! layer above it uses (pool keys, requestState binding, policy rules).

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
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

/// Every field of an [`Identity`], borrowed, as [`Principal`] serializes.
#[derive(Serialize)]
struct WireRef<'a> {
    name: &'a str,
    issuer: Option<&'a str>,
    subject: &'a str,
    groups: &'a [String],
    scopes: &'a [String],
    claims: &'a Map<String, Value>,
}

/// Every field of an [`Identity`], as [`Principal`] deserializes: each one
/// required, `issuer` too (`null` for API keys and anonymous callers), so
/// a caller whose scopes or issuer went missing on the way is an error
/// rather than a caller with none. Unknown fields are ignored, as in the
/// sealed tokens (CHANGELOG, "Sealed tokens across versions").
#[derive(Deserialize)]
struct Wire {
    name: String,
    // `deserialize_with` makes serde require the field: a plain `Option`
    // would read a missing issuer as `None`, an API key's.
    #[serde(deserialize_with = "Option::deserialize")]
    issuer: Option<String>,
    subject: String,
    groups: Vec<String>,
    scopes: Vec<String>,
    claims: Map<String, Value>,
}

/// The whole identity, every field named: what one replica tells another
/// about the caller of a forwarded request (`front::cluster`).
impl Serialize for Principal {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireRef {
            name: &self.name,
            issuer: self.issuer.as_deref(),
            subject: &self.subject,
            groups: &self.groups,
            scopes: &self.scopes,
            claims: &self.claims.0,
        }
        .serialize(serializer)
    }
}

/// A caller exactly as serialized. Whoever reads one trusts its source as
/// it would an authentication step: redmark reads one only from a forward
/// the cluster secret signed (`front::cluster`).
impl<'de> Deserialize<'de> for Principal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let w = Wire::deserialize(deserializer)?;
        Ok(Self(Arc::new(Identity {
            name: Arc::from(w.name),
            groups: Arc::from(w.groups),
            claims: Arc::new(Claims(w.claims)),
            issuer: w.issuer.map(Arc::from),
            subject: Arc::from(w.subject),
            scopes: Arc::from(w.scopes),
        })))
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

    /// Every field survives serde, an OAuth caller's issuer and subject
    /// and an API key's absent issuer alike.
    #[test]
    fn serde_round_trips_every_field() {
        let claims = Map::from_iter([("tenant".to_owned(), json!({"id": 7, "tags": ["a"]}))]);
        let token = Principal::from_token(
            "https://idp.example",
            "alice",
            vec!["facilities".into()],
            vec!["capped".into(), "tools:call".into()],
            claims,
        );
        let key = Principal::new("bob", vec!["ops".into()]).with_scopes(vec!["capped".into()]);
        for p in [token, key, Principal::anonymous()] {
            let text = serde_json::to_string(&p).unwrap();
            let back: Principal = serde_json::from_str(&text).unwrap();
            assert_eq!(back, p, "{text}");
            assert_eq!(back.cel_value(), p.cel_value(), "{text}");
        }
    }

    /// A field missing is an error, `issuer` included: never read as empty.
    #[test]
    fn a_serialized_caller_without_a_field_is_refused() {
        let p = Principal::from_token("https://idp", "al", vec![], vec!["s".into()], Map::new());
        let whole = serde_json::to_value(&p).unwrap();
        for field in ["name", "issuer", "subject", "groups", "scopes", "claims"] {
            let mut cut = whole.clone();
            cut.as_object_mut().unwrap().remove(field);
            let err = serde_json::from_value::<Principal>(cut).unwrap_err();
            assert!(
                err.to_string()
                    .contains(&format!("missing field `{field}`")),
                "{field}: {err}"
            );
        }
        let mut extra = whole;
        extra["later"] = json!(true);
        assert_eq!(serde_json::from_value::<Principal>(extra).unwrap(), p);
    }
}
