//! Step 7: the transport's mirrored headers and what the revision has
//! (spec 2026-07-28 streamable-http.mdx "Server Validation"), checked in this
//! order so each mistake gets its own error:
//! 1. `MCP-Protocol-Version` and `Mcp-Method` present, `Mcp-Method` equal to
//!    the body's method (a missing one is a HeaderMismatch);
//! 2. a version redmark speaks (versioning.mdx "Protocol Version
//!    Negotiation": MUST respond with UnsupportedProtocolVersionError);
//! 3. a method 2026-07-28 has ("Protocol Version Header": MUST respond 404
//!    with -32601).

use base64::Engine;
use http::HeaderMap;
use serde_json::json;

use super::{Halt, RequestCx, Step};
use crate::jsonrpc::Id;
use crate::protocol::{Method, Reason, Reject, SUPPORTED_VERSIONS};

pub struct ProtocolHeaders;

#[async_trait::async_trait]
impl Step for ProtocolHeaders {
    async fn on_request(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        let envelope = cx.envelope()?;
        check(&cx.head.headers, &envelope.id, &envelope.method)
    }
}

/// A header value that is not visible ASCII, or whose `=?base64?…?=` encoding
/// does not decode to UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the header value is not valid visible ASCII or base64-encoded UTF-8")]
pub struct BadEncoding;

/// Reads a header as text, trimmed as HTTP does.
pub fn header_text<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, BadEncoding> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v.to_str().map(|s| Some(s.trim())).map_err(|_| BadEncoding),
    }
}

/// Decodes the `=?base64?…?=` sentinel (spec streamable-http.mdx "Value Encoding":
/// servers MUST decode an encoded value before comparing it to the body).
pub fn decode_header_value(raw: &str) -> Result<String, BadEncoding> {
    match raw
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|_| BadEncoding)?;
            String::from_utf8(bytes).map_err(|_| BadEncoding)
        }
        None => Ok(raw.to_owned()),
    }
}

pub fn mismatch(id: &Id, reason: Reason, message: String) -> Halt {
    Halt::refuse(Some(id), Reject::new(reason, message))
}

/// A mirrored header that must be present and readable.
pub fn required<'h>(
    headers: &'h HeaderMap,
    id: &Id,
    name: &str,
    display: &str,
    why: &str,
) -> Result<&'h str, Halt> {
    header_text(headers, name)
        .map_err(|BadEncoding| {
            mismatch(
                id,
                Reason::HeaderInvalid,
                format!("{display} contains invalid characters"),
            )
        })?
        .ok_or_else(|| {
            mismatch(
                id,
                Reason::HeaderMissing,
                format!("the {display} header is required{why}"),
            )
        })
}

fn check(headers: &HeaderMap, id: &Id, method: &str) -> Result<(), Halt> {
    let version = required(
        headers,
        id,
        "mcp-protocol-version",
        "MCP-Protocol-Version",
        "",
    )?;
    let method_header = required(headers, id, "mcp-method", "Mcp-Method", "")?;
    if method_header != method {
        return Err(mismatch(
            id,
            Reason::HeaderMismatch,
            format!(
                "Header mismatch: Mcp-Method header value '{method_header}' does not match body value '{method}'"
            ),
        ));
    }
    if !SUPPORTED_VERSIONS.contains(&version) {
        return Err(Halt::refuse(
            Some(id),
            Reject::new(
                Reason::UnsupportedProtocolVersion,
                "Unsupported protocol version",
            )
            .with("supported", json!(SUPPORTED_VERSIONS))
            .with("requested", version),
        ));
    }
    if Method::parse(method).is_none() {
        let (reason, message) = match method {
            "initialize"
            | "ping"
            | "logging/setLevel"
            | "resources/subscribe"
            | "resources/unsubscribe" => (
                Reason::MethodRemoved,
                // spec versioning.mdx: a modern-only server SHOULD name its versions in any error to `initialize`.
                format!(
                    "`{method}` does not exist in MCP {}; this endpoint speaks only {}",
                    SUPPORTED_VERSIONS[0],
                    SUPPORTED_VERSIONS.join(", ")
                ),
            ),
            _ => (
                Reason::MethodNotFound,
                format!("Method not found: `{method}`"),
            ),
        };
        return Err(Halt::refuse(
            Some(id),
            Reject::new(reason, message).with("supported", json!(SUPPORTED_VERSIONS)),
        ));
    }
    Ok(())
}
