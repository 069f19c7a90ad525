//! `requestState`: claims sealed with XChaCha20-Poly1305 under a key id,
//! opened with the checks in a fixed order, each failure with its own reason.
//! One format for hold and replay mode; in replay mode the claims carry the
//! answers collected so far, so the seal must hide as well as bind them.
//!
//! spec 2026-07-28 basic/patterns/mrtr.mdx "Server Requirements": "servers
//! MUST treat `requestState` as an attacker-controlled input. If
//! `requestState` influences authorization, resource access, or business
//! logic, servers MUST protect its integrity (e.g. HMAC or AEAD) and MUST
//! reject state that fails verification."
//!
//! Wire form: `{key id}.{base64url(24-byte nonce || ciphertext || 16-byte tag)}`,
//! the key id (in clear, so rotation can pick the key) bound as associated data.
//! Each configured secret gives its AEAD key through HKDF-SHA256.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use chacha20poly1305::aead::{Aead, Payload};
use chacha20poly1305::{KeyInit, XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::protocol::{IntoReject, Reason, Reject};

/// Default bound on a sealed `requestState` (`[state] max_bytes`): a state
/// that would be larger ends its operation, a longer one presented is
/// refused before any work.
pub const MAX_STATE_LEN: usize = 16 * 1024;

/// The claims format this build seals and accepts.
///
/// Across versions (replicas of two versions share states mid-upgrade):
/// fields this build does not know are ignored, so a newer build may add a
/// field an older one can do without; a change an older build would misread
/// by ignoring it raises this number, and a build refuses a number above its
/// own (`state_newer_format`) rather than misread it.
pub const CLAIMS_VERSION: u8 = 2;

const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;

/// What a sealed state says. Short field names keep the token small.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Format version.
    pub v: u8,
    /// Operation id (128 random bits, hex).
    pub op: String,
    /// The node holding the operation (hold mode; in replay mode the node that sealed it).
    pub node: String,
    /// The owner's advertised internal address (`[cluster] advertise`):
    /// under the seal, so a client cannot point a forward elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
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
    /// Replay mode: the answers given so far, in the order the server asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ans: Vec<Answered>,
    /// Replay mode: the questions this round puts to the client.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ask: Vec<Asking>,
    /// Native mode: the server's own state, wrapped, and what validates the answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nat: Option<Box<Wrapped>>,
}

/// A native server's `InputRequiredResult`, as redmark's state carries it
/// between rounds: any replica can validate the retry from it alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wrapped {
    /// The server's own `requestState`, restored on the retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s: Option<String>,
    /// The questions this round asks, under the server's keys.
    pub q: Vec<WrappedAsk>,
    /// Answers already held to the policy, kept while others are asked again.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub ok: serde_json::Map<String, Value>,
    /// Questions the server asked so far in this operation (`max_questions`).
    pub n: u32,
}

/// One question of a native server: its key, the input request as the
/// client sees it (the server's, plus any red mark), the server's own
/// message, re-asks so far, when it was asked (Unix milliseconds), and the
/// fields redmark offered a remembered answer as their `default`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrappedAsk {
    pub k: String,
    pub r: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rk: u32,
    pub at: u64,
    /// Field names only: the offered values are the defaults in `r`, which
    /// the server's own schema lacked (redmark offers none where it has one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub of: Vec<String>,
    /// Fields the policy narrowed in `r` (`shape_questions`), for the audit line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nw: Vec<String>,
}

/// Mode names in [`Claims::m`].
pub const HOLD: &str = "hold";
pub const REPLAY: &str = "replay";
/// A native server's questions, relayed statelessly.
pub const NATIVE: &str = "native";

impl Claims {
    pub fn is_replay(&self) -> bool {
        self.m == REPLAY
    }

    pub fn is_native(&self) -> bool {
        self.m == NATIVE
    }

    /// The id single use is enforced on: one per round of one operation.
    pub fn round_id(&self) -> String {
        format!("{}.{}", self.op, self.rd)
    }
}

/// One answer replay mode gives again: for the question with fingerprint
/// `f` (see [`fingerprint`]), the answer `a` (already held to the policy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answered {
    pub f: String,
    pub a: Value,
}

