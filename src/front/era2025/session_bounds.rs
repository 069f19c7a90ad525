//! What a 2025-era session keeps, bounded: the capability members redmark
//! acts on (each of bounded size), the session id's length, and its
//! resource subscriptions (how many, how long a URI). The memory a session
//! can hold follows from these (docs/src/operations/capacity.md).

use serde_json::Value;

use crate::protocol::{Reason, Reject};

/// The `capabilities` members a session keeps: the ones redmark acts on
/// (`Profile::from_client_capabilities` reads them, and a native server is
/// told them). Anything else a client declares (`experimental`, members of
/// later revisions) is dropped at `initialize`: redmark would only carry it.
pub const KEPT_CAPABILITIES: [&str; 3] = ["elicitation", "sampling", "roots"];

/// Longest kept capability member, as JSON: a real client's are tens of
/// bytes (`{"form": {}, "url": {}}`); a longer one is refused at
/// `initialize` rather than sealed into an id that rides on every request.
pub const MAX_CAPABILITY_BYTES: usize = 256;

/// Longest session id redmark mints, for a route name of up to
/// [`MAX_ROUTE_NAME_FOR_ID`] bytes: the sealed contents are bounded
/// (capabilities by [`MAX_CAPABILITY_BYTES`], `clientInfo` by
/// [`MAX_CLIENT_INFO_BYTES`], the rest fixed-size), sealed and base64url'd.
/// A unit test seals the largest contents and holds the id to it.
pub const MAX_SESSION_ID_BYTES: usize = 4096;
pub const MAX_ROUTE_NAME_FOR_ID: usize = 64;

/// Most resources one session may be subscribed to, and the longest URI it
/// may subscribe to (bytes): what a session holds for subscriptions is at
/// most their product (32 KiB).
pub const MAX_SUBSCRIPTIONS: usize = 32;
pub const MAX_SUBSCRIPTION_URI_BYTES: usize = 1024;

/// What a session keeps of `initialize`'s `capabilities`: the members of
/// [`KEPT_CAPABILITIES`], each at most [`MAX_CAPABILITY_BYTES`] as JSON
/// (refused beyond, naming the member and the limit); the rest is dropped.
pub fn kept_capabilities(caps: &serde_json::Map<String, Value>) -> Result<Value, Reject> {
    let mut kept = serde_json::Map::new();
    for name in KEPT_CAPABILITIES {
        let Some(member) = caps.get(name) else {
            continue;
        };
        let len = serde_json::to_vec(member).map_or(usize::MAX, |b| b.len());
        if len > MAX_CAPABILITY_BYTES {
            return Err(Reject::new(
                Reason::CapabilitiesTooLarge,
                format!(
                    "`capabilities.{name}` is {len} bytes as JSON; a session keeps at most {MAX_CAPABILITY_BYTES} bytes of each capability"
                ),
            ));
        }
        kept.insert(name.to_owned(), member.clone());
    }
    Ok(Value::Object(kept))
}

/// A subscription's URI within [`MAX_SUBSCRIPTION_URI_BYTES`] (a 2025-era
/// `resources/subscribe` and a 2026-07-28 listen's `resourceSubscriptions`).
pub fn check_subscription_uri(uri: &str) -> Result<(), Reject> {
    if uri.len() > MAX_SUBSCRIPTION_URI_BYTES {
        return Err(Reject::new(
            Reason::UriTooLong,
            format!(
                "the URI is {} bytes; a subscription's URI may have at most {MAX_SUBSCRIPTION_URI_BYTES}",
                uri.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::super::{Opening, Sessions};
    use super::*;
    use crate::config::SessionsConfig;
    use crate::mrtr::state::{Keyring, SharedKeyring};

    /// The largest contents a session id can seal (every kept capability at
    /// its limit, with characters JSON escapes six-fold; a `clientInfo`
    /// cut to its name, title and version, likewise escaped; the longest
    /// route name the bound is stated for) still make an id within
    /// [`MAX_SESSION_ID_BYTES`].
    #[tokio::test]
    async fn the_largest_session_id_is_within_its_stated_bound() {
        let sessions = Sessions::new(
            Arc::new(SharedKeyring::new(Keyring::ephemeral())),
            SessionsConfig::default(),
            "n1".into(),
            None,
            Default::default(),
        );
        // `{"x":"…"}` is 8 bytes around the text; each \u0001 is 6 bytes as JSON.
        let member = json!({"x": "\u{1}".repeat((MAX_CAPABILITY_BYTES - 8) / 6)});
        assert!(serde_json::to_vec(&member).unwrap().len() <= MAX_CAPABILITY_BYTES);
        let caps = json!({"elicitation": member, "sampling": member, "roots": member});
        let kept = kept_capabilities(caps.as_object().unwrap()).unwrap();
        let text = "\u{1}".repeat(4096);
        let info = json!({"name": text, "title": text, "version": text, "icons": [text]});
        let route = "r".repeat(MAX_ROUTE_NAME_FOR_ID);
        let (id, session) = sessions
            .open(Opening {
                route: &route,
                principal: "p",
                version: "2025-11-25",
                capabilities: kept,
                client_info: Some(info),
                can_subscribe: true,
            })
            .unwrap();
        assert!(
            id.len() <= MAX_SESSION_ID_BYTES,
            "an id of {} bytes",
            id.len()
        );
        assert_eq!(
            session.client_info.as_ref().unwrap()["name"]
                .as_str()
                .unwrap()
                .chars()
                .count(),
            MAX_CLIENT_INFO_TEXT_FOR_TESTS
        );
    }

    const MAX_CLIENT_INFO_TEXT_FOR_TESTS: usize = 64;

    #[test]
    fn a_subscription_uri_is_bounded() {
        assert!(check_subscription_uri(&"u".repeat(MAX_SUBSCRIPTION_URI_BYTES)).is_ok());
        let refused =
            check_subscription_uri(&"u".repeat(MAX_SUBSCRIPTION_URI_BYTES + 1)).unwrap_err();
        assert_eq!(refused.reason, Reason::UriTooLong);
        assert!(refused.message.contains("1024"), "{}", refused.message);
    }
}
