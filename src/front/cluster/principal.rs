//! The forwarded principal's wire format: the `x-redmark-forward-principal`
//! header, base64url of the whole [`Principal`] as it serializes (name,
//! issuer, subject, groups, scopes, claims) plus its format number `v`.
//!
//! The owner judges a forwarded request with exactly the caller the
//! receiving replica authenticated, so nothing may be lost or defaulted on
//! the way: a header that cannot be read, or that lacks a field, is an
//! error, never a caller with less. Across versions, as with the sealed
//! tokens (CHANGELOG, "Sealed tokens across versions"): fields a replica
//! does not know are ignored, a format newer than [`FORMAT`] is refused, and
//! the unnumbered format of replicas from before format 2 (name, groups and
//! claims only) is still read during a rolling upgrade: as those replicas
//! read it themselves, with no issuer, the name as subject and no scopes.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::protocol::Principal;

/// The format this replica writes and the newest it reads.
pub const FORMAT: u64 = 2;

/// Why a forwarded principal cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum PrincipalError {
    #[error("it cannot be written ({0})")]
    Encode(#[source] serde_json::Error),
    #[error("it is not base64url")]
    NotBase64,
    #[error("it is not a JSON object ({0})")]
    NotJson(#[source] serde_json::Error),
    #[error("its format `v` is {0}, which no replica writes")]
    UnknownFormat(String),
    #[error("its format {0} is newer than this replica's ({FORMAT}); upgrade this replica")]
    Newer(u64),
    #[error("format {format}: {source}")]
    Fields {
        format: u64,
        #[source]
        source: serde_json::Error,
    },
}

/// A principal read from a forward, and whether an older replica wrote it.
#[derive(Debug, PartialEq, Eq)]
pub struct Read {
    pub principal: Principal,
    /// The unnumbered format: no issuer, subject or scopes were sent.
    pub legacy: bool,
}

/// What [`encode`] writes: the format number, then every field.
#[derive(Serialize)]
struct Numbered<'a> {
    v: u64,
    #[serde(flatten)]
    principal: &'a Principal,
}

/// What replicas before format 2 write (`{"name", "groups", "claims"}`).
#[derive(Deserialize)]
struct Unnumbered {
    name: String,
    groups: Vec<String>,
    claims: Map<String, Value>,
}

/// The header's value for `principal`.
pub fn encode(principal: &Principal) -> Result<String, PrincipalError> {
    let text = serde_json::to_vec(&Numbered {
        v: FORMAT,
        principal,
    })
    .map_err(PrincipalError::Encode)?;
    Ok(B64.encode(text))
}

