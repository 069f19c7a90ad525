//! The composition step: from a checked [`Config`] to a running gateway.
//! Policies, requestState keys and the audit log are loaded here, once, each
//! with a typed error; anything that cannot be loaded stops the start (fail
//! closed: no route ever runs with a default in place of what failed). Then
//! the routes, the operation engine and the request pipeline are wired up and
//! the listeners bound. The binary and the tests both start through [`start`].

use foldhash::{HashMap, HashMapExt};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::config::{CacheScope, Config, ConfigErrors, UpstreamHttp2, decode_secret};
use crate::event_loops::EventLoops;
use crate::front::pipeline::{Pipeline, owner};
use crate::front::{self, Gateway, auth};
use crate::limits::RouteLimits;
use crate::mrtr::Engine;
use crate::mrtr::clock::Clock;
use crate::mrtr::single_use::SingleUse;
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

/// Why the gateway did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "route `{route}`: its policy cannot be loaded, so the route would run unguarded:\n{errors}"
    )]
    Policy { route: String, errors: ConfigErrors },
    #[error("requestState keys: {0}")]
    StateKeys(#[from] KeyError),
    #[error("audit log {} cannot be opened", path.display())]
    Audit {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("[cluster]: {0}")]
    Cluster(#[from] ClusterError),
    #[error("{listener} listener TLS: {source}")]
    Tls {
        listener: &'static str,
        #[source]
        source: crate::front::tls::TlsError,
    },
    #[error("access log {} cannot be opened", path.display())]
    AccessLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("[auth.oauth]: {0}")]
    OAuth(#[from] crate::front::oauth::OAuthError),
    #[error("upstream HTTP client: {0}")]
    UpstreamClient(String),
    #[error("route `{route}`: upstream bearer_token_env {var} is not set")]
    UpstreamTokenEnv { route: String, var: String },
    #[error(transparent)]
    EventLoops(#[from] crate::event_loops::StartError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Why the `[[state.keys]]` cannot be made into a keyring.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("state key `{id}`: environment variable {var} is not set")]
    EnvNotSet { id: String, var: String },
    #[error("state key `{id}`: the secret is not base64url of at least 16 bytes")]
    BadSecret { id: String },
    #[error("state key `{id}` has no secret")]
    NoSecret { id: String },
    #[error("no state key has `sign = true`")]
    NoSigningKey,
}

/// Why `[cluster]` cannot be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    #[error("environment variable {var} (secret_env) is not set")]
    EnvNotSet { var: String },
    #[error(
        "environment variable {var} is not base64url of at least 16 bytes (see `redmark keygen`)"
    )]
    BadSecret { var: String },
    #[error("[state] store `{url}`: {why}")]
    Store { url: String, why: String },
}

/// The cluster secret `[cluster] secret_env` names, and what it signs with.
fn cluster(config: &Config, node: &str) -> Result<Option<front::cluster::Cluster>, ClusterError> {
    let Some(c) = &config.cluster else {
        return Ok(None);
    };
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
    let secret = decode_secret(&text).ok_or(ClusterError::BadSecret { var })?;
    let secret = front::cluster::Secret::new(secret);
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

/// Where round ids are marked used: `[state] store`, or this node's memory.
fn single_use(
    config: &Config,
    metrics: &Arc<Metrics>,
) -> Result<Option<Arc<dyn SingleUse>>, ClusterError> {
    let Some(url) = &config.state.store else {
        return Ok(None);
    };
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
        out.push(handle);
    }
    Ok(out)
}

/// What `redmark check` adds to the config file's own checks: every policy
/// file read and compiled, its problems by file and line.
pub fn check(config: &Config) -> Result<(), ConfigErrors> {
    let mut problems = Vec::new();
    for route in &config.routes {
        if let Some(path) = &route.get_ref().policy
            && let Err(errors) = Policy::load(&config.base_dir.join(path.get_ref()))
        {
            problems.extend(errors.0);
        }
    }
    for (name, section) in [
        ("[server.tls]", &config.server.tls),
        ("[server.admin_tls]", &config.server.admin_tls),
    ] {
        if let Some(t) = section
            && let Err(e) =
                crate::front::tls::server_config(&t.get_ref().resolved(&config.base_dir))
        {
            problems.push(crate::config::ConfigError {
                file: e.path().display().to_string(),
                line: 0,
                column: 0,
                message: format!("{name}: {e}"),
            });
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConfigErrors(problems))
    }
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
            AuditSink::start(&cfg).map_err(|source| StartError::Audit {
                path: cfg.path.clone(),
                source,
            })?
        }
        None => AuditSink::disabled(),
    };
    let access = access_log(config)?;
    let shutdown = tokio::sync::watch::channel(false).0;
    let cluster = cluster(config, &node)?;
    let store = single_use(config, &metrics)?;
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
    if let Some(store) = store {
        engine.single_use = store;
    }
    let engine = Arc::new(engine);
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
    let pipeline = Pipeline::standard(
        config.server.allowed_origins.clone(),
        authenticator.clone(),
        config.server.max_body_bytes,
        config.server.body_read_timeout,
    )
    .then(Box::new(owner::Owner::new(engine.clone())));
    Ok(Arc::new(Gateway {
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
        .map_err(|source| StartError::AccessLog {
            path: match &config.log.access {
                AccessTarget::File(p) => config.base_dir.join(p),
                _ => PathBuf::new(),
            },
            source,
        })
}

/// Idle keep-alive connections kept per upstream host, at most.
pub const UPSTREAM_IDLE_CONNECTIONS: usize = crate::upstream::client::IDLE_CONNECTIONS;

/// How long an idle upstream connection is kept for reuse.
pub const UPSTREAM_IDLE_TIMEOUT: std::time::Duration = crate::upstream::client::IDLE_TIMEOUT;

/// The HTTP client the routes with `http2 = "auto"` share.
#[cfg(test)]
fn upstream_http_client() -> crate::upstream::client::HttpClient {
    crate::upstream::client::for_tests()
}

fn routes(
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
            limits: Arc::new(RouteLimits::new(name, &r.rate_limit, metrics.clone())),
        };
        out.insert(r.path.clone(), Arc::new(route));
    }
    Ok(out)
}

