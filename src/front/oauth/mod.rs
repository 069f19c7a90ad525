//! redmark as an OAuth 2.1 resource server (spec 2026-07-28
//! basic/authorization/): bearer JWTs validated against the issuer's JWKS
//! ([`jwks`]), each route's Protected Resource Metadata (RFC 9728) and the
//! `WWW-Authenticate` challenges that point clients at it.
//!
//! A token is accepted when: its `alg` is one of `algorithms` (asymmetric
//! only), its `typ` (if any) says access token, and the key its `kid` names
//! verifies it; `iss` is the issuer;
//! `aud` is the route's resource (RFC 8707); `exp`/`nbf` hold within the
//! leeway; it names a subject (`principal_claim`); and it carries every
//! `[auth.oauth] scopes`. The principal is (issuer, subject).

pub mod jwks;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use http::HeaderValue;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value, json};

use super::auth::AuthError;
use crate::config::{Config, OAuthConfig};
use crate::protocol::Principal;

pub use jwks::KeyStore;

/// Where the metadata documents are served (RFC 9728 §3).
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// Longest bearer token considered.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error(
        "route `{0}`: its canonical URL is unknown: set [auth.oauth] public_url, audience or [route.oauth] audience"
    )]
    NoOrigin(String),
}

/// One route as a protected resource.
#[derive(Debug, Clone)]
struct Resource {
    /// The resource identifier: the `aud` its tokens must carry.
    resource: String,
    /// Absolute URL of its metadata document.
    metadata_url: String,
    name: String,
}

/// The `[auth.oauth]` validator.
pub struct OAuth {
    issuer: String,
    scopes: Vec<String>,
    principal_claim: String,
    groups_claim: String,
    algorithms: Vec<Algorithm>,
    leeway: u64,
    /// By route path.
    resources: HashMap<String, Resource>,
    keys: Arc<KeyStore>,
}

impl OAuth {
    pub fn from_config(
        o: &OAuthConfig,
        config: &Config,
        local_addr: Option<SocketAddr>,
    ) -> Result<OAuth, OAuthError> {
        let keys = KeyStore::new(
            o.issuer.get_ref(),
            o.jwks_uri.as_ref().map(|j| j.get_ref().clone()),
            o.jwks_min_refresh,
        );
        keys.prefetch();
        Self::with_store(o, config, local_addr, keys)
    }

    /// What [`OAuth::from_config`] refuses, found without starting
    /// anything (no JWKS fetch): for `redmark check`, which must refuse what
    /// `serve` does. `listen` is the configured client listener.
    pub fn check(
        o: &OAuthConfig,
        config: &Config,
        listen: Option<SocketAddr>,
    ) -> Result<(), OAuthError> {
        Self::resources(o, config, listen).map(drop)
    }

    fn with_store(
        o: &OAuthConfig,
        config: &Config,
        local_addr: Option<SocketAddr>,
        keys: Arc<KeyStore>,
    ) -> Result<OAuth, OAuthError> {
        let resources = Self::resources(o, config, local_addr)?;
        Ok(OAuth {
            issuer: o.issuer.get_ref().clone(),
            scopes: o.scopes.get_ref().clone(),
            principal_claim: o.principal_claim.clone(),
            groups_claim: o.groups_claim.clone(),
            // The config check refused every name outside the asymmetric list.
            algorithms: o
                .algorithms
                .get_ref()
                .iter()
                .filter_map(|a| Algorithm::from_str(a).ok())
                .filter(|a| !matches!(a, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512))
                .collect(),
            leeway: o.leeway.as_secs(),
            resources,
            keys,
        })
    }

