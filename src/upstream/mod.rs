//! The legacy side: sessions to MCP servers that speak 2024-11-05 to
//! 2025-11-25 over stdio or Streamable HTTP, initialized per capability
//! profile and leased one operation at a time (several at a time on a
//! Streamable HTTP session once the server has shown it names each push's call).

pub mod catalog;
pub mod client;
mod error;
pub mod health;
pub mod mode;
pub mod native;
pub mod notices;
pub mod pool;
pub mod session;
pub mod subscriptions;
pub mod transport;

pub use error::UpstreamError;

/// A mutex's guard, poisoned or not: upstream state behind a lock stays
/// usable after a panic elsewhere (every holder leaves it consistent
/// between statements), and a request path never unwraps.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
