//! Who is calling: the identity an authentication step establishes and every
//! layer above it uses (pool keys, requestState binding, policy rules).

use std::sync::Arc;

use serde_json::{Map, Value};

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The name sessions, audit records and requestState are bound to.
    pub name: Arc<str>,
    pub groups: Arc<[String]>,
    /// What the credential said about the caller (a token's claims; empty for API keys),
    /// visible to CEL rules as `principal.claims`.
    pub claims: Arc<Claims>,
}

/// A credential's claims.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Claims(pub Map<String, Value>);

impl Principal {
    pub fn new(name: &str, groups: Vec<String>) -> Self {
        Self {
            name: Arc::from(name),
            groups: Arc::from(groups),
            claims: Arc::new(Claims::default()),
        }
    }

    pub fn anonymous() -> Self {
        Self::new("anonymous", Vec::new())
    }
}
