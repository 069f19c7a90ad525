//! Reading one client POST: the JSON-RPC envelope, the mirrored headers and
//! the per-request `_meta`, checked in a fixed order so each kind of mistake
//! gets its own error (spec 2026-07-28 `basic/index.mdx` and
//! `basic/transports/streamable-http.mdx` "Server Validation").

use base64::Engine;
use http::{HeaderMap, StatusCode};
use serde_json::{Map, Value, json};

use crate::error::Reject;
use crate::jsonrpc::{FramingError, Id, Message, code};
use crate::protocol::{self, SUPPORTED_VERSIONS, meta};
use crate::upstream::profile::Profile;

/// Per-request context from `_meta`.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestContext {
    pub protocol_version: String,
    pub capabilities: Value,
    pub client_info: Option<Value>,
    pub log_level: Option<String>,
    pub progress_token: Option<Value>,
    pub profile: Profile,
    /// W3C trace context of the caller (`_meta.traceparent`, SEP-414, else the HTTP header).
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClientRequest {
    pub id: Id,
    pub method: String,
    /// The params as sent, `_meta` included.
    pub params: Map<String, Value>,
    pub ctx: RequestContext,
    /// `Mcp-Param-*` headers, lower-cased; `None` when the value was not visible ASCII.
    pub param_headers: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    Request(Box<ClientRequest>),
    Notification { method: String },
}

/// A refusal and the id to echo (absent when the id could not be read).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub id: Option<Id>,
    pub reject: Reject,
}

fn refuse(id: Option<&Id>, reject: Reject) -> Box<Refusal> {
    Box::new(Refusal {
        id: id.cloned(),
        reject,
    })
}

fn header_mismatch(id: &Id, reason: &'static str, message: String) -> Box<Refusal> {
    refuse(
        Some(id),
        Reject::new(
            StatusCode::BAD_REQUEST,
            code::HEADER_MISMATCH,
            reason,
            message,
        ),
    )
}

/// Reads a header as text, trimmed as HTTP does; `Err` when it is not visible ASCII.
fn header_text<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, BadEncoding> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v.to_str().map(|s| Some(s.trim())).map_err(|_| BadEncoding),
    }
}

/// A header value whose `=?base64?…?=` encoding does not decode to UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the header value is not valid base64-encoded UTF-8")]
pub struct BadEncoding;

/// Decodes the `=?base64?…?=` sentinel (spec streamable-http.mdx "Value Encoding":
/// servers MUST decode an encoded `Mcp-Name` before comparing it to the body).
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

