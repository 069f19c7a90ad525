//! The issuer's signing keys: its metadata found (RFC 8414, then OpenID
//! Connect discovery), its JWKS fetched at start and kept, and fetched again
//! when a token names a `kid` it does not have, at most once per
//! `jwks_min_refresh`, so an IdP's key rotation needs no restart and a flood
//! of made-up `kid`s cannot make redmark flood the IdP.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use tokio::time::Instant;

use crate::config::is_loopback_url;

/// Largest metadata or JWKS document read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// Most keys kept from one JWKS.
const MAX_KEYS: usize = 64;
/// Limit on one metadata or JWKS fetch.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// One verification key.
#[derive(Clone)]
pub struct Key {
    pub decoding: DecodingKey,
    /// The JWK's own `alg`, when it names one: a token must use exactly it.
    pub alg: Option<Algorithm>,
}

#[derive(Default)]
struct KeySet {
    by_kid: HashMap<String, Key>,
    /// Keys without a `kid`: used only by tokens without one, and only when alone.
    unnamed: Vec<Key>,
}

impl KeySet {
    fn find(&self, kid: Option<&str>) -> Option<Key> {
        match kid {
            Some(kid) => self.by_kid.get(kid).cloned(),
            None if self.len() == 1 => self
                .unnamed
                .first()
                .or_else(|| self.by_kid.values().next())
                .cloned(),
            None => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("GET {url}: {why}")]
    Http { url: String, why: String },
    #[error("{0}")]
    Document(String),
}

struct FetchState {
    last_attempt: Option<Instant>,
    /// Found by discovery, kept for later fetches.
    jwks_uri: Option<String>,
}

/// The keys of one issuer.
pub struct KeyStore {
    issuer: String,
    http: reqwest::Client,
    min_refresh: Duration,
    keys: RwLock<Arc<KeySet>>,
    fetch: tokio::sync::Mutex<FetchState>,
}

impl KeyStore {
    pub fn new(issuer: &str, jwks_uri: Option<String>, min_refresh: Duration) -> Arc<Self> {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            // A redirect could lead off the issuer's https origin.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Arc::new(Self {
            issuer: issuer.to_owned(),
            http,
            min_refresh,
            keys: RwLock::new(Arc::new(KeySet::default())),
            fetch: tokio::sync::Mutex::new(FetchState {
                last_attempt: None,
                jwks_uri,
            }),
        })
    }

    /// Fetches the keys now, in the background (at start).
    pub fn prefetch(self: &Arc<Self>) {
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let me = self.clone();
            rt.spawn(async move { me.refresh().await });
        }
    }

    fn current(&self) -> Arc<KeySet> {
        self.keys
            .read()
            .map(|k| k.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// The key a token names; an unknown `kid` refetches the JWKS (rate-limited).
    pub async fn find(&self, kid: Option<&str>) -> Option<Key> {
        if let Some(k) = self.current().find(kid) {
            return Some(k);
        }
        self.refresh().await;
        self.current().find(kid)
    }

    /// Fetches the JWKS unless a fetch was tried within `min_refresh`.
    /// Concurrent callers wait for the one fetch in flight.
    async fn refresh(&self) {
        let mut state = self.fetch.lock().await;
        if state
            .last_attempt
            .is_some_and(|t| t.elapsed() < self.min_refresh)
        {
            return;
        }
        state.last_attempt = Some(Instant::now());
        match self.fetch_keys(&mut state).await {
            Ok(set) => {
                tracing::info!(issuer = %self.issuer, keys = set.len(), "JWKS fetched");
                let set = Arc::new(set);
                match self.keys.write() {
                    Ok(mut k) => *k = set,
                    Err(e) => *e.into_inner() = set,
                }
            }
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, error = %e, "JWKS fetch failed; keeping the keys held");
            }
        }
    }

    async fn fetch_keys(&self, state: &mut FetchState) -> Result<KeySet, FetchError> {
        let uri = match &state.jwks_uri {
            Some(u) => u.clone(),
            None => {
                let u = self.discover().await?;
                state.jwks_uri = Some(u.clone());
                u
            }
        };
        let doc = self.get_json(&uri).await?.ok_or_else(|| FetchError::Http {
            url: uri.clone(),
            why: "not found".into(),
        })?;
        let read = read_jwks(doc).map_err(|e| FetchError::Document(format!("{uri}: {e}")))?;
        if !read.skipped.is_empty() {
            let skipped: Vec<String> = read.skipped.iter().map(ToString::to_string).collect();
            tracing::warn!(issuer = %self.issuer, jwks_uri = %uri, skipped = ?skipped, kept = read.len(), "JWKS members skipped (RFC 7517 §5); the others are used");
        }
        if read.is_empty() && !read.skipped.is_empty() {
            // Nothing usable at all looks like a broken document, not a
            // revocation of every key: the keys held stay, as for a failed fetch.
            return Err(FetchError::Document(format!(
                "{uri}: no member of the JWK set is a usable signature key"
            )));
        }
        Ok(read.keys)
    }

    /// The `jwks_uri` of the issuer's metadata: RFC 8414 first, then OpenID
    /// Connect discovery (spec 2026-07-28 basic/authorization/
    /// authorization-server-discovery.mdx: the same order clients use).
    async fn discover(&self) -> Result<String, FetchError> {
        let issuer = url::Url::parse(&self.issuer)
            .map_err(|e| FetchError::Document(format!("issuer is not a URL: {e}")))?;
        let origin = issuer.origin().ascii_serialization();
        let path = issuer.path().trim_end_matches('/');
        let mut candidates = vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
        ];
        if !path.is_empty() {
            candidates.push(format!(
                "{}/.well-known/openid-configuration",
                self.issuer.trim_end_matches('/')
            ));
        }
        let mut tried = Vec::new();
        for url in candidates {
            let Some(doc) = self.get_json(&url).await? else {
                tried.push(url);
                continue;
            };
            // RFC 8414 §3.3: the metadata's issuer MUST be identical to the
            // issuer the URL was made from, or the metadata is not used.
            if doc.get("issuer").and_then(Value::as_str) != Some(self.issuer.as_str()) {
                return Err(FetchError::Document(format!(
                    "{url} names issuer {}, not {}",
                    doc.get("issuer").unwrap_or(&Value::Null),
                    self.issuer
                )));
            }
            let jwks = doc
                .get("jwks_uri")
                .and_then(Value::as_str)
                .ok_or_else(|| FetchError::Document(format!("{url} has no jwks_uri")))?;
            let parsed = url::Url::parse(jwks)
                .map_err(|e| FetchError::Document(format!("jwks_uri `{jwks}`: {e}")))?;
            if parsed.scheme() != "https"
                && !(parsed.scheme() == "http" && is_loopback_url(&parsed))
            {
                return Err(FetchError::Document(format!(
                    "jwks_uri `{jwks}` must be https (http only for loopback)"
                )));
            }
            return Ok(jwks.to_owned());
        }
        Err(FetchError::Document(format!(
            "no authorization server metadata at {}",
            tried.join(", ")
        )))
    }

    /// A JSON document; `None` on 404.
    async fn get_json(&self, url: &str) -> Result<Option<Value>, FetchError> {
        let http_err = |why: String| FetchError::Http {
            url: url.to_owned(),
            why,
        };
        let resp = self
            .http
            .get(url)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| http_err(e.to_string()))?;
        if resp.status() == http::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !resp.status().is_success() {
            return Err(http_err(format!("status {}", resp.status())));
        }
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| http_err(e.to_string()))?;
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(http_err(format!("larger than {MAX_DOCUMENT_BYTES} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| http_err(format!("not JSON: {e}")))
    }

    #[cfg(test)]
    pub fn with_keys(keys: Vec<(Option<&str>, Key)>) -> Arc<Self> {
        let store = Self::new("https://idp.test", None, Duration::from_secs(3600));
        let mut set = KeySet::default();
        for (kid, key) in keys {
            match kid {
                Some(k) => {
                    set.by_kid.insert(k.to_owned(), key);
                }
                None => set.unnamed.push(key),
            }
        }
        *store
            .keys
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(set);
        if let Ok(mut s) = store.fetch.try_lock() {
            s.last_attempt = Some(Instant::now());
        }
        store
    }
}

/// Why a document is not a JWK set at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    /// RFC 7517 §5.1: "keys" is REQUIRED, and its value is an array of JWKs.
    #[error("not a JWK set: no `keys` array")]
    NoKeys,
}

