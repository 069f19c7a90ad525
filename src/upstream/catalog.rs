//! What redmark remembers of a route's server: list results (until their TTL
//! or a list-changed notice) and the `initialize` answer per profile, so
//! `server/discover` and repeated lists do not each cost a round trip.

use foldhash::{HashMap, HashMapExt};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

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
    lists: Mutex<HashMap<ListKey, (Value, Instant)>>,
    /// The answer of the latest session per profile.
    init: Mutex<HashMap<Profile, Arc<InitInfo>>>,
    /// Every tool definition per pool key (all pages), for header checks.
    tools: Mutex<HashMap<PoolKey, (ToolMap, Instant)>>,
}

/// The list methods a list-changed notice makes stale.
fn stale_methods(notice: &str) -> &'static [&'static str] {
    match notice {
        "notifications/tools/list_changed" => &["tools/list"],
        "notifications/prompts/list_changed" => &["prompts/list"],
        "notifications/resources/list_changed" => &["resources/list", "resources/templates/list"],
        _ => &[],
    }
}

impl Catalog {
    /// A catalog kept fresh by the pool's notices.
    pub fn new(pool: &Arc<RoutePool>, ttl: Duration) -> Arc<Self> {
        let catalog = Arc::new(Self {
            ttl,
            lists: Mutex::new(HashMap::new()),
            init: Mutex::new(HashMap::new()),
            tools: Mutex::new(HashMap::new()),
        });
        let mut notices = pool.notices();
        let weak = Arc::downgrade(&catalog);
        tokio::spawn(async move {
            loop {
                let notice = match notices.recv().await {
                    Ok(n) => n,
                    // Missed notices might have been list changes: forget everything.
                    Err(RecvError::Lagged(_)) => {
                        let Some(c) = weak.upgrade() else { return };
                        lock(&c.lists).clear();
                        lock(&c.tools).clear();
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                };
                let Some(c) = weak.upgrade() else { return };
                c.invalidate(stale_methods(&notice.method));
            }
        });
        catalog
    }

    pub fn invalidate(&self, methods: &[&str]) {
        if methods.is_empty() {
            return;
        }
        lock(&self.lists).retain(|k, _| !methods.contains(&k.method.as_str()));
        if methods.contains(&"tools/list") {
            lock(&self.tools).clear();
        }
    }

    /// Tool definitions by name, if known and fresh. They are kept at least a
    /// second even with a zero TTL, so one call does not list twice.
    pub fn tools(&self, pool: &PoolKey) -> Option<ToolMap> {
        let ttl = self.ttl.max(Duration::from_secs(1));
        let tools = lock(&self.tools);
        tools
            .get(pool)
            .filter(|(_, at)| at.elapsed() < ttl)
            .map(|(t, _)| t.clone())
    }

    /// Keeps the tools of a complete listing (definitions by name).
    pub fn put_tools(&self, pool: &PoolKey, tools: HashMap<String, Value>) -> ToolMap {
        let tools: ToolMap = Arc::new(
            tools
                .into_iter()
                .map(|(name, definition)| (name, Arc::new(Tool::new(definition))))
                .collect(),
        );
        lock(&self.tools).insert(pool.clone(), (tools.clone(), Instant::now()));
        tools
    }

    pub fn list(&self, pool: &PoolKey, method: &str, cursor: Option<&str>) -> Option<Value> {
        let key = ListKey {
            pool: pool.clone(),
            method: method.into(),
            cursor: cursor.map(str::to_owned),
        };
        let mut lists = lock(&self.lists);
        match lists.get(&key) {
            Some((v, at)) if at.elapsed() < self.ttl => Some(v.clone()),
            Some(_) => {
                lists.remove(&key);
                None
            }
            None => None,
        }
    }

    pub fn put_list(&self, pool: &PoolKey, method: &str, cursor: Option<&str>, result: Value) {
        if self.ttl.is_zero() {
            return;
        }
        let key = ListKey {
            pool: pool.clone(),
            method: method.into(),
            cursor: cursor.map(str::to_owned),
        };
        lock(&self.lists).insert(key, (result, Instant::now()));
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
