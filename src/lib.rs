//! redmark: an elicitation-aware MCP gateway.
//!
//! Hosts speak the stateless 2026-07-28 protocol to redmark; behind it sit
//! legacy MCP servers (2024-11-05 to 2025-11-25) that want an `initialize`
//! handshake, keep a session, and push requests while a call is pending.
//!
//! # Layout
//! Layers import downward only; nothing imports [`front`].
//! - [`front`] (top): the 2026-07-28 Streamable HTTP endpoint: the request
//!   [`front::pipeline`] (one step per check, in a documented order),
//!   dispatch by method, SSE, subscriptions, authentication, the admin
//!   listener, and [`front::tasks`] (gateway-made tasks on routes with
//!   `[route.tasks]`).
//! - [`mrtr`]: pushed questions turned into Multi Round-Trip Requests:
//!   operations, sealed `requestState`, conversion, resumption, and the one
//!   reply each ending gets.
//! - [`route`]: one configured route: its pool, catalog, policy and result stamp.
//! - [`policy`]: policy files: guard the server's questions, judge the
//!   answers (JSON Schema, rules, CEL authz), the call-level hook, reload.
//! - [`limits`]: rate limits (GCRA, governor) per principal, route and tool.
//! - [`upstream`]: legacy sessions over stdio and Streamable HTTP, initialized
//!   per capability profile, pooled and leased one operation at a time.
//! - [`telemetry`]: logs, OTLP traces, metrics, the audit log and the report.
//! - [`config`]: the config file and its checks.
//! - [`protocol`] (bottom), [`jsonrpc`], [`sse`]: the typed 2026-07-28
//!   request, result shaping, and the one table of every `data.reason`.
//! - [`signal`] (bottom): SIGHUP, registered at once, for the reload watchers.
//! - [`event_loops`] (bottom): the per-core threads client connections are
//!   served on; upstream code asks which loop it runs on, to stay on it.
//! - [`hex_text`] (bottom): digests and ids as hex text.
//!
//! [`app`] is the composition step: it loads config, policies and keys once
//! (failing closed) and builds the [`front::Gateway`]; [`start`] binds the
//! listeners and runs it. The binary and the tests both go through it.

#![forbid(unsafe_code)]

pub mod app;
pub mod config;
pub mod event_loops;
pub mod front;
pub mod hex_text;
pub mod jsonrpc;
pub mod limits;
pub mod mrtr;
pub mod policy;
pub mod protocol;
pub mod route;
pub mod signal;
pub mod sse;
pub mod telemetry;
pub mod upstream;

pub use app::{Running, StartError, start};