/// A member of a JWK set that was not used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedKey {
    /// Its place in `keys`, from 0.
    pub index: usize,
    /// Its `kid` as sent (JSON, cut to 64 characters), when it has one.
    pub kid: Option<String>,
    pub why: String,
}

impl std::fmt::Display for SkippedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "keys[{}]", self.index)?;
        if let Some(kid) = &self.kid {
            write!(f, " (kid {kid})")?;
        }
        write!(f, ": {}", self.why)
    }
}

/// What a JWK set yields: its usable signature keys, and the members
/// skipped because they could not be read or used.
#[derive(Default)]
pub struct Jwks {
    keys: KeySet,
    pub skipped: Vec<SkippedKey>,
}

impl Jwks {
    /// The `kid`s of the keys kept, sorted (keys without one are not listed).
    pub fn kids(&self) -> Vec<&str> {
        let mut kids: Vec<&str> = self.keys.by_kid.keys().map(String::as_str).collect();
        kids.sort_unstable();
        kids
    }

    /// How many keys were kept, with a `kid` or without.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl KeySet {
    fn len(&self) -> usize {
        self.by_kid.len() + self.unnamed.len()
    }
}

/// Reads a JWK set member by member. RFC 7517 §5: "Implementations SHOULD
/// ignore JWKs within a JWK Set that use "kty" (key type) values that are
/// not understood by them, that are missing required members, or for which
/// values are out of the supported ranges." So one member redmark cannot
/// read (a numeric `kid`, an unknown `kty`, a key that does not decode) is
/// skipped and named in [`Jwks::skipped`]; it no longer discards the whole
/// set, which kept a removed key trusted and refused the new one (issue 42).
/// Only a document without a `keys` array is not a set at all.
pub fn read_jwks(doc: Value) -> Result<Jwks, JwksError> {
    let Value::Object(mut doc) = doc else {
        return Err(JwksError::NoKeys);
    };
    let Some(Value::Array(members)) = doc.remove("keys") else {
        return Err(JwksError::NoKeys);
    };
    let mut out = Jwks::default();
    for (index, member) in members.into_iter().take(MAX_KEYS).enumerate() {
        let kid = member.get("kid").map(|k| match k {
            Value::String(s) => s.chars().take(64).collect(),
            other => other.to_string().chars().take(64).collect(),
        });
        let skip = |why: String| SkippedKey {
            index,
            kid: kid.clone(),
            why,
        };
        let jwk: Jwk = match serde_json::from_value(member) {
            Ok(jwk) => jwk,
            Err(e) => {
                out.skipped
                    .push(skip(format!("not a JWK redmark reads: {e}")));
                continue;
            }
        };
        match key_of(&jwk) {
            Ok(Some(key)) => match &jwk.common.key_id {
                Some(kid) => {
                    out.keys.by_kid.insert(kid.clone(), key);
                }
                None => out.keys.unnamed.push(key),
            },
            // An encryption or symmetric key: not for verifying tokens, by design.
            Ok(None) => {}
            Err(why) => out.skipped.push(skip(why)),
        }
    }
    Ok(out)
}