/// Parses and checks one POST body against its headers.
pub fn parse(headers: &HeaderMap, body: &[u8]) -> Result<Parsed, Box<Refusal>> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        refuse(
            None,
            Reject::new(
                StatusCode::BAD_REQUEST,
                code::PARSE_ERROR,
                "parse_error",
                format!("the body is not valid JSON: {e}"),
            ),
        )
    })?;
    let raw_id = value.get("id").and_then(Id::from_value);
    let msg = Message::from_value(value).map_err(|e| {
        let reason = match e {
            FramingError::NotAnObject => "not_a_single_message",
            _ => "invalid_request",
        };
        refuse(
            raw_id.as_ref(),
            Reject::new(
                StatusCode::BAD_REQUEST,
                code::INVALID_REQUEST,
                reason,
                e.to_string(),
            ),
        )
    })?;
    let (id, method, params) = match msg {
        Message::Request { id, method, params } => (id, method, params),
        Message::Notification { method, .. } => return Ok(Parsed::Notification { method }),
        Message::Response { id, .. } => {
            // spec streamable-http.mdx "Sending Messages": "The client MUST NOT send JSON-RPC responses."
            return Err(refuse(
                Some(&id),
                Reject::new(
                    StatusCode::BAD_REQUEST,
                    code::INVALID_REQUEST,
                    "response_not_allowed",
                    "clients must not send JSON-RPC responses to a 2026-07-28 endpoint",
                ),
            ));
        }
    };

    // 1. The mirrored headers must be present (spec "Server Validation": a
    //    missing `MCP-Protocol-Version` or `Mcp-Method` is a HeaderMismatch).
    let version_header = header_text(headers, "mcp-protocol-version")
        .map_err(|BadEncoding| {
            header_mismatch(
                &id,
                "header_invalid",
                "MCP-Protocol-Version contains invalid characters".into(),
            )
        })?
        .ok_or_else(|| {
            header_mismatch(
                &id,
                "header_missing",
                "the MCP-Protocol-Version header is required".into(),
            )
        })?;
    let method_header = header_text(headers, "mcp-method")
        .map_err(|BadEncoding| {
            header_mismatch(
                &id,
                "header_invalid",
                "Mcp-Method contains invalid characters".into(),
            )
        })?
        .ok_or_else(|| {
            header_mismatch(
                &id,
                "header_missing",
                "the Mcp-Method header is required".into(),
            )
        })?;
    if method_header != method {
        return Err(header_mismatch(
            &id,
            "header_mismatch",
            format!(
                "Header mismatch: Mcp-Method header value '{method_header}' does not match body value '{method}'"
            ),
        ));
    }

    // 2. A version we do not speak (spec versioning.mdx "Protocol Version
    //    Negotiation": MUST respond with UnsupportedProtocolVersionError).
    if !SUPPORTED_VERSIONS.contains(&version_header) {
        return Err(refuse(
            Some(&id),
            Reject::new(
                StatusCode::BAD_REQUEST,
                code::UNSUPPORTED_PROTOCOL_VERSION,
                "unsupported_protocol_version",
                "Unsupported protocol version",
            )
            .with("supported", json!(SUPPORTED_VERSIONS))
            .with("requested", version_header),
        ));
    }

    // 3. Methods this revision does not have (spec streamable-http.mdx
    //    "Protocol Version Header": MUST respond 404 with -32601).
    if !protocol::METHODS.contains(&method.as_str()) {
        let (reason, message) = match method.as_str() {
            "initialize"
            | "ping"
            | "logging/setLevel"
            | "resources/subscribe"
            | "resources/unsubscribe" => (
                "method_removed",
                // spec versioning.mdx: a modern-only server SHOULD name its versions in any error to `initialize`.
                format!(
                    "`{method}` does not exist in MCP {}; this endpoint speaks only {}",
                    SUPPORTED_VERSIONS[0],
                    SUPPORTED_VERSIONS.join(", ")
                ),
            ),
            _ => ("method_not_found", format!("Method not found: `{method}`")),
        };
        return Err(refuse(
            Some(&id),
            Reject::new(
                StatusCode::NOT_FOUND,
                code::METHOD_NOT_FOUND,
                reason,
                message,
            )
            .with("supported", json!(SUPPORTED_VERSIONS)),
        ));
    }

    // 4. Required `_meta` (spec basic/index.mdx "Per-request protocol fields":
    //    "A request missing any required field is malformed; the server MUST
    //    reject it with JSON-RPC error code -32602 ... 400 Bad Request").
    let invalid_meta = |message: String| {
        refuse(
            Some(&id),
            Reject::new(
                StatusCode::BAD_REQUEST,
                code::INVALID_PARAMS,
                "missing_meta",
                message,
            ),
        )
    };
    let params = match params {
        Some(Value::Object(p)) => p,
        _ => {
            return Err(invalid_meta(
                "`params` with `_meta` is required on every request".into(),
            ));
        }
    };
    let meta_obj = params
        .get("_meta")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid_meta("`params._meta` is required".into()))?;
    let body_version = meta_obj
        .get(meta::PROTOCOL_VERSION)
        .and_then(Value::as_str)
        .ok_or_else(|| {
            invalid_meta(format!(
                "`_meta[\"{}\"]` is required",
                meta::PROTOCOL_VERSION
            ))
        })?;
    let capabilities = meta_obj
        .get(meta::CLIENT_CAPABILITIES)
        .filter(|c| c.is_object())
        .cloned()
        .ok_or_else(|| {
            invalid_meta(format!(
                "`_meta[\"{}\"]` is required and must be an object",
                meta::CLIENT_CAPABILITIES
            ))
        })?;
    if body_version != version_header {
        return Err(header_mismatch(
            &id,
            "header_mismatch",
            format!(
                "Header mismatch: MCP-Protocol-Version header value '{version_header}' does not match body value '{body_version}'"
            ),
        ));
    }
    let log_level = match meta_obj.get(meta::LOG_LEVEL) {
        None => None,
        Some(Value::String(l)) if protocol::log_level_rank(l).is_some() => Some(l.clone()),
        Some(other) => {
            return Err(refuse(
                Some(&id),
                Reject::new(
                    StatusCode::BAD_REQUEST,
                    code::INVALID_PARAMS,
                    "invalid_log_level",
                    format!(
                        "`{}` must be one of {}; got {other}",
                        meta::LOG_LEVEL,
                        protocol::LOG_LEVELS.join(", ")
                    ),
                ),
            ));
        }
    };

    // 5. `Mcp-Name` mirrors `params.name` / `params.uri`.
    if let Some(field) = protocol::name_param(&method) {
        let body_name = params.get(field).and_then(Value::as_str).ok_or_else(|| {
            refuse(
                Some(&id),
                Reject::new(
                    StatusCode::BAD_REQUEST,
                    code::INVALID_PARAMS,
                    "invalid_params",
                    format!("`params.{field}` is required for {method}"),
                ),
            )
        })?;
        let raw = header_text(headers, "mcp-name")
            .map_err(|BadEncoding| {
                header_mismatch(
                    &id,
                    "header_invalid",
                    "Mcp-Name contains invalid characters".into(),
                )
            })?
            .ok_or_else(|| {
                header_mismatch(
                    &id,
                    "header_missing",
                    format!("the Mcp-Name header is required for {method}"),
                )
            })?;
        let decoded = decode_header_value(raw).map_err(|BadEncoding| {
            header_mismatch(
                &id,
                "header_invalid",
                "Mcp-Name carries an invalid base64 value".into(),
            )
        })?;
        if decoded != body_name {
            return Err(header_mismatch(
                &id,
                "header_mismatch",
                format!(
                    "Header mismatch: Mcp-Name header value '{decoded}' does not match body value '{body_name}'"
                ),
            ));
        }
    }

    let ctx = RequestContext {
        protocol_version: body_version.to_owned(),
        profile: Profile::from_client_capabilities(&capabilities),
        capabilities,
        client_info: meta_obj.get(meta::CLIENT_INFO).cloned(),
        log_level,
        progress_token: meta_obj
            .get("progressToken")
            .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
            .cloned(),
        traceparent: meta_obj
            .get("traceparent")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| {
                header_text(headers, "traceparent")
                    .ok()
                    .flatten()
                    .map(str::to_owned)
            }),
        tracestate: meta_obj
            .get("tracestate")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| {
                header_text(headers, "tracestate")
                    .ok()
                    .flatten()
                    .map(str::to_owned)
            }),
    };
    let param_headers = headers
        .iter()
        .filter(|(k, _)| k.as_str().starts_with("mcp-param-"))
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                v.to_str().ok().map(|s| s.trim().to_owned()),
            )
        })
        .collect();
    Ok(Parsed::Request(Box::new(ClientRequest {
        id,
        method,
        params,
        ctx,
        param_headers,
    })))
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
