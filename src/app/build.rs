//! Building the gateway's parts from a checked [`Config`]: the policies, the
//! requestState keyring, the cluster secret and single-use store, the audit
//! and access logs, and the routes with their upstream pools, wired into a
//! [`Gateway`]. Nothing here binds a socket: `run` serves what [`build_at`]
//! returns, and `reload` builds a new config's keyring, policies and routes
//! with the same functions, so a reloaded route is built as a started one is.

use foldhash::{HashMap, HashMapExt};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use super::{ClusterError, KeyError, StartError};
use crate::config::{CacheScope, Config, ConfigErrors, UpstreamHttp2, decode_secret};
use crate::front::pipeline::{Pipeline, owner};
use crate::front::{self, Gateway, auth};
use crate::limits::RouteLimits;
use crate::mrtr::Engine;
use crate::mrtr::clock::Clock;
use crate::mrtr::state::{Key, Keyring};
use crate::policy::Policy;
use crate::policy::reload::PolicyHandle;
use crate::route::Route;
use crate::telemetry::access::{AccessLog, AccessTarget};
use crate::telemetry::audit::AuditSink;
use crate::telemetry::metrics::Metrics;
use crate::upstream::catalog::Catalog;
use crate::upstream::client::HttpClient;
use crate::upstream::native::NativeUpstream;
use crate::upstream::pool::{Connect, Connector, RoutePool};

/// The cluster secret `[cluster] secret_env` names (or `secret` holds), decoded.
fn cluster_secret(c: &crate::config::ClusterConfig) -> Result<Vec<u8>, ClusterError> {
    let (text, var) = match (&c.secret, &c.secret_env) {
        (Some(s), _) => (s.clone(), "[cluster] secret".to_owned()),
        (None, Some(var)) => (
            std::env::var(var).map_err(|_| ClusterError::EnvNotSet { var: var.clone() })?,
            var.clone(),
        ),
        (None, None) => {
            return Err(ClusterError::EnvNotSet {
                var: "(no secret_env)".into(),
            });
        }
    };
    decode_secret(&text).ok_or(ClusterError::BadSecret { var })
}

/// The cluster secret, and what it signs with.
fn cluster(config: &Config, node: &str) -> Result<Option<front::cluster::Cluster>, ClusterError> {
    let Some(c) = &config.cluster else {
        return Ok(None);
    };
    let secret = front::cluster::Secret::new(cluster_secret(c)?);
    Ok(Some(front::cluster::Cluster {
        pipeline: front::cluster::pipeline(
            secret.clone(),
            config.server.max_body_bytes,
            config.server.body_read_timeout,
        ),
        client: front::forward::Client::new(node.to_owned(), secret.clone()),
        secret,
        drain: c.drain,
    }))
}

/// The shared store, `[state] store`: where round ids are marked used
/// (without it, this node's memory) and where 2025-era sessions keep what
/// every replica must see. One connection manager serves both.
fn shared_store(
    config: &Config,
    metrics: &Arc<Metrics>,
) -> Result<Option<Arc<crate::mrtr::redis_store::Redis>>, ClusterError> {
    let Some(url) = &config.state.store else {
        return Ok(None);
    };
    // The check `redmark check` makes too ([`refusals`]), so both say the same.
    crate::mrtr::redis_store::Redis::check_url(url.get_ref()).map_err(|e| ClusterError::Store {
        url: url.get_ref().clone(),
        why: e.to_string(),
    })?;
    let store =
        crate::mrtr::redis_store::Redis::new(url.get_ref(), metrics.clone()).map_err(|e| {
            ClusterError::Store {
                url: url.get_ref().clone(),
                why: e.to_string(),
            }
        })?;
    Ok(Some(Arc::new(store)))
}

/// The keyring `[[state.keys]]` describes, secrets read from the environment;
/// `None` when no key is configured.
pub fn keyring(config: &Config) -> Result<Option<Keyring>, KeyError> {
    if config.state.keys.is_empty() {
        return Ok(None);
    }
    let mut signing = None;
    let mut others = Vec::new();
    for key in &config.state.keys {
        let k = key.get_ref();
        let text = match (&k.secret, &k.secret_env) {
            (Some(s), _) => s.clone(),
            (None, Some(var)) => std::env::var(var).map_err(|_| KeyError::EnvNotSet {
                id: k.id.clone(),
                var: var.clone(),
            })?,
            (None, None) => return Err(KeyError::NoSecret { id: k.id.clone() }),
        };
        let secret =
            decode_secret(&text).ok_or_else(|| KeyError::BadSecret { id: k.id.clone() })?;
        let key = Key::new(k.id.clone(), secret);
        if k.sign {
            signing = Some(key);
        } else {
            others.push(key);
        }
    }
    let signing = signing.ok_or(KeyError::NoSigningKey)?;
    Ok(Some(Keyring::new(signing, others)))
}

