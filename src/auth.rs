//! Who is calling: static API keys (only their SHA-256 is configured) mapped
//! to a principal name and groups. With no `[auth]` section every caller is
//! `anonymous`. JWT/OIDC would be another [`Authenticator`] variant.

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderMap, StatusCode, header};
use sha2::{Digest, Sha256};

use crate::config::AuthConfig;
use crate::error::{IntoReject, Reject};
use crate::jsonrpc::code;

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    pub name: Arc<str>,
    pub groups: Arc<[String]>,
}

impl Principal {
    pub fn anonymous() -> Self {
        Self {
            name: Arc::from("anonymous"),
            groups: Arc::from(Vec::new()),
        }
    }
}

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
            AuthError::Missing => "unauthenticated",
            AuthError::Invalid => "invalid_credentials",
        };
        Reject::new(
            StatusCode::UNAUTHORIZED,
            code::INVALID_REQUEST,
            reason,
            self.to_string(),
        )
    }
}

/// The `WWW-Authenticate` challenge sent with every 401.
pub const CHALLENGE: &str = "Bearer realm=\"redmark\"";

#[derive(Debug, Clone)]
pub enum Authenticator {
    Anonymous,
    ApiKeys(HashMap<[u8; 32], Principal>),
}

impl Authenticator {
    pub fn from_config(auth: Option<&AuthConfig>) -> Self {
        let Some(auth) = auth else {
            return Authenticator::Anonymous;
        };
        let keys = auth
            .api_key
            .iter()
            .filter_map(|k| {
                let k = k.get_ref();
                let digest: [u8; 32] = hex::decode(&k.sha256).ok()?.try_into().ok()?;
                Some((
                    digest,
                    Principal {
                        name: Arc::from(k.principal.as_str()),
                        groups: Arc::from(k.groups.clone()),
                    },
                ))
            })
            .collect();
        Authenticator::ApiKeys(keys)
    }

    pub fn is_anonymous(&self) -> bool {
        matches!(self, Authenticator::Anonymous)
    }

    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthError> {
        let keys = match self {
            Authenticator::Anonymous => return Ok(Principal::anonymous()),
            Authenticator::ApiKeys(keys) => keys,
        };
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
        keys.get(&digest).cloned().ok_or(AuthError::Invalid)
    }
}

/// Hex SHA-256 of a key, as written in `[[auth.api_key]] sha256`.
pub fn key_digest_hex(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ApiKeyConfig, AuthConfig};
    use http::HeaderValue;

    fn auth() -> Authenticator {
        let key = ApiKeyConfig {
            sha256: key_digest_hex("s3cret"),
            principal: "alice".into(),
            groups: vec!["facilities".into()],
        };
        Authenticator::from_config(Some(&AuthConfig {
            api_key: vec![toml::Spanned::new(0..0, key)],
        }))
    }

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn maps_key_to_principal() {
        let p = auth().authenticate(&headers("Bearer s3cret")).unwrap();
        assert_eq!(&*p.name, "alice");
        assert_eq!(&p.groups[..], ["facilities".to_string()]);
        assert_eq!(
            auth().authenticate(&headers("bearer s3cret")).unwrap().name,
            p.name
        );
    }

    #[test]
    fn refuses_missing_and_wrong_keys() {
        assert_eq!(
            auth().authenticate(&HeaderMap::new()),
            Err(AuthError::Missing)
        );
        assert_eq!(
            auth().authenticate(&headers("Basic s3cret")),
            Err(AuthError::Missing)
        );
        assert_eq!(
            auth().authenticate(&headers("Bearer nope")),
            Err(AuthError::Invalid)
        );
    }

    #[test]
    fn no_auth_section_means_anonymous() {
        let p = Authenticator::from_config(None)
            .authenticate(&HeaderMap::new())
            .unwrap();
        assert_eq!(&*p.name, "anonymous");
    }
}
