//! One gateway-made task: its status, the questions of its current round
//! under keys of its own, the answers gathered for them, and how it reads
//! in `tasks/get` and in the `CreateTaskResult` that hands it out.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

/// ext-tasks "Task Status".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    pub const fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }

    /// The status a task as `tasks/get` reads it says, if it is one.
    pub fn of(task: &Value) -> Option<Status> {
        let status = task.get("status").and_then(Value::as_str)?;
        [
            Status::Working,
            Status::InputRequired,
            Status::Completed,
            Status::Failed,
            Status::Cancelled,
        ]
        .into_iter()
        .find(|s| s.as_str() == status)
    }
}

/// A question of the current round: the key the client sees, the engine's
/// key it answers, and the answer once given.
#[derive(Debug)]
struct Question {
    key: String,
    engine_key: String,
    request: Value,
    answer: Option<Value>,
}

#[derive(Debug)]
struct State {
    status: Status,
    message: Option<String>,
    updated: SystemTime,
    questions: Vec<Question>,
    /// Every key handed out over the task's life.
    used: HashSet<String>,
    result: Option<Value>,
    error: Option<Value>,
    /// Whether the client was handed the task (a `CreateTaskResult`); until
    /// then the call may still end as a plain answer.
    handed_out: bool,
}

/// A task and what its driver and the `tasks/*` handlers share.
#[derive(Debug)]
pub struct Task {
    pub id: String,
    pub route: std::sync::Arc<str>,
    pub principal: String,
    /// The tool called (a metrics label).
    pub tool: String,
    pub created: SystemTime,
    pub ttl: Duration,
    pub poll_interval: Duration,
    /// Cancelled by `tasks/cancel`: the driver ends the call.
    pub cancel: CancellationToken,
    /// Woken when answers arrive.
    pub answered: Notify,
    /// The W3C `traceparent` of the span that made the task, when traced:
    /// its call's operation and every `tasks/*` request on it are its
    /// children, so a task is one trace across its polls and updates.
    pub traceparent: Option<String>,
    /// Bumped at every change of what the task reads as: `notifications/tasks`
    /// listeners (`notify`) watch it.
    pub changed: watch::Sender<u64>,
    state: Mutex<State>,
}

impl Task {
    pub fn new(
        id: String,
        route: std::sync::Arc<str>,
        principal: String,
        tool: String,
        created: SystemTime,
        ttl: Duration,
        poll_interval: Duration,
    ) -> Task {
        Task {
            id,
            route,
            principal,
            tool,
            created,
            ttl,
            poll_interval,
            cancel: CancellationToken::new(),
            answered: Notify::new(),
            traceparent: None,
            changed: watch::Sender::new(0),
            state: Mutex::new(State {
                status: Status::Working,
                message: None,
                updated: created,
                questions: Vec::new(),
                used: HashSet::new(),
                result: None,
                error: None,
                handed_out: false,
            }),
        }
    }

