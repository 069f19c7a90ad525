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
        if media_type(&cx.head.headers).as_deref() != Some("application/json") {
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

fn essence(media: &str) -> String {
    media
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

fn media_type(headers: &HeaderMap) -> Option<String> {
    Some(essence(headers.get(header::CONTENT_TYPE)?.to_str().ok()?))
}

fn accepts_both(headers: &HeaderMap) -> bool {
    let accept: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(essence)
        .collect();
    let has = |want: &str, family: &str| {
        accept
            .iter()
            .any(|a| a == want || a == family || a == "*/*")
    };
    has("application/json", "application/*") && has("text/event-stream", "text/*")
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
        assert!(!accepts_both(&accept(&[])));
    }
}
