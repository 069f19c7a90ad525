//! Who is calling: an [`Authenticator`] turns a request's credentials into a
//! [`Principal`]. Static API keys (only their SHA-256 is configured) map to a
//! principal name and groups; with no `[auth]` section every caller is
//! `anonymous`. With `[auth.oauth]`, bearer JWTs are validated by
//! [`super::oauth`] beside the API keys. Authentication is async: the JWKS
//! may have to be fetched.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use http::{HeaderMap, HeaderValue, header};
use sha2::{Digest, Sha256};

use super::oauth::{self, OAuth, OAuthError};
use crate::config::{AuthConfig, Config};
use crate::protocol::{IntoReject, Principal, Reason, Reject};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing `Authorization: Bearer` credentials")]
    Missing,
    #[error("the presented API key is not valid")]
    Invalid,
    /// A bearer JWT that does not validate (the text says why; it names no secret).
    #[error("the access token is not valid: {0}")]
    InvalidToken(String),
    #[error("the access token has expired")]
    TokenExpired,
    #[error("the access token was not issued for this resource (audience)")]
    WrongAudience,
    /// The scopes the request needs, all of them (spec: one challenge names every scope).
    #[error("the access token lacks the scopes this request needs: {}", .0.join(" "))]
    InsufficientScope(Vec<String>),
}

impl IntoReject for AuthError {
    fn into_reject(self) -> Reject {
        let reason = match &self {
            AuthError::Missing => Reason::Unauthenticated,
            AuthError::Invalid => Reason::InvalidCredentials,
            AuthError::InvalidToken(_) => Reason::InvalidToken,
            AuthError::TokenExpired => Reason::TokenExpired,
            AuthError::WrongAudience => Reason::WrongAudience,
            AuthError::InsufficientScope(_) => Reason::InsufficientScope,
        };
        let reject = Reject::new(reason, self.to_string());
        match self {
            AuthError::InsufficientScope(scopes) => reject.with("scopes", scopes),
            _ => reject,
        }
    }
}

/// The `WWW-Authenticate` challenge sent with every 401 when no OAuth is configured.
pub const CHALLENGE: &str = "Bearer realm=\"redmark\"";

/// Establishes who sent a request.
#[async_trait::async_trait]
pub trait Authenticator: Send + Sync {
    /// `route` is the path of the route the request was sent to (its audience differs).
    async fn authenticate(&self, route: &str, headers: &HeaderMap) -> Result<Principal, AuthError>;

    /// True when every caller is the same anonymous principal (results may be cached publicly).
    fn is_anonymous(&self) -> bool {
        false
    }

    /// The `WWW-Authenticate` value that goes with `error` on `route`.
    fn challenge(&self, _route: &str, _error: &AuthError) -> HeaderValue {
        HeaderValue::from_static(CHALLENGE)
    }

    /// Scopes every request on `route` needs (`[auth.oauth] scopes`).
    fn required_scopes(&self, _route: &str) -> &[String] {
        &[]
    }

    /// The RFC 9728 document served at `path` (a `/.well-known/oauth-protected-resource…` path).
    fn resource_metadata(&self, _path: &str) -> Option<serde_json::Value> {
        None
    }
}

/// No `[auth]`: everyone is `anonymous`.
pub struct Anonymous;

#[async_trait::async_trait]
impl Authenticator for Anonymous {
    async fn authenticate(&self, _: &str, _: &HeaderMap) -> Result<Principal, AuthError> {
        Ok(Principal::anonymous())
    }

    fn is_anonymous(&self) -> bool {
        true
    }
}

/// `[[auth.api_key]]`: bearer keys looked up by their SHA-256.
pub struct ApiKeys(HashMap<[u8; 32], Principal>);

impl ApiKeys {
    /// Keys whose digest is not 64 hex digits were refused by the config check.
    pub fn from_config(auth: &AuthConfig) -> Self {
        let keys = auth
            .api_key
            .iter()
            .filter_map(|k| {
                let k = k.get_ref();
                let digest: [u8; 32] = hex::decode(&k.sha256).ok()?.try_into().ok()?;
                Some((
                    digest,
                    Principal::new(&k.principal, k.groups.clone()).with_scopes(k.scopes.clone()),
                ))
            })
            .collect();
        Self(keys)
    }

    fn lookup(&self, token: &str) -> Result<Principal, AuthError> {
        // Looking up the digest, not the key, keeps the comparison independent
        // of how much of a guessed key is right.
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        self.0.get(&digest).cloned().ok_or(AuthError::Invalid)
    }
}