/// Every route's policy, in the order of `config.routes`, loaded before
/// anything starts. A route without a `policy` file gets the spec's own
/// guards; a route whose file fails to load is an error.
pub fn policies(config: &Config) -> Result<Vec<Arc<PolicyHandle>>, StartError> {
    let mut out = Vec::with_capacity(config.routes.len());
    for route in &config.routes {
        let route = route.get_ref();
        let handle = match &route.policy {
            None => PolicyHandle::fixed(Policy::default()),
            Some(path) => {
                PolicyHandle::load(&config.base_dir.join(path.get_ref())).map_err(|errors| {
                    StartError::Policy {
                        route: route.name.clone(),
                        errors,
                    }
                })?
            }
        };
        let problems = task_problems(route, &handle.current());
        if !problems.is_empty() {
            return Err(StartError::Policy {
                route: route.name.clone(),
                errors: ConfigErrors(problems),
            });
        }
        out.push(handle);
    }
    Ok(out)
}

/// What a route's tasks settings contradict: `[route.tasks]` with values
/// no call could use, or a policy asking for tasks on a route without
/// `[route.tasks]` (a route without it serves no tasks at all, so a
/// `task = "required"` tool could never be called).
fn task_problems(
    route: &crate::config::RouteConfig,
    policy: &Policy,
) -> Vec<crate::config::ConfigError> {
    let at = |message: String| crate::config::ConfigError {
        file: format!("route `{}`", route.name),
        line: 0,
        column: 0,
        message,
    };
    let native = route.upstream.get_ref().protocol == crate::config::UpstreamProtocol::Native;
    match &route.tasks {
        // A native server decides itself which calls become tasks; redmark
        // relays them (`mrtr::native::task`): a setting that could only
        // make a task of a legacy server's call would silently do nothing.
        Some(_) if native && policy.uses_tasks() => vec![at(
            "the policy sets `task`, but the route's server speaks 2026-07-28 (protocol = \"2026-07-28\"): it decides which calls become tasks, and redmark relays them".to_owned(),
        )],
        Some(tasks) if native && tasks.get_ref().after.is_some() => vec![at(
            "[route.tasks] after has no effect on a route whose server speaks 2026-07-28 (protocol = \"2026-07-28\"): the server decides which calls become tasks".to_owned(),
        )],
        Some(tasks) => tasks.get_ref().problems().into_iter().map(at).collect(),
        None if policy.uses_tasks() => vec![at(
            "the policy sets `task` but the route has no [route.tasks] section, so it serves no tasks"
                .to_owned(),
        )],
        None => Vec::new(),
    }
}

/// What `redmark check` adds to the config file's own checks: every policy
/// file read and compiled, its problems by file and line.
pub fn check(config: &Config) -> Result<(), ConfigErrors> {
    let mut problems = Vec::new();
    for route in &config.routes {
        let policy = match &route.get_ref().policy {
            Some(path) => match Policy::load(&config.base_dir.join(path.get_ref())) {
                Ok(policy) => policy,
                Err(errors) => {
                    problems.extend(errors.0);
                    continue;
                }
            },
            None => Policy::default(),
        };
        problems.extend(task_problems(route.get_ref(), &policy));
    }
    for (listener, section) in [
        ("client", &config.server.tls),
        ("admin", &config.server.admin_tls),
    ] {
        if let Some(t) = section
            && let Err(e) =
                crate::front::tls::server_config(&t.get_ref().resolved(&config.base_dir))
        {
            let file = e.path().display().to_string();
            problems.push(crate::config::ConfigError {
                file,
                line: 0,
                column: 0,
                // As `serve` says it.
                message: StartError::Tls { listener, cause: e }.to_string(),
            });
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConfigErrors(problems))
    }
}

/// Every route's `bearer_token_env` is set.
fn upstream_tokens(config: &Config) -> Result<(), StartError> {
    for r in &config.routes {
        if let Some(var) = &r.get_ref().upstream.get_ref().bearer_token_env
            && std::env::var_os(var).is_none()
        {
            return Err(StartError::UpstreamTokenEnv {
                route: r.get_ref().name.clone(),
                var: var.clone(),
            });
        }
    }
    Ok(())
}

