//! Part of step 6: the transport's mirrored headers and what the revision has
//! (spec 2026-07-28 streamable-http.mdx "Server Validation"), checked in this
//! order so each mistake gets its own error:
//! 1. `MCP-Protocol-Version` and `Mcp-Method` present, each sent once (or
//!    repeated with the same value), `Mcp-Method` equal to the body's method
//!    (a missing one is a HeaderMismatch);
//! 2. a version redmark speaks (versioning.mdx "Protocol Version
//!    Negotiation": MUST respond with UnsupportedProtocolVersionError);
//! 3. a method 2026-07-28 has ("Protocol Version Header": MUST respond 404
//!    with -32601).

use std::borrow::Cow;

use base64::Engine;
use http::{HeaderMap, HeaderValue};
use serde_json::json;

use super::Halt;
use crate::jsonrpc::Id;
use crate::protocol::{Method, Reason, Reject, SUPPORTED_VERSIONS};

/// A header value that is not visible ASCII, or whose `=?base64?…?=` encoding
/// does not decode to UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the header value is not valid visible ASCII or base64-encoded UTF-8")]
pub struct BadEncoding;

/// Why a mirrored header cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error(transparent)]
    BadEncoding(#[from] BadEncoding),
    /// Sent more than once with values that differ.
    #[error("the header is sent more than once with different values")]
    Conflicting,
}

/// One header read as text, trimmed as HTTP does, gathered value by value.
/// A header sent more than once must carry the same value every time:
/// otherwise a proxy that routes or authorizes on the last value would see
/// another request than the one checked here (spec streamable-http.mdx
/// "Server Validation": servers MUST reject headers that do not match the
/// body, because "different components in the network rely on different
/// sources of truth").
#[derive(Debug, Default, Clone, Copy)]
pub struct HeaderText<'h>(Option<Result<&'h str, HeaderError>>);

impl<'h> HeaderText<'h> {
    /// The next value sent under the name: the first mistake met decides
    /// (a value that is not visible ASCII, or one that differs from the first).
    fn add(&mut self, value: &'h HeaderValue) {
        let text = value
            .to_str()
            .map(str::trim)
            .map_err(|_| BadEncoding.into());
        self.0 = Some(match (self.0, text) {
            (None, text) => text,
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(_)), Err(e)) => Err(e),
            (Some(Ok(first)), Ok(other)) if other != first => Err(HeaderError::Conflicting),
            (Some(Ok(first)), Ok(_)) => Ok(first),
        });
    }

    pub fn get(self) -> Result<Option<&'h str>, HeaderError> {
        self.0.transpose()
    }
}

/// The headers step 6 reads, found in one pass over the request's headers:
/// each lookup by name hashes the name, and the six lookups a call made
/// were 1.7k instructions (benches/WHERE_THE_TIME_GOES.md).
#[derive(Debug, Default)]
pub struct Mirrored<'h> {
    pub version: HeaderText<'h>,
    pub method: HeaderText<'h>,
    pub name: HeaderText<'h>,
    pub traceparent: HeaderText<'h>,
    pub tracestate: HeaderText<'h>,
    /// `Mcp-Param-*`, lower-cased; `None` when the value was not visible ASCII.
    pub params: Vec<(String, Option<String>)>,
}

impl<'h> Mirrored<'h> {
    pub fn read(headers: &'h HeaderMap) -> Mirrored<'h> {
        let mut m = Mirrored::default();
        for (name, value) in headers {
            let slot = match name.as_str() {
                "mcp-protocol-version" => &mut m.version,
                "mcp-method" => &mut m.method,
                "mcp-name" => &mut m.name,
                "traceparent" => &mut m.traceparent,
                "tracestate" => &mut m.tracestate,
                other if other.starts_with("mcp-param-") => {
                    let text = value.to_str().ok().map(|s| s.trim().to_owned());
                    m.params.push((other.to_owned(), text));
                    continue;
                }
                _ => continue,
            };
            slot.add(value);
        }
        m
    }
}

/// Decodes the `=?base64?…?=` sentinel (spec streamable-http.mdx "Value Encoding":
/// servers MUST decode an encoded value before comparing it to the body).
pub fn decode_header_value(raw: &str) -> Result<Cow<'_, str>, BadEncoding> {
    match raw
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|_| BadEncoding)?;
            String::from_utf8(bytes)
                .map(Cow::Owned)
                .map_err(|_| BadEncoding)
        }
        None => Ok(Cow::Borrowed(raw)),
    }
}

pub fn mismatch(id: &Id, reason: Reason, message: String) -> Halt {
    Halt::refuse(Some(id), Reject::new(reason, message))
}

/// A mirrored header that must be present and readable; `for_method`, when
/// given, is named in the error for a missing one.
pub fn required<'h>(
    header: HeaderText<'h>,
    id: &Id,
    display: &str,
    for_method: Option<&str>,
) -> Result<&'h str, Halt> {
    header
        .get()
        .map_err(|e| match e {
            HeaderError::BadEncoding(BadEncoding) => mismatch(
                id,
                Reason::HeaderInvalid,
                format!("{display} contains invalid characters"),
            ),
            HeaderError::Conflicting => mismatch(
                id,
                Reason::HeaderMismatch,
                format!("Header mismatch: {display} is sent more than once with different values"),
            ),
        })?
        .ok_or_else(|| {
            mismatch(
                id,
                Reason::HeaderMissing,
                match for_method {
                    Some(method) => format!("the {display} header is required for {method}"),
                    None => format!("the {display} header is required"),
                },
            )
        })
}

