//! Gateway-made tasks (the `io.modelcontextprotocol/tasks` extension,
//! ext-tasks `tasks.md`) for a legacy server that has none, on a route
//! with `[route.tasks]`: a `tools/call` whose policy says `task` becomes a
//! task for a client that declared the extension on the call, and
//! `tasks/get`, `tasks/update` and `tasks/cancel` read and steer it.
//!
//! - [`task`]: one task's status, questions (keys unique over its life),
//!   answers, and how it reads;
//! - [`table`]: the tasks a replica holds, bounded, until their TTL;
//! - [`id`]: task ids, sealed (route, principal digest, owner, expiry);
//! - [`driver`]: the call, its rounds and retries through the engine;
//! - [`notify`]: `notifications/tasks` on `subscriptions/listen`;
//! - [`polls`]: one shared reader per task a listen reads from elsewhere.
//!
//! On such a route whose server speaks 2026-07-28 itself, the server's own
//! tasks are relayed instead (`mrtr::native::task`). Every other route is
//! untouched: the extension is neither offered nor served there
//! (`protocol::tasks`).

pub mod driver;
pub use crate::mrtr::task_id as id;
pub mod notify;
pub mod polls;
pub mod table;
pub mod task;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use self::driver::{Driver, Early};
pub use self::table::Tasks;
use self::task::Task;
use super::Gateway;
use super::dispatch::{self, Reply};
use crate::mrtr::state::Claims;
use crate::policy::TaskMode;
use crate::protocol::tasks::{EXTENSION, extension_required, unknown};
use crate::protocol::{ClientRequest, Method, Principal, Reason, Reject};
use crate::route::Route;
use crate::telemetry::traces;

/// How long a task is kept after its TTL: a task that failed at its TTL
/// can still be read as failed, with its diagnostic.
const LINGER: Duration = Duration::from_secs(60);

/// `tasks/*` on a route that serves no tasks: a method it does not have.
pub fn not_served(method: &str) -> Reject {
    Reject::new(
        Reason::MethodNotFound,
        format!(
            "Method not found: `{method}`; redmark serves no tasks on this route (the {EXTENSION} extension is not offered)"
        ),
    )
}

/// A checked request on its route: tasks where the route serves them,
/// everything else as `front::dispatch` serves it.
pub async fn dispatch(
    gw: &Arc<Gateway>,
    route: Arc<Route>,
    principal: Principal,
    req: Box<ClientRequest>,
    verified: Option<Box<Claims>>,
) -> Reply {
    let Some(limits) = route.tasks.clone() else {
        return dispatch::dispatch(gw, route, principal, req, verified).await;
    };
    if req.method.is_task() {
        if route.native.is_native().await {
            // A native server's own tasks, relayed under wrapped ids.
            let out = crate::mrtr::native::task::serve(&gw.engine, &route, &principal, &req).await;
            return Reply::Json(out);
        }
        return serve(gw, &route, &principal, &req);
    }
    // ext-tasks "Task Status Notifications": "If a client requests task
    // status notifications but does not declare the
    // `io.modelcontextprotocol/tasks` extension capability, the server MUST
    // return a JSON-RPC error specifying the missing capabilities". A
    // declaring client's listen is served with the named tasks'
    // `notifications/tasks` (`notify`).
    if req.method == Method::SubscriptionsListen
        && let Some(ids) = req
            .params
            .get("notifications")
            .and_then(|n| n.get("taskIds"))
    {
        if !crate::protocol::tasks::declared_on(&req.ctx) {
            return Reply::reject(
                &req.id,
                &extension_required(
                    "task status notifications (`notifications.taskIds`) need the extension declared in the request's client capabilities",
                ),
            );
        }
        let tasks = notify::watched(gw, &route, &principal, ids);
        let subscription = req.id.clone();
        let watcher = notify::Watcher {
            gw: gw.clone(),
            route: route.clone(),
            principal: principal.clone(),
            ctx: req.ctx.clone(),
        };
        let native = route.native.is_native().await;
        let reply = match dispatch::dispatch(gw, route, principal, req, verified).await {
            // A native server that serves no listen (it answered -32601):
            // the tasks are redmark's to watch all the same.
            Reply::Json(out) if native && !tasks.is_empty() && not_found(&out) => {
                notify::own_listen(gw, &subscription)
            }
            reply => reply,
        };
        return notify::merge(reply, &subscription, tasks, watcher);
    }
    if req.method != Method::ToolsCall || req.is_retry() || req.is_2025_era() {
        return dispatch::dispatch(gw, route, principal, req, verified).await;
    }
    let Some(mode) = route.policy.current().task(req.target()) else {
        return dispatch::dispatch(gw, route, principal, req, verified).await;
    };
    if route.native.is_native().await {
        return dispatch::dispatch(gw, route, principal, req, verified).await;
    }
    match (mode, crate::protocol::tasks::declared_on(&req.ctx)) {
        (_, true) => Box::pin(start(gw, route, principal, req, mode, limits)).await,
        (TaskMode::Required, false) => Reply::reject(
            &req.id,
            &extension_required(&format!(
                "`{}` runs only as a task: declare the {EXTENSION} extension in the request's client capabilities",
                req.target()
            )),
        ),
        (TaskMode::Optional, false) => {
            dispatch::dispatch(gw, route, principal, req, verified).await
        }
    }
}

