//! Step 4: media types (spec 2026-07-28 streamable-http.mdx "Sending
//! Messages": the body is one JSON-RPC message, and the client MUST list both
//! `application/json` and `text/event-stream` in `Accept`).

use http::{HeaderMap, header};

use super::{Halt, RequestCx, Step};
use crate::protocol::{Reason, Reject};

pub struct MediaTypes;

#[async_trait::async_trait]
impl Step for MediaTypes {
    async fn on_request(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        if !media_type(&cx.head.headers).is_some_and(|m| m.eq_ignore_ascii_case("application/json"))
        {
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

fn media_type(headers: &HeaderMap) -> Option<&str> {
    Some(essence(headers.get(header::CONTENT_TYPE)?.to_str().ok()?))
}

fn accepts_both(headers: &HeaderMap) -> bool {
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
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("Application/JSON; charset=utf-8"),
        );
        assert_eq!(media_type(&h), Some("Application/JSON"));
        assert!(media_type(&h).is_some_and(|m| m.eq_ignore_ascii_case("application/json")));
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
        assert!(!accepts_both(&accept(&["application/json"])));
        assert!(!accepts_both(&accept(&["text/event-stream"])));
        assert!(!accepts_both(&accept(&[])));
    }
}
