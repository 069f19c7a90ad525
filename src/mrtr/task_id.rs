//! Task ids: unguessable and sealed with the state keyring, so that a task
//! id says (to redmark alone) which route and principal it belongs to,
//! which replica holds the call, and until when it is honoured. A client
//! can neither forge one nor read what it says. The same seal serves both
//! kinds of task: gateway-made ones (`front::tasks`) and a native server's
//! own, relayed under a wrapped id that carries the server's id and the
//! tool (`mrtr::native::task`).

use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::mrtr::state::{SharedKeyring, principal_digest};

/// How every task id begins.
pub const PREFIX: &str = "redmark-task.";

/// The task id format this build issues and reads up to. As for a
/// `requestState` ([`crate::mrtr::state::CLAIMS_VERSION`]): fields this
/// build does not know are ignored, and a change an older build would
/// misread by ignoring them raises this number.
pub const TASK_ID_FORMAT: u8 = 0;

/// What a task id says, sealed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    /// The format ([`TASK_ID_FORMAT`]); absent in the first.
    #[serde(default, skip_serializing_if = "is_first_format")]
    pub v: u8,
    /// The route's name.
    pub r: String,
    /// The principal's digest on that route.
    pub p: String,
    /// The node holding the call.
    pub n: String,
    /// Its internal address, in a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a: Option<String>,
    /// Honoured until (unix seconds).
    pub e: u64,
    /// Created (unix milliseconds), its TTL and poll interval (ms): what
    /// another replica needs to say the task failed when its holder is lost.
    pub c: u64,
    pub t: u64,
    pub i: u64,
    /// 128 random bits: no two tasks share an id.
    pub x: String,
    /// The incarnation of the node's task table that holds the task (a
    /// random id per process): a node that restarted knows its old tasks
    /// are lost, not unknown. Absent in ids issued before it was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b: Option<String>,
    /// A native server's own task id, for a task redmark relays (absent
    /// for a gateway-made task): what the server hears in `tasks/*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub u: Option<String>,
    /// The tool (or prompt, or resource) the task runs: whose policy a
    /// relayed task's questions and answers are held to, and the label a
    /// lost task is counted under. Absent in ids issued before it was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub o: Option<String>,
    /// The W3C `traceparent` of the span that made the task, when traced:
    /// a replica that forwards the task's `tasks/*` to its holder, or
    /// serves a relayed task from its id alone, traces it in the task's
    /// one trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_first_format(v: &u8) -> bool {
    *v == 0
}

impl Sealed {
    /// Whether this is a native server's task, relayed.
    pub fn is_relayed(&self) -> bool {
        self.u.is_some()
    }

    /// The task as `tasks/get` reads it `failed` with `error` (ext-tasks
    /// "Task Execution Errors": the `error` field MUST be present), from
    /// what its id alone says: for a task whose holder cannot say more.
    pub fn failed_read(&self, task_id: &str, message: String, error: Value) -> Value {
        let created = UNIX_EPOCH + Duration::from_millis(self.c);
        let iso = humantime::format_rfc3339_millis(created).to_string();
        json!({
            "resultType": "complete",
            "taskId": task_id,
            "status": "failed",
            "statusMessage": message,
            "createdAt": iso,
            "lastUpdatedAt": iso,
            "ttlMs": self.t,
            "pollIntervalMs": self.i,
            "error": error,
        })
    }
}

/// Why a task id is not one of this route's and principal's live tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("not a task id redmark issued")]
    Forged,
    #[error("the task id has expired")]
    Expired,
    #[error("the task belongs to another route or principal")]
    NotYours,
    #[error(
        "the task id was issued by a newer redmark, in a format this one cannot read (format {0}; this one reads up to {TASK_ID_FORMAT})"
    )]
    NewerFormat(u8),
}

/// Where and whose a task is, and its times, before it is sealed.
pub struct Issue<'a> {
    pub route: &'a str,
    pub principal: &'a str,
    pub node: &'a str,
    /// The incarnation of the table that holds the task (a random id per process).
    pub boot: &'a str,
    pub advertise: Option<&'a str>,
    pub expires_unix: u64,
    pub created_ms: u64,
    pub ttl_ms: u64,
    pub poll_ms: u64,
    /// The tool (or prompt, or resource) the task runs.
    pub target: &'a str,
    /// For a relayed task: the server's own id.
    pub server_id: Option<&'a str>,
    /// The task's trace (`traceparent`), when traced.
    pub traceparent: Option<&'a str>,
}