/// One question a replay-mode round asks: its key, fingerprint, kind
/// (`elicitation`, `sampling`, `roots`; `url` for URL-mode elicitation),
/// re-asks so far and when the server asked it (Unix milliseconds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asking {
    pub k: String,
    pub f: String,
    pub kd: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rk: u32,
    pub at: u64,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Why a state is refused, in the order the checks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("requestState is longer than this gateway's bound ([state] max_bytes)")]
    TooLarge,
    #[error("requestState is malformed")]
    Malformed,
    #[error(
        "requestState was sealed by a newer redmark, in a format this one cannot read (format {0}; this one reads {CLAIMS_VERSION})"
    )]
    NewerFormat(u8),
    #[error("requestState was sealed under a key this gateway does not have")]
    UnknownKey,
    #[error("requestState failed verification (tampered, or sealed under another secret)")]
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
            StateError::TooLarge => Reason::StateTooLarge,
            StateError::Malformed => Reason::StateMalformed,
            StateError::NewerFormat(_) => Reason::StateNewerFormat,
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

/// A state that cannot be sealed within the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the requestState would be {len} bytes, more than [state] max_bytes = {max}")]
pub struct TooLarge {
    pub len: usize,
    pub max: usize,
}

/// One sealing key: its id and the AEAD key derived from its secret.
#[derive(Clone)]
pub struct Key {
    pub id: String,
    aead: [u8; 32],
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Key {
    /// A key from a configured secret (any length; `[[state.keys]]` asks at least 16 bytes).
    pub fn new(id: impl Into<String>, secret: Vec<u8>) -> Self {
        let id = id.into();
        // HKDF-SHA256 (RFC 5869): the secret is input keying material, the
        // key id is part of the info, so one secret under two ids gives two keys.
        let hkdf = hkdf::Hkdf::<Sha256>::new(Some(b"redmark requestState"), &secret);
        let mut aead = [0u8; 32];
        hkdf.expand_multi_info(&[b"xchacha20poly1305 v2\0", id.as_bytes()], &mut aead)
            .unwrap_or_else(|_| unreachable!("32 bytes is within HKDF-SHA256's output"));
        Self { id, aead }
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&self.aead.into())
    }
}

/// The signing key and every key still accepted for verification (rotation).
#[derive(Debug, Clone)]
pub struct Keyring {
    signing: Key,
    verifying: HashMap<String, Key>,
    max_len: usize,
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

    pub fn seal_bounded(&self, claims: &Claims) -> Result<String, TooLarge> {
        self.current().seal_bounded(claims)
    }

    pub fn open(&self, token: &str, now: SystemTime) -> Result<Claims, StateError> {
        self.current().open(token, now)
    }

    pub fn unseal(&self, token: &str) -> Result<Claims, StateError> {
        self.current().unseal(token)
    }

    pub fn seal_payload(&self, plain: &[u8]) -> String {
        self.current().seal_payload(plain)
    }

    pub fn open_payload(&self, token: &str) -> Result<Vec<u8>, StateError> {
        self.current().open_payload(token)
    }

    pub fn max_len(&self) -> usize {
        self.current().max_len()
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
        Self {
            signing,
            verifying,
            max_len: MAX_STATE_LEN,
        }
    }

