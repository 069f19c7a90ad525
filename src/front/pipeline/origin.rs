//! Step 1, `Origin` validation against DNS rebinding (spec 2026-07-28
//! streamable-http.mdx "Security & Endpoint": "Servers MUST validate the
//! `Origin` header on all incoming connections ... If the `Origin` header is
//! present and invalid, servers MUST respond with HTTP 403 Forbidden").

use http::header;

use super::{Check, Halt, RequestCx};
use crate::protocol::{Reason, Reject};

pub struct Origin {
    /// `[server] allowed_origins`; unset: loopback origins only.
    allowed: Option<Vec<String>>,
}

impl Origin {
    pub fn new(allowed: Option<Vec<String>>) -> Self {
        Self { allowed }
    }
}

impl Check for Origin {
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        let origin = cx
            .head
            .headers
            .get(header::ORIGIN)
            .map(|v| v.to_str().unwrap_or("\u{fffd}"));
        if allowed(origin, self.allowed.as_deref()) {
            return Ok(());
        }
        Err(Halt::refuse(
            None,
            Reject::new(
                Reason::OriginNotAllowed,
                "the Origin of this request is not allowed",
            ),
        ))
    }
}

/// True when a request with this `Origin` may proceed. Without an allow-list
/// only loopback origins pass; requests without `Origin` (non-browser clients)
/// always pass.
pub fn allowed(origin: Option<&str>, allow_list: Option<&[String]>) -> bool {
    let Some(origin) = origin else { return true };
    match allow_list {
        Some(list) => list
            .iter()
            .any(|a| a == "*" || a.eq_ignore_ascii_case(origin.trim_end_matches('/'))),
        None => is_loopback(origin),
    }
}

fn is_loopback(origin: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    if !matches!(scheme, "http" | "https") {
        return false;
    }
    let authority = rest.split('/').next().unwrap_or_default();
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    host.eq_ignore_ascii_case("localhost")
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_by_default() {
        assert!(allowed(None, None));
        assert!(allowed(Some("http://localhost:3000"), None));
        assert!(allowed(Some("http://127.0.0.1"), None));
        assert!(allowed(Some("https://[::1]:8443"), None));
        assert!(!allowed(Some("http://evil.example"), None));
        assert!(!allowed(Some("http://localhost.evil.example"), None));
        assert!(!allowed(Some("null"), None));
    }

    #[test]
    fn allow_list_is_exact() {
        let list = vec!["https://app.example.com".to_string()];
        assert!(allowed(Some("https://app.example.com"), Some(&list)));
        assert!(!allowed(Some("https://app.example.com.evil"), Some(&list)));
        assert!(!allowed(Some("http://localhost"), Some(&list)));
    }
}
