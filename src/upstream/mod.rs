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
pub mod pool;
pub mod session;
pub mod transport;

pub use error::UpstreamError;