/// Makes a task of the call: at once (`task = "required"`, or no
/// `[route.tasks] after`), or once it asks a person or is still running
/// after `after`; a call that ends sooner is answered plainly.
async fn start(
    gw: &Arc<Gateway>,
    route: Arc<Route>,
    principal: Principal,
    mut req: Box<ClientRequest>,
    mode: TaskMode,
    limits: crate::config::TasksConfig,
) -> Reply {
    let created = SystemTime::now();
    let since_epoch = created.duration_since(UNIX_EPOCH).unwrap_or_default();
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    // One trace for the whole task: this span (under the caller's trace)
    // is the parent of the call's operation, its retries, and every
    // `tasks/*` request on the task.
    let span = tracing::info_span!(
        "task",
        otel.name = %format!("task {}", req.target()),
        otel.kind = "server",
        mcp.method.name = %req.method,
        gen_ai.tool.name = %req.target(),
        redmark.route = %route.name,
    );
    traces::adopt_parent(
        &span,
        req.ctx.traceparent.as_deref(),
        req.ctx.tracestate.as_deref(),
    );
    let traceparent = traces::traceparent(&span);
    if traceparent.is_some() {
        req.ctx.traceparent.clone_from(&traceparent);
    }
    let task_id = id::issue(
        &gw.engine.keys,
        &id::Issue {
            route: &route.name,
            principal: &principal.name,
            node: &gw.engine.node,
            boot: gw.tasks.boot(),
            advertise: gw.engine.advertise.as_deref(),
            expires_unix: since_epoch
                .saturating_add(limits.ttl)
                .saturating_add(LINGER)
                .as_secs(),
            created_ms: millis(since_epoch),
            ttl_ms: millis(limits.ttl),
            poll_ms: millis(limits.poll_interval),
            target: req.target(),
            server_id: None,
            traceparent: traceparent.as_deref(),
        },
    );
    let task = Arc::new(
        Task::new(
            task_id,
            route.name.clone(),
            principal.name.to_string(),
            req.target().to_owned(),
            created,
            limits.ttl,
            limits.poll_interval,
        )
        .in_trace(traceparent),
    );
    let deadline = tokio::time::Instant::now() + limits.ttl;
    // ext-tasks "Task Creation": "A server MUST NOT return
    // `CreateTaskResult` until the task is durably created — that is, until
    // a `tasks/get` for the returned `taskId` would resolve": it is in the
    // table before the call starts.
    if let Err(full) = gw.tasks.insert(task.clone(), &limits, deadline + LINGER) {
        return Reply::reject(
            &req.id,
            &Reject::new(Reason::TooManyPending, full.to_string()),
        );
    }
    let (early, mut heard) = mpsc::channel(2);
    let driver = Driver {
        gw: gw.clone(),
        route,
        principal,
        template: (*req).clone(),
        task: task.clone(),
        deadline,
        early,
    };
    let at_once = mode == TaskMode::Required || limits.after.is_none();
    if at_once && task.hand_out() {
        gw.engine.metrics.add_live_tasks(1);
    }
    tokio::spawn(driver.run(req.clone()));
    if !at_once {
        let after = limits.after.unwrap_or_default();
        let first = tokio::select! {
            first = heard.recv() => first,
            () = tokio::time::sleep(after) => None,
        };
        if let Some(Early::Done(out)) = first {
            return Reply::Json(out);
        }
        if task.hand_out() {
            gw.engine.metrics.add_live_tasks(1);
        } else {
            // It ended as it was to be handed out: its answer is on its way.
            while let Some(early) = heard.recv().await {
                if let Early::Done(out) = early {
                    return Reply::Json(out);
                }
            }
        }
    }
    Reply::result(&req.id, task.created_result())
}

