//! Prometheus metrics served on the admin listener.

use std::sync::{Arc, OnceLock, Weak};

mod families;
mod labels;

use super::labelled::{Labelled, shape};
use crate::event_loops::EventLoops;
pub use labels::{
    AllocatorLabels, ForwardLabels, LimitLabels, MethodLabels, ModeLabels, OperationLabels,
    ProtocolLabels, RejectionLabels, ReloadLabels, RequestLabels, RouteLabels, SessionLabels,
    ToolLabels,
};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// What the process's allocator holds, in bytes (jemalloc's `stats.*`): live
/// allocations (`allocated`), the pages they sit in (`active`), every page the
/// allocator has resident, freed but not yet purged ones included
/// (`resident`), address space kept but given back to the system
/// (`retained`, not in RSS), and the allocator's own bookkeeping (`metadata`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    pub allocated: u64,
    pub active: u64,
    pub resident: u64,
    pub retained: u64,
    pub metadata: u64,
}

/// How this process reads its allocator's statistics: set by the binary
/// that chose the global allocator (the library does not know it).
static ALLOCATOR_STATS: OnceLock<fn() -> Option<AllocatorStats>> = OnceLock::new();

/// Makes every scrape render `redmark_allocator_bytes{kind}` from `read`.
/// The first call wins: there is one allocator per process.
pub fn read_allocator_stats_with(read: fn() -> Option<AllocatorStats>) {
    let _ = ALLOCATOR_STATS.set(read);
}

/// What several replicas add: retries forwarded between them, and the shared store.
#[derive(Default)]
struct ClusterMetrics {
    forwards: Family<ForwardLabels, Counter>,
    received: Family<RouteLabels, Counter>,
    store_errors: Counter,
}

/// Members a tool-labelled family may grow to: the tool label is the name
/// a client sent (a server that cannot list its tools vouches for none) or
/// a resource URI, so past this many distinct label sets new ones count
/// under `tool="_other"`. Each value is at most
/// [`MAX_LABEL_BYTES`](super::labelled::MAX_LABEL_BYTES) long ([`shape`]).
pub const MAX_TOOL_SERIES: usize = 10_000;

/// The `tool` label of what is counted past [`MAX_TOOL_SERIES`].
pub const OTHER_TOOL: &str = "_other";

/// The `method` label of a request: the methods a 2026-07-28 client may
/// send, the notifications it sends, `-` before any was read, and `other`
/// for anything else (a client must not mint a label value per request).
pub fn method_label(sent: Option<&str>) -> &'static str {
    const NOTIFICATIONS: [&str; 4] = [
        "notifications/cancelled",
        "notifications/progress",
        "notifications/initialized",
        "notifications/roots/list_changed",
    ];
    let Some(sent) = sent else { return "-" };
    if let Some(m) = crate::protocol::Method::parse(sent) {
        return m.as_str();
    }
    // 2025-era messages (`front::era2025`): a fixed set, so the label stays bounded.
    const ERA_2025: [&str; 7] = [
        "initialize",
        "ping",
        "logging/setLevel",
        "response",
        "GET",
        "DELETE",
        "resources/subscribe",
    ];
    NOTIFICATIONS
        .into_iter()
        .chain(ERA_2025)
        .find(|n| *n == sent)
        .unwrap_or("other")
}

/// Resolved handles of the families recorded on every call.
struct Handles {
    /// `requests` and `duration` by (route, method, outcome).
    requests: Labelled<(Counter, Histogram, Counter)>,
    /// `operations` by (route, tool, outcome).
    operations: Labelled<Counter>,
    /// `questions` by (route, tool, outcome).
    questions: Labelled<Counter>,
    /// `task_ends` by (route, tool, outcome).
    task_ends: Labelled<Counter>,
    /// `rounds` by (route, tool).
    rounds: Labelled<Histogram>,
    /// `answers` by (route, tool).
    answers: Labelled<Histogram>,
    /// `replay_rounds` by (route, tool).
    replay_rounds: Labelled<Counter>,
    /// `rejections` by (route, tool, reason).
    rejections: Labelled<Counter>,
}

