//! Questions pushed to 2025-era clients and their answers: the JSON-RPC id
//! each question is pushed with (sealed, naming the replica that holds the
//! call), the wait for its answer, and where an answer that lands on
//! another replica belongs.

use std::sync::{Arc, Weak};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::session::{Session, Sessions};

/// How the id of every pushed question begins.
pub const PUSH_PREFIX: &str = "redmark.";

/// What a pushed question's id says, sealed.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Owner {
    /// The node holding the call.
    n: String,
    /// Its internal address, when it is in a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    a: Option<String>,
    r: String,
}

/// A client's answer to a pushed question: its result, or the error it sent.
pub type Answer = Result<Value, crate::jsonrpc::ErrorObject>;

#[derive(Debug)]
pub(super) struct Waiting {
    session: String,
    tx: tokio::sync::oneshot::Sender<Answer>,
}

/// A pushed question's wait for its answer; the question is forgotten when
/// this is dropped (answered, or its call ended).
pub struct Expected {
    sessions: Weak<Sessions>,
    pub id: String,
    pub rx: tokio::sync::oneshot::Receiver<Answer>,
}

impl Drop for Expected {
    fn drop(&mut self) {
        if let Some(s) = self.sessions.upgrade() {
            s.answers.remove(&self.id);
        }
    }
}

impl Sessions {
    /// A question about to be pushed to `session`'s client: the JSON-RPC id
    /// to push it with, and where its answer arrives. The id is sealed: it
    /// names this replica and its internal address (so a replica the answer
    /// lands on forwards it here, and no client can point that forward
    /// elsewhere) and 64 random bits.
    pub fn expect(self: &Arc<Self>, session: &Session) -> Expected {
        let owner = Owner {
            n: self.node.clone(),
            a: self.advertise.clone(),
            r: hex::encode(rand::random::<[u8; 8]>()),
        };
        let sealed = self
            .keys
            .seal_payload(&serde_json::to_vec(&owner).unwrap_or_default());
        let id = format!("{PUSH_PREFIX}{sealed}");
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.answers.insert(
            id.clone(),
            Waiting {
                session: session.name.clone(),
                tx,
            },
        );
        Expected {
            sessions: Arc::downgrade(self),
            id,
            rx,
        }
    }

    /// Hands the client's answer to the call waiting for it; false when no
    /// question of this session waits under that id.
    pub fn deliver(&self, session: &Session, id: &crate::jsonrpc::Id, answer: Answer) -> bool {
        let crate::jsonrpc::Id::String(id) = id else {
            return false;
        };
        match self.answers.remove_if(id, |_, w| w.session == session.name) {
            Some((_, w)) => w.tx.send(answer).is_ok(),
            None => false,
        }
    }

    /// The replica that pushed the question answered under `id`, when it is
    /// another one this replica can forward to: its node and address.
    pub fn owner_elsewhere(&self, id: &crate::jsonrpc::Id) -> Option<(String, String)> {
        let crate::jsonrpc::Id::String(id) = id else {
            return None;
        };
        if self.answers.contains_key(id) {
            return None;
        }
        let sealed = id.strip_prefix(PUSH_PREFIX)?;
        let plain = self.keys.open_payload(sealed).ok()?;
        let owner: Owner = serde_json::from_slice(&plain).ok()?;
        if owner.n == self.node {
            return None;
        }
        Some((owner.n, owner.a?))
    }
}
