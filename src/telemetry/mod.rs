//! What operators see: logs, metrics (and, later, traces and the audit log).

pub mod logging;
pub mod metrics;
