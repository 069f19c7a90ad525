//! `notifications/tasks` on `subscriptions/listen` (ext-tasks "Task Status
//! Notifications"): a client that declared the extension and named task
//! ids in `notifications.taskIds` is sent each named task's `DetailedTask`
//! on the listen's stream, beside the notices it subscribed to: once when
//! the listen starts, then at every change, until the task ends.
//!
//! Only this principal's live tasks on this route are acknowledged (at most
//! [`MAX_TASK_IDS`]); an id that is not one of them is left out of the
//! acknowledgement, disclosing nothing, and the client polls it. A task this
//! replica holds is sent at each change as it happens; one another replica
//! holds, and a native server's relayed task, are read (`tasks/get`, routed
//! as a client's would be) at the task's poll interval and sent when they
//! read differently: a listen may land on any replica behind a balancer.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, watch};

use super::id;
use super::polls::{PollKey, Reading};
use super::task::Task;
use crate::front::Gateway;
use crate::front::dispatch::Reply;
use crate::jsonrpc::Id;
use crate::mrtr::Outgoing;
use crate::protocol::shape::notification;
use crate::protocol::{ClientParams, ClientRequest, Method, Principal, RequestContext};
use crate::route::Route;

/// Bounds on how often a polled task is read.
const POLL_MIN: Duration = Duration::from_millis(100);
const POLL_MAX: Duration = Duration::from_secs(30);

/// A task a listen watches.
pub enum Watched {
    /// This replica holds it: each change is sent as it happens.
    Held(Arc<Task>),
    /// Another replica holds it, or it is a native server's, relayed: read
    /// every `every`.
    Polled { id: String, every: Duration },
}

impl Watched {
    fn id(&self) -> &str {
        match self {
            Watched::Held(t) => &t.id,
            Watched::Polled { id, .. } => id,
        }
    }
}

/// Who watches, for the polled tasks' reads: they are the listener's own
/// `tasks/get`s.
pub struct Watcher {
    pub gw: Arc<Gateway>,
    pub route: Arc<Route>,
    pub principal: Principal,
    pub ctx: RequestContext,
}

/// The most task ids one listen watches.
pub const MAX_TASK_IDS: usize = 64;

/// The tasks named in `notifications.taskIds` that this listen may watch.
pub fn watched(gw: &Gateway, route: &Route, principal: &Principal, ids: &Value) -> Vec<Watched> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let mut tasks: Vec<Watched> = Vec::new();
    for task_id in ids
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if tasks.len() == MAX_TASK_IDS {
            break;
        }
        if tasks.iter().any(|t| t.id() == task_id) {
            continue;
        }
        let Ok(sealed) = id::open(&gw.engine.keys, task_id, &route.name, &principal.name, now)
        else {
            continue;
        };
        let held = gw
            .tasks
            .get(task_id)
            .filter(|t| *t.principal == *principal.name && t.route == route.name);
        let elsewhere = sealed.n != gw.engine.node && gw.engine.advertise.is_some();
        if let Some(task) = held {
            tasks.push(Watched::Held(task));
        } else if sealed.is_relayed() || elsewhere {
            // Never more often than the route asks its clients to poll: a
            // listen must not cost the server more than polling would.
            let floor = route
                .tasks
                .as_ref()
                .map_or(POLL_MIN, |t| t.poll_interval.max(POLL_MIN));
            let every = Duration::from_millis(sealed.i).clamp(floor, POLL_MAX.max(floor));
            tasks.push(Watched::Polled {
                id: task_id.to_owned(),
                every,
            });
        }
    }
    tasks
}

/// The listen's reply with the watched tasks' notifications merged into
/// its stream, and their ids in its acknowledgement ("In its
/// acknowledgement notification, the server includes the list of task IDs
/// it has agreed to send task status notifications for, if any").
pub fn merge(reply: Reply, subscription: &Id, tasks: Vec<Watched>, watcher: Watcher) -> Reply {
    let Reply::Stream {
        mut first,
        rx: mut inner,
    } = reply
    else {
        return reply;
    };
    if tasks.is_empty() {
        return Reply::Stream { first, rx: inner };
    }
    if let Some(ack) = first
        .pointer_mut("/params/notifications")
        .and_then(Value::as_object_mut)
    {
        let ids: Vec<&str> = tasks.iter().map(Watched::id).collect();
        ack.insert("taskIds".into(), json!(ids));
    }
    let (tx, rx) = mpsc::channel(64);
    let watcher = Arc::new(watcher);
    for task in tasks {
        match task {
            Watched::Held(task) => {
                tokio::spawn(watch(task, subscription.clone(), tx.clone()));
            }
            Watched::Polled { id, every } => {
                let key = PollKey {
                    route: watcher.route.name.clone(),
                    principal: watcher.principal.name.clone(),
                    task_id: id.clone(),
                };
                let reader = watcher.clone();
                let readings = watcher.gw.tasks.polls.subscribe(key, every, move || {
                    let (reader, id) = (reader.clone(), id.clone());
                    async move { read(&reader, &id).await }
                });
                tokio::spawn(relay(readings, subscription.clone(), tx.clone()));
            }
        }
    }
    tokio::spawn(async move {
        loop {
            tokio::select! {
                out = inner.recv() => match out {
                    Some(out) => if tx.send(out).await.is_err() { break },
                    None => break,
                },
                () = tx.closed() => break,
            }
        }
    });
    Reply::Stream { first, rx }
}

