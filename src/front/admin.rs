//! The admin listener: `/healthz` (the process answers), `/readyz` (serving,
//! not shutting down, every upstream reachable: [`super::readiness`]), `/metrics` (Prometheus text format)
//! and `/report` (the report page, live: [`super::admin_report`]).
//!
//! A web page must not be able to use it through a browser (issue 42). Two
//! checks come before any path:
//! - **`Host`** names a loopback address (`localhost`, `127.0.0.0/8`,
//!   `[::1]`), the admin listener's own address, an IP literal when the
//!   listener is bound to all addresses, or one of `[server] admin_hosts`;
//!   any other name is refused (403). DNS rebinding points a name the
//!   attacker owns at this address: the browser then sends that name as
//!   `Host`, so refusing unknown names keeps a page from reading `/metrics`
//!   and `/readyz`. An IP literal cannot be rebound.
//! - **`Origin`**, when sent, must name a host the `Host` check allows (403
//!   otherwise): programs (Prometheus, kubelet, `redmark reload`) send none.
//!
//! And `POST /reload` must carry `Content-Type: application/json`: a
//! cross-origin form or `fetch` with a CORS-safelisted type (`text/plain`)
//! is sent without a preflight, while `application/json` needs one, which
//! this listener never grants (415 otherwise).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;

use super::Gateway;
use super::response::{self as body, Body};

/// The `Host` values the admin listener answers (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts {
    /// The listener's bound address.
    addr: Option<SocketAddr>,
    /// `[server] admin_hosts`, lower-cased.
    names: Vec<String>,
}

impl AllowedHosts {
    pub fn new(addr: Option<SocketAddr>, names: &[String]) -> Self {
        Self {
            addr,
            names: names.iter().map(|n| n.to_ascii_lowercase()).collect(),
        }
    }

    /// Whether `authority` (`host[:port]`, as in `Host`) names this listener.
    pub fn allows(&self, authority: &str) -> bool {
        let host = host_of(authority).to_ascii_lowercase();
        if host == "localhost" || self.names.contains(&host) {
            return true;
        }
        let Ok(ip) = host.parse::<IpAddr>() else {
            return false;
        };
        ip.is_loopback()
            || self
                .addr
                .is_some_and(|a| a.ip().is_unspecified() || a.ip() == ip)
    }
}

/// The host of `host[:port]` or `[v6][:port]`, without brackets.
fn host_of(authority: &str) -> &str {
    if let Some(v6) = authority.strip_prefix('[') {
        // No closing bracket: not an authority at all.
        return v6.split_once(']').map(|(h, _)| h).unwrap_or_default();
    }
    // A bare IPv6 address (no brackets, no port) has several colons.
    if authority.matches(':').count() > 1 {
        return authority;
    }
    authority.split(':').next().unwrap_or_default()
}

/// Why a request is not served, before its path is looked at.
fn refused(hosts: &AllowedHosts, req: &Request<Incoming>) -> Option<&'static str> {
    let host = req
        .headers()
        .get(header::HOST)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"))
        .or_else(|| req.uri().authority().map(http::uri::Authority::as_str));
    if host.is_some_and(|h| !hosts.allows(h)) {
        return Some("this Host is not the admin listener's (DNS rebinding protection)\n");
    }
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let authority = origin
            .to_str()
            .ok()
            .and_then(|o| o.split_once("://"))
            .map(|(_, rest)| rest.split('/').next().unwrap_or_default());
        if !authority.is_some_and(|a| hosts.allows(a)) {
            return Some("cross-origin requests are not served by the admin listener\n");
        }
    }
    None
}

pub async fn handle(
    gw: Arc<Gateway>,
    hosts: Arc<AllowedHosts>,
    req: Request<Incoming>,
) -> Response<Body> {
    if let Some(why) = refused(&hosts, &req) {
        return body::text(StatusCode::FORBIDDEN, why);
    }
    match req.uri().path() {
        "/healthz" => body::text(StatusCode::OK, "ok\n"),
        "/readyz" => super::readiness::readyz(&gw).await,
        "/reload" => reload(&gw, &req),
        "/report" => super::admin_report::report(&gw, &req).await,
        "/metrics" => {
            let mut resp = body::text(StatusCode::OK, &gw.metrics.render());
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            resp
        }
        _ => body::text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// `POST /reload`: the config file reloaded, with what changed (200) or why
/// nothing did (400). Served only on a loopback admin listener: anyone who
/// can reach it can reload.
fn reload(gw: &Gateway, req: &Request<Incoming>) -> Response<Body> {
    if req.method() != http::Method::POST {
        return body::text(StatusCode::METHOD_NOT_ALLOWED, "POST /reload\n");
    }
    // A type a browser may send cross-origin without a preflight
    // (text/plain, a form) is refused: see the module doc.
    let json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return body::text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "POST /reload with Content-Type: application/json\n",
        );
    }
    let Some(hook) = gw.reload.get() else {
        return body::text(
            StatusCode::FORBIDDEN,
            "reload is served only when the admin listener is on loopback (use SIGHUP)\n",
        );
    };
    match hook() {
        Ok(done) => body::json(StatusCode::OK, &done),
        Err(why) => body::json(
            StatusCode::BAD_REQUEST,
            &serde_json::json!({ "error": why, "running": "the running config stays in force" }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_the_listeners_own_address_are_allowed_other_names_not() {
        let on =
            |a: &str| AllowedHosts::new(Some(a.parse().unwrap()), &["metrics.internal".into()]);
        let lo = on("127.0.0.1:9464");
        for ok in [
            "127.0.0.1:9464",
            "127.0.0.1",
            "localhost:9464",
            "LOCALHOST",
            "[::1]:9464",
            "::1",
            "127.1.2.3:80",
            "metrics.internal:9464",
        ] {
            assert!(lo.allows(ok), "{ok}");
        }
        for bad in [
            "evil.example:9464",
            "evil.example",
            "10.0.0.5:9464",
            "localhost.evil.example",
            "",
            "[::1",
        ] {
            assert!(!lo.allows(bad), "{bad}");
        }
        let pod = on("10.0.0.5:9464");
        assert!(pod.allows("10.0.0.5:9464") && !pod.allows("10.0.0.6:9464"));
        // Bound to every address: any IP literal, still no unknown name.
        let all = on("0.0.0.0:9464");
        assert!(all.allows("10.0.0.6:9464") && all.allows("[fe80::1]:9464"));
        assert!(!all.allows("rebound.evil.example:9464"));
    }
}