    /// The task in the trace of `traceparent` ([`Task::traceparent`]).
    #[must_use]
    pub fn in_trace(mut self, traceparent: Option<String>) -> Task {
        self.traceparent = traceparent;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn status(&self) -> Status {
        self.lock().status
    }

    /// Marks the task handed to the client; false when it already ended
    /// before (its answer then goes to the client as a plain one).
    pub fn hand_out(&self) -> bool {
        let mut s = self.lock();
        if s.status.is_terminal() {
            return false;
        }
        s.handed_out = true;
        true
    }

    /// Whether the client was handed the task.
    pub fn handed_out(&self) -> bool {
        self.lock().handed_out
    }

    /// A new round: the engine's questions, each under a key of the task's
    /// own. ext-tasks "Task Update Requests": "Each request key in
    /// `inputRequests` MUST be unique over the lifetime of a single task. A
    /// server MUST NOT reuse a key for a subsequent server-to-client request
    /// after a response for that key has been delivered". The engine's key
    /// is kept where it is new (it names the question, `room`); a question
    /// the engine asks again under a key already used (the red mark of an
    /// invalid answer) gets `room.2`, `room.3`, ...
    pub fn ask(&self, requests: &[(String, Value)]) {
        let mut s = self.lock();
        if s.status.is_terminal() {
            return;
        }
        let mut questions = Vec::with_capacity(requests.len());
        for (engine_key, request) in requests {
            let mut key = engine_key.clone();
            let mut n = 1;
            while s.used.contains(&key) {
                n += 1;
                key = format!("{engine_key}.{n}");
            }
            s.used.insert(key.clone());
            questions.push(Question {
                key,
                engine_key: engine_key.clone(),
                request: request.clone(),
                answer: None,
            });
        }
        s.questions = questions;
        s.status = Status::InputRequired;
        s.message = Some("waiting for answers to inputRequests".to_owned());
        s.updated = SystemTime::now();
        self.bump();
    }

    /// Tells the task's watchers it reads differently now.
    fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Takes `tasks/update`'s answers. ext-tasks "Task Update Requests": "A
    /// server SHOULD ignore any `inputResponses` responses mapped to a key
    /// that is not currently outstanding for the task — including keys that
    /// were never issued, keys that have already been answered" and "MAY
    /// accept a partial set of responses". Returns how many were taken.
    pub fn accept(&self, responses: &Map<String, Value>) -> usize {
        let mut s = self.lock();
        if s.status != Status::InputRequired {
            return 0;
        }
        let mut taken = 0;
        for q in &mut s.questions {
            if q.answer.is_none()
                && let Some(answer) = responses.get(&q.key)
            {
                q.answer = Some(answer.clone());
                taken += 1;
            }
        }
        if taken > 0 {
            s.updated = SystemTime::now();
            self.bump();
        }
        taken
    }

    /// The round's answers by the engine's keys, once every question has
    /// one; the task is `working` again then.
    pub fn answers(&self) -> Option<Map<String, Value>> {
        let mut s = self.lock();
        if s.status != Status::InputRequired || s.questions.iter().any(|q| q.answer.is_none()) {
            return None;
        }
        let answers = s
            .questions
            .drain(..)
            .filter_map(|q| q.answer.map(|a| (q.engine_key, a)))
            .collect();
        s.status = Status::Working;
        s.message = None;
        s.updated = SystemTime::now();
        self.bump();
        Some(answers)
    }

    /// Ends the task with the call's answer; true when the client was
    /// handed the task. Otherwise it can no longer be handed out, and the
    /// answer goes to the request that started it, plainly (false).
    /// (One lock with [`Task::hand_out`]: the two cannot cross.)
    pub fn settle(&self, status: Status, payload: Value) -> Settled {
        let mut s = self.lock();
        let ended = end(&mut s, status, Some(payload), None);
        if ended {
            self.bump();
        }
        Settled {
            handed_out: s.handed_out,
            ended,
        }
    }

    /// Ends the task (a task already ended stays as it ended). True when
    /// this ended a task the client was handed: it is accounted then, once.
    pub fn finish(&self, status: Status, payload: Option<Value>, message: Option<String>) -> bool {
        let mut s = self.lock();
        let ended = end(&mut s, status, payload, message);
        if ended {
            self.bump();
        }
        ended && s.handed_out
    }

    /// The `Task` fields (ext-tasks "Tasks").
    fn fields(&self, s: &State) -> Map<String, Value> {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let mut m = Map::new();
        m.insert("taskId".into(), self.id.clone().into());
        m.insert("status".into(), s.status.as_str().into());
        if let Some(message) = &s.message {
            m.insert("statusMessage".into(), message.clone().into());
        }
        m.insert("createdAt".into(), iso(self.created).into());
        m.insert("lastUpdatedAt".into(), iso(s.updated).into());
        m.insert("ttlMs".into(), millis(self.ttl).into());
        m.insert("pollIntervalMs".into(), millis(self.poll_interval).into());
        m
    }

    /// The `CreateTaskResult` (ext-tasks "Task Creation"): "Servers MUST
    /// set `resultType` to `"task"` when returning a `CreateTaskResult`".
    pub fn created_result(&self) -> Value {
        let s = self.lock();
        let mut m = Map::new();
        m.insert(
            "resultType".into(),
            crate::protocol::tasks::RESULT_TYPE.into(),
        );
        m.extend(self.fields(&s));
        Value::Object(m)
    }

    /// The `GetTaskResult` (ext-tasks "Task Polling", "Response"): the
    /// status's own member (`inputRequests` with every outstanding
    /// request, `result`, `error`), and `resultType: "complete"` ("MUST be
    /// set to `"complete"` on this object").
    pub fn detailed(&self) -> Value {
        let s = self.lock();
        let mut m = Map::new();
        m.insert("resultType".into(), "complete".into());
        m.extend(self.fields(&s));
        match s.status {
            Status::InputRequired => {
                let outstanding: Map<String, Value> = s
                    .questions
                    .iter()
                    .filter(|q| q.answer.is_none())
                    .map(|q| (q.key.clone(), q.request.clone()))
                    .collect();
                m.insert("inputRequests".into(), Value::Object(outstanding));
            }
            Status::Completed => {
                m.insert("result".into(), s.result.clone().unwrap_or(json!({})));
            }
            Status::Failed => {
                m.insert(
                    "error".into(),
                    s.error
                        .clone()
                        .unwrap_or(json!({"code": -32603, "message": "the task failed"})),
                );
            }
            Status::Working | Status::Cancelled => {}
        }
        Value::Object(m)
    }
}

/// What [`Task::settle`] did: whether the client was handed the task, and
/// whether this ended it (it had not ended already).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub handed_out: bool,
    pub ended: bool,
}

