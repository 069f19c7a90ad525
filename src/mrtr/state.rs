//! `requestState`: sealed with HMAC-SHA256 under a key id, opened with the
//! checks in a fixed order, each failure with its own reason.
//!
//! spec 2026-07-28 basic/patterns/mrtr.mdx "Server Requirements": "servers
//! MUST treat `requestState` as an attacker-controlled input. If
//! `requestState` influences authorization, resource access, or business
//! logic, servers MUST protect its integrity (e.g. HMAC or AEAD) and MUST
//! reject state that fails verification."
//!
//! Wire form: `{key id}.{base64url(claims JSON)}.{base64url(HMAC over "{key id}.{claims}")}`.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::protocol::{IntoReject, Reason, Reject};

type HmacSha256 = Hmac<Sha256>;

/// Largest `requestState` accepted; anything longer is refused before any work.
pub const MAX_STATE_LEN: usize = 16 * 1024;

/// What a sealed state says. Short field names keep the token small.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claims {
    /// Format version.
    pub v: u8,
    /// Operation id (128 random bits, hex).
    pub op: String,
    /// The node holding the operation.
    pub node: String,
    /// Hex SHA-256 of the principal (route-scoped).
    pub pr: String,
    /// Expiry, seconds since the Unix epoch.
    pub exp: u64,
    /// Hex SHA-256 of method, route, name or URI and canonical arguments.
    pub rq: String,
    /// Round this state answers.
    pub rd: u32,
    /// `hold` or `replay`.
    pub m: String,
    /// W3C traceparent of the operation's root span, when traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tc: Option<String>,
}

/// Why a state is refused, in the order the checks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("requestState is malformed")]
    Malformed,
    #[error("requestState was sealed under a key this gateway does not have")]
    UnknownKey,
    #[error("requestState failed signature verification")]
    BadSignature,
    #[error("requestState has expired")]
    Expired,
    #[error("requestState belongs to another principal")]
    WrongPrincipal,
    #[error("requestState belongs to another request (method, target or arguments differ)")]
    WrongRequest,
}

impl StateError {
    pub fn reason(self) -> Reason {
        match self {
            StateError::Malformed => Reason::StateMalformed,
            StateError::UnknownKey => Reason::StateUnknownKey,
            StateError::BadSignature => Reason::StateBadSignature,
            StateError::Expired => Reason::StateExpired,
            StateError::WrongPrincipal => Reason::StateWrongPrincipal,
            StateError::WrongRequest => Reason::StateWrongRequest,
        }
    }
}

impl IntoReject for StateError {
    fn into_reject(self) -> Reject {
        Reject::new(self.reason(), self.to_string())
    }
}

/// One HMAC key.
#[derive(Clone)]
pub struct Key {
    pub id: String,
    secret: Vec<u8>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Key {
    pub fn new(id: impl Into<String>, secret: Vec<u8>) -> Self {
        Self {
            id: id.into(),
            secret,
        }
    }

    fn mac(&self, signed: &[u8]) -> HmacSha256 {
        // HMAC accepts keys of any length.
        let mut mac = HmacSha256::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        mac.update(signed);
        mac
    }
}

/// The signing key and every key still accepted for verification (rotation).
#[derive(Debug, Clone)]
pub struct Keyring {
    signing: Key,
    verifying: HashMap<String, Key>,
}

pub use crate::config::{decode_secret, generate_secret};

/// The keyring in force, replaced whole by a config reload (a verification
/// key added, the signing key switched): a state is sealed with the signing
/// key in force when it is sealed, and opened with the keys in force when
/// its retry arrives, so operations in flight go on.
#[derive(Debug)]
pub struct SharedKeyring(std::sync::RwLock<std::sync::Arc<Keyring>>);

impl SharedKeyring {
    pub fn new(keys: Keyring) -> Self {
        Self(std::sync::RwLock::new(std::sync::Arc::new(keys)))
    }

    pub fn current(&self) -> std::sync::Arc<Keyring> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn replace(&self, keys: Keyring) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = std::sync::Arc::new(keys);
    }

    pub fn seal(&self, claims: &Claims) -> String {
        self.current().seal(claims)
    }