/// The token of an `Authorization: Bearer` header (RFC 6750 §2.1).
pub fn bearer(headers: &HeaderMap) -> Result<&str, AuthError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or(AuthError::Missing)?;
    let (scheme, token) = value.split_once(' ').ok_or(AuthError::Missing)?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(AuthError::Missing);
    }
    Ok(token.trim())
}

#[async_trait::async_trait]
impl Authenticator for ApiKeys {
    async fn authenticate(&self, _: &str, headers: &HeaderMap) -> Result<Principal, AuthError> {
        self.lookup(bearer(headers)?)
    }
}

/// `[auth]` with `[auth.oauth]`: bearer JWTs, and API keys beside them. A
/// token is taken for a JWT by its shape (three base64url parts, the first a
/// JSON object with `alg`); anything else is looked up as an API key.
pub struct KeysAndTokens {
    keys: ApiKeys,
    oauth: OAuth,
}

#[async_trait::async_trait]
impl Authenticator for KeysAndTokens {
    async fn authenticate(&self, route: &str, headers: &HeaderMap) -> Result<Principal, AuthError> {
        let token = bearer(headers)?;
        if oauth::looks_like_jwt(token) {
            self.oauth.validate(route, token).await
        } else if self.keys.0.is_empty() {
            Err(AuthError::InvalidToken("not a JWT".into()))
        } else {
            self.keys.lookup(token)
        }
    }

    fn challenge(&self, route: &str, error: &AuthError) -> HeaderValue {
        self.oauth.challenge(route, error)
    }

    fn required_scopes(&self, route: &str) -> &[String] {
        self.oauth.required_scopes(route)
    }

    fn resource_metadata(&self, path: &str) -> Option<serde_json::Value> {
        self.oauth.resource_metadata(path)
    }
}

/// The authenticator `[auth]` describes. `local_addr` is the bound client
/// listener: with no `public_url`, a loopback listener is the routes' origin.
pub fn from_config(
    config: &Config,
    local_addr: Option<SocketAddr>,
) -> Result<Arc<dyn Authenticator>, OAuthError> {
    let Some(auth) = config.auth.as_ref() else {
        return Ok(Arc::new(Anonymous));
    };
    let keys = ApiKeys::from_config(auth);
    match &auth.oauth {
        None => Ok(Arc::new(keys)),
        Some(o) => Ok(Arc::new(KeysAndTokens {
            keys,
            oauth: OAuth::from_config(o.get_ref(), config, local_addr)?,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ApiKeyConfig, AuthConfig, key_digest_hex};

    fn auth() -> ApiKeys {
        let key = ApiKeyConfig {
            sha256: key_digest_hex("s3cret"),
            principal: "alice".into(),
            groups: vec!["facilities".into()],
            scopes: vec![],
        };
        ApiKeys::from_config(&AuthConfig {
            api_key: vec![toml::Spanned::new(0..0, key)],
            oauth: None,
        })
    }

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        h
    }

    #[tokio::test]
    async fn maps_key_to_principal() {
        let p = auth()
            .authenticate("/mcp", &headers("Bearer s3cret"))
            .await
            .unwrap();
        assert_eq!(&*p.name, "alice");
        assert_eq!(&p.groups[..], ["facilities".to_string()]);
        let lower = auth().authenticate("/mcp", &headers("bearer s3cret")).await;
        assert_eq!(lower.unwrap().name, p.name);
    }

    #[tokio::test]
    async fn refuses_missing_and_wrong_keys() {
        let a = auth();
        assert_eq!(
            a.authenticate("/mcp", &HeaderMap::new()).await,
            Err(AuthError::Missing)
        );
        assert_eq!(
            a.authenticate("/mcp", &headers("Basic s3cret")).await,
            Err(AuthError::Missing)
        );
        assert_eq!(
            a.authenticate("/mcp", &headers("Bearer nope")).await,
            Err(AuthError::Invalid)
        );
    }

    #[tokio::test]
    async fn no_auth_section_means_anonymous() {
        let config = crate::config::Config::parse(
            "[server]\nlisten = \"127.0.0.1:0\"\n[[route]]\nname = \"m\"\npath = \"/mcp\"\n[route.upstream]\nurl = \"http://127.0.0.1:9/mcp\"\n",
            "t.toml",
            std::path::PathBuf::from("/"),
        )
        .unwrap();
        let a = from_config(&config, None).unwrap();
        assert!(a.is_anonymous());
        let p = a.authenticate("/mcp", &HeaderMap::new()).await.unwrap();
        assert_eq!(&*p.name, "anonymous");
    }
}
