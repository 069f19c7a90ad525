//! `[auth.oauth]` and `[route.oauth]`: redmark as an OAuth 2.1 resource
//! server (spec 2026-07-28 basic/authorization/), and the checks that keep a
//! misconfiguration from accepting tokens it should not (fail closed).

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::Config;

/// The algorithms accepted when `algorithms` is not set.
pub const DEFAULT_ALGORITHMS: &[&str] = &["RS256", "ES256", "EdDSA"];

/// Asymmetric algorithms only: never `none`, never HMAC (a public JWKS key
/// used as an HMAC secret lets anyone sign).
pub const ALLOWED_ALGORITHMS: &[&str] = &[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The authorization server's issuer identifier; its metadata (RFC 8414,
    /// then OIDC discovery) names the `jwks_uri`.
    #[schemars(with = "String")]
    pub issuer: Spanned<String>,
    /// The `aud` every route accepts unless `[route.oauth] audience` says
    /// otherwise; default: the route's canonical URL (RFC 8707).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub audience: Option<Spanned<String>>,
    /// Scopes every request's token must carry; advertised as `scopes_supported`.
    #[schemars(with = "Vec<String>")]
    pub scopes: Spanned<Vec<String>>,
    /// The claim naming the subject (with the issuer, the principal).
    #[serde(default = "default_principal_claim")]
    pub principal_claim: String,
    /// The claim listing the principal's groups (`principal.groups`).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Skips discovery: the JWKS is fetched from here.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub jwks_uri: Option<Spanned<String>>,
    /// JWT signature algorithms accepted (asymmetric only: RS*, PS*, ES256,
    /// ES384, EdDSA; never `none` or HMAC).
    #[serde(default = "default_algorithms")]
    #[schemars(with = "Vec<String>")]
    pub algorithms: Spanned<Vec<String>>,
    /// The origin clients reach redmark at (`https://mcp.example.com`): a
    /// route's canonical URL is this plus its path. Default: the listen
    /// address, when it is loopback.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub public_url: Option<Spanned<String>>,
    /// Clock skew allowed on `exp` and `nbf`.
    #[serde(default = "default_leeway", with = "humantime_serde")]
    #[schemars(with = "super::schema::HumanDuration")]
    pub leeway: Duration,
    /// Least time between two JWKS fetches caused by an unknown `kid`.
    #[serde(default = "default_jwks_min_refresh", with = "humantime_serde")]
    #[schemars(with = "super::schema::HumanDuration")]
    pub jwks_min_refresh: Duration,
}

/// `[route.oauth]`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteOAuthConfig {
    /// The `aud` this route's tokens must carry, and its `resource`.
    #[serde(default)]
    pub audience: Option<String>,
}

fn default_principal_claim() -> String {
    "sub".into()
}
fn default_groups_claim() -> String {
    "groups".into()
}
fn default_algorithms() -> Spanned<Vec<String>> {
    Spanned::new(
        0..0,
        DEFAULT_ALGORITHMS.iter().map(|a| (*a).to_owned()).collect(),
    )
}
fn default_leeway() -> Duration {
    Duration::from_secs(30)
}
fn default_jwks_min_refresh() -> Duration {
    Duration::from_secs(10)
}

