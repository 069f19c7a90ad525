//! The client request attached to an operation: where the operation's
//! answer and the notifications relayed before it go, and how the queue
//! keeps a slot for the answer so a client that does not read never holds
//! the operation.

use serde_json::Value;
use tokio::sync::mpsc;

use super::spans;
use crate::jsonrpc::Id;
use crate::mrtr::outgoing::{Outcome, Outgoing};
use crate::protocol::{Reject, RequestContext};

/// The client request currently attached to the operation.
pub(super) struct Client {
    pub(super) id: Id,
    pub(super) ctx: RequestContext,
    pub(super) tx: mpsc::Sender<Outgoing>,
    /// This round trip's span, held so it ends when the client is answered and dropped.
    pub(super) span: tracing::Span,
}

impl Client {
    pub(super) async fn send(&self, out: Outgoing) -> bool {
        if let Outgoing::Final {
            outcome: Outcome::Error(reason),
            ..
        } = &out
        {
            spans::record_error(&self.span, reason.as_str());
        }
        self.tx.send(out).await.is_ok()
    }

    pub(super) async fn reject(&self, reject: &Reject) -> bool {
        self.send(Outgoing::reject(Some(&self.id), reject)).await
    }

    /// Queues a notification without ever waiting for the client to read.
    /// One slot of the queue stays free for the answer (an input request or
    /// the final response), so [`Client::send`] never waits either: a client
    /// that does not read cannot hold the operation (and its session) past
    /// its timeouts, nor make it buffer without bound.
    pub(super) fn notify(&self, n: Value) -> Notified {
        if self.tx.capacity() <= ANSWER_SLOTS {
            return if self.tx.is_closed() {
                Notified::Closed
            } else {
                Notified::Dropped
            };
        }
        match self.tx.try_send(Outgoing::Notification(n)) {
            Ok(()) => Notified::Queued,
            Err(mpsc::error::TrySendError::Full(_)) => Notified::Dropped,
            Err(mpsc::error::TrySendError::Closed(_)) => Notified::Closed,
        }
    }
}

/// Queue slots kept free for the answer to the attached request: the
/// operation is the only sender on it and sends one answer per request.
const ANSWER_SLOTS: usize = 1;

/// What [`Client::notify`] did with a notification.
#[derive(Debug, PartialEq)]
pub(super) enum Notified {
    Queued,
    /// The client is not reading; the notification is gone (and counted).
    Dropped,
    Closed,
}
