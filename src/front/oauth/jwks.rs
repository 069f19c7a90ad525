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
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet, PublicKeyUse};
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
            None if self.by_kid.len() + self.unnamed.len() == 1 => self
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
                tracing::info!(issuer = %self.issuer, keys = set.by_kid.len() + set.unnamed.len(), "JWKS fetched");
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
        let set: JwkSet = serde_json::from_value(doc)
            .map_err(|e| FetchError::Document(format!("{uri} is not a JWK set: {e}")))?;
        Ok(keys_of(&set))
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

/// The signature keys of a JWK set: encryption keys and symmetric (`oct`)
/// keys are dropped, the latter so a public key can never serve as an HMAC secret.
fn keys_of(set: &JwkSet) -> KeySet {
    let mut out = KeySet::default();
    for jwk in set.keys.iter().take(MAX_KEYS) {
        if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
            continue;
        }
        if matches!(
            jwk.algorithm,
            AlgorithmParameters::OctetKey(_) | AlgorithmParameters::Other(_)
        ) {
            continue;
        }
        let Ok(decoding) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        // A JWK `alg` that is not a signature algorithm (`RSA-OAEP`) leaves the key unusable.
        let alg = match jwk.common.key_algorithm {
            None => None,
            Some(a) => match serde_json::to_value(a)
                .ok()
                .and_then(|v| v.as_str().and_then(|s| Algorithm::from_str(s).ok()))
            {
                Some(alg) => Some(alg),
                None => continue,
            },
        };
        let key = Key { decoding, alg };
        match &jwk.common.key_id {
            Some(kid) => {
                out.by_kid.insert(kid.clone(), key);
            }
            None => out.unnamed.push(key),
        }
    }
    out
}
