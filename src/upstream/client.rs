//! The HTTP clients that carry upstream traffic, per `[route.upstream]
//! http2`: which HTTP version, how many idle connections are kept, and which
//! sessions get a connection of their own.
//!
//! HTTP/2 multiplexes, so a hold-mode call waiting for a person is one stream
//! instead of one HTTP/1.1 connection (its socket, buffers and connection
//! task). But hyper's client never opens a second HTTP/2 connection to a host
//! (RFC 9113 section 9.1: "Clients SHOULD NOT open more than one HTTP/2
//! connection to a given host and port pair"): once the server's
//! `SETTINGS_MAX_CONCURRENT_STREAMS` are all held by waiting calls, every
//! further request, the answers that would release them included, queues
//! behind them. So a session that may speak HTTP/2 gets a client (hence a
//! connection) of its own, and its streams are bounded by the pool's
//! `max_operations_per_session` plus the few short requests beside them.

use std::time::Duration;

use crate::config::UpstreamHttp2;

/// Idle keep-alive connections kept per upstream host and client, at most.
pub const IDLE_CONNECTIONS: usize = 64;

/// Idle HTTP/1.1 connections a session's own client keeps (an `https://`
/// server that did not agree on `h2`): the session's short requests reuse
/// them; its calls in flight hold their own.
pub const SESSION_IDLE_CONNECTIONS: usize = 4;

/// How long an idle upstream connection is kept for reuse.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How often an HTTP/2 connection with streams open is pinged, so a peer that
/// vanished without a FIN is noticed while calls wait on it for minutes.
const H2_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
const H2_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// A client for traffic of the whole route (short requests: the stateless
/// protocol's, and every legacy session's unless [`for_session`] gives it
/// its own). Its idle pool is bounded: reqwest's default keeps every
/// connection ever opened (one per hold-mode call in flight, so thousands
/// after a burst of waiting questions) for 90 s to 3 min; the soak
/// (examples/soak.rs) found 196 of them left at rest after 1,000 questions.
pub fn shared(http2: UpstreamHttp2) -> reqwest::Client {
    build(http2, IDLE_CONNECTIONS)
}

/// A client of its own for one legacy session to `url`, when that session
/// may speak HTTP/2 (`prior_knowledge`, or `auto` over `https://`); `None`:
/// use the route's shared client (HTTP/1.1 only, a connection per request in
/// flight anyway).
pub fn for_session(http2: UpstreamHttp2, url: &str) -> Option<reqwest::Client> {
    let https = url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"));
    match http2 {
        UpstreamHttp2::PriorKnowledge => Some(build(http2, 1)),
        UpstreamHttp2::Auto if https => Some(build(http2, SESSION_IDLE_CONNECTIONS)),
        UpstreamHttp2::Auto | UpstreamHttp2::Off => None,
    }
}

fn build(http2: UpstreamHttp2, idle: usize) -> reqwest::Client {
    let builder = reqwest::Client::builder()
        // A redirect is not followed but answered as the upstream's failure,
        // as a reverse proxy does: following one would send the call (its
        // body and the route's headers) to wherever the server points, and
        // reqwest's redirect layer parsed the URL again on every request.
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(idle)
        .pool_idle_timeout(IDLE_TIMEOUT)
        .http2_keep_alive_interval(H2_KEEP_ALIVE_INTERVAL)
        .http2_keep_alive_timeout(H2_KEEP_ALIVE_TIMEOUT);
    let builder = match http2 {
        UpstreamHttp2::Auto => builder,
        UpstreamHttp2::PriorKnowledge => builder.http2_prior_knowledge(),
        UpstreamHttp2::Off => builder.http1_only(),
    };
    builder.build().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sessions_that_may_speak_http2_get_a_client_of_their_own() {
        let own = |mode, url| for_session(mode, url).is_some();
        assert!(own(UpstreamHttp2::PriorKnowledge, "http://127.0.0.1:1/mcp"));
        assert!(own(UpstreamHttp2::Auto, "https://example.com/mcp"));
        assert!(own(UpstreamHttp2::Auto, "HTTPS://example.com/mcp"));
        assert!(!own(UpstreamHttp2::Auto, "http://127.0.0.1:1/mcp"));
        assert!(!own(UpstreamHttp2::Off, "https://example.com/mcp"));
    }
}
