//! An in-process transport: the session talks over channels to a peer in the
//! same process. Tests script legacy servers with it, with no process and no
//! socket, so they can run on paused time.

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, watch};

use super::{Inbound, Link, QUEUE_DEPTH};
use crate::jsonrpc::{Id, Message};

/// The server's end of an in-process link.
pub struct Peer {
    from_session: mpsc::Receiver<Message>,
    to_session: mpsc::Sender<Inbound>,
    shutdown: oneshot::Receiver<()>,
    ended: watch::Sender<bool>,
}

/// A connected pair: the session's [`Link`] and the server's [`Peer`].
pub fn pair() -> (Link, Peer) {
    let (outbound, from_session) = mpsc::channel(QUEUE_DEPTH);
    let (to_session, inbound) = mpsc::channel(QUEUE_DEPTH);
    let (shutdown_tx, shutdown) = oneshot::channel();
    let (ended, ended_rx) = watch::channel(false);
    let link = Link {
        direct: None,
        outbound,
        inbound,
        session_id: Arc::new(Mutex::new(None)),
        protocol_version: Arc::new(Mutex::new(None)),
        shutdown: shutdown_tx,
        ended: ended_rx,
    };
    let peer = Peer {
        from_session,
        to_session,
        shutdown,
        ended,
    };
    (link, peer)
}

impl Peer {
    /// The next message the session sent; `None` once the session closed the
    /// link. Messages sent before the close are delivered first, as a pipe would.
    pub async fn recv(&mut self) -> Option<Message> {
        tokio::select! {
            biased;
            message = self.from_session.recv() => message,
            _ = &mut self.shutdown => None,
        }
    }

    /// Sends a message to the session; false when it is gone.
    pub async fn send(&self, message: Message) -> bool {
        self.to_session
            .send(Inbound::Message(message))
            .await
            .is_ok()
    }

    /// Sends a message as if on the response stream of the session's request
    /// `id` (what an HTTP server does with a push that names its request).
    pub async fn send_on(&self, id: Id, message: Message) -> bool {
        self.to_session
            .send(Inbound::OnStream(id, message))
            .await
            .is_ok()
    }

    /// The server goes away (a crash, a dropped session).
    pub async fn close(self, why: &str) {
        let _ = self.to_session.send(Inbound::Closed(why.to_owned())).await;
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.ended.send(true);
    }
}