/// The verification key of one JWK. Encryption keys and symmetric (`oct`)
/// keys give `None`, the latter so a public key can never serve as an HMAC
/// secret; a key of a type not understood, one that does not decode, or one
/// that names an `alg` that is not a signature algorithm, is an error that
/// says why.
fn key_of(jwk: &Jwk) -> Result<Option<Key>, String> {
    if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
        return Ok(None);
    }
    match jwk.algorithm {
        AlgorithmParameters::OctetKey(_) => return Ok(None),
        AlgorithmParameters::Other(_) => return Err("key type (`kty`) not understood".into()),
        _ => {}
    }
    let decoding = DecodingKey::from_jwk(jwk).map_err(|e| format!("key does not decode: {e}"))?;
    // A JWK `alg` that is not a signature algorithm (`RSA-OAEP`) leaves the key unusable.
    let alg = match jwk.common.key_algorithm {
        None => None,
        Some(a) => Some(
            serde_json::to_value(a)
                .ok()
                .and_then(|v| v.as_str().and_then(|s| Algorithm::from_str(s).ok()))
                .ok_or_else(|| format!("`alg` {a:?} is not a signature algorithm"))?,
        ),
    };
    Ok(Some(Key { decoding, alg }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
    use base64::Engine;
    use serde_json::json;

    fn ed25519(kid: Value) -> Value {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
        json!({"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig"})
    }

    /// Issue 42: one member redmark cannot read (a numeric `kid`) discarded
    /// the whole refreshed set. Each member now stands alone (RFC 7517 §5).
    #[test]
    fn a_bad_member_is_skipped_and_named_and_the_others_are_kept() {
        let doc = json!({"keys": [
            ed25519(json!("old")),
            ed25519(json!(42)),
            {"kty": "XYZ", "kid": "strange"},
            {"kty": "OKP", "crv": "Ed25519", "x": "not base64 !", "kid": "broken"},
            {"kty": "RSA", "kid": "enc", "use": "enc", "n": "AQAB", "e": "AQAB"},
            ed25519(json!("new")),
        ]});
        let read = read_jwks(doc).unwrap();
        assert_eq!(read.kids(), vec!["new", "old"]);
        let skipped: Vec<(usize, Option<&str>)> = read
            .skipped
            .iter()
            .map(|s| (s.index, s.kid.as_deref()))
            .collect();
        assert_eq!(
            skipped,
            vec![(1, Some("42")), (2, Some("strange")), (3, Some("broken"))],
            "an encryption key is left out by design, not reported: {:?}",
            read.skipped
        );
        assert!(
            read.skipped[0]
                .to_string()
                .starts_with("keys[1] (kid 42): ")
        );
    }

    #[test]
    fn a_document_without_a_keys_array_is_not_a_set() {
        for doc in [json!({}), json!({"keys": {}}), json!([]), json!("keys")] {
            assert_eq!(read_jwks(doc).err(), Some(JwksError::NoKeys));
        }
        assert!(read_jwks(json!({"keys": []})).unwrap().is_empty());
    }
}
