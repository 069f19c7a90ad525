//! Where a call enters the engine: a request without `requestState` begins an
//! operation, a retry resumes one. The first thing the operation sends decides
//! how the front answers: a final response as JSON, a notification opens SSE.
//!
//! An operation runs in the client request's own task until that first
//! output, and gets a task of its own only if something is left to do after
//! it (questions that wait for a retry, a stream, the end of its bookkeeping):
//! a call the server answers at once never leaves the request's task, which
//! saves a spawn and a hand-off between tasks per call
//! (benches/WHERE_THE_TIME_GOES.md).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::state::Claims;
use super::{Engine, Outgoing, operation, resume};
use crate::protocol::{ClientRequest, Principal};
use crate::route::Route;

/// Queue depth between an operation and the client's response stream.
pub const STREAM_DEPTH: usize = 64;

/// An operation and the receiving end of what it sends.
pub struct Started {
    operation: Detach,
    rx: mpsc::Receiver<Outgoing>,
}

/// Boxed: an operation's future is large (it holds the whole operation and
/// its upstream call), and tokio moves a task's future by value several
/// times (into the task cell, and its stage when it completes); moving a
/// pointer instead was a quarter of a passthrough call's instructions
/// (benches/WHERE_THE_TIME_GOES.md).
type Running = Pin<Box<dyn Future<Output = ()> + Send>>;

/// An operation not done yet, moved to a task of its own when dropped. So
/// an operation whose client goes away mid-call (the request's task
/// dropped) sees its receiver gone and ends as it always does: counted,
/// audited, and its upstream call cancelled.
struct Detach(Option<Running>);

impl Drop for Detach {
    fn drop(&mut self) {
        if let Some(operation) = self.0.take() {
            tokio::spawn(operation);
        }
    }
}

impl Started {
    /// The operation's first output, driving the operation in this task
    /// meanwhile, and the receiver of what it sends after; what it still
    /// has to do then runs on its own task.
    pub async fn first(self) -> (Option<Outgoing>, mpsc::Receiver<Outgoing>) {
        let Started {
            mut operation,
            mut rx,
        } = self;
        let Some(running) = operation.0.as_mut() else {
            return (rx.recv().await, rx);
        };
        let first = tokio::select! {
            biased;
            out = rx.recv() => Some(out),
            () = running.as_mut() => None,
        };
        match first {
            // Sent with work left to do: `operation` moves to its own task here.
            Some(out) => (out, rx),
            None => {
                operation.0 = None;
                // Done: whatever it sent is queued already.
                (rx.recv().await, rx)
            }
        }
    }
}

/// Starts (or resumes) the operation for `req`; its answer arrives through
/// [`Started::first`]. The operation notices a
/// client that goes away (the receiver dropped) and cancels upstream what
/// nobody will receive.
/// `verified`: a retry's state already opened and checked by the front.
pub fn call(
    engine: Arc<Engine>,
    route: Arc<Route>,
    principal: Principal,
    req: ClientRequest,
    verified: Option<Claims>,
) -> Started {
    let (tx, rx) = mpsc::channel(STREAM_DEPTH);
    let operation: Pin<Box<dyn Future<Output = ()> + Send>> =
        if req.params.contains_key("requestState") {
            Box::pin(resume::resume(engine, route, principal, req, verified, tx))
        } else {
            Box::pin(operation::begin(engine, route, principal, req, tx))
        };
    Started {
        operation: Detach(Some(operation)),
        rx,
    }
}
