//! `/readyz`: 200 only while the gateway is not shutting down and every
//! route can reach its upstream; otherwise 503. The JSON body lists each
//! route's state and last error either way, so an operator (or a probe's
//! event log) sees why. `/healthz` stays the liveness probe: a route whose
//! server is down makes the pod unready, never restarted.
//!
//! A route not yet up is probed here (a throwaway session, at most one per
//! route per second), so a route that is down comes back up without a
//! client having to fail first, and a new replica tells the truth before its
//! first request.

use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};

use super::Gateway;
use super::response::{self as body, Body};
use crate::upstream::health::State;
use crate::upstream::native::Detected;

/// How long `/readyz` waits for the probes it started (kubelet's default
/// `timeoutSeconds` is 1; the shipped manifests give it 5).
const PROBE_WAIT: Duration = Duration::from_secs(2);

pub async fn readyz(gw: &Gateway) -> http::Response<Body> {
    // A draining replica (`[cluster]`, after SIGTERM) is not ready for new calls either.
    let shutting_down = *gw.shutdown_signal().borrow() || gw.engine.is_draining();
    if !shutting_down {
        probe(gw).await;
    }
    let (ready, report) = report(gw, shutting_down);
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    body::json(status, &report)
}

/// Starts a probe of every route that is not up and waits for them, bounded.
async fn probe(gw: &Gateway) {
    let routes = gw.routes();
    let waits = routes.values().map(|route| async move {
        // A native server is asked `server/discover`; it holds no sessions.
        if route.native.is_native().await {
            let _ = route.native.discover(PROBE_WAIT).await;
            return;
        }
        let mut rx = route.pool.health().subscribe();
        let Some(started) = route.pool.probe() else {
            return;
        };
        // Another probe may hold the slot: then wait for its answer instead.
        let _ = started.await;
        let _ = rx.wait_for(|s| s.state != State::Unknown).await;
    });
    let all = futures::future::join_all(waits.collect::<Vec<_>>());
    let _ = tokio::time::timeout(PROBE_WAIT, all).await;
}

fn report(gw: &Gateway, shutting_down: bool) -> (bool, Value) {
    let all = gw.routes();
    let mut routes: Vec<_> = all.values().collect();
    routes.sort_by(|a, b| a.name.cmp(&b.name));
    let mut ready = !shutting_down;
    let listed: Vec<Value> = routes
        .iter()
        .map(|route| {
            let health = route.pool.health().snapshot();
            if route.native.detected() == Detected::Native {
                let up = route.native.is_up();
                ready &= up;
                return json!({
                    "route": &*route.name,
                    "path": route.path,
                    "protocol": route.native.detected().label(),
                    "state": if up { "up" } else { "down" },
                    "last_error": route.native.last_error(),
                });
            }
            ready &= health.state == State::Up;
            json!({
                "route": &*route.name,
                "path": route.path,
                "protocol": route.native.detected().label(),
                "state": health.state,
                "since": humantime::format_rfc3339_seconds(health.since).to_string(),
                "last_error": health.last_error,
                "last_reason": health.last_reason,
            })
        })
        .collect();
    let status = match (shutting_down, ready) {
        (true, _) => "shutting_down",
        (false, true) => "ready",
        (false, false) => "not_ready",
    };
    (ready, json!({"status": status, "routes": listed}))
}
