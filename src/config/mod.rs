//! The gateway configuration file (TOML): what users write, how it is read,
//! and the checks that run before anything starts.
//!
//! Every table denies unknown keys, and every error names the file and line.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toml::Spanned;

pub use crate::protocol::shape::CacheScope;

/// A configuration problem, located in its file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl ConfigError {
    /// An error at a byte span of `text` (line 0 when the span is unknown).
    pub fn at(file: &str, text: &str, span: Option<std::ops::Range<usize>>, message: &str) -> Self {
        let (line, column) = span.map_or((0, 0), |s| load::line_col(text, s.start));
        ConfigError {
            file: file.to_owned(),
            line,
            column,
            message: message.to_owned(),
        }
    }
}

/// Several problems found at once, so `redmark check` can list them all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct ConfigErrors(pub Vec<ConfigError>);

/// redmark.toml: the gateway's listeners, its routes to MCP servers, and
/// the bounds on everything it holds.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "redmark.toml")]
pub struct Config {
    /// `[server]`: the listeners and the limits on client connections.
    pub server: ServerConfig,
    /// `[auth]`: who may call. Unset: every caller is the principal
    /// `anonymous`; with it, a request without valid credentials gets 401.
    #[serde(default)]
    pub auth: Option<AuthConfig>,
    /// `[[route]]`: one per MCP server redmark fronts, each at its own path.
    #[serde(default, rename = "route")]
    #[schemars(with = "Vec<RouteConfig>")]
    pub routes: Vec<Spanned<RouteConfig>>,
    /// `[mrtr]`: how long questions are held and how many rounds an operation may take.
    #[serde(default)]
    pub mrtr: MrtrConfig,
    /// `[state]`: the keys that seal `requestState`, and where rounds are marked used.
    #[serde(default)]
    pub state: StateConfig,
    /// `[sessions]`: the 2025-era clients' sessions (`initialize`, `Mcp-Session-Id`).
    #[serde(default)]
    pub sessions: SessionsConfig,
    /// Several replicas: the internal endpoint forwarded retries arrive on.
    #[serde(default)]
    pub cluster: Option<ClusterConfig>,
    /// `[telemetry]`: OpenTelemetry trace export (OTLP).
    #[serde(default)]
    pub telemetry: crate::telemetry::traces::TelemetryConfig,
    /// The audit log of questions (`redmark report` reads it); unset: no audit log.
    #[serde(default)]
    #[schemars(with = "Option<crate::telemetry::audit::AuditConfig>")]
    pub audit: Option<Spanned<crate::telemetry::audit::AuditConfig>>,
    /// `[log]`: where the access log goes.
    #[serde(default)]
    pub log: crate::telemetry::access::LogConfig,
    /// Directory of the config file; relative paths in it resolve against this.
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// Keys written under a name that is deprecated (`compat`): warnings
    /// for `redmark check` and the log at load.
    #[serde(skip)]
    pub deprecations: Vec<ConfigError>,
}

/// Most `[server] event_loops`: each is a thread.
pub const MAX_EVENT_LOOPS: usize = 256;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Address of the 2026-07-28 endpoint(s).
    #[schemars(with = "String")]
    pub listen: Spanned<String>,
    /// Address of the admin listener (`/healthz`, `/readyz`, `/metrics`).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub admin: Option<Spanned<String>>,
    /// Largest request body accepted, in bytes; larger bodies get 413.
    #[serde(default = "defaults::max_body_bytes")]
    pub max_body_bytes: usize,
    /// Most bytes of request bodies held at once over every connection
    /// (never less than `max_body_bytes`); beyond, 503 `body_memory_exhausted`.
    #[serde(default = "defaults::max_body_memory")]
    pub max_body_memory: usize,
    /// Names, besides loopback and the admin listener's own address, that
    /// the admin listener answers as `Host` (DNS rebinding protection).
    #[serde(default)]
    pub admin_hosts: Vec<String>,
    /// Allowed `Origin` values (scheme://host[:port]). Unset: loopback origins only.
    #[serde(default)]
    pub allowed_origins: Option<Vec<String>>,
    /// How long in-flight requests may run after SIGTERM before they are cut.
    #[serde(default = "defaults::shutdown_grace", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub shutdown_grace: Duration,
    /// Interval of SSE keep-alive comments on open response streams.
    #[serde(default = "defaults::keepalive", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub sse_keepalive: Duration,
    /// Most client connections served at once; connections beyond it are
    /// answered 503 `too_many_connections` (`Retry-After`) and closed.
    #[serde(default = "defaults::max_connections")]
    pub max_connections: usize,
    /// Time a client has to send a complete request head, counted from the
    /// connection's start or the end of the previous response (so it is also
    /// the keep-alive idle timeout); then the connection is closed.
    #[serde(default = "defaults::header_read_timeout", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub header_read_timeout: Duration,
    /// Time a client has to send the whole request body once its head is in;
    /// then it gets 408 `body_timeout`.
    #[serde(default = "defaults::body_read_timeout", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub body_read_timeout: Duration,
    /// Longest a write to a client may make no progress (a client that does
    /// not read its response); then the connection is closed.
    #[serde(default = "defaults::send_timeout", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub send_timeout: Duration,
    /// Threads serving client connections, each its own event loop
    /// (`event_loops`); default: one per core. 0: connections are served on
    /// the shared work-stealing runtime.
    #[serde(default = "defaults::event_loops")]
    #[schemars(extend("x-default" = "one per core"))]
    pub event_loops: usize,
    /// This node's name in sealed state (which replica holds an operation); default: random.
    #[serde(default)]
    pub node_id: Option<String>,
    /// `[server.tls]`: serve the 2026-07-28 endpoint over HTTPS (rustls).
    #[serde(default)]
    #[schemars(with = "Option<TlsConfig>")]
    pub tls: Option<Spanned<TlsConfig>>,
    /// `[server.admin_tls]`: the admin listener's own HTTPS.
    #[serde(default)]
    #[schemars(with = "Option<TlsConfig>")]
    pub admin_tls: Option<Spanned<TlsConfig>>,
}

