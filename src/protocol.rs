//! Names and constants of the 2026-07-28 protocol that both sides refer to.

/// Protocol versions the front speaks (spec 2026-07-28 `basic/versioning.mdx`).
pub const SUPPORTED_VERSIONS: [&str; 1] = ["2026-07-28"];

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

/// Client-to-server methods of 2026-07-28 (schema `ClientRequest`).
pub const METHODS: [&str; 10] = [
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "subscriptions/listen",
];

/// Methods whose results carry caching hints (spec 2026-07-28
/// `server/utilities/caching.mdx` "Cacheable Results": "Servers MUST include
/// caching hints on results with `resultType: "complete"` returned by ...").
pub const CACHEABLE: [&str; 6] = [
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// Methods whose `Mcp-Name` header mirrors `params.name` or `params.uri`.
pub fn name_param(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
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