/// True for an `http(s)` URL whose host is a loopback address or `localhost`.
pub fn is_loopback_url(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// `https`, or `http` to loopback (spec 2026-07-28 basic/authorization/
/// security-considerations.mdx "Communication Security": authorization
/// server endpoints MUST be served over HTTPS).
fn secure_url(text: &str, what: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(text).map_err(|e| format!("{what} `{text}` is not a URL: {e}"))?;
    match url.scheme() {
        "https" => {}
        "http" if is_loopback_url(&url) => {}
        _ => {
            return Err(format!(
                "{what} `{text}` must be https (http only for loopback)"
            ));
        }
    }
    if url.fragment().is_some() || url.query().is_some() {
        return Err(format!("{what} `{text}` must have no query or fragment"));
    }
    Ok(url)
}

impl Config {
    pub(super) fn oauth_problems(&self) -> Vec<(std::ops::Range<usize>, String)> {
        let mut out = Vec::new();
        let Some(oauth) = self.auth.as_ref().and_then(|a| a.oauth.as_ref()) else {
            for route in &self.routes {
                if route.get_ref().oauth.is_some() {
                    out.push((
                        route.span(),
                        format!(
                            "route `{}`: [route.oauth] needs [auth.oauth]",
                            route.get_ref().name
                        ),
                    ));
                }
            }
            return out;
        };
        let o = oauth.get_ref();
        if let Err(e) = secure_url(o.issuer.get_ref(), "[auth.oauth] issuer") {
            out.push((o.issuer.span(), e));
        }
        if let Some(j) = &o.jwks_uri
            && let Err(e) = secure_url(j.get_ref(), "[auth.oauth] jwks_uri")
        {
            out.push((j.span(), e));
        }
        let scopes = o.scopes.get_ref();
        if scopes.is_empty() {
            out.push((
                o.scopes.span(),
                "[auth.oauth] scopes must name at least one scope (every token must carry them)"
                    .into(),
            ));
        }
        for s in scopes {
            if !is_scope_token(s) {
                out.push((
                    o.scopes.span(),
                    format!("[auth.oauth] scope `{s}` is not a scope token (RFC 6749 §3.3)"),
                ));
            }
        }
        let algs = o.algorithms.get_ref();
        let span = if o.algorithms.span().is_empty() {
            oauth.span()
        } else {
            o.algorithms.span()
        };
        if algs.is_empty() {
            out.push((span.clone(), "[auth.oauth] algorithms is empty".into()));
        }
        for a in algs {
            if !ALLOWED_ALGORITHMS.contains(&a.as_str()) {
                out.push((
                    span.clone(),
                    format!(
                        "[auth.oauth] algorithm `{a}` is not allowed (asymmetric only: {})",
                        ALLOWED_ALGORITHMS.join(", ")
                    ),
                ));
            }
        }
        if o.principal_claim.is_empty() || o.groups_claim.is_empty() {
            out.push((
                oauth.span(),
                "[auth.oauth] principal_claim and groups_claim must not be empty".into(),
            ));
        }
        if let Some(p) = &o.public_url {
            match secure_url(p.get_ref(), "[auth.oauth] public_url") {
                Ok(u) if u.path() != "/" => out.push((
                    p.span(),
                    format!(
                        "[auth.oauth] public_url `{}` must be an origin (no path)",
                        p.get_ref()
                    ),
                )),
                Ok(_) => {}
                Err(e) => out.push((p.span(), e)),
            }
        }
        if let Some(a) = &o.audience
            && let Err(e) = audience_url(a.get_ref())
        {
            out.push((a.span(), e));
        }
        let loopback_listen = self
            .server
            .listen
            .get_ref()
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|a| a.ip().is_loopback());
        for route in &self.routes {
            let r = route.get_ref();
            let own = r.oauth.as_ref().and_then(|x| x.get_ref().audience.as_ref());
            if let Some(a) = own
                && let Err(e) = audience_url(a)
            {
                out.push((route.span(), format!("route `{}`: {e}", r.name)));
            }
            if own.is_none() && o.audience.is_none() && o.public_url.is_none() && !loopback_listen {
                out.push((
                    route.span(),
                    format!(
                        "route `{}`: no audience: set [auth.oauth] public_url (its canonical URL is public_url + path), audience, or [route.oauth] audience",
                        r.name
                    ),
                ));
            }
        }
        out
    }
}

/// An audience is the canonical URI of an MCP server (spec 2026-07-28
/// basic/authorization/index.mdx "Resource Parameter Implementation").
fn audience_url(text: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(text).map_err(|e| format!("audience `{text}` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "https" | "http") || url.fragment().is_some() {
        return Err(format!(
            "audience `{text}` must be an http(s) URL without a fragment"
        ));
    }
    Ok(url)
}

/// RFC 6749 §3.3: `scope-token = 1*( %x21 / %x23-5B / %x5D-7E )`.
pub fn is_scope_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}
