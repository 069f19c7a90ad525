//! Step 4: media types (spec 2026-07-28 streamable-http.mdx "Sending
//! Messages": the body is one JSON-RPC message, and the client MUST list both
//! `application/json` and `text/event-stream` in `Accept`).

use http::{HeaderMap, header};

use super::{Check, Halt, RequestCx};
use crate::protocol::{Reason, Reject};

pub struct MediaTypes;

impl Check for MediaTypes {
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        // GET and DELETE carry no body; `front::era2025` checks what a GET accepts.
        if cx.head.method != http::Method::POST {
            return Ok(());
        }
        if !content_is_json(&cx.head.headers) {
            return Err(Halt::refuse(
                None,
                Reject::new(
                    Reason::UnsupportedMediaType,
                    "Content-Type must be application/json",
                ),
            ));
        }
        if !accepts_both(&cx.head.headers) {
            return Err(Halt::refuse(
                None,
                Reject::new(
                    Reason::NotAcceptable,
                    "Accept must list both application/json and text/event-stream",
                ),
            ));
        }
        Ok(())
    }
}

/// The type/subtype of a media range, parameters and spaces cut (compared
/// without regard to case, as media types are: no lowered copy per request).
fn essence(media: &str) -> &str {
    media.split(';').next().unwrap_or_default().trim()
}

fn content_is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return false;
    };
    // What clients send, compared whole before it is taken apart.
    value.as_bytes() == b"application/json"
        || value
            .to_str()
            .is_ok_and(|v| essence(v).eq_ignore_ascii_case("application/json"))
}

/// The `Accept` the official SDKs send, checked whole before it is taken apart.
const USUAL_ACCEPT: &[u8] = b"application/json, text/event-stream";

fn accepts_both(headers: &HeaderMap) -> bool {
    let mut all = headers.get_all(header::ACCEPT).iter();
    if let (Some(only), None) = (all.next(), all.next())
        && only.as_bytes() == USUAL_ACCEPT
    {
        return true;
    }
    let (mut json, mut sse) = (false, false);
    let ranges = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(essence);
    for range in ranges {
        let is = |want: &str| range.eq_ignore_ascii_case(want);
        let any = is("*/*");
        json |= any || is("application/json") || is("application/*");
        sse |= any || is("text/event-stream") || is("text/*");
    }
    json && sse
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn accept(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn content_type_is_compared_without_case_or_parameters() {
        let content = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(v));
            content_is_json(&h)
        };
        assert!(content("application/json"));
        assert!(content("Application/JSON; charset=utf-8"));
        assert!(!content("application/jsonl"));
        assert!(!content("text/plain"));
        assert!(!content_is_json(&HeaderMap::new()));
    }

    #[test]
    fn accept_needs_json_and_sse_in_any_form() {
        assert!(accepts_both(&accept(&[
            "application/json, text/event-stream"
        ])));
        assert!(accepts_both(&accept(&[
            "application/json",
            "text/event-stream;q=0.5"
        ])));
        assert!(accepts_both(&accept(&["*/*"])));
        assert!(accepts_both(&accept(&["application/*, text/*"])));
        assert!(!accepts_both(&accept(&["application/json"])));
        assert!(accepts_both(&accept(&[
            "Application/JSON",
            "TEXT/Event-Stream"
        ])));
        assert!(!accepts_both(&accept(&["text/event-stream"])));
        assert!(!accepts_both(&accept(&[])));
    }
}