/// What [`build_at`] would refuse, found without starting anything (no
/// file opened, no connection, no task): the requestState keys, the cluster
/// secret, the state store's URL, the upstream tokens' environment and the
/// OAuth routes' origins, each with the message `serve` stops with. TLS
/// files and policies are in [`check`]; the audit and access logs are not
/// opened here (that would create them).
pub fn refusals(config: &Config) -> Vec<StartError> {
    let mut out = Vec::new();
    if let Err(e) = keyring(config) {
        out.push(e.into());
    }
    if let Some(c) = &config.cluster
        && let Err(e) = cluster_secret(c)
    {
        out.push(e.into());
    }
    if let Some(url) = &config.state.store
        && let Err(e) = crate::mrtr::redis_store::Redis::check_url(url.get_ref())
    {
        out.push(
            ClusterError::Store {
                url: url.get_ref().clone(),
                why: e.to_string(),
            }
            .into(),
        );
    }
    if let Err(e) = upstream_tokens(config) {
        out.push(e);
    }
    if let Some(o) = config.auth.as_ref().and_then(|a| a.oauth.as_ref())
        && let Err(e) =
            crate::front::oauth::OAuth::check(o.get_ref(), config, Some(config.listen_addr()))
    {
        out.push(e.into());
    }
    out
}

/// Choices the config file does not make (tests use them).
#[derive(Clone, Default)]
pub struct Options {
    pub clock: Clock,
    /// In-process servers in place of a route's configured upstream, by route name.
    pub connectors: HashMap<String, Connector>,
}

/// Builds the gateway from a checked config: loads what it needs once and
/// wires the layers together. Nothing is served yet.
pub fn build(
    config: &Config,
    metrics: Arc<Metrics>,
    options: Options,
) -> Result<Arc<Gateway>, StartError> {
    build_at(config, metrics, options, None)
}

/// [`build`] for a gateway whose client listener is bound at `local_addr`:
/// with no `[auth.oauth] public_url`, a loopback listener is the routes' origin.
pub fn build_at(
    config: &Config,
    metrics: Arc<Metrics>,
    options: Options,
    local_addr: Option<SocketAddr>,
) -> Result<Arc<Gateway>, StartError> {
    let policies = policies(config)?;
    let keys = match keyring(config)? {
        Some(k) => k,
        None => {
            tracing::warn!(
                "no [[state.keys]] configured: requestState is sealed with a random per-process key, so pending operations do not survive a restart and replicas cannot verify each other's state"
            );
            Keyring::ephemeral()
        }
    }
    .with_max_len(*config.state.max_bytes.get_ref());
    let node = config
        .server
        .node_id
        .clone()
        .unwrap_or_else(|| format!("node-{}", hex::encode(rand::random::<[u8; 4]>())));
    let audit = match &config.audit {
        Some(cfg) => {
            let mut cfg = cfg.get_ref().clone();
            // Like every path in the config: relative to the config file's directory.
            if cfg.path.as_os_str() != "-" && cfg.path.is_relative() {
                cfg.path = config.base_dir.join(&cfg.path);
            }
            AuditSink::start(&cfg).map_err(|cause| StartError::Audit {
                path: cfg.path.clone(),
                cause,
            })?
        }
        None => AuditSink::disabled(),
    };
    let access = access_log(config)?;
    let shutdown = tokio::sync::watch::channel(false).0;
    let cluster = cluster(config, &node)?;
    let store = shared_store(config, &metrics)?;
    let mut engine = Engine::new(
        &config.mrtr,
        keys,
        node,
        metrics.clone(),
        audit,
        shutdown.subscribe(),
        options.clock,
    );
    engine.advertise = config.cluster.as_ref().and_then(|c| c.advertise.clone());
    if let Some(store) = &store {
        engine.single_use = store.clone();
        engine.remembered.share_with(store.clone());
        engine.relayed_tasks.share_with(store.clone());
    }
    let engine = Arc::new(engine);
    upstream_tokens(config)?;
    let authenticator = auth::from_config(config, local_addr)?;
    let watched = config
        .routes
        .iter()
        .map(|r| r.get_ref().name.clone())
        .zip(policies.iter().cloned())
        .collect();
    let routes = routes(
        config,
        policies,
        authenticator.is_anonymous(),
        &metrics,
        &options,
    )?;
    let reload_metrics = metrics.clone();
    let policy_watch = crate::policy::reload::watch(
        watched,
        shutdown.subscribe(),
        Arc::new(move |route: &str, ok: bool| reload_metrics.record_policy_reload(route, ok)),
    );
    let sessions = crate::front::era2025::Sessions::new(
        engine.keys.clone(),
        config.sessions.clone(),
        engine.node.clone(),
        engine.advertise.clone(),
        metrics.client_sessions(),
    );
    sessions.set_open_to_all(authenticator.is_anonymous());
    // What a 2025-era session changes after `initialize` (its log level, its
    // end by DELETE) goes where every replica finds it, with a store.
    if let Some(store) = store {
        sessions.share_with(store);
    }
    // A 2025-era client's answer forwarded by another replica finds its
    // session here, after the internal endpoint's own checks.
    let cluster = cluster.map(|mut c| {
        c.pipeline = c
            .pipeline
            .then(Box::new(crate::front::era2025::SessionStep::internal(
                sessions.clone(),
            )));
        c
    });
    let pipeline = Pipeline::standard(
        config.server.allowed_origins.clone(),
        authenticator.clone(),
        config.server.max_body_bytes,
        config.server.body_read_timeout,
        sessions.clone(),
    )
    .then(Box::new(owner::Owner::new(engine.clone())));
    Ok(Arc::new(Gateway {
        sessions,
        tasks: Arc::new(crate::front::tasks::Tasks::new()),
        routes: std::sync::RwLock::new(Arc::new(routes)),
        pipeline: std::sync::RwLock::new(Arc::new(pipeline)),
        authenticator: std::sync::RwLock::new(authenticator),
        metrics,
        sse_keepalive: config.server.sse_keepalive,
        engine,
        cluster,
        access,
        shutdown,
        reload: std::sync::OnceLock::new(),
        policy_watch,
    }))
}

