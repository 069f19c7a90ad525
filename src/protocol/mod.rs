//! The bottom layer: the 2026-07-28 vocabulary every other layer shares.
//!
//! - [`params`]: a client's params as read: `_meta` typed, `arguments` kept as text until asked for.
//! - [`request`]: the typed client request (`ClientRequest`, `Method`, `RequestContext`).
//! - [`profile`]: the capability profile a client declared.
//! - [`principal`]: who is calling.
//! - [`reason`]: the table of every `data.reason`, with its code, status and fault side.
//! - [`reject`]: refusals built from that table.
//! - [`shape`]: legacy results and errors made into 2026-07-28 ones; replies and notifications.
//! - [`tasks`]: the tasks extension, withheld where no route serves it.
//! - [`tool`]: a listed tool, and the parameters its calls mirror into headers.
//!
//! It imports nothing of redmark's but [`crate::jsonrpc`]: every layer above may use it.

pub mod params;
pub mod principal;
pub mod profile;
pub mod reason;
pub mod reject;
pub mod request;
pub mod shape;
pub mod tasks;
pub mod tool;

pub use params::{Arguments, ClientMeta, ClientParams};
pub use principal::Principal;
pub use reason::{Fault, Reason};
pub use reject::{IntoReject, Reject};
pub use request::{ClientRequest, Method, RequestContext};

/// Protocol versions the front speaks (spec 2026-07-28 `basic/versioning.mdx`).
pub const SUPPORTED_VERSIONS: [&str; 1] = ["2026-07-28"];

/// The initialization-based versions redmark serves to 2025-era clients,
/// oldest first (`front::era2025`).
pub const LEGACY_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

pub mod meta {
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    /// Legacy tasks metadata that has no meaning in 2026-07-28.
    pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
    pub const RESERVED_PREFIX: &str = "io.modelcontextprotocol/";
}

/// Log levels in increasing severity (RFC 5424, as MCP uses them).
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

pub fn log_level_rank(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| *l == level)
}