/// The principal a header's value names.
pub fn decode(text: &str) -> Result<Read, PrincipalError> {
    let bytes = B64.decode(text).map_err(|_| PrincipalError::NotBase64)?;
    let mut fields: Map<String, Value> =
        serde_json::from_slice(&bytes).map_err(PrincipalError::NotJson)?;
    let fields_error = |format| move |source| PrincipalError::Fields { format, source };
    match fields.remove("v") {
        None => {
            let old: Unnumbered =
                serde_json::from_value(Value::Object(fields)).map_err(fields_error(1))?;
            let principal = Principal::new(&old.name, old.groups).with_claims(old.claims);
            Ok(Read {
                principal,
                legacy: true,
            })
        }
        Some(Value::Number(n)) if n.as_u64() == Some(FORMAT) => {
            let principal =
                serde_json::from_value(Value::Object(fields)).map_err(fields_error(FORMAT))?;
            Ok(Read {
                principal,
                legacy: false,
            })
        }
        Some(Value::Number(n)) if n.as_u64().is_some_and(|v| v > FORMAT) => {
            Err(PrincipalError::Newer(n.as_u64().unwrap_or(u64::MAX)))
        }
        Some(other) => Err(PrincipalError::UnknownFormat(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(v: &Value) -> String {
        B64.encode(v.to_string())
    }

    fn oauth_caller() -> Principal {
        let claims = Map::from_iter([
            ("tenant".to_owned(), json!("acme")),
            ("limits".to_owned(), json!({"max": 100, "tags": ["a", "b"]})),
        ]);
        Principal::from_token(
            "https://idp.example/realm",
            "alice",
            vec!["facilities".into(), "ops".into()],
            vec!["capped".into(), "tools:call".into()],
            claims,
        )
    }

    /// Every field arrives as sent: an OAuth caller's issuer, subject and
    /// scopes (the name is `issuer#subject`, not split again), an API key's
    /// scopes and absent issuer, the anonymous caller.
    #[test]
    fn every_field_round_trips() {
        let key = Principal::new("bob", vec!["facilities".into()])
            .with_scopes(vec!["capped".into()])
            .with_claims(Map::from_iter([("k".to_owned(), json!(null))]));
        for p in [oauth_caller(), key, Principal::anonymous()] {
            let text = encode(&p).unwrap();
            let read = decode(&text).unwrap();
            assert_eq!(
                read,
                Read {
                    principal: p.clone(),
                    legacy: false
                }
            );
            // What CEL rules see, field by field.
            assert_eq!(read.principal.cel_value(), p.cel_value());
        }
        let read = decode(&encode(&oauth_caller()).unwrap()).unwrap().principal;
        assert_eq!(read.issuer.as_deref(), Some("https://idp.example/realm"));
        assert_eq!(&*read.subject, "alice");
        assert_eq!(&*read.name, "https://idp.example/realm#alice");
        assert_eq!(
            &*read.scopes,
            ["capped".to_owned(), "tools:call".to_owned()]
        );
    }

    /// The written header names its format and every field.
    #[test]
    fn the_header_is_numbered_and_names_every_field() {
        let text = encode(&oauth_caller()).unwrap();
        let v: Value = serde_json::from_slice(&B64.decode(text).unwrap()).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "v", "name", "issuer", "subject", "groups", "scopes", "claims"
            ]
        );
        assert_eq!(v["v"], 2);
        let key = encode(&Principal::new("bob", vec![])).unwrap();
        let v: Value = serde_json::from_slice(&B64.decode(key).unwrap()).unwrap();
        assert_eq!(v["issuer"], Value::Null);
    }

    /// An older replica's header (name, groups, claims) is read as that
    /// replica reads it: no issuer, the name as subject, no scopes.
    #[test]
    fn the_unnumbered_format_of_older_replicas_is_read_without_scopes() {
        let old = json!({"name": "https://idp.example#alice", "groups": ["ops"], "claims": {"tenant": "acme"}});
        let read = decode(&b64(&old)).unwrap();
        assert!(read.legacy);
        let p = read.principal;
        assert_eq!(&*p.name, "https://idp.example#alice");
        assert_eq!(&*p.subject, "https://idp.example#alice");
        assert_eq!(p.issuer, None);
        assert!(p.scopes.is_empty());
        assert_eq!(&*p.groups, ["ops".to_owned()]);
        assert_eq!(p.claims.0["tenant"], "acme");
        // Missing what the old format always had is still an error.
        let err = decode(&b64(&json!({"name": "alice", "groups": []}))).unwrap_err();
        assert_eq!(err.to_string(), "format 1: missing field `claims`");
    }

    /// What cannot be read is an error naming why, never a caller with less.
    #[test]
    fn a_header_that_cannot_be_read_says_why() {
        let whole = serde_json::to_value(oauth_caller()).unwrap();
        let numbered = |edit: &dyn Fn(&mut Map<String, Value>)| {
            let mut m = whole.as_object().unwrap().clone();
            m.insert("v".into(), json!(2));
            edit(&mut m);
            b64(&Value::Object(m))
        };
        for field in ["name", "issuer", "subject", "groups", "scopes", "claims"] {
            let err = decode(&numbered(&|m| {
                m.remove(field);
            }))
            .unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("format 2: missing field `{field}`")
            );
        }
        let err = decode(&numbered(&|m| {
            m.insert("scopes".into(), json!("capped"));
        }))
        .unwrap_err();
        assert!(
            err.to_string().starts_with("format 2: invalid type"),
            "{err}"
        );
        // A field this format does not know is ignored (a later format may add one).
        let later = decode(&numbered(&|m| {
            m.insert("later".into(), json!(1));
        }));
        assert_eq!(later.unwrap().principal, oauth_caller());
        let cases = [
            ("not base64!".to_owned(), "it is not base64url"),
            (B64.encode("[1]"), "it is not a JSON object"),
            (
                numbered(&|m| drop(m.insert("v".into(), json!(3)))),
                "its format 3 is newer",
            ),
            (
                numbered(&|m| drop(m.insert("v".into(), json!("2")))),
                "its format `v` is \"2\"",
            ),
            (
                numbered(&|m| drop(m.insert("v".into(), json!(1)))),
                "its format `v` is 1",
            ),
        ];
        for (text, says) in cases {
            let err = decode(&text).unwrap_err().to_string();
            assert!(err.starts_with(says), "{text}: {err}");
        }
    }
}
