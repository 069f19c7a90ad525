//! Route-wide notices from a route's server (list changes, resource
//! updates), and the list epochs that let the catalog see a list change the
//! moment a session reads its notice.
//!
//! The epoch is bumped by the session's own dispatcher, before the notice is
//! relayed to anyone: a client that hears `notifications/tools/list_changed`
//! (over `subscriptions/listen`) and lists again at once is never served the
//! list the notice made stale, whichever task happens to run first.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use tokio::sync::broadcast;

/// Route-wide notices: list changes and resource updates.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub method: String,
    pub params: Option<Value>,
}

/// How many list-changed notices of each kind the route's server has sent.
#[derive(Debug, Default)]
pub struct ListEpochs {
    tools: AtomicU64,
    prompts: AtomicU64,
    resources: AtomicU64,
}

impl ListEpochs {
    /// The counter a list method's results depend on; `None` for methods no
    /// notice makes stale.
    fn of_list(&self, list_method: &str) -> Option<&AtomicU64> {
        match list_method {
            "tools/list" => Some(&self.tools),
            "prompts/list" => Some(&self.prompts),
            "resources/list" | "resources/templates/list" => Some(&self.resources),
            _ => None,
        }
    }

    /// The counter a list-changed notice bumps.
    fn of_notice(&self, notice: &str) -> Option<&AtomicU64> {
        match notice {
            "notifications/tools/list_changed" => Some(&self.tools),
            "notifications/prompts/list_changed" => Some(&self.prompts),
            "notifications/resources/list_changed" => Some(&self.resources),
            _ => None,
        }
    }

    /// The epoch of `list_method`'s results now: read it before asking the
    /// server, and keep the answer only if it has not moved meanwhile.
    pub fn current(&self, list_method: &str) -> u64 {
        self.of_list(list_method)
            .map_or(0, |e| e.load(Ordering::Acquire))
    }

    /// Marks the lists `notice` names as changed.
    pub fn bump(&self, notice: &str) {
        if let Some(e) = self.of_notice(notice) {
            e.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// The route's notice channel: every session of the route sends on it.
#[derive(Debug, Clone)]
pub struct Notices {
    tx: broadcast::Sender<Notice>,
    epochs: Arc<ListEpochs>,
}

impl Notices {
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity);
        Self {
            tx,
            epochs: Arc::new(ListEpochs::default()),
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.tx.subscribe()
    }

    pub fn epochs(&self) -> &Arc<ListEpochs> {
        &self.epochs
    }

    /// Marks the lists the notice makes stale, then relays it (to nobody,
    /// when no client listens: that is not an error).
    pub fn send(&self, notice: Notice) {
        self.epochs.bump(&notice.method);
        let _ = self.tx.send(notice);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_moves_the_epoch_of_the_lists_it_names_before_anyone_hears_it() {
        let notices = Notices::new(4);
        let mut rx = notices.subscribe();
        let before =
            ["tools/list", "prompts/list", "resources/list"].map(|m| notices.epochs().current(m));
        notices.send(Notice {
            method: "notifications/resources/list_changed".into(),
            params: None,
        });
        assert!(rx.try_recv().is_ok(), "relayed");
        assert_eq!(notices.epochs().current("tools/list"), before[0]);
        assert_eq!(notices.epochs().current("prompts/list"), before[1]);
        assert_eq!(notices.epochs().current("resources/list"), before[2] + 1);
        assert_eq!(
            notices.epochs().current("resources/templates/list"),
            before[2] + 1,
            "templates are resources too"
        );
        // A resource update changes no list.
        notices.send(Notice {
            method: "notifications/resources/updated".into(),
            params: None,
        });
        assert_eq!(notices.epochs().current("resources/list"), before[2] + 1);
        assert_eq!(notices.epochs().current("completion/complete"), 0);
    }
}
