//! The composition step: from a checked [`Config`](crate::config::Config) to a running gateway.
//! Policies, requestState keys and the audit log are loaded here, once, each
//! with a typed error; anything that cannot be loaded stops the start (fail
//! closed: no route ever runs with a default in place of what failed). Then
//! the routes, the operation engine and the request pipeline are wired up and
//! the listeners bound. The binary and the tests both start through [`start`].
//! `build` makes the parts from the config, `run` binds and serves them; the
//! errors of both are here, since either can stop the start.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::config::ConfigErrors;

pub use build::{
    Options, UPSTREAM_IDLE_CONNECTIONS, UPSTREAM_IDLE_TIMEOUT, build, build_at, check, keyring,
    policies,
};
pub use run::{Running, start, start_with};

/// Why the gateway did not start.
///
/// Each message says its cause itself, and no variant also hands the cause
/// out as its `source()`: printed with its chain (`{:#}`, as `redmark serve`
/// does), an error that did both said the cause twice ("X: X").
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "route `{route}`: its policy cannot be loaded, so the route would run unguarded:\n{errors}"
    )]
    Policy { route: String, errors: ConfigErrors },
    #[error("requestState keys: {0}")]
    StateKeys(KeyError),
    #[error("audit log {} cannot be opened: {cause}", path.display())]
    Audit {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("[cluster]: {0}")]
    Cluster(ClusterError),
    #[error("{listener} listener TLS: {cause}")]
    Tls {
        listener: &'static str,
        cause: crate::front::tls::TlsError,
    },
    #[error("access log {} cannot be opened: {cause}", path.display())]
    AccessLog {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("[auth.oauth]: {0}")]
    OAuth(crate::front::oauth::OAuthError),
    #[error("upstream HTTP client: {0}")]
    UpstreamClient(String),
    #[error("route `{route}`: upstream bearer_token_env {var} is not set")]
    UpstreamTokenEnv { route: String, var: String },
    #[error(transparent)]
    EventLoops(#[from] crate::event_loops::StartError),
    #[error("cannot listen on {addr}: {cause}")]
    Bind {
        addr: SocketAddr,
        cause: std::io::Error,
    },
}

// Not `#[from]`: that would make each cause the variant's `source()` too.
impl From<KeyError> for StartError {
    fn from(e: KeyError) -> Self {
        StartError::StateKeys(e)
    }
}

impl From<ClusterError> for StartError {
    fn from(e: ClusterError) -> Self {
        StartError::Cluster(e)
    }
}

impl From<crate::front::oauth::OAuthError> for StartError {
    fn from(e: crate::front::oauth::OAuthError) -> Self {
        StartError::OAuth(e)
    }
}

/// Why the `[[state.keys]]` cannot be made into a keyring.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("state key `{id}`: environment variable {var} is not set")]
    EnvNotSet { id: String, var: String },
    #[error("state key `{id}`: the secret is not base64url of at least 16 bytes")]
    BadSecret { id: String },
    #[error("state key `{id}` has no secret")]
    NoSecret { id: String },
    #[error("no state key has `sign = true`")]
    NoSigningKey,
}

/// Why `[cluster]` cannot be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    #[error("environment variable {var} (secret_env) is not set")]
    EnvNotSet { var: String },
    #[error(
        "environment variable {var} is not base64url of at least 16 bytes (see `redmark keygen`)"
    )]
    BadSecret { var: String },
    #[error("[state] store `{url}`: {why}")]
    Store { url: String, why: String },
}

mod build;
pub mod checks;
pub mod reload;
mod run;

#[cfg(test)]
#[path = "app_tests.rs"]
mod tests;
