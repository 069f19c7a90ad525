//! Errors of the legacy side, and how each one reaches a client.

use crate::protocol::{IntoReject, Reason, Reject};

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

impl UpstreamError {
    /// Why the server went away, without the sentence that says it did: for
    /// a message that says so itself (an operation's `upstream_lost`
    /// ending), so the cause is not told twice.
    pub fn cause(self) -> String {
        match self {
            UpstreamError::Lost(why) => why,
            other => other.to_string(),
        }
    }

    pub fn reason(&self) -> Reason {
        match self {
            UpstreamError::Lost(_) => Reason::UpstreamLost,
            UpstreamError::Unavailable(_) => Reason::UpstreamUnavailable,
            UpstreamError::Incompatible(_) => Reason::UpstreamIncompatible,
            UpstreamError::Busy(_) => Reason::UpstreamBusy,
            UpstreamError::Timeout(_) => Reason::UpstreamTimeout,
            UpstreamError::ShuttingDown => Reason::ShuttingDown,
        }
    }
}

impl IntoReject for UpstreamError {
    fn into_reject(self) -> Reject {
        Reject::new(self.reason(), self.to_string())
    }
}