/// Multi Round-Trip Requests: how long questions are held and how many rounds an operation may take.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MrtrConfig {
    /// How long an unanswered question is held before the server hears `cancel`.
    #[serde(default = "defaults::mrtr_ttl", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub ttl: Duration,
    /// Rounds of questions one operation may take.
    #[serde(default = "defaults::max_rounds")]
    pub max_rounds: u32,
    /// Bound on the window for collecting pushes that arrive together into one round.
    #[serde(default = "defaults::gather", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub gather: Duration,
    /// The window ends early once the server has pushed nothing for this long
    /// (never later than `gather`): a lone question does not wait out the bound.
    #[serde(default = "defaults::gather_quiet", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub gather_quiet: Duration,
    /// Operations one principal may have waiting for answers at once.
    #[serde(default = "defaults::max_pending_per_principal")]
    pub max_pending_per_principal: usize,
}

impl Default for MrtrConfig {
    fn default() -> Self {
        Self {
            ttl: defaults::mrtr_ttl(),
            max_rounds: defaults::max_rounds(),
            gather: defaults::gather(),
            gather_quiet: defaults::gather_quiet(),
            max_pending_per_principal: defaults::max_pending_per_principal(),
        }
    }
}

/// `[sessions]`: bounds on the sessions 2025-era clients open with `initialize`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsConfig {
    /// A session nobody used for this long ends (then 404, and the client initializes again).
    #[serde(default = "defaults::session_idle", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub idle_timeout: Duration,
    /// The longest a session id is honoured, used or not (it is sealed into the id).
    #[serde(default = "defaults::session_lifetime", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub max_lifetime: Duration,
    /// Sessions one principal may hold open on a replica.
    #[serde(default = "defaults::sessions_per_principal")]
    pub max_per_principal: usize,
    /// Sessions a replica holds open in all.
    #[serde(default = "defaults::sessions_total")]
    pub max_total: usize,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            idle_timeout: defaults::session_idle(),
            max_lifetime: defaults::session_lifetime(),
            max_per_principal: defaults::sessions_per_principal(),
            max_total: defaults::sessions_total(),
        }
    }
}