    pub fn open(&self, token: &str, now: SystemTime) -> Result<Claims, StateError> {
        self.current().open(token, now)
    }

    /// The id of the signing key in force.
    pub fn signing_id(&self) -> String {
        self.current().signing.id.clone()
    }
}

impl Keyring {
    pub fn new(signing: Key, others: Vec<Key>) -> Self {
        let mut verifying: HashMap<String, Key> =
            others.into_iter().map(|k| (k.id.clone(), k)).collect();
        verifying.insert(signing.id.clone(), signing.clone());
        Self { signing, verifying }
    }

    /// This keyring, still verifying `old`'s signing key when that was the
    /// per-process one: states it sealed stay valid after a reload that
    /// configures keys for the first time.
    #[must_use]
    pub fn keeping_ephemeral(mut self, old: &Keyring) -> Self {
        if old.signing.id.starts_with("ephemeral-") {
            self.verifying
                .entry(old.signing.id.clone())
                .or_insert_with(|| old.signing.clone());
        }
        self
    }

    /// A random key that lives as long as this process.
    pub fn ephemeral() -> Self {
        Self::new(
            Key::new(
                format!("ephemeral-{}", hex::encode(rand::random::<[u8; 4]>())),
                rand::random::<[u8; 32]>().to_vec(),
            ),
            Vec::new(),
        )
    }

    pub fn seal(&self, claims: &Claims) -> String {
        let payload = B64.encode(serde_json::to_vec(claims).unwrap_or_default());
        let signed = format!("{}.{payload}", self.signing.id);
        let tag = self.signing.mac(signed.as_bytes()).finalize().into_bytes();
        format!("{signed}.{}", B64.encode(tag))
    }

    /// Verifies a state's integrity and freshness; the caller checks principal and request.
    pub fn open(&self, token: &str, now: SystemTime) -> Result<Claims, StateError> {
        if token.len() > MAX_STATE_LEN {
            return Err(StateError::Malformed);
        }
        let mut parts = token.split('.');
        let (Some(kid), Some(payload), Some(tag), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(StateError::Malformed);
        };
        let tag = B64.decode(tag).map_err(|_| StateError::Malformed)?;
        let body = B64.decode(payload).map_err(|_| StateError::Malformed)?;
        if kid.is_empty() || tag.len() != 32 {
            return Err(StateError::Malformed);
        }
        let key = self.verifying.get(kid).ok_or(StateError::UnknownKey)?;
        // Decoding before verifying only rejects what could never have been
        // sealed; every byte that decodes is covered by the MAC.
        key.mac(format!("{kid}.{payload}").as_bytes())
            .verify_slice(&tag)
            .map_err(|_| StateError::BadSignature)?;
        let claims: Claims = serde_json::from_slice(&body).map_err(|_| StateError::Malformed)?;
        if claims.v != 1 {
            return Err(StateError::Malformed);
        }
        let now = now
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs();
        if now >= claims.exp {
            return Err(StateError::Expired);
        }
        Ok(claims)
    }
}

/// Hex SHA-256 identifying a principal on a route.
pub fn principal_digest(route: &str, principal: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"redmark-principal\0");
    h.update(route.as_bytes());
    h.update(b"\0");
    h.update(principal.as_bytes());
    hex::encode(h.finalize())
}

/// Hex SHA-256 identifying a request: method, route, tool name or URI, and canonical arguments.
pub fn request_digest(
    route: &str,
    method: &str,
    params: &serde_json::Map<String, Value>,
) -> String {
    let target = params
        .get("name")
        .or_else(|| params.get("uri"))
        .cloned()
        .unwrap_or(Value::Null);
    let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
    let mut h = Sha256::new();
    h.update(b"redmark-request\0");
    for part in [route, method] {
        h.update(part.as_bytes());
        h.update(b"\0");
    }
    h.update(canonical_json(&target).as_bytes());
    h.update(b"\0");
    h.update(canonical_json(&arguments).as_bytes());
    hex::encode(h.finalize())
}

/// JSON with object keys sorted at every level, so equal arguments digest equally.
pub fn canonical_json(value: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(o) => {
                let mut keys: Vec<&String> = o.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    write(&o[k.as_str()], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, item) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
