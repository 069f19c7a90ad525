use std::net::SocketAddr;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use jsonwebtoken::{EncodingKey, Header};

use super::jwks::Key;
use super::*;

const CONFIG: &str = r#"
[server]
listen = "127.0.0.1:0"
[auth.oauth]
issuer = "https://idp.test"
scopes = ["mcp"]
[[route]]
name = "main"
path = "/mcp"
[route.upstream]
url = "http://127.0.0.1:9/mcp"
[[route]]
name = "other"
path = "/other"
[route.oauth]
audience = "https://other.example/mcp"
[route.upstream]
url = "http://127.0.0.1:9/mcp"
"#;

struct Signer {
    encoding: EncodingKey,
    key: Key,
}

fn signer() -> Signer {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let x = B64.encode(pair.public_key().as_ref());
    Signer {
        encoding: EncodingKey::from_ed_der(pkcs8.as_ref()),
        key: Key {
            decoding: jsonwebtoken::DecodingKey::from_ed_components(&x).unwrap(),
            alg: Some(Algorithm::EdDSA),
        },
    }
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

fn claims(extra: Value) -> Value {
    let mut c = json!({
        "iss": "https://idp.test",
        "sub": "alice",
        "aud": "http://127.0.0.1:8080/mcp",
        "exp": now() + 300,
        "iat": now(),
        "scope": "mcp rooms:book",
        "groups": ["facilities"],
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn sign(s: &Signer, kid: &str, claims: &Value) -> String {
    let mut h = Header::new(Algorithm::EdDSA);
    h.kid = Some(kid.into());
    jsonwebtoken::encode(&h, claims, &s.encoding).unwrap()
}

fn oauth(s: &Signer) -> OAuth {
    let config = Config::parse(CONFIG, "t.toml", "/".into()).unwrap();
    let o = config
        .auth
        .as_ref()
        .unwrap()
        .oauth
        .as_ref()
        .unwrap()
        .get_ref()
        .clone();
    let addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    OAuth::with_store(
        &o,
        &config,
        Some(addr),
        KeyStore::with_keys(vec![(Some("k1"), s.key.clone())]),
    )
    .unwrap()
}

#[tokio::test]
async fn a_valid_token_names_issuer_and_subject() {
    let s = signer();
    let p = oauth(&s)
        .validate("/mcp", &sign(&s, "k1", &claims(json!({}))))
        .await
        .unwrap();
    assert_eq!(&*p.name, "https://idp.test#alice");
    assert_eq!(&*p.subject, "alice");
    assert_eq!(&p.scopes[..], ["mcp", "rooms:book"]);
    assert_eq!(&p.groups[..], ["facilities"]);
    assert_eq!(p.claims.0["sub"], "alice");
}

#[tokio::test]
async fn scp_arrays_are_scopes_too() {
    let s = signer();
    let c = claims(json!({"scope": null, "scp": ["mcp", "x"]}));
    let mut c = c;
    c.as_object_mut().unwrap().remove("scope");
    let p = oauth(&s)
        .validate("/mcp", &sign(&s, "k1", &c))
        .await
        .unwrap();
    assert_eq!(&p.scopes[..], ["mcp", "x"]);
}

#[tokio::test]
async fn each_failure_has_its_own_error() {
    let s = signer();
    let o = oauth(&s);
    let v = |c: Value| sign(&s, "k1", &c);
    let expired = v(claims(json!({"exp": now() - 120})));
    assert_eq!(
        o.validate("/mcp", &expired).await,
        Err(AuthError::TokenExpired)
    );
    let other_aud = v(claims(json!({"aud": "https://evil.example/mcp"})));
    assert_eq!(
        o.validate("/mcp", &other_aud).await,
        Err(AuthError::WrongAudience)
    );
    // The same token is fine where it belongs: another route's own audience.
    let for_other = v(claims(json!({"aud": "https://other.example/mcp"})));
    assert!(o.validate("/other", &for_other).await.is_ok());
    assert_eq!(
        o.validate("/mcp", &for_other).await,
        Err(AuthError::WrongAudience)
    );
    let other_iss = v(claims(json!({"iss": "https://evil.example"})));
    assert!(matches!(
        o.validate("/mcp", &other_iss).await,
        Err(AuthError::InvalidToken(_))
    ));
    let no_scope = v(claims(json!({"scope": "rooms:book"})));
    assert_eq!(
        o.validate("/mcp", &no_scope).await,
        Err(AuthError::InsufficientScope(vec!["mcp".into()]))
    );
    let future = v(claims(json!({"nbf": now() + 600})));
    assert!(matches!(
        o.validate("/mcp", &future).await,
        Err(AuthError::InvalidToken(_))
    ));
    let no_sub = {
        let mut c = claims(json!({}));
        c.as_object_mut().unwrap().remove("sub");
        v(c)
    };
    assert!(matches!(
        o.validate("/mcp", &no_sub).await,
        Err(AuthError::InvalidToken(_))
    ));
}

#[tokio::test]
async fn forged_tokens_are_invalid() {
    let s = signer();
    let o = oauth(&s);
    let good = sign(&s, "k1", &claims(json!({})));
    // Another key under the same kid: a bad signature.
    let forged = sign(&signer(), "k1", &claims(json!({})));
    assert_eq!(
        o.validate("/mcp", &forged).await,
        Err(AuthError::InvalidToken("bad signature".into()))
    );
    // `alg: none`, no signature.
    let payload = good.split('.').nth(1).unwrap();
    let none = format!("{}.{payload}.", B64.encode(br#"{"alg":"none","kid":"k1"}"#));
    assert_eq!(
        o.validate("/mcp", &none).await,
        Err(AuthError::InvalidToken(
            "algorithm `none` is not accepted".into()
        ))
    );
    // HS256 keyed with something public.
    let mut h = Header::new(Algorithm::HS256);
    h.kid = Some("k1".into());
    let hs = jsonwebtoken::encode(
        &h,
        &claims(json!({})),
        &EncodingKey::from_secret(b"public").unwrap(),
    )
    .unwrap();
    assert!(matches!(
        o.validate("/mcp", &hs).await,
        Err(AuthError::InvalidToken(_))
    ));
    // A tampered payload.
    let mut parts: Vec<&str> = good.split('.').collect();
    let evil = B64.encode(claims(json!({"sub": "mallory"})).to_string());
    parts[1] = &evil;
    assert!(matches!(
        o.validate("/mcp", &parts.join(".")).await,
        Err(AuthError::InvalidToken(_))
    ));
    // A JWT that is not an access token.
    let mut h = Header::new(Algorithm::EdDSA);
    h.kid = Some("k1".into());
    h.typ = Some("logout+jwt".into());
    let logout = jsonwebtoken::encode(&h, &claims(json!({})), &s.encoding).unwrap();
    assert_eq!(
        o.validate("/mcp", &logout).await,
        Err(AuthError::InvalidToken("not an access token (typ)".into()))
    );
    // An unknown kid (the store is not refetched within its interval).
    let unknown = sign(&s, "k9", &claims(json!({})));
    assert!(matches!(
        o.validate("/mcp", &unknown).await,
        Err(AuthError::InvalidToken(_))
    ));
}

#[test]
fn api_keys_are_not_jwts() {
    assert!(!looks_like_jwt("s3cret"));
    assert!(!looks_like_jwt("a.b.c"));
    assert!(looks_like_jwt(&format!(
        "{}.{}.",
        B64.encode(br#"{"alg":"RS256"}"#),
        B64.encode("{}")
    )));
}

#[test]
fn challenges_and_metadata_name_the_route() {
    let o = oauth(&signer());
    let c = o.challenge("/mcp", &AuthError::Missing);
    assert_eq!(
        c.to_str().unwrap(),
        r#"Bearer resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp", scope="mcp""#
    );
    let c = o.challenge("/mcp", &AuthError::TokenExpired);
    assert!(
        c.to_str()
            .unwrap()
            .starts_with(r#"Bearer error="invalid_token", resource_metadata="#)
    );
    let c = o.challenge(
        "/mcp",
        &AuthError::InsufficientScope(vec!["mcp".into(), "pay".into()]),
    );
    assert!(
        c.to_str()
            .unwrap()
            .contains(r#"error="insufficient_scope""#)
    );
    assert!(c.to_str().unwrap().contains(r#"scope="mcp pay""#));
    let doc = o
        .resource_metadata("/.well-known/oauth-protected-resource/mcp")
        .unwrap();
    assert_eq!(doc["resource"], "http://127.0.0.1:8080/mcp");
    assert_eq!(doc["authorization_servers"], json!(["https://idp.test"]));
    assert_eq!(doc["scopes_supported"], json!(["mcp"]));
    assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    let other = o
        .resource_metadata("/.well-known/oauth-protected-resource/other")
        .unwrap();
    assert_eq!(other["resource"], "https://other.example/mcp");
    // Two routes, none at `/`: the root form names no one resource.
    assert!(
        o.resource_metadata("/.well-known/oauth-protected-resource")
            .is_none()
    );
    assert!(
        o.resource_metadata("/.well-known/oauth-protected-resource/nope")
            .is_none()
    );
}

#[test]
fn request_state_binds_issuer_and_subject() {
    use crate::mrtr::state::principal_digest;
    let a = Principal::from_token("https://a.example", "alice", vec![], vec![], Map::new());
    let b = Principal::from_token("https://b.example", "alice", vec![], vec![], Map::new());
    let key = Principal::new("alice", vec![]);
    let d = |p: &Principal| principal_digest("main", &p.name);
    assert_ne!(d(&a), d(&b));
    assert_ne!(d(&a), d(&key));
}