/// What to do when a server asks for something the client did not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MissingCapability {
    /// Answer the server with an error and the client with -32021.
    #[default]
    Error,
    /// Answer the server `decline` on the user's behalf (elicitation only).
    Decline,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// `[[auth.api_key]]`: API keys, each naming its principal.
    #[serde(default)]
    #[schemars(with = "Vec<ApiKeyConfig>")]
    pub api_key: Vec<Spanned<ApiKeyConfig>>,
    /// Bearer JWTs from an OAuth 2.1 authorization server (see `oauth.rs`).
    #[serde(default)]
    #[schemars(with = "Option<OAuthConfig>")]
    pub oauth: Option<Spanned<OAuthConfig>>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// Hex SHA-256 of the key; the key itself is never stored.
    pub sha256: String,
    /// The principal a request with this key acts as (in policy rules,
    /// limits, logs and audit records).
    pub principal: String,
    /// Groups of the principal, for policy rules (`principal.groups`).
    #[serde(default)]
    pub groups: Vec<String>,
    /// Scopes this key holds, for tools whose policy requires scopes.
    #[serde(default)]
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// The route's name, unique: in metrics, logs and audit records.
    pub name: String,
    /// The URL path clients post to, e.g. `/mcp/rooms`; unique, starts with `/`.
    pub path: String,
    /// `[route.upstream]`: the MCP server behind this route: `command`
    /// (stdio) or `url` (Streamable HTTP), exactly one.
    #[schemars(with = "UpstreamConfig")]
    pub upstream: Spanned<UpstreamConfig>,
    /// `[route.pool]`: the upstream sessions this route keeps.
    #[serde(default)]
    pub pool: PoolConfig,
    /// `[route.cache]`: caching hints on results, and the list cache.
    #[serde(default)]
    pub cache: CacheConfig,
    /// A server asking for a capability the client lacks: `error` (default) or `decline`.
    #[serde(default)]
    pub on_missing_capability: MissingCapability,
    /// Narrow the forms clients receive by the policy's field rules (bounds,
    /// lengths, choices, formats), so people see the rules before answering;
    /// `false` turns it off for the whole route (a policy can turn it off
    /// per tool with `shape_questions = false`).
    #[serde(default = "defaults::shape_questions")]
    pub shape_questions: bool,
    /// Policy file for this route (relative to this config file), e.g. `policies/rooms.toml`.
    #[serde(default)]
    #[schemars(with = "Option<PathBuf>")]
    pub policy: Option<Spanned<PathBuf>>,
    /// `[route.rate_limit]`: limits on new calls and on retries (none by default).
    #[serde(default)]
    pub rate_limit: RateLimitConfig,
    /// `[route.oauth]`: this route's own OAuth settings (its audience).
    #[serde(default)]
    #[schemars(with = "Option<RouteOAuthConfig>")]
    pub oauth: Option<Spanned<RouteOAuthConfig>>,
    /// `[route.tasks]`: the tasks extension on this route: gateway-made tasks
    /// for a legacy server, a native server's own tasks relayed; unset, the
    /// route serves none.
    #[serde(default)]
    #[schemars(with = "Option<TasksConfig>")]
    pub tasks: Option<Spanned<TasksConfig>>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// A stdio server: program and arguments.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// Environment variables set for a stdio server (on top of redmark's own).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory of a stdio server; default: the config file's directory.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// A Streamable HTTP server.
    #[serde(default)]
    pub url: Option<String>,
    /// Extra headers sent to an HTTP server (for example its own credentials).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Environment variable holding a static bearer token for an HTTP server
    /// (sent as `Authorization: Bearer …`; the client's own token never is).
    #[serde(default)]
    pub bearer_token_env: Option<String>,
    /// Limit on the `initialize` handshake.
    #[serde(default = "defaults::init_timeout", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub init_timeout: Duration,
    /// Limit on one upstream request that involves no person (lists, completion).
    #[serde(default = "defaults::request_timeout", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub request_timeout: Duration,
    /// Longest silence from the server during a call before redmark cancels it.
    #[serde(default = "defaults::call_timeout", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub call_timeout: Duration,
    /// How long a call redmark gives up (its questions answered with
    /// `cancel` or an error: the client lacks a capability, the red marks
    /// ran out, nobody answered in time, the client left) may take to end on
    /// its own before redmark sends `notifications/cancelled`. Long on
    /// purpose: a cancellation that reaches a server while it is finishing
    /// the call makes some servers (PyPI `mcp` 1.x) end the whole session.
    #[serde(default = "defaults::end_grace", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub end_grace: Duration,
    /// Largest single message accepted from the upstream, in bytes.
    #[serde(default = "defaults::max_message_bytes")]
    pub max_message_bytes: usize,
    /// Which protocol the server speaks: detected (`auto`), or pinned.
    #[serde(default)]
    pub protocol: UpstreamProtocol,
    /// HTTP/2 to a Streamable HTTP server: `auto`, `prior_knowledge` or `off`.
    #[serde(default)]
    pub http2: UpstreamHttp2,
}

/// `[route.upstream] http2`: which HTTP version redmark speaks to a
/// Streamable HTTP server. HTTP/2 carries every waiting call of a session as
/// a stream of one connection instead of one HTTP/1.1 connection each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamHttp2 {
    /// Over `https://`, whatever TLS ALPN agrees (`h2` when the server offers
    /// it); over `http://`, HTTP/1.1.
    #[default]
    Auto,
    /// HTTP/2 from the first byte, also over `http://` (h2c with prior
    /// knowledge): for servers known to speak it.
    PriorKnowledge,
    /// HTTP/1.1 only, also over `https://`.
    Off,
}

