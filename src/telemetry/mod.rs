//! What operators see: logs, the access log, metrics, traces, the audit log of questions and
//! the report of what those questions cost people.

pub mod access;
pub mod audit;
pub mod labelled;
pub mod logging;
pub mod metrics;
pub mod policy_lines;
pub mod report;
pub mod report_html;
pub mod report_text;
pub mod suggest;
pub mod traces;
pub mod visible;