/// The `[log] access` sink, a file relative to the config file's directory.
fn access_log(config: &Config) -> Result<Arc<AccessLog>, StartError> {
    AccessLog::start(&config.log.access, &config.base_dir)
        .map(Arc::new)
        .map_err(|cause| StartError::AccessLog {
            path: match &config.log.access {
                AccessTarget::File(p) => config.base_dir.join(p),
                _ => PathBuf::new(),
            },
            cause,
        })
}

/// Idle keep-alive connections kept per upstream host, at most.
pub const UPSTREAM_IDLE_CONNECTIONS: usize = crate::upstream::client::IDLE_CONNECTIONS;

/// How long an idle upstream connection is kept for reuse.
pub const UPSTREAM_IDLE_TIMEOUT: std::time::Duration = crate::upstream::client::IDLE_TIMEOUT;

/// The HTTP client the routes with `http2 = "auto"` share.
#[cfg(test)]
pub(super) fn upstream_http_client() -> crate::upstream::client::HttpClient {
    crate::upstream::client::for_tests()
}

pub(super) fn routes(
    config: &Config,
    policies: Vec<Arc<PolicyHandle>>,
    anonymous: bool,
    metrics: &Arc<Metrics>,
    options: &Options,
) -> Result<HashMap<String, Arc<Route>>, StartError> {
    // One shared client per `[route.upstream] http2` setting in use.
    let mut clients: HashMap<UpstreamHttp2, HttpClient> = HashMap::new();
    let mut out = HashMap::new();
    for (r, policy) in config.routes.iter().zip(policies) {
        let r = r.get_ref();
        let mode = r.upstream.get_ref().http2;
        let http = match clients.get(&mode) {
            Some(c) => c.clone(),
            None => {
                let c = crate::upstream::client::shared(mode, config.server.event_loops)
                    .map_err(StartError::UpstreamClient)?;
                clients.insert(mode, c.clone());
                c
            }
        };
        let name: Arc<str> = Arc::from(r.name.as_str());
        let connect = match options.connectors.get(&r.name) {
            Some(c) => Connect::Custom(c.clone()),
            None => Connect::Target(r.target(&config.base_dir)),
        };
        let target = match &connect {
            Connect::Target(t) => Some(t.clone()),
            Connect::Custom(_) => None,
        };
        let native = NativeUpstream::new(
            name.clone(),
            target.as_ref(),
            r.upstream.get_ref(),
            http.clone(),
            metrics.clone(),
        );
        let pool = RoutePool::new(
            name.clone(),
            connect,
            r.upstream.get_ref().clone(),
            r.pool.clone(),
            http.clone(),
            metrics.clone(),
        );
        let route = Route {
            name: name.clone(),
            path: r.path.clone(),
            catalog: Catalog::new(&pool, r.cache.ttl),
            pool,
            native,
            cache_ttl: r.cache.ttl,
            cache_scope: r.cache.scope.unwrap_or(if anonymous {
                CacheScope::Public
            } else {
                CacheScope::Private
            }),
            policy,
            on_missing_capability: r.on_missing_capability,
            shape_questions: r.shape_questions,
            limits: Arc::new(RouteLimits::new(name, &r.rate_limit, metrics.clone())),
            tasks: r.tasks.as_ref().map(|t| t.get_ref().clone()),
        };
        out.insert(r.path.clone(), Arc::new(route));
    }
    Ok(out)
}
