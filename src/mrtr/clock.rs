//! The engine's clock. Deadlines (TTLs, the gather window, tombstones,
//! answer times) are `tokio::time::Instant`s, so paused-time tests drive them
//! with `advance`. requestState expiry is wall-clock seconds, because other
//! replicas check it with their own clocks; in tests the wall clock can be made
//! to follow tokio's too.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

#[derive(Debug, Clone, Copy, Default)]
pub enum Clock {
    /// The system's wall clock for Unix times (production).
    #[default]
    Wall,
    /// Unix time = the wall clock when made + tokio's elapsed time since (tests
    /// with paused time: `advance` moves state expiry too).
    FollowsTokio { unix: Duration, at: Instant },
}

impl Clock {
    pub fn following_tokio() -> Self {
        Clock::FollowsTokio {
            unix: wall_now(),
            at: Instant::now(),
        }
    }

    /// Time since the Unix epoch.
    pub fn unix_now(&self) -> Duration {
        match self {
            Clock::Wall => wall_now(),
            Clock::FollowsTokio { unix, at } => *unix + at.elapsed(),
        }
    }

    /// Milliseconds since the Unix epoch.
    pub fn unix_now_ms(&self) -> u64 {
        u64::try_from(self.unix_now().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn system_time(&self) -> SystemTime {
        UNIX_EPOCH + self.unix_now()
    }
}

fn wall_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_following_clock_moves_with_paused_time() {
        let clock = Clock::following_tokio();
        let before = clock.unix_now();
        tokio::time::advance(Duration::from_secs(600)).await;
        assert_eq!(clock.unix_now() - before, Duration::from_secs(600));
    }
}