/// What a newcomer needs to hear after the first line of an error to a
/// request that is neither 2026-07-28 (no modern `_meta` and headers) nor
/// 2025-era (no `initialize` first, no session): the two ways in, and each
/// common client's switch for the stateless one.
pub fn modern_only_hint() -> String {
    format!(
        "this endpoint speaks MCP {} statelessly (every request carries MCP-Protocol-Version, \
         Mcp-Method and `_meta`) and 2024-11-05 to 2025-11-25 in a session a client opens with \
         `initialize`. Pin your client to 2026-07-28: TypeScript `new Client(info, {{ versionNegotiation: {{ mode: {{ pin: '2026-07-28' }} }} }})`; \
         Python `mcp`: `Client(url, mode=\"2026-07-28\")`; \
         MCP Inspector: `--transport http --protocol-era modern`",
        SUPPORTED_VERSIONS.join(", ")
    )
}

/// The checks of this step, in order, for a request with `id` and `method`.
pub fn check(headers: &Mirrored<'_>, id: &Id, method: &str) -> Result<(), Halt> {
    // A missing version header is how a legacy client (or one left in
    // legacy/auto mode) first shows itself: spec versioning.mdx
    // "Compatibility Matrix" (legacy client, modern server): "rejected per
    // server validation with 400 Bad Request".
    let version = required(headers.version, id, "MCP-Protocol-Version", None).map_err(newcomer)?;
    let method_header = required(headers.method, id, "Mcp-Method", None)?;
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
                    "`{method}` does not exist in MCP {}; {}",
                    SUPPORTED_VERSIONS[0],
                    modern_only_hint()
                ),
            ),
            // 2025-11-25's `tasks/result` and `tasks/list`, gone from the
            // tasks extension, and any other `tasks/*`: a client hears why.
            _ if method.starts_with("tasks/") => (
                Reason::MethodNotFound,
                format!(
                    "Method not found: `{method}`; redmark serves no tasks/* method but tasks/get, tasks/update and tasks/cancel of the {} extension (2025-11-25's tasks/result and tasks/list are not in it)",
                    crate::protocol::tasks::EXTENSION
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

/// A missing `MCP-Protocol-Version` gets the pinning hint and
/// `data.supported`; its reason (`header_missing`) is unchanged. Other
/// refusals of the header (invalid, conflicting) pass through as they are.
fn newcomer(halt: Halt) -> Halt {
    match halt {
        Halt::Refuse(mut refusal) if refusal.reject.reason == Reason::HeaderMissing => {
            let first = "the MCP-Protocol-Version header is required";
            refusal.reject.message = format!("{first}: {}", modern_only_hint());
            refusal
                .reject
                .data
                .insert("supported".to_owned(), json!(SUPPORTED_VERSIONS));
            Halt::Refuse(refusal)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &[u8])]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(*name, HeaderValue::from_bytes(value).unwrap());
        }
        h
    }

    /// Repeats must agree, and the first mistake met decides.
    #[test]
    fn a_header_is_read_trimmed_and_its_repeats_must_agree() {
        type Case = (
            &'static [(&'static str, &'static [u8])],
            Result<Option<&'static str>, HeaderError>,
        );
        let bad = Err(HeaderError::BadEncoding(BadEncoding));
        let cases: [Case; 6] = [
            (&[("mcp-method", b" tools/call ")], Ok(Some("tools/call"))),
            (&[("mcp-method", b"a"), ("mcp-method", b"a")], Ok(Some("a"))),
            (
                &[("mcp-method", b"a"), ("mcp-method", b"b")],
                Err(HeaderError::Conflicting),
            ),
            (&[("mcp-method", b"a"), ("mcp-method", b"\xff")], bad),
            (&[("mcp-method", b"\xff"), ("mcp-method", b"b")], bad),
            (&[("host", b"x")], Ok(None)),
        ];
        for (case, expected) in cases {
            let h = headers(case);
            assert_eq!(Mirrored::read(&h).method.get(), expected, "{case:?}");
        }
    }

    #[test]
    fn one_pass_finds_each_mirrored_header_and_the_param_headers() {
        let h = headers(&[
            ("mcp-protocol-version", b"2026-07-28"),
            ("mcp-name", b"echo"),
            ("traceparent", b"00-aa-bb-01"),
            ("mcp-param-region", b" eu "),
            ("mcp-param-bad", b"\xff"),
            ("tracestate", b"k=v"),
        ]);
        let m = Mirrored::read(&h);
        assert_eq!(m.version.get(), Ok(Some("2026-07-28")));
        assert_eq!(m.name.get(), Ok(Some("echo")));
        assert_eq!(m.method.get(), Ok(None));
        assert_eq!(m.traceparent.get(), Ok(Some("00-aa-bb-01")));
        assert_eq!(m.tracestate.get(), Ok(Some("k=v")));
        assert_eq!(
            m.params,
            vec![
                ("mcp-param-region".to_owned(), Some("eu".to_owned())),
                ("mcp-param-bad".to_owned(), None),
            ]
        );
    }
}
