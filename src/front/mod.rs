//! The top layer, the 2026-07-28 side: a Streamable HTTP endpoint per route.
//! Each POST goes through the [`pipeline`] (one documented step per check),
//! then [`dispatch`] answers it with JSON or SSE. Nothing below imports this.
//!
//! - [`server`]: accept loops, connection cap and refusals, timeouts for slow
//!   and greedy clients (idle, head, stalled writes), graceful shutdown.
//! - [`http`]: one request: route, pipeline, dispatch, metrics.
//! - [`pipeline`]: the ordered steps, and how to add one.
//! - [`dispatch`]: by method: discovery, lists, operations, subscriptions ([`listen`]).
//! - [`auth`]: authenticators (API keys, bearer JWTs, anonymous).
//! - [`oauth`]: the OAuth 2.1 resource server: JWT validation, JWKS, Protected Resource Metadata.
//! - [`response`]: JSON and SSE response bodies.
//! - [`admin`]: `/healthz`, `/readyz`, `/metrics`.

pub mod admin;
pub mod auth;
pub mod dispatch;
pub mod http;
mod listen;
pub mod oauth;
pub mod pipeline;
pub mod response;
pub mod server;
pub mod tls;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::mrtr::Engine;
use crate::route::Route;
use crate::telemetry::metrics::Metrics;

/// Everything a request handler needs, shared by all connections. Built by
/// the composition step (`app`).
pub struct Gateway {
    /// By path.
    pub routes: HashMap<String, Arc<Route>>,
    pub pipeline: pipeline::Pipeline,
    /// Also serves the routes' Protected Resource Metadata (RFC 9728).
    pub authenticator: Arc<dyn auth::Authenticator>,
    pub metrics: Arc<Metrics>,
    pub sse_keepalive: Duration,
    pub engine: Arc<Engine>,
    pub(crate) shutdown: tokio::sync::watch::Sender<bool>,
}

impl Gateway {
    /// Changes to `true` when the gateway starts shutting down.
    pub fn shutdown_signal(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Tells long-lived streams (subscriptions) and waiting operations to finish.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Stops every pool: idle sessions end now, leased ones when returned.
    pub async fn shutdown_upstreams(&self) {
        self.routes.values().for_each(|r| r.pool.shutdown());
        futures::future::join_all(
            self.routes
                .values()
                .map(|r| r.pool.wait_ended(Duration::from_secs(5))),
        )
        .await;
    }
}
