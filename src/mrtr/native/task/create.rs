//! A native server answered a call with a task (`CreateTaskResult`,
//! ext-tasks "Task Creation"): the client gets redmark's own, under a
//! wrapped id, with the task's fields only (no questions, results or state
//! of the server's ride along unguarded) and its TTL no longer than the
//! route allows.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::{LINGER, MAX_SERVER_ID, Overlay, Relayed};
use crate::mrtr::ending::Ending;
use crate::mrtr::native::Run;
use crate::mrtr::outgoing::Outgoing;
use crate::mrtr::task_id::{self, Issue};
use crate::protocol::{ClientRequest, Reason, Reject, tasks};

/// The fields of a `Task` (ext-tasks "Tasks") a `CreateTaskResult` carries.
const TASK_FIELDS: [&str; 6] = [
    "status",
    "statusMessage",
    "createdAt",
    "lastUpdatedAt",
    "ttlMs",
    "pollIntervalMs",
];

impl Run {
    /// Whether a task the server answered with is one the client may get:
    /// the route relays tasks and this request declared the extension
    /// (ext-tasks "Capability Negotiation": "A server MUST NOT return
    /// CreateTaskResult to a client that did not include the extension
    /// capability on its request").
    pub(in crate::mrtr::native) fn relays_task(&self, req: &ClientRequest) -> bool {
        self.route.tasks.is_some() && tasks::declared_on(&req.ctx)
    }

    /// The server's `CreateTaskResult`, relayed under a wrapped id.
    pub(in crate::mrtr::native) async fn task_created(
        &mut self,
        req: &ClientRequest,
        result: Value,
    ) -> Outgoing {
        let Some(limits) = self.route.tasks.clone() else {
            return self.end(req, &Ending::UpstreamInvalid("an unasked task".into()));
        };
        let server_id = match result.get("taskId") {
            Some(Value::String(id)) if !id.is_empty() && id.len() <= MAX_SERVER_ID => id.clone(),
            _ => {
                return self.end(
                    req,
                    &Ending::UpstreamInvalid(format!(
                        "the server answered {} with a task whose taskId is missing, empty or longer than {MAX_SERVER_ID} bytes",
                        req.method
                    )),
                );
            }
        };
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let cap = millis(limits.ttl);
        // `ttlMs: null` is unlimited (ext-tasks "Tasks"); redmark honours the
        // wrapped id no longer than the route's `ttl`, and says so.
        let ttl_ms = result
            .get("ttlMs")
            .and_then(Value::as_u64)
            .map_or(cap, |t| t.min(cap));
        let poll_ms = result
            .get("pollIntervalMs")
            .and_then(Value::as_u64)
            .unwrap_or_else(|| millis(limits.poll_interval));
        let now = self.engine.clock.unix_now();
        let ttl = Duration::from_millis(ttl_ms);
        let id = task_id::issue(
            &self.engine.keys,
            &Issue {
                route: &self.route.name,
                principal: &self.principal.name,
                node: &self.engine.node,
                boot: self.engine.relayed_tasks.boot(),
                advertise: self.engine.advertise.as_deref(),
                expires_unix: now.saturating_add(ttl).saturating_add(LINGER).as_secs(),
                created_ms: millis(now),
                ttl_ms,
                poll_ms,
                target: &self.target,
                server_id: Some(&server_id),
                traceparent: self.tc.as_deref(),
            },
        );
        // The id's random part names the task in the single-use store.
        let mark = task_id::open(
            &self.engine.keys,
            &id,
            &self.route.name,
            &self.principal.name,
            now.as_secs(),
        )
        .map(|s| s.x)
        .unwrap_or_default();
        let task = Arc::new(Relayed {
            id: id.clone(),
            server_id,
            route: self.route.name.clone(),
            principal: self.principal.name.clone(),
            target: self.target.clone(),
            arguments: self.arguments.clone(),
            operation: self.op_id.clone(),
            traceparent: self.tc.clone(),
            mark,
            live: true,
            remove_at: Instant::now() + ttl + LINGER + LINGER,
            state: Mutex::new(Overlay::default()),
        });
        if let Err(full) = self
            .engine
            .relayed_tasks
            .insert(&self.engine, task.clone(), &limits)
        {
            // The server made a task nobody will poll: it hears `cancel`.
            self.cancel_unkept(req, &task).await;
            let r = Reject::new(Reason::TooManyPending, full.to_string());
            return self.reject_call(req, &r);
        }
        self.engine.metrics.add_live_tasks(1);
        // Before the client has the id: whichever replica it polls next may
        // have to take the task over.
        super::shared::keep(
            &self.engine,
            &task.mark,
            &task.arguments,
            ttl + LINGER + LINGER,
        )
        .await;
        tracing::info!(operation = %self.op_id, trace_id = self.trace_id.as_deref(), route = %self.route.name, tool = %self.target, "the server made a task; relayed under a wrapped id");
        let mut created = Map::new();
        created.insert("resultType".into(), tasks::RESULT_TYPE.into());
        created.insert("taskId".into(), Value::String(id));
        for field in TASK_FIELDS {
            if let Some(v) = result.get(field) {
                created.insert(field.into(), v.clone());
            }
        }
        created.insert("ttlMs".into(), json!(ttl_ms));
        created.insert("pollIntervalMs".into(), json!(poll_ms));
        if let Some(m) = result.get("_meta") {
            created.insert("_meta".into(), m.clone());
        }
        let ending = Ending::Completed {
            result: Value::Object(created).into(),
            declined: false,
            cancelled: false,
        };
        self.end(req, &ending)
    }

    /// `tasks/cancel` for a task the server made but redmark could not keep.
    async fn cancel_unkept(&self, req: &ClientRequest, task: &Relayed) {
        let mut params = super::super::params::upstream_params(req, Some(&self.root));
        params.retain(|k, _| k == "_meta");
        super::declare_tasks(&mut params, req);
        params.insert("taskId".into(), Value::String(task.server_id.clone()));
        let _ = self
            .route
            .native
            .request(crate::upstream::native::NativeRequest {
                method: "tasks/cancel",
                params: Value::Object(params),
                name: Some(&task.server_id),
                param_headers: Vec::new(),
                timeout: self.route.pool.request_timeout(),
                notify: None,
            })
            .await;
    }
}