impl Default for Handles {
    fn default() -> Self {
        Handles {
            // Every label is bounded: routes, methods, outcomes.
            requests: Labelled::new(usize::MAX),
            operations: Labelled::new(MAX_TOOL_SERIES),
            questions: Labelled::new(MAX_TOOL_SERIES),
            task_ends: Labelled::new(MAX_TOOL_SERIES),
            rounds: Labelled::new(MAX_TOOL_SERIES),
            answers: Labelled::new(MAX_TOOL_SERIES),
            replay_rounds: Labelled::new(MAX_TOOL_SERIES),
            rejections: Labelled::new(MAX_TOOL_SERIES),
        }
    }
}

pub struct Metrics {
    registry: Registry,
    handles: Handles,
    cluster: ClusterMetrics,
    rounds: Family<ToolLabels, Histogram>,
    answers: Family<ToolLabels, Histogram>,
    reloads: Family<ReloadLabels, Counter>,
    rejections: Family<RejectionLabels, Counter>,
    operations: Family<OperationLabels, Counter>,
    questions: Family<OperationLabels, Counter>,
    task_ends: Family<OperationLabels, Counter>,
    live_tasks: Gauge,
    pending: Gauge,
    requests: Family<RequestLabels, Counter>,
    duration: Family<MethodLabels, Histogram>,
    sessions: Family<SessionLabels, Gauge>,
    session_ops: Family<RouteLabels, Gauge>,
    session_mode: Family<ModeLabels, Gauge>,
    upstream_protocol: Family<ProtocolLabels, Gauge>,
    connections: Gauge,
    /// `redmark_request_body_bytes`: updated by the listener's body budget.
    body_bytes: Gauge,
    refused: Counter,
    dropped: Family<RouteLabels, Counter>,
    rate_limited: Family<LimitLabels, Counter>,
    replay_rounds: Family<ToolLabels, Counter>,
    eras: Family<labels::EraLabels, Counter>,
    client_sessions: Gauge,
    tasks: Gauge,
    /// The event loops whose tasks count too. Weak: tasks on the loops hold
    /// the gateway, which holds these metrics.
    loops: OnceLock<Weak<EventLoops>>,
    allocator: Family<AllocatorLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// `redmark_upstream_sessions{route, state}` and
/// `redmark_upstream_session_operations{route}` of one route: handles on the
/// registered gauges ([`Metrics::session_gauges`]).
#[derive(Debug, Clone, Default)]
pub struct SessionGauges {
    idle: Gauge,
    leased: Gauge,
    operations: Gauge,
}

impl SessionGauges {
    pub fn set(&self, idle: usize, leased: usize, operations: usize) {
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        self.idle.set(n(idle));
        self.leased.set(n(leased));
        self.operations.set(n(operations));
    }
}

impl Metrics {
    /// `method`: a [`method_label`].
    /// `era`: the client's, `2026` or `2025` (`redmark_client_era_requests`).
    pub fn record_request(
        &self,
        route: &str,
        method: &str,
        outcome: &str,
        era: &str,
        seconds: f64,
    ) {
        self.handles.requests.with(
            &[route, method, outcome, era],
            &[],
            |v| {
                let counter = self.requests.get_or_create(&RequestLabels {
                    route: v[0].into(),
                    method: v[1].into(),
                    outcome: v[2].into(),
                });
                let histogram = self.duration.get_or_create(&MethodLabels {
                    route: v[0].into(),
                    method: v[1].into(),
                });
                let era = self.eras.get_or_create(&labels::EraLabels {
                    route: v[0].into(),
                    era: v[3].into(),
                });
                (counter.clone(), histogram.clone(), era.clone())
            },
            |(counter, histogram, era)| {
                counter.inc();
                histogram.observe(seconds);
                era.inc();
            },
        );
    }

    pub fn record_operation(&self, route: &str, tool: &str, outcome: &str) {
        count_by_tool(
            &self.handles.operations,
            &self.operations,
            route,
            tool,
            outcome,
        );
    }

