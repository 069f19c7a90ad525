//! `assert_error`, the one check of an error answer, and `assert_contains`.

use std::ops::Deref;

use serde_json::Value;

use super::{Resp, assert_schema};

/// An error answer that passed [`assert_error`]; derefs to its `error` object.
#[derive(Debug, Clone, Copy)]
pub struct Refusal<'r> {
    pub resp: &'r Resp,
    pub error: &'r Value,
}

impl Deref for Refusal<'_> {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.error
    }
}

impl std::fmt::Display for Refusal<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl<'r> Refusal<'r> {
    /// The error's `data`.
    pub fn data(&self) -> &'r Value {
        &self.error["data"]
    }

    /// Also asserts the error came as a plain JSON body (not a stream) whose
    /// id is `id` (`None`: no id at all).
    pub fn json_reply_to(self, id: Option<Value>) -> Self {
        let (r, msg) = (self.resp, self.resp.last());
        assert!(
            r.content_type.starts_with("application/json"),
            "content type {:?}; body: {}",
            r.content_type,
            r.raw
        );
        assert_eq!(msg.get("id"), id.as_ref(), "echoed id; body: {msg}");
        self
    }
}

/// Asserts `text` contains every one of `parts`.
pub fn assert_contains(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} not in {text:?}");
    }
}

/// Asserts `r` is an error answer with HTTP `status`, JSON-RPC `code` and
/// `data.reason`, valid as a `JSONRPCErrorResponse` and as the schema's own
/// definition for `code` where it has one.
pub fn assert_error<'r>(r: &'r Resp, status: u16, code: i64, reason: &str) -> Refusal<'r> {
    assert_eq!(r.status, status, "HTTP status; body: {}", r.raw);
    let msg = r.last();
    assert_schema("JSONRPCErrorResponse", msg);
    let error = r.error();
    assert_eq!(error["code"], code, "code; body: {msg}");
    assert_eq!(error["data"]["reason"], reason, "data.reason; body: {msg}");
    match code {
        // Definitions of a whole response.
        -32020 => assert_schema("HeaderMismatchError", msg),
        -32021 => assert_schema("MissingRequiredClientCapabilityError", msg),
        -32022 => assert_schema("UnsupportedProtocolVersionError", msg),
        // Definitions of the error object.
        -32700 => assert_schema("ParseError", error),
        -32600 => assert_schema("InvalidRequestError", error),
        -32601 => assert_schema("MethodNotFoundError", error),
        -32602 => assert_schema("InvalidParamsError", error),
        -32603 => assert_schema("InternalError", error),
        _ => {}
    }
    Refusal { resp: r, error }
}
