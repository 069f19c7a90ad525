//! Who is calling: an [`Authenticator`] turns a request's credentials into a
//! [`Principal`]. Static API keys (only their SHA-256 is configured) map to a
//! principal name and groups; with no `[auth]` section every caller is
//! `anonymous`. Authentication is async, so an authenticator that must fetch
//! (a JWKS for bearer JWTs) fits the same step.

use std::collections::HashMap;

use http::{HeaderMap, header};
use sha2::{Digest, Sha256};

use crate::config::AuthConfig;
use crate::protocol::{IntoReject, Principal, Reason, Reject};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing `Authorization: Bearer` credentials")]
    Missing,
    #[error("the presented API key is not valid")]
    Invalid,
}

impl IntoReject for AuthError {
    fn into_reject(self) -> Reject {
        let reason = match self {
            AuthError::Missing => Reason::Unauthenticated,
            AuthError::Invalid => Reason::InvalidCredentials,
        };
        Reject::new(reason, self.to_string())
    }
}

/// The `WWW-Authenticate` challenge sent with every 401.
pub const CHALLENGE: &str = "Bearer realm=\"redmark\"";

/// Establishes who sent a request.
#[async_trait::async_trait]
pub trait Authenticator: Send + Sync {
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthError>;

    /// True when every caller is the same anonymous principal (results may be cached publicly).
    fn is_anonymous(&self) -> bool {
        false
    }
}

/// No `[auth]`: everyone is `anonymous`.
pub struct Anonymous;

#[async_trait::async_trait]
impl Authenticator for Anonymous {
    async fn authenticate(&self, _: &HeaderMap) -> Result<Principal, AuthError> {
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
                Some((digest, Principal::new(&k.principal, k.groups.clone())))
            })
            .collect();
        Self(keys)
    }
}

#[async_trait::async_trait]
impl Authenticator for ApiKeys {
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthError> {
        let value = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or(AuthError::Missing)?;
        let (scheme, token) = value.split_once(' ').ok_or(AuthError::Missing)?;
        if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
            return Err(AuthError::Missing);
        }
        // Looking up the digest, not the key, keeps the comparison independent
        // of how much of a guessed key is right.
        let digest: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
        self.0.get(&digest).cloned().ok_or(AuthError::Invalid)
    }
}

/// The authenticator `[auth]` describes.
pub fn from_config(auth: Option<&AuthConfig>) -> std::sync::Arc<dyn Authenticator> {
    match auth {
        None => std::sync::Arc::new(Anonymous),
        Some(a) => std::sync::Arc::new(ApiKeys::from_config(a)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ApiKeyConfig, AuthConfig, key_digest_hex};
    use http::HeaderValue;

    fn auth() -> ApiKeys {
        let key = ApiKeyConfig {
            sha256: key_digest_hex("s3cret"),
            principal: "alice".into(),
            groups: vec!["facilities".into()],
        };
        ApiKeys::from_config(&AuthConfig {
            api_key: vec![toml::Spanned::new(0..0, key)],
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
            .authenticate(&headers("Bearer s3cret"))
            .await
            .unwrap();
        assert_eq!(&*p.name, "alice");
        assert_eq!(&p.groups[..], ["facilities".to_string()]);
        let lower = auth().authenticate(&headers("bearer s3cret")).await;
        assert_eq!(lower.unwrap().name, p.name);
    }

    #[tokio::test]
    async fn refuses_missing_and_wrong_keys() {
        let a = auth();
        assert_eq!(
            a.authenticate(&HeaderMap::new()).await,
            Err(AuthError::Missing)
        );
        assert_eq!(
            a.authenticate(&headers("Basic s3cret")).await,
            Err(AuthError::Missing)
        );
        assert_eq!(
            a.authenticate(&headers("Bearer nope")).await,
            Err(AuthError::Invalid)
        );
    }

    #[tokio::test]
    async fn no_auth_section_means_anonymous() {
        let a = from_config(None);
        assert!(a.is_anonymous());
        let p = a.authenticate(&HeaderMap::new()).await.unwrap();
        assert_eq!(&*p.name, "anonymous");
    }
}
