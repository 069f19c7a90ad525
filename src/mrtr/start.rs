//! Where a call enters the engine: a request without `requestState` begins an
//! operation, a retry resumes one. The first thing the operation sends decides
//! how the front answers: a final response as JSON, a notification opens SSE.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::state::Claims;
use super::{Engine, Outgoing, operation, resume};
use crate::protocol::{ClientRequest, Principal};
use crate::route::Route;

/// Queue depth between an operation and the client's response stream.
pub const STREAM_DEPTH: usize = 64;

/// Starts (or resumes) the operation for `req`; its answer arrives on the receiver.
/// The operation notices a client that goes away (the receiver dropped) and
/// cancels upstream what nobody will receive.
/// `verified`: a retry's state already opened and checked by the front.
pub fn call(
    engine: Arc<Engine>,
    route: Arc<Route>,
    principal: Principal,
    req: Box<ClientRequest>,
    verified: Option<Box<Claims>>,
) -> mpsc::Receiver<Outgoing> {
    let (tx, rx) = mpsc::channel(STREAM_DEPTH);
    // Boxed: an operation's future is large (it holds the whole operation
    // and its upstream call), and tokio moves a task's future by value
    // several times (into the task cell, and its stage when it completes);
    // moving a pointer instead was a quarter of a passthrough call's
    // instructions (benches/WHERE_THE_TIME_GOES.md).
    if req.is_retry() {
        tokio::spawn(Box::pin(resume::resume(
            engine, route, principal, req, verified, tx,
        )));
    } else {
        tokio::spawn(Box::pin(operation::begin(
            engine, route, principal, req, tx,
        )));
    }
    rx
}
