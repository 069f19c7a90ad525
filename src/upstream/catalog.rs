//! What redmark remembers of a route's server: list results (until their TTL
//! or a list-changed notice) and the `initialize` answer per profile, so
//! `server/discover` and repeated lists do not each cost a round trip.
//!
//! A kept list carries the epoch of its kind ([`ListEpochs`]) read before it
//! was asked for; a list-changed notice moves the epoch as the session reads
//! it, so from that moment the kept list is not served, and an answer that
//! was in flight across the notice is not kept.

use foldhash::{HashMap, HashMapExt};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::notices::ListEpochs;
use super::pool::{PoolKey, RoutePool};
use super::session::InitInfo;
use crate::protocol::profile::Profile;
use crate::protocol::tool::Tool;
use crate::upstream::lock;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ListKey {
    pool: PoolKey,
    method: String,
    cursor: Option<String>,
}

/// Tool definitions by name, each shared with the calls that use it.
pub type ToolMap = Arc<HashMap<String, Arc<Tool>>>;

pub struct Catalog {
    ttl: Duration,
    epochs: Arc<ListEpochs>,
    lists: Mutex<HashMap<ListKey, Kept<Value>>>,
    /// The answer of the latest session per profile.
    init: Mutex<HashMap<Profile, Arc<InitInfo>>>,
    /// Every tool definition per pool key (all pages), for header checks.
    tools: Mutex<HashMap<PoolKey, Kept<ToolMap>>>,
}

/// A kept answer: when it was kept, and the epoch of its list kind when it
/// was asked for.
struct Kept<T> {
    value: T,
    at: Instant,
    epoch: u64,
}

/// The epoch of a list kind, read before its server is asked: the answer is
/// kept only if no list-changed notice came in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch(u64);

impl Catalog {
    /// A catalog kept fresh by the list-changed notices of the pool's sessions.
    pub fn new(pool: &Arc<RoutePool>, ttl: Duration) -> Arc<Self> {
        Self::with_epochs(pool.list_epochs(), ttl)
    }

    fn with_epochs(epochs: Arc<ListEpochs>, ttl: Duration) -> Arc<Self> {
        Arc::new(Self {
            ttl,
            epochs,
            lists: Mutex::new(HashMap::new()),
            init: Mutex::new(HashMap::new()),
            tools: Mutex::new(HashMap::new()),
        })
    }

    /// The epoch of `list_method`'s results now; read it before asking the server.
    pub fn epoch(&self, list_method: &str) -> Epoch {
        Epoch(self.epochs.current(list_method))
    }

    /// Tool definitions by name, if known and fresh. They are kept at least a
    /// second even with a zero TTL, so one call does not list twice.
    pub fn tools(&self, pool: &PoolKey) -> Option<ToolMap> {
        let ttl = self.ttl.max(Duration::from_secs(1));
        let epoch = self.epochs.current("tools/list");
        let mut tools = lock(&self.tools);
        match tools.get(pool) {
            Some(k) if k.epoch == epoch && k.at.elapsed() < ttl => Some(k.value.clone()),
            Some(_) => {
                tools.remove(pool);
                None
            }
            None => None,
        }
    }

    /// Keeps the tools of a complete listing (definitions by name), asked
    /// for at `epoch`, unless the tool list changed since.
    pub fn put_tools(
        &self,
        pool: &PoolKey,
        tools: HashMap<String, Value>,
        epoch: Epoch,
    ) -> ToolMap {
        let tools: ToolMap = Arc::new(
            tools
                .into_iter()
                .map(|(name, definition)| (name, Arc::new(Tool::new(definition))))
                .collect(),
        );
        if epoch == self.epoch("tools/list") {
            let kept = Kept {
                value: tools.clone(),
                at: Instant::now(),
                epoch: epoch.0,
            };
            lock(&self.tools).insert(pool.clone(), kept);
        }
        tools
    }

    pub fn list(&self, pool: &PoolKey, method: &str, cursor: Option<&str>) -> Option<Value> {
        let key = ListKey {
            pool: pool.clone(),
            method: method.into(),
            cursor: cursor.map(str::to_owned),
        };
        let epoch = self.epochs.current(method);
        let mut lists = lock(&self.lists);
        match lists.get(&key) {
            Some(k) if k.epoch == epoch && k.at.elapsed() < self.ttl => Some(k.value.clone()),
            Some(_) => {
                lists.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Keeps a list result asked for at `epoch`, unless that list changed since.
    pub fn put_list(
        &self,
        pool: &PoolKey,
        method: &str,
        cursor: Option<&str>,
        result: Value,
        epoch: Epoch,
    ) {
        if self.ttl.is_zero() || epoch != self.epoch(method) {
            return;
        }
        let key = ListKey {
            pool: pool.clone(),
            method: method.into(),
            cursor: cursor.map(str::to_owned),
        };
        let kept = Kept {
            value: result,
            at: Instant::now(),
            epoch: epoch.0,
        };
        lock(&self.lists).insert(key, kept);
    }

    pub fn init(&self, profile: &Profile) -> Option<Arc<InitInfo>> {
        lock(&self.init).get(profile).map(Arc::clone)
    }

    /// Keeps the `initialize` answer of a session of `profile` (shared with
    /// it), in place of the one kept.
    pub fn put_init(&self, profile: Profile, info: &Arc<InitInfo>) {
        lock(&self.init).insert(profile, Arc::clone(info));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> PoolKey {
        PoolKey {
            principal: "alice".into(),
            profile: Profile::default(),
        }
    }

    #[test]
    fn a_list_change_stops_the_kept_list_at_once_and_an_answer_from_before_it_is_not_kept() {
        let epochs = Arc::new(ListEpochs::default());
        let catalog = Catalog::with_epochs(epochs.clone(), Duration::from_secs(60));
        let first = serde_json::json!({"tools": [{"name": "a"}]});
        let asked = catalog.epoch("tools/list");
        catalog.put_list(&key(), "tools/list", None, first.clone(), asked);
        catalog.put_tools(&key(), HashMap::new(), asked);
        assert_eq!(catalog.list(&key(), "tools/list", None), Some(first));
        assert!(catalog.tools(&key()).is_some());
        // Another kind of list keeps its entries.
        let prompts = serde_json::json!({"prompts": []});
        catalog.put_list(
            &key(),
            "prompts/list",
            None,
            prompts.clone(),
            catalog.epoch("prompts/list"),
        );

        // The session reads the notice: from here on the kept tool list is stale.
        epochs.bump("notifications/tools/list_changed");
        assert_eq!(catalog.list(&key(), "tools/list", None), None);
        assert!(catalog.tools(&key()).is_none());
        assert_eq!(catalog.list(&key(), "prompts/list", None), Some(prompts));

        // An answer asked for before the notice and back after it is not kept.
        catalog.put_list(
            &key(),
            "tools/list",
            None,
            serde_json::json!({"tools": []}),
            asked,
        );
        catalog.put_tools(&key(), HashMap::new(), asked);
        assert_eq!(catalog.list(&key(), "tools/list", None), None);
        assert!(catalog.tools(&key()).is_none());

        // One asked for after it is.
        let second = serde_json::json!({"tools": [{"name": "b"}]});
        let now = catalog.epoch("tools/list");
        catalog.put_list(&key(), "tools/list", None, second.clone(), now);
        assert_eq!(catalog.list(&key(), "tools/list", None), Some(second));
    }
}