/// A running gateway.
pub struct Running {
    pub addr: SocketAddr,
    pub admin_addr: Option<SocketAddr>,
    /// The internal endpoint (`[cluster] listen`).
    pub cluster_addr: Option<SocketAddr>,
    pub gateway: Arc<Gateway>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Running {
    /// Graceful shutdown: stop accepting, finish in-flight requests up to the
    /// configured grace period, end upstream sessions.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }

    /// Runs until the gateway stops by itself (it does not, unless shut down).
    pub async fn wait(mut self) {
        let _ = (&mut self.task).await;
    }

    /// Reloads `path` (the file `config` came from) on SIGHUP, and on
    /// `POST /reload` when the admin listener is on loopback; `listen` and
    /// `admin` are the command line's overrides of the file's addresses.
    pub fn enable_reload(
        &self,
        path: PathBuf,
        listen: Option<SocketAddr>,
        admin: Option<SocketAddr>,
        config: Config,
    ) -> Arc<reload::Reloader> {
        let reloader = reload::Reloader::new(path, listen, admin, self.gateway.clone(), config);
        if self.admin_addr.is_some_and(|a| a.ip().is_loopback()) {
            let r = reloader.clone();
            let _ = self.gateway.reload.set(Arc::new(move || {
                r.reload("POST /reload")
                    .map(|done| serde_json::to_value(done).unwrap_or_default())
                    .map_err(|e| e.to_string())
            }));
        }
        #[cfg(unix)]
        {
            let r = reloader.clone();
            let mut stop = self.gateway.shutdown_signal();
            if let Ok(mut hup) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            {
                self.gateway.policy_watch.leave_sighup_to_config_reload();
                tokio::spawn(async move {
                    loop {
                        tokio::select! {
                            got = hup.recv() => {
                                if got.is_none() { return; }
                                let _ = r.reload("SIGHUP");
                            }
                            _ = stop.wait_for(|down| *down) => return,
                        }
                    }
                });
            }
        }
        reloader
    }

    /// A handle that triggers shutdown from elsewhere (signal handlers).
    pub fn take_stop(&mut self) -> Option<oneshot::Sender<()>> {
        self.stop.take()
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { addr, source })
}

/// Builds the gateway, binds the client and admin listeners (port 0 for an
/// ephemeral port) and starts serving.
pub async fn start(config: Config) -> Result<Running, StartError> {
    start_with(config, Options::default()).await
}

pub async fn start_with(mut config: Config, options: Options) -> Result<Running, StartError> {
    // The internal listener is bound first: with port 0, the address other
    // replicas use (`advertise`, sealed into every state) has the real port.
    let internal = match config.cluster.as_mut() {
        Some(c) => {
            let addr = c
                .listen_addr()
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
            let listener = bind(addr).await?;
            let bound = listener
                .local_addr()
                .map_err(|source| StartError::Bind { addr, source })?;
            c.advertise.get_or_insert_with(|| format!("http://{bound}"));
            Some(listener)
        }
        None => None,
    };
    let cluster_addr = internal.as_ref().and_then(|l| l.local_addr().ok());
    let metrics = Arc::new(Metrics::new());
    // Bound first: with port 0, the routes' canonical URLs need the port.
    let listener = bind(config.listen_addr()).await?;
    let addr = listener.local_addr().map_err(|source| StartError::Bind {
        addr: config.listen_addr(),
        source,
    })?;
    let gateway = build_at(&config, metrics, options, Some(addr))?;
    let tls = listener_tls(&config, "client", config.server.tls.as_ref())?;
    let admin_tls = listener_tls(&config, "admin", config.server.admin_tls.as_ref())?;
    crate::front::tls::watch(
        tls.iter().chain(&admin_tls).cloned().collect(),
        gateway.shutdown.subscribe(),
    );
    let admin = match config.admin_addr() {
        Some(a) => Some(bind(a).await?),
        None => None,
    };
    let admin_addr = admin.as_ref().and_then(|l| l.local_addr().ok());
    for route in gateway.routes().values() {
        tracing::info!(route = %route.name, path = %route.path, "route ready");
    }
    tracing::info!(
        %addr,
        admin = admin_addr.map(|a| a.to_string()).as_deref(),
        cluster = cluster_addr.map(|a| a.to_string()).as_deref(),
        advertise = gateway.engine.advertise.as_deref(),
        node = %gateway.engine.node,
        tls = tls.is_some(),
        mutual_tls = config.server.tls.as_ref().is_some_and(|t| t.get_ref().client_ca.is_some()),
        "redmark listening"
    );
    let (stop, stopped) = oneshot::channel::<()>();
    let loops = match config.server.event_loops {
        0 => None,
        n => Some(Arc::new(EventLoops::start(n)?)),
    };
    if let Some(loops) = &loops {
        gateway.metrics.count_tasks_on(loops);
    }
    let limits = front::server::Limits {
        max_connections: config.server.max_connections,
        header_read_timeout: config.server.header_read_timeout,
        send_timeout: config.server.send_timeout,
        grace: config.server.shutdown_grace,
        metrics: Some(gateway.metrics.clone()),
        tls,
        loops,
    };
    let listeners = Listeners {
        client: listener,
        admin,
        admin_tls,
        internal,
    };
    let task = tokio::spawn(serve(gateway.clone(), listeners, limits, stopped));
    Ok(Running {
        addr,
        admin_addr,
        cluster_addr,
        gateway,
        stop: Some(stop),
        task,
    })
}

/// A listener's TLS from its config section, files relative to the config.
fn listener_tls(
    config: &Config,
    listener: &'static str,
    section: Option<&toml::Spanned<crate::config::TlsConfig>>,
) -> Result<Option<Arc<crate::front::tls::Tls>>, StartError> {
    section
        .map(|t| {
            crate::front::tls::Tls::load(listener, t.get_ref().resolved(&config.base_dir))
                .map_err(|source| StartError::Tls { listener, source })
        })
        .transpose()
}

struct Listeners {
    client: TcpListener,
    admin: Option<TcpListener>,
    admin_tls: Option<Arc<crate::front::tls::Tls>>,
    internal: Option<TcpListener>,
}

async fn serve(
    gw: Arc<Gateway>,
    listeners: Listeners,
    limits: front::server::Limits,
    stopped: oneshot::Receiver<()>,
) {
    // The admin listener: the same timeouts, its own small cap and TLS, not counted.
    // The loops outlive every listener: the upstream sessions on them are
    // shut down (`shutdown_upstreams`) after the client listener stops.
    let loops = limits.loops.clone();
    let admin_limits = front::server::Limits {
        max_connections: 256,
        grace: std::time::Duration::from_secs(1),
        metrics: None,
        tls: listeners.admin_tls,
        loops: None,
        ..limits.clone()
    };
    let (admin_stop, admin_stopped) = oneshot::channel::<()>();
    let admin_task = listeners.admin.map(|listener| {
        let gw = gw.clone();
        tokio::spawn(front::server::serve(
            listener,
            move |req| front::admin::handle(gw.clone(), req),
            admin_limits,
            async move {
                let _ = admin_stopped.await;
            },
        ))
    });
    // The internal listener: the client listener's bounds, plain HTTP (the
    // forward signature authenticates); it stops after the drain, so
    // forwarded retries are served while the node drains.
    let (internal_stop, internal_stopped) = oneshot::channel::<()>();
    let internal_task = listeners.internal.map(|listener| {
        let gw = gw.clone();
        let internal_limits = front::server::Limits {
            metrics: None,
            tls: None,
            ..limits.clone()
        };
        tokio::spawn(front::server::serve(
            listener,
            move |req| front::cluster::handle(gw.clone(), req),
            internal_limits,
            async move {
                let _ = internal_stopped.await;
            },
        ))
    });
    let handler_gw = gw.clone();
    let shutdown_gw = gw.clone();
    front::server::serve(
        listeners.client,
        move |req| front::http::handle(handler_gw.clone(), req),
        limits,
        async move {
            let _ = stopped.await;
            if let Some(cluster) = &shutdown_gw.cluster {
                tracing::info!(drain = ?cluster.drain, waiting = shutdown_gw.engine.table.len(), "draining: /readyz is 503 and new operations are refused; waiting operations are still served");
                let left = shutdown_gw.drain(cluster.drain).await;
                tracing::info!(left, "drained");
            }
            tracing::info!("shutting down: no new connections; finishing in-flight requests");
            shutdown_gw.begin_shutdown();
        },
    )
    .await;
    let _ = internal_stop.send(());
    if let Some(t) = internal_task {
        let _ = t.await;
    }
    gw.shutdown_upstreams().await;
    // Every question's audit line is on disk before the process ends.
    if let Err(e) = gw.engine.audit.close().await {
        tracing::warn!(error = %e, "closing the audit log failed");
    }
    let _ = admin_stop.send(());
    if let Some(t) = admin_task {
        let _ = t.await;
    }
    drop(loops);
    tracing::info!("redmark stopped");
}

pub mod checks;
pub mod reload;

#[cfg(test)]
#[path = "app_tests.rs"]
mod tests;
