//! The internal endpoint: hold-mode retries forwarded by other replicas,
//! and the signature that authenticates them.
//!
//! A forward is the client's own request (its body and protocol headers)
//! plus three headers: the time it was signed, the principal the receiving
//! replica authenticated (the whole of it, every field: [`principal`]), and
//! an HMAC-SHA256 under the cluster secret over `redmark-forward-v1`, the
//! time, the route's path, the principal header and the SHA-256 of the
//! body. The owner refuses a request without them (`forward_unsigned`), with
//! a signature that does not verify (`forward_bad_signature`), signed more
//! than [`MAX_SKEW`] from its own clock (`forward_stale`) or whose signed
//! principal it cannot read (`forward_bad_principal`); then it serves the
//! request as that principal, without authenticating again. Its pipeline
//! has no owner step, so a forwarded request is never forwarded again.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use http::{HeaderMap, Request, Response, StatusCode};
use hyper::body::Incoming;
use sha2::{Digest, Sha256};

use super::Gateway;
use super::pipeline::{Check, Halt, Pipeline, RequestCx, body::ReadBody, media, parse};
use super::response::{self, Body};
use crate::protocol::{Principal, Reason, Reject};

mod principal;

pub use principal::PrincipalError;

type HmacSha256 = Hmac<Sha256>;

/// When the forward was signed, seconds since the Unix epoch.
pub const TIMESTAMP: &str = "x-redmark-forward-timestamp";
/// The principal, base64url of its JSON (`principal::encode`).
pub const PRINCIPAL: &str = "x-redmark-forward-principal";
/// Hex HMAC-SHA256 (see the module header).
pub const SIGNATURE: &str = "x-redmark-forward-signature";
/// The node id of the replica that forwarded (for logs; not trusted).
pub const FROM: &str = "x-redmark-forward-from";

/// Largest difference between the signer's clock and ours.
pub const MAX_SKEW: Duration = Duration::from_secs(30);

/// The secret every replica shares.
#[derive(Clone)]
pub struct Secret(Arc<[u8]>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(Arc::from(bytes))
    }

    fn mac(&self, ts: u64, path: &str, principal: &str, body: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        let digest = crate::hex_text::lower(&Sha256::digest(body));
        mac.update(format!("redmark-forward-v1\n{ts}\n{path}\n{principal}\n{digest}").as_bytes());
        mac
    }

    /// The three signature headers of a forward of `body` to route `path` for `principal`.
    pub fn sign(
        &self,
        now: SystemTime,
        path: &str,
        principal: &Principal,
        body: &[u8],
    ) -> Result<[(&'static str, String); 3], PrincipalError> {
        Ok(self.sign_encoded(now, path, principal::encode(principal)?, body))
    }

    /// [`Self::sign`] with the principal header's value already written.
    fn sign_encoded(
        &self,
        now: SystemTime,
        path: &str,
        principal: String,
        body: &[u8],
    ) -> [(&'static str, String); 3] {
        let ts = unix(now);
        let tag =
            crate::hex_text::lower(&self.mac(ts, path, &principal, body).finalize().into_bytes());
        [
            (TIMESTAMP, ts.to_string()),
            (PRINCIPAL, principal),
            (SIGNATURE, tag),
        ]
    }

    /// The principal a correctly signed, fresh forward names.
    pub fn verify(
        &self,
        headers: &HeaderMap,
        path: &str,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Principal, Reject> {
        let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let (Some(ts), Some(principal), Some(tag)) =
            (get(TIMESTAMP), get(PRINCIPAL), get(SIGNATURE))
        else {
            return Err(Reject::new(
                Reason::ForwardUnsigned,
                format!(
                    "the internal endpoint serves only retries forwarded by another replica, signed with the cluster secret ({TIMESTAMP}, {PRINCIPAL}, {SIGNATURE})"
                ),
            ));
        };
        let bad = |why: &str| {
            Reject::new(
                Reason::ForwardBadSignature,
                format!("the forward signature does not verify: {why}"),
            )
        };
        let ts: u64 = ts
            .parse()
            .map_err(|_| bad("the timestamp is not a number"))?;
        let tag = hex::decode(tag).map_err(|_| bad("the signature is not hex"))?;
        self.mac(ts, path, principal, body)
            .verify_slice(&tag)
            .map_err(|_| bad("not signed with this cluster's secret, or altered on the way"))?;
        let skew = unix(now).abs_diff(ts);
        if skew > MAX_SKEW.as_secs() {
            return Err(Reject::new(
                Reason::ForwardStale,
                format!(
                    "the forward was signed {skew} s from this replica's clock (at most {} s)",
                    MAX_SKEW.as_secs()
                ),
            ));
        }
        // Only a signed header is read: what it says is the cluster's word.
        let read = principal::decode(principal).map_err(|e| {
            Reject::new(
                Reason::ForwardBadPrincipal,
                format!(
                    "the forwarded principal cannot be read: {e}; nothing is served without it"
                ),
            )
        })?;
        if read.legacy {
            older_replica(headers);
        }
        Ok(read.principal)
    }
}

/// Says once per process that a replica from before the principal's format
/// 2 forwarded here: its callers are judged without scopes or issuer, as
/// that replica judges them, until it is upgraded.
fn older_replica(headers: &HeaderMap) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        let from = headers.get(FROM).and_then(|v| v.to_str().ok());
        tracing::warn!(
            from = from.unwrap_or("?"),
            "a replica of an older version forwarded a principal without scopes, issuer or subject: rules over them see none until every replica is upgraded"
        );
    }
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

/// Step: the forward signature, over the body just read; sets the principal.
struct Signed {
    secret: Secret,
}

impl Check for Signed {
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        let principal = self
            .secret
            .verify(
                &cx.head.headers,
                cx.head.uri.path(),
                &cx.bytes,
                SystemTime::now(),
            )
            .map_err(|reject| Halt::refuse(None, reject))?;
        cx.principal = principal;
        Ok(())
    }
}

