//! The tasks a replica holds: bounded per principal and in all (per
//! route, `[route.tasks]`), each kept until its TTL (and a short while
//! after, so a task that failed at its TTL can still be read as failed).

use std::sync::{Arc, Mutex, PoisonError};

use foldhash::{HashMap, HashMapExt};
use tokio::time::Instant;

use super::task::Task;
use crate::config::TasksConfig;

struct Entry {
    task: Arc<Task>,
    remove_at: Instant,
}

/// Why a task could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Full {
    #[error(
        "this principal holds {0} tasks on the route, the most it may ([route.tasks] max_per_principal)"
    )]
    Principal(usize),
    #[error("the route holds {0} tasks, the most it may ([route.tasks] max_total)")]
    Total(usize),
}

/// Every task this replica holds, by id.
pub struct Tasks {
    live: Mutex<HashMap<String, Entry>>,
    /// This table's incarnation, sealed in every id it issues: a task id
    /// naming this node but another incarnation is a task lost in a
    /// restart.
    boot: String,
    /// The shared readers of tasks that listens here read from elsewhere.
    pub polls: super::polls::Polls,
}

impl Default for Tasks {
    fn default() -> Self {
        Self::new()
    }
}

impl Tasks {
    pub fn new() -> Tasks {
        Tasks {
            live: Mutex::new(HashMap::new()),
            boot: hex::encode(rand::random::<[u8; 8]>()),
            polls: super::polls::Polls::default(),
        }
    }

    /// This table's incarnation.
    pub fn boot(&self) -> &str {
        &self.boot
    }

    /// Holds `task` until `remove_at`, within the route's bounds.
    pub fn insert(
        &self,
        task: Arc<Task>,
        limits: &TasksConfig,
        remove_at: Instant,
    ) -> Result<(), Full> {
        let now = Instant::now();
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        live.retain(|_, e| e.remove_at > now);
        let on_route = live.values().filter(|e| e.task.route == task.route);
        let (mut total, mut mine) = (0, 0);
        for e in on_route {
            total += 1;
            if e.task.principal == task.principal {
                mine += 1;
            }
        }
        if mine >= limits.max_per_principal {
            return Err(Full::Principal(mine));
        }
        if total >= limits.max_total {
            return Err(Full::Total(total));
        }
        live.insert(task.id.clone(), Entry { task, remove_at });
        Ok(())
    }

    /// The task under `id`, unless its time is up (then it is forgotten).
    pub fn get(&self, id: &str) -> Option<Arc<Task>> {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let expired = live.get(id)?.remove_at <= Instant::now();
        if expired {
            live.remove(id);
            return None;
        }
        live.get(id).map(|e| e.task.clone())
    }

    /// Forgets a task (one whose call ended before it was handed out).
    pub fn remove(&self, id: &str) {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    pub fn len(&self) -> usize {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn task(id: &str, route: &str, principal: &str) -> Arc<Task> {
        Arc::new(Task::new(
            id.into(),
            route.into(),
            principal.into(),
            "tool".into(),
            std::time::SystemTime::now(),
            Duration::from_secs(60),
            Duration::from_secs(1),
        ))
    }

    fn limits(per: usize, total: usize) -> TasksConfig {
        TasksConfig {
            max_per_principal: per,
            max_total: total,
            ..TasksConfig::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_per_principal_and_per_route_and_forgotten_at_their_time() {
        let t = Tasks::new();
        let l = limits(2, 3);
        let at = Instant::now() + Duration::from_secs(60);
        t.insert(task("a1", "r", "alice"), &l, at).unwrap();
        t.insert(task("a2", "r", "alice"), &l, at).unwrap();
        assert_eq!(
            t.insert(task("a3", "r", "alice"), &l, at),
            Err(Full::Principal(2))
        );
        t.insert(task("b1", "r", "bob"), &l, at).unwrap();
        assert_eq!(
            t.insert(task("c1", "r", "carol"), &l, at),
            Err(Full::Total(3))
        );
        // Another route's bounds are its own.
        t.insert(task("o1", "other", "alice"), &l, at).unwrap();
        assert!(t.get("a1").is_some());

        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(t.get("a1").is_some(), "still within its time");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(t.get("a1").is_none(), "forgotten at its time");
        // Expired tasks free their places.
        t.insert(
            task("c1", "r", "carol"),
            &l,
            Instant::now() + Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(t.len(), 1);
        t.remove("c1");
        assert!(t.is_empty());
    }
}
