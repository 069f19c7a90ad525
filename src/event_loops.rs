//! The threads that serve client connections: one event loop (a
//! current-thread tokio runtime) per core, as nginx and Envoy run one per
//! worker. An accepted connection is handed to one loop, round robin, and
//! everything it starts (its operations, the upstream sessions they open,
//! their HTTP connections) runs on that loop.
//!
//! Why not one work-stealing runtime: a passthrough call crosses about seven
//! tasks (the connection, the operation, the session's writer, the POST, the
//! upstream connection, the session's reader, back). On a shared runtime
//! each hand-off may wake an idle worker thread to steal it, and measured
//! under load that was half a context switch and a third of the gateway's
//! CPU per call (benches/WHERE_THE_TIME_GOES.md). On one loop a hand-off is
//! a queue push. Upstream code asks [`current`] which loop it runs on, to
//! lease sessions and pooled connections that live on the same loop.
//!
//! The trade-off is nginx's: a connection stays on its loop, so one client
//! multiplexing a heavy load over a single HTTP/2 connection uses one core.
//! `[server] event_loops = 0` serves connections on the shared runtime instead.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

thread_local! {
    static CURRENT: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Which event loop this thread is (0-based), `None` off the loops.
pub fn current() -> Option<usize> {
    CURRENT.with(Cell::get)
}

/// Why the loops could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start event loop {index}: {cause}")]
pub struct StartError {
    pub(crate) index: usize,
    /// Said in the message, so not also the error's `source()`.
    pub(crate) cause: std::io::Error,
}

/// One loop: its runtime's handle, and the signal that stops it.
struct Loop {
    handle: Handle,
    stop: Option<oneshot::Sender<()>>,
}

/// The running loops. Dropping this stops them: each runtime shuts down on
/// its own thread, cancelling what still runs there.
pub struct EventLoops {
    loops: Vec<Loop>,
    next: AtomicUsize,
}

impl EventLoops {
    /// Starts `count` loops (at least one), named `redmark-loop-N`.
    pub fn start(count: usize) -> Result<EventLoops, StartError> {
        let mut loops = Vec::with_capacity(count.max(1));
        for index in 0..count.max(1) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|cause| StartError { index, cause })?;
            let handle = runtime.handle().clone();
            let (stop, stopped) = oneshot::channel::<()>();
            std::thread::Builder::new()
                .name(format!("redmark-loop-{index}"))
                .spawn(move || {
                    CURRENT.with(|c| c.set(Some(index)));
                    // Runs the loop until stopped (or its EventLoops is gone);
                    // the runtime's tasks are dropped with it, here, off any
                    // other runtime.
                    let _ = runtime.block_on(stopped);
                    drop(runtime);
                })
                .map_err(|cause| StartError { index, cause })?;
            loops.push(Loop {
                handle,
                stop: Some(stop),
            });
        }
        Ok(EventLoops {
            loops,
            next: AtomicUsize::new(0),
        })
    }

    pub fn len(&self) -> usize {
        self.loops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.loops.is_empty()
    }

    /// Runs `make()`'s future on the next loop, round robin. `make` runs on
    /// that loop, so what it registers (a socket taken over with
    /// `TcpStream::from_std`) belongs to that loop's reactor.
    pub fn spawn<F, Fut>(&self, make: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let at = self.next.fetch_add(1, Ordering::Relaxed) % self.loops.len();
        // Boxed: a connection's future is large, and a task moves its future
        // by value (see `mrtr::start::call`); the task holds only `make`
        // until it first runs, on the loop.
        self.loops[at]
            .handle
            .spawn(async move { Box::pin(make()).await });
    }

    /// Tasks alive on every loop (for `redmark_runtime_tasks`).
    pub fn alive_tasks(&self) -> usize {
        self.loops
            .iter()
            .map(|l| l.handle.metrics().num_alive_tasks())
            .sum()
    }
}

impl Drop for EventLoops {
    fn drop(&mut self) {
        for l in &mut self.loops {
            if let Some(stop) = l.stop.take() {
                let _ = stop.send(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_loop_knows_its_index_and_work_goes_round_robin() {
        let loops = EventLoops::start(2).unwrap();
        assert_eq!(current(), None);
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..4 {
            let tx = tx.clone();
            loops.spawn(move || async move {
                tx.send(current()).unwrap();
            });
        }
        let mut seen: Vec<Option<usize>> = (0..4).map(|_| rx.recv().unwrap()).collect();
        seen.sort();
        assert_eq!(seen, vec![Some(0), Some(0), Some(1), Some(1)]);
    }

    #[test]
    fn dropping_the_loops_cancels_what_runs_on_them() {
        let loops = EventLoops::start(1).unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        loops.spawn(move || async move {
            // Holds `tx` until cancelled: the receiver sees the sender dropped.
            let _tx = tx;
            started_tx.send(()).unwrap();
            std::future::pending::<()>().await;
        });
        started_rx.recv().unwrap();
        assert_eq!(loops.alive_tasks(), 1);
        drop(loops);
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(10)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
        );
    }
}
