//! Errors of the legacy side, and how each one reaches a client.

use http::StatusCode;

use crate::error::{Fault, IntoReject, Reject};
use crate::jsonrpc::code;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UpstreamError {
    /// The server process exited or the HTTP session was dropped.
    #[error("the upstream server went away: {0}")]
    Lost(String),
    /// Could not start or initialize a session.
    #[error("could not start an upstream session: {0}")]
    Unavailable(String),
    /// The server negotiated a protocol version redmark does not speak.
    #[error("the upstream server answered initialize with unsupported protocol version {0}")]
    Incompatible(String),
    /// Every session this caller may use is busy.
    #[error("no upstream session became free within {0:?}")]
    Busy(std::time::Duration),
    /// The server did not answer in time.
    #[error("the upstream server did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// The gateway is shutting down.
    #[error("redmark is shutting down")]
    ShuttingDown,
}

impl IntoReject for UpstreamError {
    fn into_reject(self) -> Reject {
        let (status, reason) = match &self {
            UpstreamError::Lost(_) => (StatusCode::OK, "upstream_lost"),
            UpstreamError::Unavailable(_) => (StatusCode::BAD_GATEWAY, "upstream_unavailable"),
            UpstreamError::Incompatible(_) => (StatusCode::BAD_GATEWAY, "upstream_incompatible"),
            UpstreamError::Busy(_) => (StatusCode::SERVICE_UNAVAILABLE, "upstream_busy"),
            UpstreamError::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, "upstream_timeout"),
            UpstreamError::ShuttingDown => (StatusCode::SERVICE_UNAVAILABLE, "shutting_down"),
        };
        let fault = match self {
            UpstreamError::Busy(_) | UpstreamError::ShuttingDown => Fault::Gateway,
            _ => Fault::Upstream,
        };
        Reject::new(status, code::INTERNAL_ERROR, reason, self.to_string()).fault(fault)
    }
}
