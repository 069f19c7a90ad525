//! Reloading `redmark.toml` without a restart (SIGHUP, `redmark reload`, or
//! `POST /reload` on a loopback admin listener): routes, API keys, origins,
//! body limits, policies and requestState keys. Everything is loaded and
//! checked first; only when all of it loads is it put in force, at once. A
//! file that does not load keeps the running config, and the log says why.
//!
//! Operations in flight keep the `Route` (pool, policy) they started with and
//! a retry is opened with the keys in force when it arrives, so adding a
//! verification key and switching the signing key drops nothing. A route
//! whose settings are unchanged keeps its pool and sessions; a changed or
//! removed one has its pool shut down (idle sessions end now, leased ones
//! when their operation ends).
//!
//! Settings bound at start (listen addresses, connection limits and
//! timeouts, `[mrtr]`, `[telemetry]`, `[audit]`, `[log]`, `node_id`) are
//! logged as "restart needed" and the rest still applies.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::build::routes;
use super::{Options, StartError, keyring, policies};
use crate::config::{Config, ConfigErrors, RouteConfig};
use crate::front::pipeline::{Pipeline, owner};
use crate::front::{Gateway, auth};
use crate::route::Route;

/// What a reload changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reloaded {
    pub routes_added: Vec<String>,
    pub routes_changed: Vec<String>,
    pub routes_removed: Vec<String>,
    /// The signing key in force after the reload.
    pub signing_key: Option<String>,
    /// Settings that changed but apply only after a restart.
    pub restart_needed: Vec<&'static str>,
}

/// Why a reload changed nothing. `Config` shows its errors and is not
/// their `source()` as well (that would print them twice in a chain).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("{0}")]
    Config(ConfigErrors),
    #[error(transparent)]
    Start(#[from] StartError),
}

/// Reloads one running gateway from its config file.
pub struct Reloader {
    path: PathBuf,
    /// Command-line overrides of the file's addresses (`--listen`, `--admin`).
    listen: Option<SocketAddr>,
    admin: Option<SocketAddr>,
    gateway: Arc<Gateway>,
    options: Options,
    running: Mutex<Config>,
}

impl Reloader {
    pub fn new(
        path: PathBuf,
        listen: Option<SocketAddr>,
        admin: Option<SocketAddr>,
        gateway: Arc<Gateway>,
        running: Config,
    ) -> Arc<Self> {
        Arc::new(Self {
            path,
            listen,
            admin,
            gateway,
            options: Options::default(),
            running: Mutex::new(running),
        })
    }

    /// Loads the file and, when all of it loads, puts it in force; logs the outcome.
    pub fn reload(&self, trigger: &str) -> Result<Reloaded, ReloadError> {
        let result = self.try_reload(trigger);
        match &result {
            Ok(r) => {
                tracing::info!(trigger, config = %self.path.display(), added = ?crate::telemetry::logging::json(&r.routes_added), changed = ?crate::telemetry::logging::json(&r.routes_changed), removed = ?crate::telemetry::logging::json(&r.routes_removed), signing_key = r.signing_key.as_deref(), "config reloaded");
                if !r.restart_needed.is_empty() {
                    tracing::warn!(trigger, settings = ?crate::telemetry::logging::json(&r.restart_needed), "restart needed: these settings changed and apply only after a restart; the rest of the config is in force");
                }
            }
            Err(e) => {
                tracing::error!(trigger, config = %self.path.display(), error = %e, "config reload failed; the running config stays in force");
            }
        }
        result
    }