/// Step: only a retry of an operation, or a task's `tasks/*`, is ever forwarded.
struct RetryOnly;

impl Check for RetryOnly {
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        // A 2025-era client's answer to a question this replica pushed
        // (`front::era2025`): its session is found by the next step.
        if let Some(era) = &cx.era2025 {
            if matches!(
                era.message,
                crate::front::era2025::Message2025::Response { .. }
            ) {
                return Ok(());
            }
            return Err(Halt::refuse(
                None,
                Reject::new(
                    Reason::ForwardNotRetry,
                    "of a 2025-era session, only an answer to a pushed question is forwarded",
                ),
            ));
        }
        let req = cx.request()?;
        // A task's `tasks/*` go to the replica holding it
        // (`front::tasks::owner_elsewhere`).
        if (req.method.is_operation() && req.is_retry()) || req.method.is_task() {
            Ok(())
        } else {
            Err(Halt::refuse(
                Some(&req.id),
                Reject::new(
                    Reason::ForwardNotRetry,
                    "only a retry (with requestState) of tools/call, prompts/get or resources/read, or a task's tasks/*, is forwarded",
                ),
            ))
        }
    }
}

/// The internal endpoint's pipeline: body (bounded as on the client
/// listener), signature, media types and parse (the composition step adds
/// the 2025-era session step, for forwarded answers). The receiving replica ran
/// the client-facing checks (origin, credentials, the tool, the policy's
/// `on_call`) and the state's own before it forwarded.
pub fn pipeline(secret: Secret, max_body_bytes: usize, body_read_timeout: Duration) -> Pipeline {
    Pipeline::new(vec![
        Box::new(ReadBody::new(max_body_bytes, body_read_timeout)),
        Box::new(Signed { secret }),
        Box::new(media::MediaTypes),
        Box::new(parse::Parse),
        Box::new(RetryOnly),
    ])
}

/// What a replica in a cluster holds beyond a single node.
pub struct Cluster {
    pub secret: Secret,
    /// The internal endpoint's steps.
    pub pipeline: Pipeline,
    pub client: super::forward::Client,
    /// After SIGTERM, how long waiting operations are still served.
    pub drain: Duration,
}

