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
//! - [`access`]: what a request's access-log line says.
//! - [`era2025`]: 2025-era clients (`initialize`, sessions, pushed questions) on the same endpoint.
//! - [`rounds`]: the loop of a call whose rounds redmark answers for its client (2025-era calls, [`tasks`]).
//! - [`admin`]: `/healthz`, `/readyz`, `/metrics`; [`readiness`]: what `/readyz` reports.
//! - [`cluster`]: the internal endpoint (retries forwarded by other replicas) and its signature.
//! - [`forward`]: the client that forwards a hold-mode retry to the replica owning it.

pub(crate) mod access;
pub mod admin;
pub mod admin_report;
pub mod auth;
pub mod body_budget;
pub mod client_cert;
pub mod cluster;
pub mod dispatch;
pub mod era2025;
pub mod forward;
pub mod http;
mod listen;
pub mod native;
pub mod oauth;
pub mod pipeline;
mod readiness;
pub mod response;
pub(crate) mod rounds;
pub mod server;
pub mod tasks;
pub mod tls;

use foldhash::HashMap;
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
    /// Also serves the routes' Protected Resource Metadata (RFC 9728);
    /// replaced with the pipeline by a config reload ([`Gateway::authenticator`]).
    pub authenticator: std::sync::RwLock<Arc<dyn auth::Authenticator>>,
    pub metrics: Arc<Metrics>,
    pub sse_keepalive: Duration,
    pub engine: Arc<Engine>,
    /// Set with `[cluster]`: the internal endpoint and the forward client.
    pub cluster: Option<cluster::Cluster>,
    /// One line per client request ([`access`]).
    pub access: Arc<crate::telemetry::access::AccessLog>,
    pub(crate) shutdown: tokio::sync::watch::Sender<bool>,
    /// How `POST /reload` on the admin listener reloads the config file; set
    /// by the composition step only when the admin listener is on loopback.
    pub reload: std::sync::OnceLock<ReloadHook>,
    /// The watcher of the routes' policy files; a config reload replaces what it watches.
    pub policy_watch: crate::policy::reload::PolicyWatch,
    /// 2025-era clients' sessions, and the questions pushed to them.
    pub sessions: Arc<era2025::Sessions>,
    /// Gateway-made tasks this replica holds (`[route.tasks]`).
    pub tasks: Arc<tasks::Tasks>,
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

    /// The authenticator in force (API keys, OAuth).
    pub fn authenticator(&self) -> Arc<dyn auth::Authenticator> {
        self.authenticator
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Puts new routes, a new pipeline and its authenticator in force at once.
    pub fn replace(
        &self,
        routes: HashMap<String, Arc<Route>>,
        pipeline: pipeline::Pipeline,
        authenticator: Arc<dyn auth::Authenticator>,
    ) {
        let mut r = self
            .routes
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut p = self
            .pipeline
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut a = self
            .authenticator
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *r = Arc::new(routes);
        *p = Arc::new(pipeline);
        *a = authenticator;
    }
    /// Changes to `true` when the gateway starts shutting down.
    pub fn shutdown_signal(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Tells long-lived streams (subscriptions) and waiting operations to finish.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Drains for a rolling restart: `/readyz` turns 503 and new operations
    /// are refused (`draining`), while waiting operations are still served
    /// (their retries come directly or forwarded) until none is left or
    /// `within` runs out. Returns how many were still waiting.
    pub async fn drain(&self, within: Duration) -> usize {
        self.engine
            .draining
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + within;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            let waiting = self.engine.table.len();
            if waiting == 0 || tokio::time::Instant::now() >= deadline {
                return waiting;
            }
            tick.tick().await;
        }
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