    fn try_reload(&self, why: &str) -> Result<Reloaded, ReloadError> {
        let mut new = Config::load(&self.path)?;
        crate::config::compat::log(&new.deprecations);
        if let Some(a) = self.listen {
            new.server.listen = toml::Spanned::new(0..0, a.to_string());
        }
        if let Some(a) = self.admin {
            new.server.admin = Some(toml::Spanned::new(0..0, a.to_string()));
        }
        // Everything that can fail, before anything changes.
        let new_policies = policies(&new)?;
        let keys = keyring(&new).map_err(StartError::from)?;
        let mut running = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let gw = &self.gateway;
        // The listener keeps its address across a reload (a change is
        // "restart needed"), so OAuth's default audiences keep theirs.
        let bound = Some(new.listen_addr()).filter(|a| a.port() != 0);
        let authenticator =
            auth::from_config(&new, bound).map_err(|e| ReloadError::Start(StartError::OAuth(e)))?;
        let pipeline = Pipeline::standard(
            new.server.allowed_origins.clone(),
            authenticator.clone(),
            new.server.max_body_bytes,
            new.server.body_read_timeout,
            gw.sessions.clone(),
        )
        .then(Box::new(owner::Owner::new(gw.engine.clone())));
        gw.sessions.configure(new.sessions.clone());
        gw.sessions.set_open_to_all(authenticator.is_anonymous());
        let built = routes(
            &new,
            new_policies,
            authenticator.is_anonymous(),
            &gw.metrics,
            &self.options,
        )
        .map_err(ReloadError::Start)?;
        let old_routes = gw.routes();
        let old_by_name: HashMap<&str, (&RouteConfig, Arc<Route>)> = running
            .routes
            .iter()
            .filter_map(|r| {
                let r = r.get_ref();
                old_routes
                    .get(&r.path)
                    .map(|route| (r.name.as_str(), (r, route.clone())))
            })
            .collect();
        let mut out = Reloaded::default();
        let mut next = foldhash::HashMap::default();
        for r in new.routes.iter().map(toml::Spanned::get_ref) {
            let Some(route) = built.get(&r.path).cloned() else {
                continue;
            };
            match old_by_name.get(r.name.as_str()) {
                Some((old, kept)) if same_route(old, r) => {
                    // Unchanged: the same pool and sessions; its policy file read again.
                    route.pool.shutdown();
                    if kept.policy.path().is_some() {
                        crate::policy::reload::reload_logged(
                            &r.name,
                            &kept.policy,
                            why,
                            &|route: &str, ok: bool| gw.metrics.record_policy_reload(route, ok),
                        );
                    }
                    next.insert(r.path.clone(), kept.clone());
                }
                Some(_) => {
                    out.routes_changed.push(r.name.clone());
                    next.insert(r.path.clone(), route);
                }
                None => {
                    out.routes_added.push(r.name.clone());
                    next.insert(r.path.clone(), route);
                }
            }
        }
        for (name, (_, old)) in &old_by_name {
            let kept = next.values().any(|r| Arc::ptr_eq(r, old));
            if !kept {
                if !new.routes.iter().any(|r| r.get_ref().name == *name) {
                    out.routes_removed.push((*name).to_owned());
                }
                old.pool.shutdown();
            }
        }
        match keys {
            Some(k) => gw.engine.keys.replace(
                k.keeping_ephemeral(&gw.engine.keys.current())
                    .with_max_len(*new.state.max_bytes.get_ref()),
            ),
            None if !running.state.keys.is_empty() => out
                .restart_needed
                .push("state.keys (removed: the running keys stay)"),
            None => {}
        }
        out.signing_key = Some(gw.engine.keys.signing_id());
        out.restart_needed.extend(restart_needed(&running, &new));
        // The policy files of the routes in force are watched, and no others.
        let mut watched: Vec<_> = next
            .values()
            .map(|r| (r.name.to_string(), r.policy.clone()))
            .collect();
        watched.sort_by(|a, b| a.0.cmp(&b.0));
        gw.policy_watch.replace(watched);
        gw.replace(next, pipeline, authenticator);
        out.routes_added.sort();
        out.routes_changed.sort();
        out.routes_removed.sort();
        *running = new;
        Ok(out)
    }
}

/// Whether a route can keep its pool: every setting but the policy's content equal.
fn same_route(a: &RouteConfig, b: &RouteConfig) -> bool {
    a.path == b.path
        && format!("{:?}", a.upstream.get_ref()) == format!("{:?}", b.upstream.get_ref())
        && format!("{:?}", a.pool) == format!("{:?}", b.pool)
        && format!("{:?}", a.cache) == format!("{:?}", b.cache)
        && a.on_missing_capability == b.on_missing_capability
        && a.shape_questions == b.shape_questions
        && a.policy.as_ref().map(toml::Spanned::get_ref)
            == b.policy.as_ref().map(toml::Spanned::get_ref)
}

/// The settings bound at start that differ between `old` and `new`.
fn restart_needed(old: &Config, new: &Config) -> Vec<&'static str> {
    let (o, n) = (&old.server, &new.server);
    let checks: [(&'static str, bool); 15] = [
        ("server.listen", o.listen.get_ref() != n.listen.get_ref()),
        (
            "server.admin",
            o.admin.as_ref().map(toml::Spanned::get_ref)
                != n.admin.as_ref().map(toml::Spanned::get_ref),
        ),
        ("server.admin_hosts", o.admin_hosts != n.admin_hosts),
        (
            "server.max_body_memory",
            o.max_body_memory != n.max_body_memory,
        ),
        (
            "server.max_connections",
            o.max_connections != n.max_connections,
        ),
        ("server.event_loops", o.event_loops != n.event_loops),
        (
            "server.header_read_timeout",
            o.header_read_timeout != n.header_read_timeout,
        ),
        ("server.send_timeout", o.send_timeout != n.send_timeout),
        (
            "server.shutdown_grace",
            o.shutdown_grace != n.shutdown_grace,
        ),
        ("server.sse_keepalive", o.sse_keepalive != n.sse_keepalive),
        ("server.node_id", o.node_id != n.node_id),
        (
            "mrtr",
            format!("{:?}", old.mrtr) != format!("{:?}", new.mrtr),
        ),
        (
            "telemetry",
            format!("{:?}", old.telemetry) != format!("{:?}", new.telemetry),
        ),
        (
            "audit",
            format!("{:?}", old.audit.as_ref().map(toml::Spanned::get_ref))
                != format!("{:?}", new.audit.as_ref().map(toml::Spanned::get_ref)),
        ),
        ("log", old.log != new.log),
    ];
    checks
        .into_iter()
        .filter_map(|(name, changed)| changed.then_some(name))
        .collect()
}

impl From<ConfigErrors> for ReloadError {
    fn from(e: ConfigErrors) -> Self {
        ReloadError::Config(e)
    }
}