/// A task the client was handed ended (`outcome`: `completed`, `failed`,
/// `cancelled`, `expired`): one operation, counted once, by the replica
/// that held it (`redmark_tasks_total`, `redmark_tasks_live`).
pub(crate) fn account(gw: &Gateway, task: &Task, outcome: &str) {
    let metrics = &gw.engine.metrics;
    metrics.record_task(&task.route, &task.tool, outcome);
    metrics.add_live_tasks(-1);
}

/// A task lost with its replica (unreachable, or restarted since), counted
/// once in `redmark_tasks_total{outcome="lost"}` however many reads find it
/// lost on however many replicas: the first marks it in the single-use
/// store (`[state] store` when shared, else this replica's). Its live count
/// went with the replica that held it.
pub(crate) async fn count_lost(engine: Arc<crate::mrtr::Engine>, sealed: id::Sealed) {
    let now = engine.clock.unix_now().as_secs();
    let ttl = Duration::from_secs(sealed.e.saturating_sub(now).max(1));
    let mark = format!("task-lost.{}", sealed.x);
    if let Ok(true) = engine.single_use.first_use(&mark, ttl).await {
        let tool = sealed.o.as_deref().unwrap_or("-");
        engine.metrics.record_task(&sealed.r, tool, "lost");
    }
}

/// The replica holding a task, when it is another one this replica can
/// forward `tasks/*` to (the pipeline's `owner` step marks the request);
/// `None` for this replica's own tasks and for ids that do not open (they
/// are answered here, `task_unknown`).
pub fn owner_elsewhere(
    engine: &crate::mrtr::Engine,
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
) -> Option<crate::front::pipeline::owner::ForwardTo> {
    let task_id = req.params.get("taskId").and_then(Value::as_str)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let sealed = id::open(&engine.keys, task_id, &route.name, &principal.name, now).ok()?;
    if sealed.n == engine.node || engine.advertise.is_none() {
        return None;
    }
    Some(crate::front::pipeline::owner::ForwardTo {
        node: sealed.n.clone(),
        addr: sealed.a.clone()?,
        operation: format!("task {}", req.method),
        tc: sealed.tp.clone(),
        task: Some(crate::front::pipeline::owner::TaskAt {
            method: req.method,
            id: task_id.to_owned(),
            sealed,
        }),
    })
}

/// What `tasks/get` reads for a task whose replica cannot be reached: the
/// task is lost with it, so it is `failed`, with a message saying so.
pub fn lost(task_id: &str, sealed: &id::Sealed, error: Value) -> Value {
    sealed.failed_read(
        task_id,
        format!("the replica holding this task ({}) is lost", sealed.n),
        error,
    )
}

/// Whether a final answer is `-32601` (Method not found).
fn not_found(out: &crate::mrtr::Outgoing) -> bool {
    match out {
        crate::mrtr::Outgoing::Final { body, .. } => {
            body.to_value().pointer("/error/code")
                == Some(&Value::from(crate::jsonrpc::code::METHOD_NOT_FOUND))
        }
        crate::mrtr::Outgoing::Notification(_) => false,
    }
}

