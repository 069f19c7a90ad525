//! Default values of the configuration, one function per setting (serde's `default = ...`).

use std::time::Duration;
pub fn max_body_bytes() -> usize {
    4 * 1024 * 1024
}
pub fn max_body_memory() -> usize {
    256 * 1024 * 1024
}
pub fn shutdown_grace() -> Duration {
    Duration::from_secs(10)
}
pub fn keepalive() -> Duration {
    Duration::from_secs(15)
}
/// One event loop per core, as nginx's `worker_processes auto`.
pub fn event_loops() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}
pub fn max_connections() -> usize {
    4096
}
/// nginx `client_header_timeout` (60s); its `keepalive_timeout` is 75s.
pub fn header_read_timeout() -> Duration {
    Duration::from_secs(60)
}
/// nginx `client_body_timeout` (60s), here for the whole body, not per read.
pub fn body_read_timeout() -> Duration {
    Duration::from_secs(60)
}
/// nginx `send_timeout` (60s): between two successful writes.
pub fn send_timeout() -> Duration {
    Duration::from_secs(60)
}
pub fn init_timeout() -> Duration {
    Duration::from_secs(20)
}
pub fn request_timeout() -> Duration {
    Duration::from_secs(60)
}
pub fn call_timeout() -> Duration {
    Duration::from_secs(300)
}
pub fn end_grace() -> Duration {
    Duration::from_secs(30)
}
pub fn mrtr_ttl() -> Duration {
    Duration::from_secs(600)
}
pub fn max_rounds() -> u32 {
    10
}
pub fn gather() -> Duration {
    Duration::from_millis(20)
}
/// Pushes a server sends together (one `asyncio.gather`, one `Promise.all`)
/// leave it within microseconds. tokio's timer rounds a deadline up to its
/// next 1 ms tick, so this waits 1-2 ms, never less: still a thousand times
/// the gap it waits for. It is what every lone question waits before it is
/// asked: at 2 ms (2-3 ms in fact) `ask` ran 17-29 % fewer operations a
/// second under wrk than at 1 ms, 7 % fewer in `scripts/bench.sh`
/// (benches/WHERE_THE_TIME_GOES.md). A push that
/// comes later is asked in the next round; nothing is lost.
pub fn gather_quiet() -> Duration {
    Duration::from_millis(1)
}
pub fn max_pending_per_principal() -> usize {
    256
}
pub fn max_message_bytes() -> usize {
    16 * 1024 * 1024
}
pub fn max_sessions() -> usize {
    64
}
pub fn max_sessions_per_principal() -> usize {
    16
}
pub fn max_operations_per_session() -> usize {
    64
}
pub fn idle_timeout() -> Duration {
    Duration::from_secs(300)
}
pub fn lease_timeout() -> Duration {
    Duration::from_secs(30)
}
pub fn cache_ttl() -> Duration {
    Duration::from_secs(60)
}
/// `[state] max_bytes`: 16 KiB.
pub fn max_state_bytes() -> usize {
    16 * 1024
}
pub fn session_idle() -> Duration {
    Duration::from_secs(30 * 60)
}
pub fn session_lifetime() -> Duration {
    Duration::from_secs(24 * 60 * 60)
}
pub fn sessions_per_principal() -> usize {
    64
}
pub fn sessions_total() -> usize {
    10_000
}

/// Forms are narrowed by the policy's field rules unless a route says otherwise.
pub fn shape_questions() -> bool {
    true
}
