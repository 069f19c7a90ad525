//! A native server as one child process on stdio: every request is written
//! at once under redmark's own id and its answer matched back by that id, so
//! one process serves any number of concurrent requests. A process that
//! exits fails what is in flight and is started again on the next request.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::jsonrpc::{ErrorObject, Id, Message};
use crate::upstream::UpstreamError;
use crate::upstream::transport::{Inbound, stdio};

type Waiters = Arc<Mutex<HashMap<i64, oneshot::Sender<Result<Value, ErrorObject>>>>>;

/// Requests in flight on one process, at most (a bound, not a pool).
const MAX_IN_FLIGHT: usize = 1024;

struct Process {
    outbound: mpsc::Sender<Value>,
    waiters: Waiters,
    /// Dropping it stops the process.
    _shutdown: oneshot::Sender<()>,
    alive: Arc<std::sync::atomic::AtomicBool>,
}

pub struct StdioNative {
    route: Arc<str>,
    program: PathBuf,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: PathBuf,
    max_message_bytes: usize,
    process: tokio::sync::Mutex<Option<Arc<Process>>>,
    next_id: AtomicI64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl StdioNative {
    pub fn new(
        route: Arc<str>,
        program: PathBuf,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: PathBuf,
        max_message_bytes: usize,
    ) -> Self {
        Self {
            route,
            program,
            args,
            env,
            cwd,
            max_message_bytes,
            process: tokio::sync::Mutex::new(None),
            next_id: AtomicI64::new(1),
        }
    }

    async fn process(&self) -> Result<Arc<Process>, UpstreamError> {
        let mut slot = self.process.lock().await;
        if let Some(p) = slot.as_ref()
            && p.alive.load(Ordering::Relaxed)
        {
            return Ok(p.clone());
        }
        let link = stdio::spawn(
            &self.program,
            &self.args,
            &self.env,
            &self.cwd,
            self.route.clone(),
            self.max_message_bytes,
        )?;
        let waiters: Waiters = Arc::default();
        let alive = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (w, a, route) = (waiters.clone(), alive.clone(), self.route.clone());
        let mut inbound = link.inbound;
        tokio::spawn(async move {
            while let Some(msg) = inbound.recv().await {
                match msg {
                    Inbound::Message(Message::Response {
                        id: Id::Number(n),
                        outcome,
                    })
                    | Inbound::OnStream(
                        _,
                        Message::Response {
                            id: Id::Number(n),
                            outcome,
                        },
                    ) => {
                        if let Some(tx) = lock(&w).remove(&n) {
                            let _ = tx.send(outcome);
                        }
                    }
                    Inbound::Closed(why) => {
                        tracing::info!(route = %route, why, "native stdio server ended");
                        break;
                    }
                    // A 2026-07-28 server pushes no requests; its notifications are not relayed.
                    _ => {}
                }
            }
            a.store(false, Ordering::Relaxed);
            // Every request in flight hears that the server went away.
            lock(&w).clear();
        });
        let p = Arc::new(Process {
            outbound: link.outbound,
            waiters,
            _shutdown: link.shutdown,
            alive,
        });
        *slot = Some(p.clone());
        Ok(p)
    }

    pub async fn send(
        &self,
        method: &str,
        params: Value,
    ) -> Result<Result<Value, ErrorObject>, UpstreamError> {
        let p = self.process().await?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut w = lock(&p.waiters);
            if w.len() >= MAX_IN_FLIGHT {
                return Err(UpstreamError::Busy(std::time::Duration::ZERO));
            }
            w.insert(id, tx);
        }
        // Removed again however this request ends (answer, timeout, caller gone).
        let _forget = Forget(&p.waiters, id);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if p.outbound.send(msg).await.is_err() {
            return Err(UpstreamError::Lost("the server's stdin is closed".into()));
        }
        rx.await
            .map_err(|_| UpstreamError::Lost("the server process exited".into()))
    }

    pub fn close(&self) {
        if let Ok(mut slot) = self.process.try_lock() {
            slot.take();
        }
    }
}

struct Forget<'a>(&'a Waiters, i64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(self.0).remove(&self.1);
    }
}
