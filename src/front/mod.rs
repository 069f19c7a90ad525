//! The 2026-07-28 side: a Streamable HTTP endpoint per route, where each POST
//! is checked, authenticated and dispatched, and answered with JSON or SSE.

pub mod admin;
pub mod body;
pub mod dispatch;
pub mod http;
mod listen;
mod origin;
mod params;
mod relay;
pub mod request;
pub mod server;
pub mod shape;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::auth::Authenticator;
use crate::config::{CacheScope, Config, MissingCapability};
use crate::mrtr::Engine;
use crate::mrtr::state::Keyring;
use crate::policy::Policy;
use crate::policy::reload::PolicyHandle;
use crate::telemetry::audit::AuditSink;
use crate::telemetry::metrics::Metrics;
use crate::upstream::catalog::Catalog;
use crate::upstream::pool::RoutePool;

/// One configured route: a path on the front, a pool of sessions behind it.
pub struct Route {
    pub name: Arc<str>,
    pub path: String,
    pub pool: Arc<RoutePool>,
    pub catalog: Arc<Catalog>,
    pub cache_ttl: Duration,
    pub cache_scope: CacheScope,
    pub policy: Arc<PolicyHandle>,
    pub on_missing_capability: MissingCapability,
}

/// Everything a request handler needs, shared by all connections.
pub struct Gateway {
    pub routes: HashMap<String, Arc<Route>>,
    pub auth: Authenticator,
    pub metrics: Arc<Metrics>,
    pub max_body_bytes: usize,
    pub allowed_origins: Option<Vec<String>>,
    pub sse_keepalive: Duration,
    pub engine: Arc<Engine>,
    shutdown: tokio::sync::watch::Sender<bool>,
}

impl Gateway {
    /// Builds the gateway; fails when a state key's secret cannot be read.
    pub fn new(config: &Config, metrics: Arc<Metrics>) -> Result<Arc<Self>, String> {
        let keys = match config.keyring()? {
            Some(k) => k,
            None => {
                tracing::warn!(
                    "no [[state.keys]] configured: requestState is sealed with a random per-process key, so pending operations do not survive a restart and replicas cannot verify each other's state"
                );
                Keyring::ephemeral()
            }
        };
        let node = config
            .server
            .node_id
            .clone()
            .unwrap_or_else(|| format!("node-{}", hex::encode(rand::random::<[u8; 4]>())));
        let audit = match &config.audit {
            Some(cfg) => AuditSink::start(cfg.get_ref())
                .map_err(|e| format!("audit log {}: {e}", cfg.get_ref().path.display()))?,
            None => AuditSink::disabled(),
        };
        let shutdown = tokio::sync::watch::channel(false).0;
        let engine = Arc::new(Engine::new(
            &config.mrtr,
            keys,
            node,
            metrics.clone(),
            audit,
            shutdown.subscribe(),
        ));
        let auth = Authenticator::from_config(config.auth.as_ref());
        let http = reqwest::Client::builder().build().unwrap_or_default();
        let routes: HashMap<String, Arc<Route>> = config
            .routes
            .iter()
            .map(|r| {
                let r = r.get_ref();
                let name: Arc<str> = Arc::from(r.name.as_str());
                let pool = RoutePool::new(
                    name.clone(),
                    r.target(&config.base_dir),
                    r.upstream.get_ref().clone(),
                    r.pool.clone(),
                    http.clone(),
                    metrics.clone(),
                );
                let catalog = Catalog::new(&pool, r.cache.ttl);
                let scope = r.cache.scope.unwrap_or(if auth.is_anonymous() {
                    CacheScope::Public
                } else {
                    CacheScope::Private
                });
                // `Config::load` has checked the policy file already.
                let policy = r
                    .policy
                    .as_ref()
                    .and_then(|p| PolicyHandle::load(&config.base_dir.join(p.get_ref())).ok())
                    .unwrap_or_else(|| PolicyHandle::fixed(Policy::default()));
                let route = Route {
                    name,
                    path: r.path.clone(),
                    pool,
                    catalog,
                    cache_ttl: r.cache.ttl,
                    cache_scope: scope,
                    policy,
                    on_missing_capability: r.on_missing_capability,
                };
                (r.path.clone(), Arc::new(route))
            })
            .collect();
        let policies = routes
            .values()
            .map(|r| (r.name.to_string(), r.policy.clone()))
            .collect();
        let reload_metrics = metrics.clone();
        crate::policy::reload::watch(
            policies,
            shutdown.subscribe(),
            Arc::new(move |route: &str, ok: bool| reload_metrics.record_policy_reload(route, ok)),
        );
        Ok(Arc::new(Self {
            routes,
            engine,
            auth,
            metrics,
            max_body_bytes: config.server.max_body_bytes,
            allowed_origins: config.server.allowed_origins.clone(),
            sse_keepalive: config.server.sse_keepalive,
            shutdown,
        }))
    }

    /// Changes to `true` when the gateway starts shutting down.
    pub fn shutdown_signal(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Tells long-lived streams (subscriptions) to finish.
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