    /// One question ended (`outcome`: an audit outcome word).
    pub fn record_question(&self, route: &str, tool: &str, outcome: &str) {
        count_by_tool(
            &self.handles.questions,
            &self.questions,
            route,
            tool,
            outcome,
        );
    }

    /// A gateway-made task ended (`outcome`: completed, failed, cancelled,
    /// expired).
    pub fn record_task(&self, route: &str, tool: &str, outcome: &str) {
        count_by_tool(
            &self.handles.task_ends,
            &self.task_ends,
            route,
            tool,
            outcome,
        );
    }

    /// A task handed out (+1) or ended (-1).
    pub fn add_live_tasks(&self, delta: i64) {
        self.live_tasks.inc_by(delta);
    }

    pub fn record_policy_reload(&self, route: &str, ok: bool) {
        let result = if ok { "ok" } else { "failed" };
        self.reloads
            .get_or_create(&ReloadLabels {
                route: route.into(),
                result: result.into(),
            })
            .inc();
    }

    pub fn record_policy_rejection(&self, route: &str, tool: &str, reason: &str) {
        // The name or URI a client sent: bounded in length (issue 42).
        let tool = shape(tool);
        let tool = tool.as_ref();
        self.handles.rejections.with(
            &[route, tool, reason],
            &[route, OTHER_TOOL, reason],
            |v| {
                self.rejections
                    .get_or_create(&RejectionLabels {
                        route: v[0].into(),
                        tool: v[1].into(),
                        reason: v[2].into(),
                    })
                    .clone()
            },
            Counter::inc,
        );
    }

    /// A member of a family labelled by route and tool.
    fn tool_member<M: Clone>(family: &Family<ToolLabels, M, impl Fn() -> M>, v: &[&str]) -> M {
        family
            .get_or_create(&ToolLabels {
                route: v[0].into(),
                tool: v[1].into(),
            })
            .clone()
    }

    pub fn record_rounds(&self, route: &str, tool: &str, rounds: u32) {
        // The name or URI a client sent: bounded in length (issue 42).
        let tool = shape(tool);
        let tool = tool.as_ref();
        self.handles.rounds.with(
            &[route, tool],
            &[route, OTHER_TOOL],
            |v| Self::tool_member(&self.rounds, v),
            |h| h.observe(f64::from(rounds)),
        );
    }

    pub fn record_replay_round(&self, route: &str, tool: &str) {
        // The name or URI a client sent: bounded in length (issue 42).
        let tool = shape(tool);
        let tool = tool.as_ref();
        self.handles.replay_rounds.with(
            &[route, tool],
            &[route, OTHER_TOOL],
            |v| Self::tool_member(&self.replay_rounds, v),
            Counter::inc,
        );
    }

    pub fn record_answer(&self, route: &str, tool: &str, seconds: f64) {
        // The name or URI a client sent: bounded in length (issue 42).
        let tool = shape(tool);
        let tool = tool.as_ref();
        self.handles.answers.with(
            &[route, tool],
            &[route, OTHER_TOOL],
            |v| Self::tool_member(&self.answers, v),
            |h| h.observe(seconds),
        );
    }

    /// One client connection opened (`1`) or closed (`-1`).
    pub fn add_client_connection(&self, delta: i64) {
        self.connections.inc_by(delta);
    }

    /// The gauge of request body bytes held (`front::body_budget`).
    pub fn body_bytes_gauge(&self) -> Gauge {
        self.body_bytes.clone()
    }

    pub fn record_connection_refused(&self) {
        self.refused.inc();
    }

    pub fn record_notifications_dropped(&self, route: &str, n: u64) {
        self.dropped
            .get_or_create(&RouteLabels {
                route: route.into(),
            })
            .inc_by(n);
    }

    /// A retry forwarded to its owner: `forwarded` or `owner_unreachable`.
    pub fn record_forward(&self, route: &str, outcome: &str) {
        self.cluster
            .forwards
            .get_or_create(&ForwardLabels {
                route: route.into(),
                outcome: outcome.into(),
            })
            .inc();
    }

