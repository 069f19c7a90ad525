//! redmark: an elicitation-aware MCP gateway.
//!
//! Hosts speak the stateless 2026-07-28 protocol to redmark; behind it sit
//! legacy MCP servers (2024-11-05 to 2025-11-25) that want an `initialize`
//! handshake, keep a session, and push requests while a call is pending.
//!
//! # Layout
//! - [`front`]: the 2026-07-28 Streamable HTTP endpoint: headers, `_meta`,
//!   `server/discover`, result shapes, SSE, subscriptions, the admin listener.
//! - [`mrtr`]: pushed questions turned into Multi Round-Trip Requests:
//!   operations, sealed `requestState`, conversion, resumption.
//! - [`policy`]: policy files: per-tool question keys (and, later, rules).
//! - [`upstream`]: legacy sessions over stdio and Streamable HTTP, initialized
//!   per capability profile, pooled and leased one operation at a time.
//! - [`telemetry`]: logs and metrics.
//! - [`config`], [`auth`], [`jsonrpc`], [`protocol`], [`sse`], [`error`]:
//!   the pieces every layer shares.
//!
//! [`start`] binds the listeners and runs the gateway; the binary and the
//! tests both go through it.

#![forbid(unsafe_code)]

pub mod auth;
pub mod config;
pub mod error;
pub mod front;
pub mod jsonrpc;
pub mod mrtr;
pub mod policy;
pub mod protocol;
pub mod sse;
pub mod telemetry;
pub mod upstream;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::front::Gateway;
use crate::telemetry::metrics::Metrics;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("requestState keys: {0}")]
    State(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// A running gateway.
pub struct Running {
    pub addr: SocketAddr,
    pub admin_addr: Option<SocketAddr>,
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

/// Binds the client and admin listeners (use port 0 for an ephemeral port) and starts serving.
pub async fn start(config: Config) -> Result<Running, StartError> {
    let metrics = Arc::new(Metrics::new());
    let gateway = Gateway::new(&config, metrics).map_err(StartError::State)?;
    let listener = bind(config.listen_addr()).await?;
    let addr = listener.local_addr().map_err(|source| StartError::Bind {
        addr: config.listen_addr(),
        source,
    })?;
    let admin = match config.admin_addr() {
        Some(a) => Some(bind(a).await?),
        None => None,
    };
    let admin_addr = admin.as_ref().and_then(|l| l.local_addr().ok());
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (admin_stop_tx, admin_stop_rx) = oneshot::channel::<()>();
    let gw = gateway.clone();
    let grace = config.server.shutdown_grace;
    let max_connections = config.server.max_connections;
    for route in gateway.routes.values() {
        tracing::info!(route = %route.name, path = %route.path, "route ready");
    }
    tracing::info!(%addr, admin = ?admin_addr, "redmark listening");
    let task = tokio::spawn(async move {
        let admin_task = admin.map(|listener| {
            let gw = gw.clone();
            tokio::spawn(front::server::serve(
                listener,
                move |req| front::admin::handle(gw.clone(), req),
                256,
                std::time::Duration::from_secs(1),
                async move {
                    let _ = admin_stop_rx.await;
                },
            ))
        });
        let handler_gw = gw.clone();
        let shutdown_gw = gw.clone();
        front::server::serve(
            listener,
            move |req| front::http::handle(handler_gw.clone(), req),
            max_connections,
            grace,
            async move {
                let _ = stop_rx.await;
                tracing::info!("shutting down: no new connections; finishing in-flight requests");
                shutdown_gw.begin_shutdown();
            },
        )
        .await;
        gw.shutdown_upstreams().await;
        // Every question's audit line is on disk before the process ends.
        if let Err(e) = gw.engine.audit.close().await {
            tracing::warn!(error = %e, "closing the audit log failed");
        }
        let _ = admin_stop_tx.send(());
        if let Some(t) = admin_task {
            let _ = t.await;
        }
        tracing::info!("redmark stopped");
    });
    Ok(Running {
        addr,
        admin_addr,
        gateway,
        stop: Some(stop_tx),
        task,
    })
}
