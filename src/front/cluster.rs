//! The internal endpoint: hold-mode retries forwarded by other replicas,
//! and the signature that authenticates them.
//!
//! A forward is the client's own request (its body and protocol headers)
//! plus three headers: the time it was signed, the principal the receiving
//! replica authenticated, and an HMAC-SHA256 under the cluster secret over
//! `redmark-forward-v1`, the time, the route's path, the principal and the
//! SHA-256 of the body. The owner refuses a request without them
//! (`forward_unsigned`), with a signature that does not verify
//! (`forward_bad_signature`) or signed more than [`MAX_SKEW`] from its own
//! clock (`forward_stale`); then it serves the retry as that principal,
//! without authenticating again. Its pipeline has no owner step, so a
//! forwarded request is never forwarded again.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, KeyInit, Mac};
use http::{HeaderMap, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::Gateway;
use super::pipeline::{Check, Halt, Pipeline, RequestCx, body::ReadBody, media, parse};
use super::response::{self, Body};
use crate::protocol::{Principal, Reason, Reject};

type HmacSha256 = Hmac<Sha256>;

/// When the forward was signed, seconds since the Unix epoch.
pub const TIMESTAMP: &str = "x-redmark-forward-timestamp";
/// The principal, base64url of `{"name", "groups", "claims"}`.
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
    ) -> [(&'static str, String); 3] {
        let ts = unix(now);
        let principal = encode_principal(principal);
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
        decode_principal(principal).ok_or_else(|| bad("the principal does not decode"))
    }
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

fn encode_principal(p: &Principal) -> String {
    let v = json!({"name": &*p.name, "groups": &*p.groups, "claims": p.claims.0});
    B64.encode(v.to_string())
}

fn decode_principal(text: &str) -> Option<Principal> {
    let v: Value = serde_json::from_slice(&B64.decode(text).ok()?).ok()?;
    let name = v.get("name")?.as_str()?;
    let groups = v
        .get("groups")?
        .as_array()?
        .iter()
        .map(|g| g.as_str().map(str::to_owned))
        .collect::<Option<Vec<_>>>()?;
    let claims: Map<String, Value> = v.get("claims")?.as_object()?.clone();
    Some(Principal::new(name, groups).with_claims(claims))
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
    use super::*;

    fn headers(signed: &[(&'static str, String)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in signed {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn alice() -> Principal {
        let mut claims = Map::new();
        claims.insert("tenant".into(), json!("acme"));
        Principal::new("alice", vec!["facilities".into()]).with_claims(claims)
    }

    #[test]
    fn a_signed_forward_names_its_principal_and_nothing_else_verifies() {
        let secret = Secret::new(vec![7; 32]);
        let now = SystemTime::now();
        let body = br#"{"jsonrpc":"2.0"}"#;
        let signed = headers(&secret.sign(now, "/mcp", &alice(), body));
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
        // Another principal under the same signature.
        let mut swapped = signed.clone();
        swapped.insert(
            PRINCIPAL,
            encode_principal(&Principal::new("mallory", vec![]))
                .parse()
                .unwrap(),
        );
        assert_eq!(
            reason(secret.verify(&swapped, "/mcp", body, now)),
            Reason::ForwardBadSignature
        );
    }
}