    /// The same keys with another bound on a state's length (`[state] max_bytes`).
    #[must_use]
    pub fn with_max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len;
        self
    }

    pub fn max_len(&self) -> usize {
        self.max_len
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

    /// Seals claims, whatever their size (see [`Keyring::seal_bounded`]).
    pub fn seal(&self, claims: &Claims) -> String {
        self.seal_payload(&serde_json::to_vec(claims).unwrap_or_default())
    }

    /// Seals any bytes as a state's payload under the signing key (claims are
    /// JSON; the fuzz target seals arbitrary bytes to reach the parse behind
    /// the tag).
    pub fn seal_payload(&self, plain: &[u8]) -> String {
        // 192-bit random nonces: collisions are negligible for any number of
        // states one key will ever seal (XChaCha20's reason to exist).
        let nonce_bytes: [u8; NONCE_LEN] = rand::random();
        let nonce = XNonce::from(nonce_bytes);
        let sealed = self
            .signing
            .cipher()
            .encrypt(
                &nonce,
                Payload {
                    msg: plain,
                    aad: self.signing.id.as_bytes(),
                },
            )
            .unwrap_or_else(|_| unreachable!("XChaCha20-Poly1305 seals any length we produce"));
        let mut blob = Vec::with_capacity(NONCE_LEN + sealed.len());
        blob.extend_from_slice(&nonce_bytes);
        blob.extend_from_slice(&sealed);
        format!("{}.{}", self.signing.id, B64.encode(blob))
    }

    /// Seals claims, or says how far past the bound they would be.
    pub fn seal_bounded(&self, claims: &Claims) -> Result<String, TooLarge> {
        let token = self.seal(claims);
        if token.len() > self.max_len {
            return Err(TooLarge {
                len: token.len(),
                max: self.max_len,
            });
        }
        Ok(token)
    }

    /// Verifies a state's integrity and freshness; the caller checks principal and request.
    pub fn open(&self, token: &str, now: SystemTime) -> Result<Claims, StateError> {
        let claims = self.unseal(token)?;
        let now = now
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs();
        if now >= claims.exp {
            return Err(StateError::Expired);
        }
        Ok(claims)
    }

    /// Verifies and decrypts a state without looking at its expiry.
    pub fn unseal(&self, token: &str) -> Result<Claims, StateError> {
        let plain = self.open_payload(token)?;
        let claims: Claims = serde_json::from_slice(&plain).map_err(|_| StateError::Malformed)?;
        if claims.v > CLAIMS_VERSION {
            return Err(StateError::NewerFormat(claims.v));
        }
        if claims.v != CLAIMS_VERSION {
            return Err(StateError::Malformed);
        }
        Ok(claims)
    }

    /// Verifies and decrypts any payload sealed by [`Keyring::seal_payload`]
    /// (a state's claims, a 2025-era session id's): what it means is the
    /// caller's to check.
    pub fn open_payload(&self, token: &str) -> Result<Vec<u8>, StateError> {
        // Refused before any decoding or decryption.
        if token.len() > self.max_len {
            return Err(StateError::TooLarge);
        }
        let mut parts = token.split('.');
        let (Some(kid), Some(blob), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(StateError::Malformed);
        };
        let blob = B64.decode(blob).map_err(|_| StateError::Malformed)?;
        if kid.is_empty() || blob.len() < NONCE_LEN + TAG_LEN {
            return Err(StateError::Malformed);
        }
        let key = self.verifying.get(kid).ok_or(StateError::UnknownKey)?;
        let (nonce, sealed) = blob.split_at(NONCE_LEN);
        let nonce = XNonce::try_from(nonce).map_err(|_| StateError::Malformed)?;
        // Decoding before verifying only rejects what could never have been
        // sealed; every byte that decodes is covered by the tag.
        let plain = key
            .cipher()
            .decrypt(
                &nonce,
                Payload {
                    msg: sealed,
                    aad: kid.as_bytes(),
                },
            )
            .map_err(|_| StateError::BadSignature)?;
        Ok(plain)
    }
}

/// Hex SHA-256 identifying a question as the server asked it: method,
/// message and requested schema, as canonical JSON. A red mark redmark adds
/// is not part of it (it is computed from the server's own params).
pub fn fingerprint(method: &str, params: &Value) -> String {
    let part = |k: &str| params.get(k).cloned().unwrap_or(Value::Null);
    // Sampling asks with `messages` (and a system prompt), not a `message`.
    let subject = serde_json::json!([
        method,
        part("mode"),
        part("message"),
        part("requestedSchema"),
        part("url"),
        part("messages"),
        part("systemPrompt"),
    ]);
    let mut h = Sha256::new();
    h.update(b"redmark-question\0");
    h.update(canonical_json(&subject).as_bytes());
    crate::hex_text::lower(&h.finalize())
}
/// Hex SHA-256 identifying a principal on a route.
pub fn principal_digest(route: &str, principal: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"redmark-principal\0");
    h.update(route.as_bytes());
    h.update(b"\0");
    h.update(principal.as_bytes());
    crate::hex_text::lower(&h.finalize())
}

/// Hex SHA-256 identifying a request: method, route, tool name or URI, and canonical arguments.
/// `params` without `arguments`, which a client request keeps apart.
pub fn request_digest(
    route: &str,
    method: &str,
    params: &serde_json::Map<String, Value>,
    arguments: &Value,
) -> String {
    let target = params.get("name").or_else(|| params.get("uri"));
    request_digest_of(route, method, target.unwrap_or(&Value::Null), arguments)
}

/// [`request_digest`] of the parts: the tool name or URI, and the arguments.
pub fn request_digest_of(route: &str, method: &str, target: &Value, arguments: &Value) -> String {
    let mut h = Sha256::new();
    h.update(b"redmark-request\0");
    for part in [route, method] {
        h.update(part.as_bytes());
        h.update(b"\0");
    }
    h.update(canonical_json(target).as_bytes());
    h.update(b"\0");
    h.update(canonical_json(arguments).as_bytes());
    crate::hex_text::lower(&h.finalize())
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
                    // A `str` always serialises; no copy of the key into a `Value` first.
                    out.push_str(&serde_json::to_string(k.as_str()).unwrap_or_default());
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