/// Sends `task` as it reads now, and again at each change, until it ends
/// or the client leaves.
async fn watch(task: Arc<Task>, subscription: Id, tx: mpsc::Sender<Outgoing>) {
    let mut changes = task.changed.subscribe();
    loop {
        let (out, ended) = status_notification(&task, &subscription);
        if tx.send(Outgoing::Notification(out)).await.is_err() || ended {
            return;
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            () = tx.closed() => return,
        }
    }
}

/// ext-tasks: "Each notification carries a complete `DetailedTask` for the
/// current status, identical to what `tasks/get` would have returned at
/// that moment" (without `resultType`, a result's member), tagged with the
/// subscription id as every notice of the listen is. True when the task
/// has ended: nothing follows.
fn status_notification(task: &Task, subscription: &Id) -> (Value, bool) {
    let mut params = task.detailed();
    if let Some(p) = params.as_object_mut() {
        p.remove("resultType");
    }
    let ended = task.status().is_terminal();
    let params = crate::front::listen::tag(subscription, Some(params));
    (notification("notifications/tasks", Some(params)), ended)
}

/// A listen of redmark's own, for task notifications alone: for a native
/// server that serves no `subscriptions/listen` (its answer was an error),
/// the listener's tasks are still watched; the acknowledgement then agrees
/// to nothing else ([`merge`] adds the task ids). It ends when the client
/// leaves, or when redmark shuts down, as every listen does.
pub fn own_listen(gw: &Gateway, subscription: &Id) -> Reply {
    let ack = notification(
        "notifications/subscriptions/acknowledged",
        Some(crate::front::listen::tag(
            subscription,
            Some(json!({"notifications": {}})),
        )),
    );
    let (tx, rx) = mpsc::channel(2);
    let mut shutdown = gw.shutdown_signal();
    let id = subscription.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = tx.closed() => {}
            _ = shutdown.changed() => {
                // spec subscriptions.mdx "Graceful Closure", as for every listen.
                let result = json!({"resultType": "complete",
                    "_meta": {crate::protocol::meta::SUBSCRIPTION_ID: id.to_value()}});
                let _ = tx.send(Outgoing::result(&id, result)).await;
            }
        }
    });
    Reply::Stream { first: ack, rx }
}

/// Sends a polled task's reading (shared with every listen watching it,
/// [`super::polls`]) each time it reads differently, until it ends, can no
/// longer be read, or the client leaves.
async fn relay(
    mut readings: watch::Receiver<Reading>,
    subscription: Id,
    tx: mpsc::Sender<Outgoing>,
) {
    loop {
        let reading = readings.borrow_and_update().clone();
        match &reading {
            Reading::Pending => {}
            Reading::Gone => return,
            Reading::Read(task) => {
                let params = crate::front::listen::tag(&subscription, Some(Value::clone(task)));
                let out = notification("notifications/tasks", Some(params));
                if tx.send(Outgoing::Notification(out)).await.is_err() || reading.is_final() {
                    return;
                }
            }
        }
        tokio::select! {
            changed = readings.changed() => if changed.is_err() { return },
            () = tx.closed() => return,
        }
    }
}

/// The task as the listener's own `tasks/get` reads it: forwarded to the
/// replica holding it, or served here. `None` when it cannot be read.
async fn read(watcher: &Watcher, task_id: &str) -> Option<Value> {
    let Watcher {
        gw,
        route,
        principal,
        ctx,
    } = watcher;
    let mut members = Map::new();
    members.insert("taskId".into(), Value::String(task_id.to_owned()));
    let params = ClientParams {
        members,
        meta: None,
        arguments: crate::protocol::params::Arguments::default(),
    };
    let req = ClientRequest::new(
        Id::Number(0),
        Method::TasksGet,
        params,
        ctx.clone(),
        Vec::new(),
    );
    if let Some(to) = super::owner_elsewhere(&gw.engine, route, principal, &req) {
        let forwarding = forwarding(route, principal, ctx, task_id)?;
        if let Some((resp, _)) = crate::front::forward::forward(gw, forwarding, to).await {
            let body = resp.into_body().collect().await.ok()?.to_bytes();
            let message: Value = serde_json::from_slice(&body).ok()?;
            return message.get("result").cloned();
        }
    }
    let out = if crate::mrtr::native::is_native(route).await {
        crate::mrtr::native::task::serve(&gw.engine, route, principal, &req).await
    } else {
        match super::serve(gw, route, principal, &req) {
            Reply::Json(out) => out,
            Reply::Stream { .. } => return None,
        }
    };
    match out {
        Outgoing::Final { body, .. } => body.to_value().get("result").cloned(),
        Outgoing::Notification(_) => None,
    }
}

/// A `tasks/get` as a client on `ctx` would send it, to forward.
fn forwarding(
    route: &Arc<Route>,
    principal: &Principal,
    ctx: &RequestContext,
    task_id: &str,
) -> Option<crate::front::forward::Forwarding> {
    let meta = crate::upstream::native::request_meta(&ctx.capabilities, ctx.client_info.as_ref());
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "tasks/get",
        "params": {"taskId": task_id, "_meta": meta}});
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-method", "tasks/get"),
        ("mcp-protocol-version", ctx.protocol_version.as_str()),
        ("mcp-name", task_id),
    ] {
        headers.insert(name, HeaderValue::from_str(value).ok()?);
    }
    Some(crate::front::forward::Forwarding {
        route: route.clone(),
        headers,
        body: Bytes::from(serde_json::to_vec(&body).ok()?),
        principal: principal.clone(),
        id: Some(Id::Number(0)),
    })
}