/// `[route.upstream] protocol`: `auto` tries the stateless 2026-07-28
/// protocol (`server/discover`) first and falls back to a legacy
/// `initialize` session; the other two pin it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum UpstreamProtocol {
    #[default]
    #[serde(rename = "auto")]
    Auto,
    #[serde(rename = "2026-07-28")]
    Native,
    #[serde(rename = "legacy")]
    Legacy,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// Upstream sessions of this route, all principals together.
    #[serde(default = "defaults::max_sessions")]
    pub max_sessions: usize,
    /// Upstream sessions one principal may hold on this route.
    #[serde(default = "defaults::max_sessions_per_principal")]
    pub max_sessions_per_principal: usize,
    /// An idle session older than this is closed.
    #[serde(default = "defaults::idle_timeout", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub idle_timeout: Duration,
    /// How long a request waits for a free session before `upstream_busy`.
    #[serde(default = "defaults::lease_timeout", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub lease_timeout: Duration,
    /// Operations one Streamable HTTP session may carry at once, once the
    /// route has learned that its server sends each push on its call's own
    /// stream (until then, and always over stdio: one).
    #[serde(default = "defaults::max_operations_per_session")]
    pub max_operations_per_session: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            max_sessions: defaults::max_sessions(),
            max_sessions_per_principal: defaults::max_sessions_per_principal(),
            idle_timeout: defaults::idle_timeout(),
            lease_timeout: defaults::lease_timeout(),
            max_operations_per_session: defaults::max_operations_per_session(),
        }
    }
}

/// Caching hints (`ttlMs`, `cacheScope`) put on cacheable results, and how
/// long redmark itself keeps list results (until a list-changed notification).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// `ttlMs` on cacheable results, and how long redmark keeps a list
    /// result before asking the server again.
    #[serde(default = "defaults::cache_ttl", with = "humantime_serde")]
    #[schemars(with = "schema::HumanDuration")]
    pub ttl: Duration,
    /// `public` or `private`; default: `private` when `[auth]` is set, else `public`.
    #[serde(default)]
    pub scope: Option<CacheScope>,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            ttl: defaults::cache_ttl(),
            scope: None,
        }
    }
}

pub mod check;
mod cluster;
pub mod compat;
mod defaults;
mod load;
mod oauth;
pub mod rate_limit;
pub mod reference;
pub mod schema;
mod state;
pub mod tasks;
pub mod tls;

pub use cluster::ClusterConfig;
pub use oauth::{OAuthConfig, RouteOAuthConfig, is_loopback_url, is_scope_token};
pub use rate_limit::{Rate, RateLimitConfig};
pub use schema::config_schema;
pub use state::{StateConfig, StateKeyConfig, decode_secret, generate_secret};
pub use tasks::TasksConfig;
pub use tls::TlsConfig;

/// The upstream of a route after checking: exactly one transport.
#[derive(Debug, Clone)]
pub enum UpstreamTarget {
    Stdio {
        program: PathBuf,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: PathBuf,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl Config {
    pub fn listen_addr(&self) -> SocketAddr {
        // `problems` has already proven it parses.
        self.server
            .listen
            .get_ref()
            .parse()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 8080)))
    }

    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.server
            .admin
            .as_ref()
            .and_then(|a| a.get_ref().parse().ok())
    }
}

impl RouteConfig {
    pub fn target(&self, base_dir: &Path) -> UpstreamTarget {
        let up = self.upstream.get_ref();
        match (&up.command, &up.url) {
            (Some(cmd), _) if !cmd.is_empty() => {
                let cwd = match &up.cwd {
                    Some(c) if c.is_relative() => base_dir.join(c),
                    Some(c) => c.clone(),
                    None => base_dir.to_path_buf(),
                };
                let program = PathBuf::from(&cmd[0]);
                // A relative path with a slash means "relative to the config file",
                // not to wherever redmark happened to be started.
                let program = if program.is_relative() && cmd[0].contains('/') {
                    base_dir.join(program)
                } else {
                    program
                };
                UpstreamTarget::Stdio {
                    program,
                    args: cmd[1..].to_vec(),
                    env: up.env.clone(),
                    cwd,
                }
            }
            (_, url) => {
                let mut headers = up.headers.clone();
                // The route's own credential for its server; a missing variable
                // is a start error (`app`), so none is silently sent.
                if let Some(var) = &up.bearer_token_env
                    && let Ok(token) = std::env::var(var)
                {
                    headers.insert("Authorization".into(), format!("Bearer {}", token.trim()));
                }
                UpstreamTarget::Http {
                    url: url.clone().unwrap_or_default(),
                    headers,
                }
            }
        }
    }
}

/// Hex SHA-256 of an API key, as written in `[[auth.api_key]] sha256`.
pub fn key_digest_hex(key: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(key.as_bytes()))
}

#[cfg(test)]
mod tests;
