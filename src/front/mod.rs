//! The top layer, the 2026-07-28 side: a Streamable HTTP endpoint per route.
//! Each POST goes through the [`pipeline`] (one documented step per check),
//! then [`dispatch`] answers it with JSON or SSE. Nothing below imports this.
//!
//! - [`server`]: accept loops, connection cap and refusals, timeouts for slow
//!   and greedy clients (idle, head, stalled writes), graceful shutdown.
//! - [`http`]: one request: route, pipeline, dispatch, metrics.
//! - [`pipeline`]: the ordered steps, and how to add one.
//! - [`dispatch`]: by method: discovery, lists, operations, subscriptions ([`listen`]).
//! - [`auth`]: authenticators (API keys, anonymous).
//! - [`response`]: JSON and SSE response bodies.
//! - [`access`]: what a request's access-log line says.
//! - [`admin`]: `/healthz`, `/readyz`, `/metrics`; [`readiness`]: what `/readyz` reports.

mod access;
pub mod admin;
pub mod auth;
pub mod dispatch;
pub mod http;
mod listen;
pub mod pipeline;
mod readiness;
pub mod response;
pub mod server;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::mrtr::Engine;
use crate::route::Route;
use crate::telemetry::metrics::Metrics;

/// Everything a request handler needs, shared by all connections. Built by
/// the composition step (`app`).
pub struct Gateway {
    /// By path; replaced whole by a config reload ([`Gateway::routes`]).
    pub routes: std::sync::RwLock<Arc<HashMap<String, Arc<Route>>>>,
    /// Replaced whole by a config reload ([`Gateway::pipeline`]).
    pub pipeline: std::sync::RwLock<Arc<pipeline::Pipeline>>,
    pub metrics: Arc<Metrics>,
    pub sse_keepalive: Duration,
    pub engine: Arc<Engine>,
    /// One line per client request ([`access`]).
    pub access: Arc<crate::telemetry::access::AccessLog>,
    pub(crate) shutdown: tokio::sync::watch::Sender<bool>,
    /// How `POST /reload` on the admin listener reloads the config file; set
    /// by the composition step only when the admin listener is on loopback.
    pub reload: std::sync::OnceLock<ReloadHook>,
}

/// Reloads the config file: what changed, or why nothing did.
pub type ReloadHook = Arc<dyn Fn() -> Result<serde_json::Value, String> + Send + Sync>;

impl Gateway {
    /// The routes in force. A request keeps the `Route` it started with, so
    /// a reload never touches an operation in flight.
    pub fn routes(&self) -> Arc<HashMap<String, Arc<Route>>> {
        self.routes
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The request pipeline in force (origins, API keys, body limits).
    pub fn pipeline(&self) -> Arc<pipeline::Pipeline> {
        self.pipeline
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Puts new routes and a new pipeline in force at once.
    pub fn replace(&self, routes: HashMap<String, Arc<Route>>, pipeline: pipeline::Pipeline) {
        let mut r = self
            .routes
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut p = self
            .pipeline
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *r = Arc::new(routes);
        *p = Arc::new(pipeline);
    }
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
        let routes = self.routes();
        routes.values().for_each(|r| r.pool.shutdown());
        futures::future::join_all(
            routes
                .values()
                .map(|r| r.pool.wait_ended(Duration::from_secs(5))),
        )
        .await;
    }
}
