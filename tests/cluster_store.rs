//! `[state] store`: single use of a round's state across replicas, in a real
//! Redis (Debian `redis-server`, started here on a free port and killed at
//! the end). The first presentation of a round id wins, every later one is
//! a replay; a store that does not answer refuses (`state_store_unavailable`),
//! never accepts; once Redis is back, checks work again.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use redmark::mrtr::redis_store::Redis;
use redmark::mrtr::single_use::{SingleUse, StoreError};
use redmark::protocol::IntoReject;
use redmark::telemetry::metrics::Metrics;
use tokio::process::Command;

/// A port nothing listens on now (the OS's choice of a free one).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `redis-server` on `port`, no persistence, in a directory of its own.
async fn redis_on(port: u16, dir: &std::path::Path) -> ChildGuard {
    ensure_deps();
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--dir")
        .arg(dir);
    spawn_until(cmd, "Ready to accept connections").await
}

#[tokio::test]
async fn a_round_id_is_used_once_across_replicas_and_a_dead_store_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut redis = redis_on(port, dir.path()).await;
    let url = format!("redis://127.0.0.1:{port}/0");
    let metrics = Arc::new(Metrics::new());
    // Two replicas' stores, one Redis.
    let one = Redis::new(&url, metrics.clone()).unwrap();
    let two = Redis::new(&url, Arc::new(Metrics::new())).unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(one.first_use("op-a.1", ttl).await, Ok(true));
    assert_eq!(two.first_use("op-a.1", ttl).await, Ok(false));
    assert_eq!(one.first_use("op-a.1", ttl).await, Ok(false));
    assert_eq!(two.first_use("op-a.2", ttl).await, Ok(true));
    // The key expires with the state.
    assert_eq!(
        one.first_use("op-short.1", Duration::from_millis(200))
            .await,
        Ok(true)
    );
    eventually("the short id to expire in Redis", || async {
        match two
            .first_use("op-short.1", Duration::from_millis(200))
            .await
        {
            Ok(true) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    redis.0.kill().await.unwrap();
    let started = Instant::now();
    let down = one.first_use("op-b.1", ttl).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let Err(e @ StoreError::Unavailable(_)) = down else {
        panic!("a dead store must refuse, got {down:?}");
    };
    let reject = e.into_reject();
    assert_eq!(reject.reason.as_str(), "state_store_unavailable");
    assert_eq!(reject.status().as_u16(), 503);
    let errors = metrics.render().lines().find_map(|l| {
        l.strip_prefix("redmark_state_store_errors_total ")
            .map(str::to_owned)
    });
    assert_eq!(errors.as_deref(), Some("1"));

    // Back up (empty: a restarted Redis without persistence forgets ids,
    // which the replicas guide says): checks work again without restarting redmark.
    let _redis = redis_on(port, dir.path()).await;
    eventually("the store to reconnect", || async {
        match one.first_use("op-c.1", ttl).await {
            Ok(true) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(two.first_use("op-c.1", ttl).await, Ok(false));
}

#[tokio::test]
async fn a_gateway_takes_a_redis_store_and_refuses_another_scheme() {
    let ok = stdio_config(&["true"], "[state]\nstore = \"redis://127.0.0.1:1/0\"\n");
    // Redis need not be up for the gateway to start: it connects lazily.
    let config = redmark::config::Config::parse(&ok, "ok.toml", repo()).unwrap();
    let running = redmark::start(config).await.expect("starts with a store");
    running.shutdown().await;
    let bad = stdio_config(&["true"], "[state]\nstore = \"http://127.0.0.1:6379\"\n");
    let err = redmark::config::Config::parse(&bad, "bad.toml", repo())
        .unwrap_err()
        .to_string();
    assert_contains(&err, &["bad.toml:", "[state] store", "redis://"]);
}