    pub fn record_rate_limited(&self, route: &str, scope: &str) {
        self.rate_limited
            .get_or_create(&LimitLabels {
                route: route.into(),
                scope: scope.into(),
            })
            .inc();
    }

    /// A retry another replica forwarded here, signed and admitted.
    /// The gauge of 2025-era client sessions, set by the session table.
    pub fn client_sessions(&self) -> Gauge {
        self.client_sessions.clone()
    }

    pub fn record_forward_received(&self, route: &str) {
        self.cluster
            .received
            .get_or_create(&RouteLabels {
                route: route.into(),
            })
            .inc();
    }

    pub fn record_state_store_error(&self) {
        self.cluster.store_errors.inc();
    }

    pub fn set_pending(&self, n: usize) {
        self.pending.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// The session gauges of `route`, resolved once: a pool sets them on
    /// every lease and release, and looking a labelled gauge up allocates
    /// and hashes its labels each time.
    pub fn session_gauges(&self, route: &str) -> SessionGauges {
        let state = |state: &str| {
            self.sessions
                .get_or_create(&SessionLabels {
                    route: route.into(),
                    state: state.into(),
                })
                .clone()
        };
        SessionGauges {
            idle: state("idle"),
            leased: state("leased"),
            operations: self
                .session_ops
                .get_or_create(&RouteLabels {
                    route: route.into(),
                })
                .clone(),
        }
    }

    /// The learned session mode of `route`: 1 on `mode`, 0 on the others.
    pub fn set_session_mode(&self, route: &str, mode: &str) {
        for m in ["learning", "multiplexed", "exclusive"] {
            self.session_mode
                .get_or_create(&ModeLabels {
                    route: route.into(),
                    mode: m.into(),
                })
                .set(i64::from(m == mode));
        }
    }

    /// Whether `route`'s server speaks `protocol` (1) or not (0).
    pub fn set_upstream_protocol(&self, route: &str, protocol: &str, on: bool) {
        self.upstream_protocol
            .get_or_create(&ProtocolLabels {
                route: route.into(),
                protocol: protocol.into(),
            })
            .set(i64::from(on));
    }

    fn set_allocator(&self, s: AllocatorStats) {
        for (kind, bytes) in [
            ("allocated", s.allocated),
            ("active", s.active),
            ("resident", s.resident),
            ("retained", s.retained),
            ("metadata", s.metadata),
        ] {
            self.allocator
                .get_or_create(&AllocatorLabels { kind: kind.into() })
                .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
    }

    /// Counts the tasks on `loops` in `redmark_runtime_tasks` too (set once).
    pub fn count_tasks_on(&self, loops: &Arc<EventLoops>) {
        let _ = self.loops.set(Arc::downgrade(loops));
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        // Read at the scrape rather than counted on spawn: every task of
        // every crate counts, and nothing on the request path pays for it.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let on_loops = self
                .loops
                .get()
                .and_then(Weak::upgrade)
                .map_or(0, |l| l.alive_tasks());
            let alive = rt.metrics().num_alive_tasks() + on_loops;
            self.tasks.set(i64::try_from(alive).unwrap_or(i64::MAX));
        }
        if let Some(stats) = ALLOCATOR_STATS.get().and_then(|read| read()) {
            self.set_allocator(stats);
        }
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// One more in a (route, tool, outcome) counter: the tool name a client sent
/// bounded in length (issue 42), and folded into `_other` once the family
/// holds its most series.
fn count_by_tool(
    handles: &Labelled<Counter>,
    family: &Family<OperationLabels, Counter>,
    route: &str,
    tool: &str,
    outcome: &str,
) {
    let tool = shape(tool);
    let tool = tool.as_ref();
    handles.with(
        &[route, tool, outcome],
        &[route, OTHER_TOOL, outcome],
        |v| {
            family
                .get_or_create(&OperationLabels {
                    route: v[0].into(),
                    tool: v[1].into(),
                    outcome: v[2].into(),
                })
                .clone()
        },
        Counter::inc,
    );
}

#[cfg(test)]
mod tests;
