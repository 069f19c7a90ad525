//! `notifications/tasks` on `subscriptions/listen` (ext-tasks "Task Status
//! Notifications"): a client that declared the extension and named task
//! ids in `notifications.taskIds` is sent each named task's `DetailedTask`
//! on the listen's stream, beside the notices it subscribed to: once when
//! the listen starts, then at every change, until the task ends.
//!
//! Only this principal's live tasks on this route that this replica holds
//! are acknowledged (at most [`MAX_TASK_IDS`]); an id that is not one of
//! them is left out of the acknowledgement, disclosing nothing, and the
//! client polls it (`tasks/get` is routed to the replica holding it).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::id;
use super::task::Task;
use crate::front::Gateway;
use crate::front::dispatch::Reply;
use crate::jsonrpc::Id;
use crate::mrtr::Outgoing;
use crate::protocol::Principal;
use crate::protocol::shape::notification;
use crate::route::Route;

/// The most task ids one listen watches.
pub const MAX_TASK_IDS: usize = 64;

/// The tasks named in `notifications.taskIds` that this listen may watch.
pub fn watched(gw: &Gateway, route: &Route, principal: &Principal, ids: &Value) -> Vec<Arc<Task>> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let mut tasks: Vec<Arc<Task>> = Vec::new();
    for task_id in ids
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if tasks.len() == MAX_TASK_IDS {
            break;
        }
        if tasks.iter().any(|t| t.id == task_id) {
            continue;
        }
        let held = id::open(&gw.engine.keys, task_id, &route.name, &principal.name, now)
            .ok()
            .and_then(|_| gw.tasks.get(task_id))
            .filter(|t| *t.principal == *principal.name && t.route == route.name);
        tasks.extend(held);
    }
    tasks
}

/// The listen's reply with the watched tasks' notifications merged into
/// its stream, and their ids in its acknowledgement ("In its
/// acknowledgement notification, the server includes the list of task IDs
/// it has agreed to send task status notifications for, if any").
pub fn merge(reply: Reply, subscription: &Id, tasks: Vec<Arc<Task>>) -> Reply {
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
        let ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        ack.insert("taskIds".into(), json!(ids));
    }
    let (tx, rx) = mpsc::channel(64);
    for task in tasks {
        tokio::spawn(watch(task, subscription.clone(), tx.clone()));
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