    /// Each route as a protected resource, by path: its canonical URL from
    /// `public_url`, its audience, or a loopback listener.
    fn resources(
        o: &OAuthConfig,
        config: &Config,
        local_addr: Option<SocketAddr>,
    ) -> Result<HashMap<String, Resource>, OAuthError> {
        let scheme = if config.server.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let listen_origin = local_addr
            .filter(|a| a.ip().is_loopback())
            .map(|a| format!("{scheme}://{a}"));
        let public = o
            .public_url
            .as_ref()
            .map(|p| p.get_ref().trim_end_matches('/').to_owned())
            .or(listen_origin);
        let mut resources = HashMap::new();
        for route in &config.routes {
            let r = route.get_ref();
            let audience = r
                .oauth
                .as_ref()
                .and_then(|x| x.get_ref().audience.clone())
                .or_else(|| o.audience.as_ref().map(|a| a.get_ref().clone()));
            let origin = public.clone().or_else(|| {
                audience
                    .as_deref()
                    .and_then(|a| url::Url::parse(a).ok())
                    .map(|u| u.origin().ascii_serialization())
            });
            let Some(origin) = origin else {
                return Err(OAuthError::NoOrigin(r.name.clone()));
            };
            let resource = audience.unwrap_or_else(|| format!("{origin}{}", r.path));
            resources.insert(
                r.path.clone(),
                Resource {
                    resource,
                    metadata_url: format!("{origin}{WELL_KNOWN}{}", r.path),
                    name: r.name.clone(),
                },
            );
        }
        Ok(resources)
    }

    pub fn required_scopes(&self, _route: &str) -> &[String] {
        &self.scopes
    }