/// A fresh sealed id for a task.
pub fn issue(keys: &SharedKeyring, task: &Issue<'_>) -> String {
    let sealed = Sealed {
        v: TASK_ID_FORMAT,
        r: task.route.to_owned(),
        p: principal_digest(task.route, task.principal),
        n: task.node.to_owned(),
        a: task.advertise.map(str::to_owned),
        e: task.expires_unix,
        c: task.created_ms,
        t: task.ttl_ms,
        i: task.poll_ms,
        x: hex::encode(rand::random::<[u8; 16]>()),
        b: Some(task.boot.to_owned()),
        u: task.server_id.map(str::to_owned),
        o: Some(task.target.to_owned()),
        tp: task.traceparent.map(str::to_owned),
    };
    let plain = serde_json::to_vec(&sealed).unwrap_or_default();
    format!("{PREFIX}{}", keys.seal_payload(&plain))
}

/// Opens `id` for `principal` on `route` at `now_unix`.
pub fn open(
    keys: &SharedKeyring,
    id: &str,
    route: &str,
    principal: &str,
    now_unix: u64,
) -> Result<Sealed, IdError> {
    let token = id.strip_prefix(PREFIX).ok_or(IdError::Forged)?;
    let plain = keys.open_payload(token).map_err(|_| IdError::Forged)?;
    let sealed: Sealed = serde_json::from_slice(&plain).map_err(|_| IdError::Forged)?;
    if sealed.v > TASK_ID_FORMAT {
        // Sealed with our key, so a replica of a newer version issued it:
        // the client is told the task is unknown (nothing else is safe to
        // say), and the operator why.
        let error = IdError::NewerFormat(sealed.v);
        tracing::warn!(route, %error, "a task id from a newer replica was refused: finish the upgrade");
        return Err(error);
    }
    if sealed.r != route || sealed.p != principal_digest(route, principal) {
        return Err(IdError::NotYours);
    }
    if sealed.e <= now_unix {
        return Err(IdError::Expired);
    }
    Ok(sealed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mrtr::state::{Key, Keyring};

    fn keys() -> SharedKeyring {
        SharedKeyring::new(Keyring::new(Key::new("k1", vec![7u8; 32]), Vec::new()))
    }

    /// Alice's task on route "main", held by node-a, honoured until 1,000.
    fn alices_task(advertise: Option<&str>) -> Issue<'_> {
        Issue {
            route: "main",
            principal: "alice",
            node: "node-a",
            boot: "b1",
            advertise,
            expires_unix: 1_000,
            created_ms: 5,
            ttl_ms: 6,
            poll_ms: 7,
            target: "t",
            server_id: None,
            traceparent: None,
        }
    }

    #[test]
    fn an_id_opens_for_its_route_and_principal_only_until_it_expires() {
        let keys = keys();
        let task = alices_task(Some("10.0.0.1:9"));
        let id = issue(&keys, &task);
        let again = issue(&keys, &task);
        assert_ne!(id, again, "unguessable: never the same twice");
        let sealed = open(&keys, &id, "main", "alice", 999).unwrap();
        assert_eq!(
            (sealed.n.as_str(), sealed.a.as_deref()),
            ("node-a", Some("10.0.0.1:9"))
        );
        assert_eq!(sealed.b.as_deref(), Some("b1"));
        assert!(!id.contains("alice") && !id.contains("node-a"), "{id}");
        assert_eq!(open(&keys, &id, "main", "bob", 999), Err(IdError::NotYours));
        assert_eq!(
            open(&keys, &id, "other", "alice", 999),
            Err(IdError::NotYours)
        );
        assert_eq!(
            open(&keys, &id, "main", "alice", 1_000),
            Err(IdError::Expired)
        );
        let mut tampered = id.clone();
        tampered.push('x');
        assert_eq!(
            open(&keys, &tampered, "main", "alice", 1),
            Err(IdError::Forged)
        );
        assert_eq!(open(&keys, "t-1", "main", "alice", 1), Err(IdError::Forged));
    }

    /// Mid-upgrade, replicas of two versions read each other's ids: a field
    /// this build does not know is ignored, a newer format refused.
    #[test]
    fn unknown_fields_are_ignored_and_a_newer_format_is_refused() {
        let keys = keys();
        let id = issue(&keys, &alices_task(None));
        let sealed = open(&keys, &id, "main", "alice", 1).unwrap();
        let plain = keys.open_payload(id.strip_prefix(PREFIX).unwrap()).unwrap();
        assert!(
            !String::from_utf8_lossy(&plain).contains("\"v\""),
            "the first format writes no v"
        );
        let reissue = |edit: &dyn Fn(&mut Value)| {
            let mut v = serde_json::to_value(&sealed).unwrap();
            edit(&mut v);
            format!(
                "{PREFIX}{}",
                keys.seal_payload(&serde_json::to_vec(&v).unwrap())
            )
        };
        let extended = reissue(&|v| v["later"] = json!([1, 2]));
        assert_eq!(
            open(&keys, &extended, "main", "alice", 1),
            Ok(sealed.clone())
        );
        let newer = reissue(&|v| v["v"] = json!(TASK_ID_FORMAT + 1));
        assert_eq!(
            open(&keys, &newer, "main", "alice", 1),
            Err(IdError::NewerFormat(TASK_ID_FORMAT + 1))
        );
    }
}