/// True when this ended the task.
fn end(s: &mut State, status: Status, payload: Option<Value>, message: Option<String>) -> bool {
    if s.status.is_terminal() {
        return false;
    }
    s.status = status;
    s.questions.clear();
    match status {
        Status::Completed => s.result = payload,
        Status::Failed => s.error = payload,
        _ => {}
    }
    s.message = message;
    s.updated = SystemTime::now();
    true
}

/// ISO 8601 (RFC 3339) in UTC, to the millisecond.
fn iso(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task::new(
            "t".into(),
            "main".into(),
            "alice".into(),
            "book".into(),
            SystemTime::now(),
            Duration::from_secs(60),
            Duration::from_secs(2),
        )
    }

    fn ask(t: &Task, keys: &[&str]) {
        let requests: Vec<(String, Value)> = keys
            .iter()
            .map(|k| {
                (
                    (*k).to_owned(),
                    json!({"method": "elicitation/create", "k": k}),
                )
            })
            .collect();
        t.ask(&requests);
    }

    fn outstanding(t: &Task) -> Vec<String> {
        let d = t.detailed();
        let mut keys: Vec<String> = d["inputRequests"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        keys
    }

    #[test]
    fn keys_stay_unique_over_the_task_life_when_the_engine_asks_again() {
        let t = task();
        ask(&t, &["room"]);
        assert_eq!(outstanding(&t), ["room"]);
        assert_eq!(
            t.accept(&Map::from_iter([(
                "room".into(),
                json!({"action": "accept"})
            )])),
            1
        );
        let answers = t.answers().unwrap();
        assert!(answers.contains_key("room"));
        assert_eq!(t.status(), Status::Working);
        // The red mark: the engine asks `room` again.
        ask(&t, &["room"]);
        assert_eq!(outstanding(&t), ["room.2"]);
        // The old key is answered already: ignored.
        assert_eq!(t.accept(&Map::from_iter([("room".into(), json!(1))])), 0);
        let answers = t.accept(&Map::from_iter([("room.2".into(), json!(2))]));
        assert_eq!(answers, 1);
        assert_eq!(
            t.answers().unwrap()["room"],
            json!(2),
            "answered under the engine's key"
        );
        ask(&t, &["room"]);
        assert_eq!(outstanding(&t), ["room.3"]);
    }

    #[test]
    fn partial_answers_keep_the_task_waiting_and_unknown_keys_are_ignored() {
        let t = task();
        ask(&t, &["a", "b"]);
        let taken = t.accept(&Map::from_iter([
            ("a".into(), json!(1)),
            ("nope".into(), json!(2)),
        ]));
        assert_eq!(taken, 1);
        assert!(t.answers().is_none());
        assert_eq!(t.status(), Status::InputRequired);
        assert_eq!(outstanding(&t), ["b"], "only what is still outstanding");
        assert_eq!(t.accept(&Map::from_iter([("a".into(), json!(9))])), 0);
        t.accept(&Map::from_iter([("b".into(), json!(3))]));
        let answers = t.answers().unwrap();
        assert_eq!(answers["a"], json!(1));
        assert_eq!(answers["b"], json!(3));
    }

    #[test]
    fn a_task_ends_once_and_reads_as_it_ended() {
        let t = task();
        assert!(t.hand_out());
        let created = t.created_result();
        assert_eq!(created["resultType"], "task");
        assert_eq!(created["status"], "working");
        assert_eq!(created["ttlMs"], 60_000);
        assert_eq!(created["pollIntervalMs"], 2_000);
        assert!(created["createdAt"].as_str().unwrap().ends_with('Z'));
        assert!(t.finish(Status::Completed, Some(json!({"isError": true})), None));
        assert!(!t.finish(Status::Cancelled, None, None), "ended once");
        let d = t.detailed();
        assert_eq!(d["resultType"], "complete");
        assert_eq!(d["status"], "completed");
        assert_eq!(d["result"]["isError"], true);
        assert!(!t.hand_out(), "an ended task is answered plainly");
    }
}
