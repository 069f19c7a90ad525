//! Every metric family, registered once in the `redmark` registry under its
//! name and help text: `Metrics::new`, which keeps a handle on each.

use std::sync::OnceLock;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::labels::{
    AllocatorLabels, EraLabels, LimitLabels, MethodLabels, ModeLabels, OperationLabels,
    ProtocolLabels, RejectionLabels, ReloadLabels, RequestLabels, RouteLabels, SessionLabels,
    ToolLabels,
};
use super::{ClusterMetrics, Handles, Metrics};

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("redmark");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Client requests by route, method and outcome",
            requests.clone(),
        );
        let duration = Family::<MethodLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        });
        registry.register(
            "request_duration_seconds",
            "Time to answer a client request (in the spirit of mcp.server.operation.duration)",
            duration.clone(),
        );
        let sessions = Family::<SessionLabels, Gauge>::default();
        registry.register(
            "upstream_sessions",
            "Upstream legacy sessions by route and state (idle, leased)",
            sessions.clone(),
        );
        let session_ops = Family::<RouteLabels, Gauge>::default();
        registry.register(
            "upstream_session_operations",
            "Operations riding leased upstream sessions (more than the leased sessions when multiplexed)",
            session_ops.clone(),
        );
        let session_mode = Family::<ModeLabels, Gauge>::default();
        registry.register(
            "upstream_session_mode",
            "How a route's sessions are shared, learned from its server: 1 on the current mode (learning, multiplexed, exclusive)",
            session_mode.clone(),
        );
        let upstream_protocol = Family::<ProtocolLabels, Gauge>::default();
        registry.register(
            "upstream_protocol",
            "The protocol a route's server speaks, as detected or pinned: 1 on the current one (2026-07-28, legacy, unknown)",
            upstream_protocol.clone(),
        );
        let operations = Family::<OperationLabels, Counter>::default();
        registry.register(
            "operations",
            "Logical operations (tools/call, prompts/get, resources/read) by route, tool and how they ended",
            operations.clone(),
        );
        let questions = Family::<OperationLabels, Counter>::default();
        registry.register(
            "questions",
            "Questions servers asked, by route, tool and how each ended (accepted, declined, cancelled, unanswered, refused, invalid, denied, abandoned); a re-asked attempt counts once more; one audit line each",
            questions.clone(),
        );
        let task_ends = Family::<OperationLabels, Counter>::default();
        registry.register(
            "tasks",
            "Gateway-made tasks handed to clients, by route, tool and how each ended (completed, failed, cancelled, expired), counted once by the replica holding it",
            task_ends.clone(),
        );
        let live_tasks = Gauge::default();
        registry.register(
            "tasks_live",
            "Gateway-made tasks this replica holds that have not ended",
            live_tasks.clone(),
        );
        let pending = Gauge::default();
        registry.register(
            "pending_operations",
            "Operations waiting for their client to answer a question",
            pending.clone(),
        );
        let reloads = Family::<ReloadLabels, Counter>::default();
        registry.register(
            "policy_reloads",
            "Policy reloads by route and result (ok, failed)",
            reloads.clone(),
        );
        let rejections = Family::<RejectionLabels, Counter>::default();
        registry.register(
            "policy_rejections",
            "Questions refused and answers rejected by policy, by route, tool and reason",
            rejections.clone(),
        );
        let rounds = Family::<ToolLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.0, 1.0, 2.0, 3.0, 5.0, 10.0])
        });
        registry.register(
            "rounds",
            "Rounds of questions per operation",
            rounds.clone(),
        );
        let answers = Family::<ToolLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.5, 2.0, 14))
        });
        registry.register(
            "answer_seconds",
            "How long a person took to answer a question",
            answers.clone(),
        );
        let connections = Gauge::default();
        registry.register(
            "client_connections",
            "Client connections open on the 2026-07-28 listener",
            connections.clone(),
        );
        let body_bytes = Gauge::default();
        registry.register(
            "request_body_bytes",
            "Bytes of request bodies the client listener holds now (bounded per connection and by [server] max_body_memory)",
            body_bytes.clone(),
        );
        let refused = Counter::default();
        registry.register(
            "connections_refused",
            "Client connections refused (503 too_many_connections) because max_connections were open",
            refused.clone(),
        );
        let dropped = Family::<RouteLabels, Counter>::default();
        registry.register(
            "notifications_dropped",
            "Progress and log notifications dropped because the client was not reading its stream",
            dropped.clone(),
        );
        let cluster = ClusterMetrics::default();
        registry.register(
            "forwarded_retries",
            "Hold-mode retries this replica forwarded to the replica owning the operation, by route and outcome (forwarded, owner_unreachable)",
            cluster.forwards.clone(),
        );
        registry.register(
            "forwards_received",
            "Hold-mode retries another replica forwarded to this one (the owner), by route",
            cluster.received.clone(),
        );
        registry.register(
            "state_store_errors",
            "Single-use checks refused because the shared state store ([state] store) did not answer",
            cluster.store_errors.clone(),
        );
        let rate_limited = Family::<LimitLabels, Counter>::default();
        registry.register(
            "rate_limited",
            "Requests refused with 429 rate_limited, by route and the limit that refused them",
            rate_limited.clone(),
        );
        let replay_rounds = Family::<ToolLabels, Counter>::default();
        registry.register(
            "replay_rounds",
            "Rounds of questions asked in replay mode (the upstream call ended, nothing held until the retry)",
            replay_rounds.clone(),
        );
        let eras = Family::<EraLabels, Counter>::default();
        registry.register(
            "client_era_requests",
            "Client requests by route and the client's era: 2026 (stateless 2026-07-28) or 2025 (initialize and a session)",
            eras.clone(),
        );
        let client_sessions = Gauge::default();
        registry.register(
            "client_sessions",
            "2025-era client sessions this replica holds (opened by initialize, ended by DELETE or idleness)",
            client_sessions.clone(),
        );
        let tasks = Gauge::default();
        registry.register(
            "runtime_tasks",
            "Tokio tasks alive in the gateway's runtime, read at each scrape (a leak shows as growth at rest)",
            tasks.clone(),
        );
        let allocator = Family::<AllocatorLabels, Gauge>::default();
        registry.register(
            "allocator_bytes",
            "What the memory allocator holds, read at each scrape, by kind: allocated (live objects), active (their pages), resident (also freed pages not yet returned), retained (address space only), metadata",
            allocator.clone(),
        );
        Self {
            handles: Handles::default(),
            eras,
            client_sessions,
            tasks,
            loops: OnceLock::new(),
            allocator,
            cluster,
            rate_limited,
            replay_rounds,
            connections,
            body_bytes,
            refused,
            dropped,
            registry,
            rounds,
            answers,
            reloads,
            rejections,
            operations,
            questions,
            task_ends,
            live_tasks,
            pending,
            requests,
            duration,
            sessions,
            session_ops,
            session_mode,
            upstream_protocol,
        }
    }
}
