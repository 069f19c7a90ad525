//! The running gateway: the client, admin and internal listeners bound,
//! served, and shut down in order (drain, client listener, internal
//! listener, upstream sessions, audit log, admin listener).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::build::{Options, build_at};
use super::{StartError, reload};
use crate::config::Config;
use crate::event_loops::EventLoops;
use crate::front::{self, Gateway};
use crate::telemetry::metrics::Metrics;

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
        .map_err(|cause| StartError::Bind { addr, cause })
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
                .map_err(|cause| StartError::Bind { addr, cause })?;
            c.advertise.get_or_insert_with(|| format!("http://{bound}"));
            Some(listener)
        }
        None => None,
    };
    let cluster_addr = internal.as_ref().and_then(|l| l.local_addr().ok());
    let metrics = Arc::new(Metrics::new());
    // Bound first: with port 0, the routes' canonical URLs need the port.
    let listener = bind(config.listen_addr()).await?;
    let addr = listener.local_addr().map_err(|cause| StartError::Bind {
        addr: config.listen_addr(),
        cause,
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
    // The budget is the listener's, bound at start; a reload may change
    // max_body_bytes, which sets each connection's share per request.
    let body_budget = front::body_budget::BodyBudget::new(
        config
            .server
            .max_body_memory
            .max(config.server.max_body_bytes),
        Some(gateway.metrics.body_bytes_gauge()),
    );
    let limits = front::server::Limits {
        max_connections: config.server.max_connections,
        body_budget: Some(body_budget),
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
        admin_hosts: front::admin::AllowedHosts::new(admin_addr, &config.server.admin_hosts),
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
                .map_err(|cause| StartError::Tls { listener, cause })
        })
        .transpose()
}

struct Listeners {
    client: TcpListener,
    admin: Option<TcpListener>,
    /// The `Host` values the admin listener answers.
    admin_hosts: front::admin::AllowedHosts,
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
        // No request body is read there.
        body_budget: None,
        grace: std::time::Duration::from_secs(1),
        metrics: None,
        tls: listeners.admin_tls,
        loops: None,
        ..limits.clone()
    };
    let (admin_stop, admin_stopped) = oneshot::channel::<()>();
    let hosts = Arc::new(listeners.admin_hosts);
    let admin_task = listeners.admin.map(|listener| {
        let gw = gw.clone();
        tokio::spawn(front::server::serve(
            listener,
            move |req| front::admin::handle(gw.clone(), hosts.clone(), req),
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
    // Every request's access line, and every question's audit line, is on
    // disk before the process ends.
    gw.access.close().await;
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