/// A task this node issued in an earlier incarnation (it restarted, and
/// the task was lost with its table): `Some(read)` then, where `read` is
/// the failed task `tasks/get` reads, saying so, or `None` for
/// `tasks/update` and `tasks/cancel`, which a task that ended takes as an
/// empty ack (no key is outstanding; cancelling an ended task changes
/// nothing). `None` for every other id (this incarnation's, another
/// node's, or one issued before ids carried the incarnation).
fn restarted(
    gw: &Gateway,
    task_id: &str,
    sealed: &id::Sealed,
    method: Method,
) -> Option<Option<Value>> {
    let boot = sealed.b.as_deref()?;
    if sealed.n != gw.engine.node || boot == gw.tasks.boot() {
        return None;
    }
    tokio::spawn(count_lost(gw.engine.clone(), sealed.clone()));
    if method != Method::TasksGet {
        return Some(None);
    }
    let reject = Reject::new(
        Reason::TaskLost,
        format!(
            "the replica holding this task ({}) restarted and the task was lost with it; call the tool again",
            sealed.n
        ),
    )
    .with("node", sealed.n.clone());
    let error = serde_json::to_value(reject.error_object()).unwrap_or_default();
    let mut read = lost(task_id, sealed, error);
    read["statusMessage"] = json!(format!(
        "the replica holding this task ({}) restarted: the task is lost",
        sealed.n
    ));
    Some(Some(read))
}

/// `tasks/get`, `tasks/update`, `tasks/cancel` on a route that serves tasks.
pub(super) fn serve(
    gw: &Gateway,
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
) -> Reply {
    // ext-tasks "Error Handling": "Servers MUST return this error
    // [-32021] for non-declaring clients issuing `tasks/get`,
    // `tasks/update`, and `tasks/cancel` requests."
    if !crate::protocol::tasks::declared_on(&req.ctx) {
        return Reply::reject(
            &req.id,
            &extension_required(&format!(
                "`{}` needs the {EXTENSION} extension declared in the request's client capabilities",
                req.method
            )),
        );
    }
    let Some(task_id) = req.params.get("taskId").and_then(Value::as_str) else {
        return Reply::reject(
            &req.id,
            &Reject::new(
                Reason::InvalidParams,
                format!("`params.taskId` is required for {}", req.method),
            ),
        );
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    // A relayed task's id is no gateway-made task's.
    let sealed = id::open(&gw.engine.keys, task_id, &route.name, &principal.name, now)
        .ok()
        .filter(|s| !s.is_relayed());
    let ack = || Reply::result(&req.id, json!({"resultType": "complete"}));
    if let Some(sealed) = &sealed
        && let Some(read) = restarted(gw, task_id, sealed, req.method)
    {
        return match read {
            Some(failed) => Reply::result(&req.id, failed),
            None => ack(),
        };
    }
    let held = sealed
        .and_then(|_| gw.tasks.get(task_id))
        .filter(|t| *t.principal == *principal.name && t.route == route.name);
    let Some(task) = held else {
        return Reply::reject(&req.id, &unknown(task_id));
    };
    // In the task's trace (`Task::traceparent`).
    let span = tracing::info_span!(
        "task_request",
        otel.name = %req.method,
        otel.kind = "server",
        mcp.method.name = %req.method,
        redmark.route = %route.name,
    );
    traces::adopt_parent(&span, task.traceparent.as_deref(), None);
    let _in_span = span.enter();
    match req.method {
        Method::TasksGet => Reply::result(&req.id, task.detailed()),
        Method::TasksUpdate => {
            let Some(responses) = req.params.get("inputResponses").and_then(Value::as_object)
            else {
                return Reply::reject(
                    &req.id,
                    &Reject::new(
                        Reason::MalformedInputResponse,
                        "`params.inputResponses` must be an object of answers by inputRequests key",
                    ),
                );
            };
            // ext-tasks "Task Update Requests": "On success, the server
            // MUST acknowledge the request with an empty result" with
            // `resultType: "complete"`; the answers are judged by the
            // engine when the round is complete (`driver`).
            if task.accept(responses) > 0 {
                task.answered.notify_one();
            }
            ack()
        }
        Method::TasksCancel => {
            // ext-tasks "Task Cancellation": "the server MUST acknowledge
            // the request with an empty result"; on a task already ended
            // nothing changes.
            if !task.status().is_terminal() {
                if task.finish(
                    task::Status::Cancelled,
                    None,
                    Some("cancelled by the client".to_owned()),
                ) {
                    account(gw, &task, "cancelled");
                }
                task.cancel.cancel();
            }
            ack()
        }
        _ => Reply::reject(&req.id, &not_served(req.method.as_str())),
    }
}