    /// Validates a bearer JWT sent to the route at `route` (its path).
    pub async fn validate(&self, route: &str, token: &str) -> Result<Principal, AuthError> {
        let invalid = |why: &str| AuthError::InvalidToken(why.to_owned());
        let resource = self
            .resources
            .get(route)
            .ok_or_else(|| invalid("no resource for this route"))?;
        if token.len() > MAX_TOKEN_BYTES {
            return Err(invalid("too long"));
        }
        let (header, payload) = parts(token).ok_or_else(|| invalid("not a JWT"))?;
        // `alg` read by hand first: `none` (and every name the crate does not
        // know) must be refused by name, never reach a verifier.
        let alg_name = header.get("alg").and_then(Value::as_str).unwrap_or("");
        let alg = Algorithm::from_str(alg_name)
            .ok()
            .filter(|a| self.algorithms.contains(a))
            .ok_or_else(|| {
                let shown: String = alg_name.chars().take(16).collect();
                AuthError::InvalidToken(format!("algorithm `{shown}` is not accepted"))
            })?;
        // RFC 9068 §4 asks for `typ: at+jwt`; many IdPs send `JWT` or none, so
        // those pass too, and only a token typed as something else (a DPoP
        // proof, a logout or security event token) is refused.
        if let Some(typ) = header.get("typ") {
            let typ = typ.as_str().unwrap_or("").to_ascii_lowercase();
            if !matches!(typ.as_str(), "jwt" | "at+jwt" | "application/at+jwt") {
                return Err(invalid("not an access token (typ)"));
            }
        }
        // A token of another issuer is refused before its `kid` can cause a JWKS fetch.
        if payload.get("iss").and_then(Value::as_str) != Some(self.issuer.as_str()) {
            return Err(invalid("issued by another issuer"));
        }
        let kid = header.get("kid").and_then(Value::as_str);
        let key = self
            .keys
            .find(kid)
            .await
            .ok_or_else(|| invalid("signed with a key the issuer does not publish"))?;
        if key.alg.is_some_and(|a| a != alg) {
            return Err(invalid("algorithm does not match its key"));
        }
        let mut validation = Validation::new(alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&resource.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &validation)
            .map_err(|e| match e.kind() {
                ErrorKind::ExpiredSignature => AuthError::TokenExpired,
                ErrorKind::InvalidAudience => AuthError::WrongAudience,
                ErrorKind::InvalidIssuer => invalid("issued by another issuer"),
                ErrorKind::ImmatureSignature => invalid("not valid yet (nbf)"),
                ErrorKind::InvalidSignature => invalid("bad signature"),
                ErrorKind::MissingRequiredClaim(c) => {
                    AuthError::InvalidToken(format!("no `{c}` claim"))
                }
                ErrorKind::InvalidAlgorithm => invalid("algorithm does not match its key"),
                _ => invalid("malformed"),
            })?;
        let claims = data.claims;
        let subject = match claims.get(&self.principal_claim) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => {
                return Err(AuthError::InvalidToken(format!(
                    "no `{}` claim naming the subject",
                    self.principal_claim
                )));
            }
        };
        let scopes = scopes_of(&claims);
        let groups = strings(claims.get(&self.groups_claim));
        let principal = Principal::from_token(&self.issuer, &subject, groups, scopes, claims);
        if !principal.has_scopes(&self.scopes) {
            return Err(AuthError::InsufficientScope(self.scopes.clone()));
        }
        Ok(principal)
    }

    /// RFC 6750 §3 / RFC 9728 §5.1: every 401 and 403 names the metadata
    /// document and the scopes needed (spec 2026-07-28 basic/authorization/
    /// index.mdx "Scope Selection Strategy", "Scope Challenge Handling").
    pub fn challenge(&self, route: &str, error: &AuthError) -> HeaderValue {
        let metadata = self
            .resources
            .get(route)
            .map(|r| r.metadata_url.as_str())
            .unwrap_or_default();
        let (code, scopes, description) = match error {
            AuthError::Missing => (None, self.scopes.clone(), None),
            AuthError::InsufficientScope(s) => (
                Some("insufficient_scope"),
                s.clone(),
                Some("the access token lacks a scope this request needs"),
            ),
            AuthError::TokenExpired => (
                Some("invalid_token"),
                self.scopes.clone(),
                Some("the access token expired"),
            ),
            AuthError::WrongAudience => (
                Some("invalid_token"),
                self.scopes.clone(),
                Some("the access token was issued for another resource"),
            ),
            AuthError::Invalid | AuthError::InvalidToken(_) => (
                Some("invalid_token"),
                self.scopes.clone(),
                Some("the access token is not valid"),
            ),
        };
        let mut params = Vec::new();
        if let Some(c) = code {
            params.push(format!("error=\"{c}\""));
        }
        params.push(format!("resource_metadata=\"{}\"", quoted(metadata)));
        params.push(format!("scope=\"{}\"", quoted(&scopes.join(" "))));
        if let Some(d) = description {
            params.push(format!("error_description=\"{d}\""));
        }
        HeaderValue::from_str(&format!("Bearer {}", params.join(", ")))
            .unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
    }

    /// The RFC 9728 document at `path`: `WELL_KNOWN` plus a route's path, or
    /// `WELL_KNOWN` alone for the route at `/` or the only route.
    pub fn resource_metadata(&self, path: &str) -> Option<Value> {
        let rest = path.strip_prefix(WELL_KNOWN)?;
        let resource = if rest.is_empty() || rest == "/" {
            self.resources.get("/").or_else(|| {
                (self.resources.len() == 1)
                    .then(|| self.resources.values().next())
                    .flatten()
            })?
        } else {
            self.resources.get(rest)?
        };
        Some(json!({
            "resource": resource.resource,
            "authorization_servers": [self.issuer],
            "scopes_supported": self.scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": resource.name,
        }))
    }
}

/// A token is a JWT by its shape: three base64url parts, the first a JSON
/// object with `alg` (an API key is anything else).
pub fn looks_like_jwt(token: &str) -> bool {
    parts(token).is_some_and(|(h, _)| h.contains_key("alg"))
}

/// The decoded header and (unverified) payload of a compact JWS.
fn parts(token: &str) -> Option<(Map<String, Value>, Map<String, Value>)> {
    let mut it = token.split('.');
    let (h, p, _sig) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() {
        return None;
    }
    let header: Map<String, Value> = serde_json::from_slice(&B64.decode(h).ok()?).ok()?;
    let payload: Map<String, Value> = serde_json::from_slice(&B64.decode(p).ok()?).ok()?;
    Some((header, payload))
}

/// RFC 9068 §2.2.3: `scope` is space-separated; some IdPs use `scp` (a string or an array).
fn scopes_of(claims: &Map<String, Value>) -> Vec<String> {
    match claims.get("scope").or_else(|| claims.get("scp")) {
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        other => strings(other),
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// A quoted-string's content (RFC 9110 §5.6.4): no `"` or `\`.
fn quoted(s: &str) -> String {
    s.chars().filter(|c| *c != '"' && *c != '\\').collect()
}

#[cfg(test)]
mod tests;
