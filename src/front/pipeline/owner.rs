//! Step 9: where a call's operation lives. A new operation on a draining
//! replica is refused (`draining`, 503: the balancer sends it elsewhere). A
//! retry's `requestState` is opened and checked here (signature, expiry,
//! principal, request: what any replica can check); a hold-mode retry whose
//! state names another replica is marked for forwarding to that owner, at the
//! address sealed into the state ([`RequestCx::forward`]), and the front
//! streams the owner's answer back. Replay-mode states and this node's own
//! go on to the engine.
//!
//! The internal endpoint (`front::cluster`) does not run this step: a
//! forwarded request is never forwarded again.

use std::sync::Arc;

use super::{Check, Halt, RequestCx};
use crate::mrtr::{Engine, resume};
use crate::protocol::{Reason, Reject};

/// The replica a retry goes to, from its sealed state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardTo {
    /// The owner's node id.
    pub node: String,
    /// Its advertised internal address, e.g. `http://10.0.0.5:9465`.
    pub addr: String,
    /// The operation, for errors and logs.
    pub operation: String,
    /// The operation's trace (`traceparent` of its root span), so the
    /// forward's span joins the operation's one trace.
    pub tc: Option<String>,
    /// For `tasks/*`: the task, so an owner that cannot be reached makes
    /// `tasks/get` read it as failed.
    pub task: Option<TaskAt>,
}

/// A task whose `tasks/*` request is forwarded to its replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskAt {
    pub method: crate::protocol::Method,
    pub id: String,
    pub sealed: crate::front::tasks::id::Sealed,
}

pub struct Owner {
    engine: Arc<Engine>,
}

impl Owner {
    pub fn new(engine: Arc<Engine>) -> Self {
        Self { engine }
    }
}

impl Check for Owner {
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        let req = cx.request()?;
        if req.method.is_task() {
            // A task's `tasks/*` go to the replica holding its call, named
            // in its sealed id (ext-tasks "Streamable HTTP: Routing
            // Headers": intermediaries route "to the server instance
            // holding its state, which is typically required for
            // correctness").
            cx.forward =
                crate::front::tasks::owner_elsewhere(&self.engine, &cx.route, &cx.principal, req);
            return Ok(());
        }
        if !req.method.is_operation() {
            return Ok(());
        }
        if !req.is_retry() {
            if self.engine.is_draining() {
                return Err(Halt::refuse(
                    Some(&req.id),
                    Reject::new(
                        Reason::Draining,
                        "this replica is draining for a restart and takes no new operations; call again (another replica will take it)",
                    ),
                ));
            }
            return Ok(());
        }
        let claims = resume::verify(&self.engine, &cx.route, &cx.principal, req)
            .map_err(|reject| Halt::refuse(Some(&req.id), reject))?;
        // Only a node in a cluster forwards; without an address in the state
        // the engine answers `operation_unknown` as for any foreign state.
        if claims.m == "hold"
            && claims.node != self.engine.node
            && self.engine.advertise.is_some()
            && let Some(addr) = claims.addr
        {
            cx.forward = Some(ForwardTo {
                node: claims.node,
                addr,
                operation: claims.op,
                tc: claims.tc,
                task: None,
            });
        } else {
            // Opening a state (XChaCha20-Poly1305, digests) is a good part of
            // a retry's cost: the engine takes these claims as checked.
            cx.verified = Some(Box::new(claims));
        }
        Ok(())
    }
}
