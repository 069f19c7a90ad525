//! [`SingleUse`] across replicas: round ids marked used in Redis
//! (`[state] store = "redis://..."`) with `SET key NX PX ttl`, so the first
//! replica to present a round's state wins and every later presentation, on
//! any replica, is a replay. The key expires with the state, so Redis holds
//! only ids whose states could still open.
//!
//! A store that does not answer within [`TIMEOUT`] refuses the retry
//! (`state_store_unavailable`): accepting it unchecked would allow a replay.
//! The connection manager reconnects by itself once Redis is back.
//!
//! The same store keeps what a 2025-era session changes after `initialize`
//! and every replica must see ([`Redis::session`]): its log level, and
//! whether it was ended by `DELETE` (`front::era2025`); and what a replica
//! taking over a relayed task needs beyond its id: the call's arguments.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::single_use::{SingleUse, StoreError};
use crate::telemetry::metrics::Metrics;

/// Longest a single-use check waits for Redis (connect included).
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// Keys are `redmark:used:{round id}`.
const PREFIX: &str = "redmark:used:";

pub struct Redis {
    conn: ConnectionManager,
    metrics: Arc<Metrics>,
}

impl Redis {
    /// A store at `url`; connects lazily, so a replica starts while Redis is
    /// down (and refuses retries until it is up). Must run inside tokio.
    /// Whether `url` is a store URL [`Redis::new`] takes (nothing is
    /// connected): `redmark check` refuses what `serve` would.
    pub fn check_url(url: &str) -> Result<(), redis::RedisError> {
        redis::Client::open(url).map(drop)
    }

    pub fn new(url: &str, metrics: Arc<Metrics>) -> Result<Self, redis::RedisError> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(TIMEOUT / 2))
            .set_response_timeout(Some(TIMEOUT / 2))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        let conn = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Self { conn, metrics })
    }

    fn failed(&self, why: String) -> StoreError {
        self.metrics.record_state_store_error();
        tracing::warn!(error = %why, "the state store did not answer a single-use check");
        StoreError::Unavailable(why)
    }
}

/// A 2025-era session's shared state: keys `redmark:session:{name}:level`
/// and `redmark:session:{name}:ended`, each expiring with the session.
const SESSION_PREFIX: &str = "redmark:session:";

/// What every replica must know of a 2025-era session beyond its sealed id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionState {
    pub log_level: Option<String>,
    pub ended: bool,
}

impl Redis {
    /// Runs `cmd` within [`TIMEOUT`], once more if the idle connection had broken.
    async fn run<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, StoreError> {
        let attempt = async {
            let mut conn = self.conn.clone();
            match cmd.query_async::<T>(&mut conn).await {
                Err(e) if e.is_connection_dropped() => {
                    let mut conn = self.conn.clone();
                    cmd.query_async::<T>(&mut conn).await
                }
                other => other,
            }
        };
        match tokio::time::timeout(TIMEOUT, attempt).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => Err(self.failed(e.to_string())),
            Err(_) => Err(self.failed(format!("no answer within {TIMEOUT:?}"))),
        }
    }

    /// A session's shared state, read in one round trip.
    pub async fn session(&self, name: &str) -> Result<SessionState, StoreError> {
        let mut cmd = redis::cmd("MGET");
        cmd.arg(format!("{SESSION_PREFIX}{name}:level"))
            .arg(format!("{SESSION_PREFIX}{name}:ended"));
        let (log_level, ended): (Option<String>, Option<String>) = self.run(&cmd).await?;
        Ok(SessionState {
            log_level,
            ended: ended.is_some(),
        })
    }

    /// Sets a session's log level for every replica, until `ttl`.
    pub async fn set_session_level(
        &self,
        name: &str,
        level: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.set_expiring(format!("{SESSION_PREFIX}{name}:level"), level, ttl)
            .await
    }

    /// Marks a session ended for every replica, until `ttl` (its id's lifetime).
    pub async fn end_session(&self, name: &str, ttl: Duration) -> Result<(), StoreError> {
        self.set_expiring(format!("{SESSION_PREFIX}{name}:ended"), 1, ttl)
            .await
    }
}

fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl Redis {
    /// `GET key`.
    async fn get(&self, key: String) -> Result<Option<String>, StoreError> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(key);
        self.run(&cmd).await
    }

    /// `SET key value PX ttl`: `value` under `key`, expiring after `ttl`.
    async fn set_expiring(
        &self,
        key: String,
        value: impl redis::ToRedisArgs,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(value).arg("PX").arg(ttl_ms(ttl));
        self.run::<()>(&cmd).await
    }
}

#[async_trait]
impl SingleUse for Redis {
    async fn first_use(&self, round_id: &str, ttl: Duration) -> Result<bool, StoreError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(format!("{PREFIX}{round_id}"))
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms(ttl));
        // [`Redis::run`] tries once more when the idle connection had broken
        // (Redis restarted): that write did not reach Redis, so it cannot
        // have set the key, and the retry cannot take a use twice.
        let reply: Option<String> = self.run(&cmd).await?;
        // `OK` when the key was set (first use), nil when it existed.
        Ok(reply.is_some())
    }
}

/// Remembered answers (`remember` field rules): `redmark:remember:{digest}`,
/// each a value sealed with the state key, expiring with its rule.
const REMEMBER_PREFIX: &str = "redmark:remember:";

impl Redis {
    pub async fn remembered(&self, digest: &str) -> Result<Option<String>, StoreError> {
        self.get(format!("{REMEMBER_PREFIX}{digest}")).await
    }

    pub async fn remember(
        &self,
        digest: &str,
        sealed: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.set_expiring(format!("{REMEMBER_PREFIX}{digest}"), sealed, ttl)
            .await
    }
}

/// A relayed task's call arguments (`mrtr::native::task::shared`):
/// `redmark:task-arguments:{task mark}`, sealed with the state key,
/// expiring with the task.
const TASK_ARGUMENTS_PREFIX: &str = "redmark:task-arguments:";

impl Redis {
    pub async fn task_arguments(&self, mark: &str) -> Result<Option<String>, StoreError> {
        self.get(format!("{TASK_ARGUMENTS_PREFIX}{mark}")).await
    }

    pub async fn keep_task_arguments(
        &self,
        mark: &str,
        sealed: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.set_expiring(format!("{TASK_ARGUMENTS_PREFIX}{mark}"), sealed, ttl)
            .await
    }
}
