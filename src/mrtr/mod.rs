//! Multi Round-Trip Requests: questions a legacy server pushes during a call,
//! turned into `InputRequiredResult` round trips the client answers by
//! retrying (spec 2026-07-28 `basic/patterns/mrtr.mdx`).
//!
//! - [`operation`]: the actor that owns one call from its first request to its end.
//! - [`start`]: a call's way in: a fresh call begins an operation, a retry resumes one.
//! - [`outgoing`]: what an operation sends towards its client request.
//! - [`resume`]: a retry: `requestState` checks, then the operation it resumes.
//! - [`state`]: sealing and opening `requestState`.
//! - [`single_use`]: each round's state used once (this node, or a shared store).
//! - [`remember`]: remembered answers offered as defaults (`remember` field rules).
//! - [`redis_store`]: the shared store, Redis (`[state] store`).
//! - [`convert`]: pushed requests as input requests, answers as legacy results.
//! - [`table`]: operations waiting for answers, and how recent ones ended.
//! - [`ending`]: every way an operation ends, and the one reply each ending gets.
//! - [`account`]: every question's ending, accounted once (audit line, metrics).
//! - [`clock`]: tokio's clock, so TTLs and windows run on paused time in tests.
//!
//! Above `upstream`, `policy` and `route`; below `front`, which it never imports.

pub mod account;
pub mod clock;
pub mod convert;
pub mod ending;
pub mod native;
pub mod operation;
pub mod outgoing;
pub mod redis_store;
pub mod remember;
pub mod resume;
pub mod single_use;
pub mod start;
pub mod state;
pub mod table;
pub mod task_id;

#[cfg(test)]
mod engine_tests;

pub use outgoing::{Outcome, Outgoing};

use std::sync::Arc;
use std::time::Duration;

use crate::config::MrtrConfig;
use crate::telemetry::audit::AuditSink;
use crate::telemetry::metrics::Metrics;

/// What every operation of a gateway shares.
pub struct Engine {
    /// Replaced whole by a config reload.
    pub keys: Arc<state::SharedKeyring>,
    /// This node's name, sealed into every state.
    pub node: String,
    /// Where the other replicas reach this one (`[cluster] advertise`),
    /// sealed into every hold-mode state; `None` without `[cluster]`.
    pub advertise: Option<String>,
    /// Set when the node drains for a restart: no new operations, waiting ones go on.
    pub draining: std::sync::atomic::AtomicBool,
    pub ttl: Duration,
    pub max_rounds: u32,
    pub gather: Duration,
    /// The gather window ends once the server has been quiet this long after a push.
    pub gather_quiet: Duration,
    pub table: Arc<table::Table>,
    pub metrics: Arc<Metrics>,
    /// One line per question: what was asked, how it ended, never the values.
    pub audit: AuditSink,
    /// Turns `true` when the gateway shuts down: waiting operations end then.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    pub clock: clock::Clock,
    /// Where round ids are marked used: this node's memory, or a shared store.
    pub single_use: Arc<dyn single_use::SingleUse>,
    /// Digests of each person's last answers, for `repeated_fields` in the audit.
    pub last_answers: account::LastAnswers,
    /// Remembered answers (`remember` field rules), offered as defaults.
    pub remembered: remember::Remembered,
    /// Native servers' own tasks this replica relays (`native::task`).
    pub relayed_tasks: native::task::Relays,
}

/// Round ids a node remembers without a shared store (about 100 bytes each).
pub const LOCAL_SINGLE_USE_MAX: usize = 262_144;

impl Engine {
    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn new(
        config: &MrtrConfig,
        keys: state::Keyring,
        node: String,
        metrics: Arc<Metrics>,
        audit: AuditSink,
        shutdown: tokio::sync::watch::Receiver<bool>,
        clock: clock::Clock,
    ) -> Self {
        let keys = Arc::new(state::SharedKeyring::new(keys));
        Self {
            keys: keys.clone(),
            node,
            advertise: None,
            draining: std::sync::atomic::AtomicBool::new(false),
            ttl: config.ttl,
            max_rounds: config.max_rounds,
            gather: config.gather,
            gather_quiet: config.gather_quiet.min(config.gather),
            table: table::Table::new(config.max_pending_per_principal, metrics.clone()),
            metrics,
            audit,
            shutdown,
            clock,
            single_use: single_use::Local::swept(LOCAL_SINGLE_USE_MAX),
            last_answers: account::LastAnswers::new(account::LAST_ANSWERS_MAX),
            remembered: remember::Remembered::new(keys.clone(), clock, remember::LOCAL_MAX),
            relayed_tasks: native::task::Relays::new(),
        }
    }
}
