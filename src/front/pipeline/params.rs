//! `Mcp-Param-{Name}` headers (spec 2026-07-28 streamable-http.mdx "Custom
//! Headers from Tool Parameters"): "Any server that processes the message body
//! MUST validate that encoded header values, after decoding if
//! Base64-encoded, match the corresponding values in the request body" and a
//! body value whose header is missing MUST be rejected too.

use serde_json::{Map, Value};

use super::protocol::decode_header_value;
pub use crate::protocol::tool::{Mirrored, mirrored};

/// Why the headers do not match the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamMismatch {
    #[error("the Mcp-Param-{0} header is required: the body carries a value for it")]
    Missing(String),
    #[error("the Mcp-Param-{0} header contains invalid characters or invalid base64")]
    Invalid(String),
    #[error("Header mismatch: Mcp-Param-{0} header value does not match the body value")]
    Mismatch(String),
    /// Sent more than once with values that differ (see `protocol::HeaderText`).
    #[error("Header mismatch: Mcp-Param-{0} is sent more than once with different values")]
    Conflicting(String),
}

fn value_at<'a>(args: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    rest.iter().try_fold(args.get(first)?, |v, key| v.get(key))
}

fn matches(header: &str, body: &Value) -> bool {
    match body {
        Value::String(s) => header == s,
        Value::Bool(b) => header == if *b { "true" } else { "false" },
        // spec "Server Validation": integers SHOULD be compared numerically (42.0 == 42).
        Value::Number(n) => match (header.parse::<f64>(), n.as_f64()) {
            (Ok(h), Some(b)) => h == b,
            _ => false,
        },
        _ => false,
    }
}

/// Checks the client's `Mcp-Param-*` headers (`(lower-case name, raw value)`,
/// `None` when the value was not visible ASCII) against the call's arguments.
pub fn check(
    mirrored: &[Mirrored],
    headers: &[(String, Option<String>)],
    arguments: &Map<String, Value>,
) -> Result<(), ParamMismatch> {
    for m in mirrored {
        let wanted = format!("mcp-param-{}", m.header.to_ascii_lowercase());
        let mut sent = headers.iter().filter(|(k, _)| *k == wanted).map(|(_, v)| v);
        let first = sent.next();
        if let Some(first) = first
            && sent.any(|other| other != first)
        {
            return Err(ParamMismatch::Conflicting(m.header.clone()));
        }
        let header = match first {
            None => None,
            Some(Some(v)) => Some(v.as_str()),
            // spec "Server Behavior for Custom Headers": servers MUST reject a
            // recognized Mcp-Param header that contains invalid characters.
            Some(None) => return Err(ParamMismatch::Invalid(m.header.clone())),
        };
        let body = value_at(arguments, &m.path).filter(|v| !v.is_null());
        match (header, body) {
            (None, None) | (Some(_), None) => {}
            (None, Some(_)) => return Err(ParamMismatch::Missing(m.header.clone())),
            (Some(raw), Some(body)) => {
                let decoded = decode_header_value(raw)
                    .map_err(|_| ParamMismatch::Invalid(m.header.clone()))?;
                if !matches(&decoded, body) {
                    return Err(ParamMismatch::Mismatch(m.header.clone()));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"limit": {"type": "integer", "x-mcp-header": "Limit"}}},
            "items": {"type": "array", "items": {"type": "object", "properties": {"x": {"x-mcp-header": "X"}}}},
        }})
    }

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, Option<String>)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect()
    }

    #[test]
    fn finds_only_statically_reachable_annotations() {
        let m = mirrored(&schema());
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[0],
            Mirrored {
                header: "Region".into(),
                path: vec!["region".into()]
            }
        );
        assert_eq!(m[1].path, vec!["opts".to_string(), "limit".to_string()]);
    }

    #[test]
    fn header_must_match_body() {
        let m = mirrored(&schema());
        let args = json!({"region": "us-west1", "opts": {"limit": 42}});
        let args = args.as_object().unwrap();
        assert_eq!(
            check(
                &m,
                &h(&[
                    ("mcp-param-region", "us-west1"),
                    ("mcp-param-limit", "42.0")
                ]),
                args
            ),
            Ok(())
        );
        assert_eq!(
            check(&m, &h(&[("mcp-param-region", "us-west1")]), args),
            Err(ParamMismatch::Missing("Limit".into()))
        );
        assert_eq!(
            check(
                &m,
                &h(&[("mcp-param-region", "eu"), ("mcp-param-limit", "42")]),
                args
            ),
            Err(ParamMismatch::Mismatch("Region".into()))
        );
        assert_eq!(
            check(
                &m,
                &h(&[
                    ("mcp-param-region", "=?base64?dXMtd2VzdDE=?="),
                    ("mcp-param-limit", "42")
                ]),
                args
            ),
            Ok(())
        );
        assert_eq!(
            check(
                &m,
                &h(&[
                    ("mcp-param-region", "=?base64?%%?="),
                    ("mcp-param-limit", "42")
                ]),
                args
            ),
            Err(ParamMismatch::Invalid("Region".into()))
        );
    }

    #[test]
    fn invalid_characters_are_refused() {
        let m = mirrored(&schema());
        let args = json!({"region": "x"});
        let headers = vec![("mcp-param-region".to_string(), None)];
        assert_eq!(
            check(&m, &headers, args.as_object().unwrap()),
            Err(ParamMismatch::Invalid("Region".into()))
        );
    }

    #[test]
    fn conflicting_duplicates_are_a_mismatch() {
        // A proxy reading the last `Mcp-Param-Region` would see `eu`, the server `us-west1`.
        let m = mirrored(&schema());
        let args = json!({"region": "us-west1"});
        let args = args.as_object().unwrap();
        assert_eq!(
            check(
                &m,
                &h(&[("mcp-param-region", "us-west1"), ("mcp-param-region", "eu")]),
                args
            ),
            Err(ParamMismatch::Conflicting("Region".into()))
        );
        assert_eq!(
            check(
                &m,
                &h(&[
                    ("mcp-param-region", "us-west1"),
                    ("mcp-param-region", "us-west1")
                ]),
                args
            ),
            Ok(()),
            "identical duplicates say one thing"
        );
    }

    #[test]
    fn absent_or_null_values_expect_no_header() {
        let m = mirrored(&schema());
        let args = json!({"region": null});
        assert_eq!(check(&m, &[], args.as_object().unwrap()), Ok(()));
    }
}