/// Answers one request on the internal listener.
pub async fn handle(gw: Arc<Gateway>, req: Request<Incoming>) -> Response<Body> {
    if gw.cluster.is_none() {
        return response::text(StatusCode::NOT_FOUND, "no cluster configured\n");
    }
    super::http::handle_internal(gw, req).await
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use serde_json::{Map, json};

    use super::*;

    fn headers(signed: &[(&'static str, String)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in signed {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    /// An OAuth caller with scopes: every field differs from its defaults.
    fn alice() -> Principal {
        let mut claims = Map::new();
        claims.insert("tenant".into(), json!("acme"));
        Principal::from_token(
            "https://idp.example",
            "alice",
            vec!["facilities".into()],
            vec!["capped".into()],
            claims,
        )
    }

    #[test]
    fn a_signed_forward_names_its_principal_and_nothing_else_verifies() {
        let secret = Secret::new(vec![7; 32]);
        let now = SystemTime::now();
        let body = br#"{"jsonrpc":"2.0"}"#;
        let signed = headers(&secret.sign(now, "/mcp", &alice(), body).unwrap());
        assert_eq!(secret.verify(&signed, "/mcp", body, now), Ok(alice()));
        let reason = |r: Result<Principal, Reject>| r.unwrap_err().reason;
        // Another route, another body, another secret, no headers, an old signature.
        assert_eq!(
            reason(secret.verify(&signed, "/other", body, now)),
            Reason::ForwardBadSignature
        );
        assert_eq!(
            reason(secret.verify(&signed, "/mcp", b"{}", now)),
            Reason::ForwardBadSignature
        );
        assert_eq!(
            reason(Secret::new(vec![8; 32]).verify(&signed, "/mcp", body, now)),
            Reason::ForwardBadSignature
        );
        assert_eq!(
            reason(secret.verify(&HeaderMap::new(), "/mcp", body, now)),
            Reason::ForwardUnsigned
        );
        let later = now + MAX_SKEW + Duration::from_secs(2);
        assert_eq!(
            reason(secret.verify(&signed, "/mcp", body, later)),
            Reason::ForwardStale
        );
        // Another principal under the same signature, or the same one
        // without its scopes: the signature covers every field.
        let unscoped = alice().with_scopes(Vec::new());
        for other in [Principal::new("mallory", vec![]), unscoped] {
            let mut swapped = signed.clone();
            let text = principal::encode(&other).unwrap();
            swapped.insert(PRINCIPAL, text.parse().unwrap());
            assert_eq!(
                reason(secret.verify(&swapped, "/mcp", body, now)),
                Reason::ForwardBadSignature
            );
        }
    }

    /// A replica of an older version signs `{"name", "groups", "claims"}`:
    /// still served, as that replica would, with no scopes or issuer.
    #[test]
    fn an_older_replicas_forward_is_read_without_scopes() {
        let secret = Secret::new(vec![7; 32]);
        let now = SystemTime::now();
        let old = json!({"name": "alice", "groups": ["facilities"], "claims": {"tenant": "acme"}});
        let signed = secret.sign_encoded(now, "/mcp", B64.encode(old.to_string()), b"{}");
        let read = secret
            .verify(&headers(&signed), "/mcp", b"{}", now)
            .unwrap();
        let mut claims = Map::new();
        claims.insert("tenant".into(), json!("acme"));
        assert_eq!(
            read,
            Principal::new("alice", vec!["facilities".into()]).with_claims(claims)
        );
    }

    /// A correctly signed principal that cannot be read is refused, saying
    /// why: never served as a caller with fewer fields.
    #[test]
    fn a_signed_principal_that_cannot_be_read_is_refused_saying_why() {
        let secret = Secret::new(vec![7; 32]);
        let now = SystemTime::now();
        let cases = [
            (
                json!({"v": 2, "name": "alice", "groups": [], "claims": {}}),
                "format 2: missing field `issuer`",
            ),
            (
                json!({"v": 3, "name": "alice"}),
                "its format 3 is newer than this replica's (2)",
            ),
        ];
        for (text, says) in cases {
            let signed = secret.sign_encoded(now, "/mcp", B64.encode(text.to_string()), b"{}");
            let reject = secret
                .verify(&headers(&signed), "/mcp", b"{}", now)
                .unwrap_err();
            assert_eq!(reject.reason, Reason::ForwardBadPrincipal, "{text}");
            assert!(reject.message.contains(says), "{text}: {}", reject.message);
        }
    }
}
