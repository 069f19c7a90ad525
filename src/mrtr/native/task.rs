//! A native server's own tasks (the tasks extension, ext-tasks `tasks.md`),
//! relayed on a route with `[route.tasks]`: the server's task id never
//! reaches the client, which gets a wrapped id sealed with the route, its
//! principal's digest, the tool, the replica relaying it and an expiry
//! (`mrtr::task_id`), so any replica can route its `tasks/*` and the
//! principal binding holds. The server's `inputRequests` are guarded before
//! the client sees them and `tasks/update` answers are held to the policy
//! before the server sees them, exactly as for a native call's MRTR rounds.
//!
//! - this module: the tasks this replica relays ([`Relays`]) and what each
//!   remembers beyond the server ([`Relayed`]: red marks, when each question
//!   was asked, an ending of redmark's own);
//! - [`create`]: a server's `CreateTaskResult` turned into redmark's;
//! - [`account`]: its end counted once, its questions audited;
//! - [`read`]: `tasks/get`, the server's questions guarded;
//! - [`update`]: `tasks/update` answers judged, and `tasks/cancel`;
//! - [`shared`]: the call's arguments kept in the shared store for a
//!   replica that takes the task over.
//!
//! What a relayed task remembers lives on the replica that relayed its
//! creation (its id names it; other replicas forward `tasks/*` there). When
//! that replica is gone or restarted, any replica serves the task from its
//! id alone, the server still holding it: only red marks in flight are
//! forgotten (the server's question is then asked again as it was).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::params::upstream_params;
use crate::jsonrpc::ErrorObject;
use crate::mrtr::Engine;
use crate::mrtr::redis_store::Redis;
use crate::mrtr::task_id::Sealed;
use crate::protocol::shape::upstream_error_reply;
use crate::protocol::{ClientRequest, IntoReject, Method, Principal, Reason, Reject, meta, tasks};
use crate::route::Route;
use crate::telemetry::traces;
use crate::upstream::native::NativeRequest;

mod account;
mod create;
mod read;
mod shared;
mod update;

use account::count_end;

use super::super::outgoing::Outgoing;

/// How long a relayed task is remembered after its wrapped id stops being
/// honoured (the id's own expiry already includes the TTL).
const LINGER: Duration = Duration::from_secs(60);

/// Most characters of a server's task id redmark wraps: an id is a handle,
/// not a payload, and it rides inside every wrapped id.
const MAX_SERVER_ID: usize = 256;

/// A question of the server's that redmark asked again with a red mark,
/// under a key of its own (the server's key stays outstanding).
#[derive(Debug, Clone)]
struct Mark {
    /// The key the client sees now.
    key: String,
    /// How many times it was asked again.
    reasks: u32,
    /// The question as the client sees it, red mark included.
    request: Value,
}

/// How redmark itself ended a task (a policy refusal, a question the client
/// cannot answer): the server heard `tasks/cancel`, and the task reads so.
#[derive(Debug, Clone)]
enum Ended {
    /// `failed`, with redmark's JSON-RPC error.
    Failed { message: String, error: Value },
    /// `completed` with a tool error the model can act on (a model-owned field).
    Completed { result: Value },
}

/// An [`Ended`] and when redmark ended it (the task's `lastUpdatedAt`).
#[derive(Debug, Clone)]
struct EndedAt {
    ended: Ended,
    at: std::time::SystemTime,
}

/// A question of the server's the client was shown.
#[derive(Debug, Clone)]
struct Seen {
    /// When it was first asked (unix ms).
    at: u64,
    /// The server's input request (to audit it if the task ends unanswered).
    request: Value,
}

#[derive(Debug, Default)]
struct Overlay {
    /// The server's questions redmark has guarded, by key, with when each
    /// was first asked; a key guarded once is not guarded (or audited) again.
    seen: HashMap<String, Seen>,
    /// Red-marked questions by the server's key.
    marks: HashMap<String, Mark>,
    /// Every key handed to the client over the task's life (ext-tasks
    /// "Task Update Requests": keys "MUST be unique over the lifetime of a
    /// single task").
    used: HashSet<String>,
    /// The server's keys answered through redmark (the client's valid
    /// answers, declines on the user's behalf): not shown again while the
    /// server catches up (its status is eventually consistent).
    answered: HashSet<String>,
    /// Questions asked in all (the policy's `max_questions`).
    asked: u32,
    ended: Option<EndedAt>,
    /// Whether the task's end was counted (`redmark_tasks_total`).
    counted: bool,
}

/// A task of the server's that this replica relays.
#[derive(Debug)]
pub struct Relayed {
    /// The id the client holds.
    pub id: String,
    /// The server's own id.
    pub server_id: String,
    pub route: Arc<str>,
    pub principal: Arc<str>,
    /// The tool (or prompt, or resource) it runs.
    pub target: String,
    /// The call's arguments (for the policy's CEL rules); for a task served
    /// from its id alone (its relaying replica lost), what the shared store
    /// kept ([`shared`]), else `null`.
    arguments: Value,
    /// The call's operation id (the audit's `operation`).
    pub operation: String,
    /// The `traceparent` of the call that made the task: its `tasks/*` are
    /// children of it, so a task is one trace across its polls and updates.
    pub traceparent: Option<String>,
    /// The id's random part: the task's name in the single-use store,
    /// where its end is counted once across replicas.
    mark: String,
    /// Whether this replica counted it in `redmark_tasks_live`.
    live: bool,
    remove_at: Instant,
    state: Mutex<Overlay>,
}

impl Relayed {
    fn state(&self) -> MutexGuard<'_, Overlay> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The tasks this replica relays, bounded like gateway-made ones
/// (`[route.tasks] max_per_principal`, `max_total`), each until its id
/// expires.
pub struct Relays {
    live: Mutex<HashMap<String, Arc<Relayed>>>,
    /// When the table was last swept by a `tasks/*` request.
    swept: Mutex<Instant>,
    /// This table's incarnation, sealed into the ids it issues.
    boot: String,
    /// The replicas' shared store (`[state] store`), where a task's
    /// arguments are kept for a replica that takes it over ([`shared`]).
    store: OnceLock<Arc<Redis>>,
}

impl Default for Relays {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a relayed task could not be kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Full {
    #[error(
        "this principal has {0} tasks relayed on the route, the most it may ([route.tasks] max_per_principal)"
    )]
    Principal(usize),
    #[error("the route relays {0} tasks, the most it may ([route.tasks] max_total)")]
    Total(usize),
}

impl Relays {
    pub fn new() -> Self {
        Self {
            live: Mutex::new(HashMap::new()),
            swept: Mutex::new(Instant::now()),
            boot: hex::encode(rand::random::<[u8; 8]>()),
            store: OnceLock::new(),
        }
    }

    pub fn boot(&self) -> &str {
        &self.boot
    }

    /// Keeps relayed tasks' arguments in the replicas' shared store.
    pub fn share_with(&self, store: Arc<Redis>) {
        let _ = self.store.set(store);
    }

    fn store(&self) -> Option<&Arc<Redis>> {
        self.store.get()
    }

    fn table(&self) -> MutexGuard<'_, HashMap<String, Arc<Relayed>>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops the tasks past their time; each this replica relayed that
    /// never reached an end it saw is counted `expired`.
    fn sweep(&self, engine: &Arc<Engine>, now: Instant) {
        let mut gone = Vec::new();
        self.table().retain(|_, t| {
            let keep = t.remove_at > now;
            if !keep {
                gone.push(t.clone());
            }
            keep
        });
        // Only the replica that relayed a task counts it expired: one that
        // adopted it from its id alone would count it a second time.
        for t in gone.iter().filter(|t| t.live) {
            let _ = count_end(engine, t, "expired");
        }
    }

    /// Sweeps at most once a second, so tasks that ended unseen are
    /// counted and dropped on a replica that makes no new ones.
    fn sweep_now_and_then(&self, engine: &Arc<Engine>) {
        let now = Instant::now();
        {
            let mut swept = self.swept.lock().unwrap_or_else(PoisonError::into_inner);
            if now.duration_since(*swept) < Duration::from_secs(1) {
                return;
            }
            *swept = now;
        }
        self.sweep(engine, now);
    }

    /// Keeps `task`, within the route's bounds.
    fn insert(
        &self,
        engine: &Arc<Engine>,
        task: Arc<Relayed>,
        limits: &crate::config::TasksConfig,
    ) -> Result<(), Full> {
        self.sweep(engine, Instant::now());
        let mut live = self.table();
        let on_route = live.values().filter(|t| t.route == task.route);
        let (mut total, mut mine) = (0, 0);
        for t in on_route {
            total += 1;
            if t.principal == task.principal {
                mine += 1;
            }
        }
        if mine >= limits.max_per_principal {
            return Err(Full::Principal(mine));
        }
        if total >= limits.max_total {
            return Err(Full::Total(total));
        }
        live.insert(task.id.clone(), task);
        Ok(())
    }

    fn get(&self, id: &str) -> Option<Arc<Relayed>> {
        self.table().get(id).cloned()
    }

    /// A relayed task this replica does not hold (its relaying replica
    /// lost or restarted), served from its id alone, with the `arguments`
    /// the shared store kept; the one another request adopted meanwhile,
    /// if any.
    fn adopt(
        &self,
        engine: &Arc<Engine>,
        id: &str,
        sealed: &Sealed,
        principal: &Principal,
        arguments: Value,
    ) -> Arc<Relayed> {
        let now_unix = engine.clock.unix_now().as_secs();
        let left = Duration::from_secs(sealed.e.saturating_sub(now_unix));
        let adopted = Arc::new(Relayed {
            id: id.to_owned(),
            server_id: sealed.u.clone().unwrap_or_default(),
            route: sealed.r.as_str().into(),
            // Only the digest is sealed: the name is the caller's, checked
            // against the digest when the id was opened.
            principal: principal.name.clone(),
            target: sealed.o.clone().unwrap_or_default(),
            arguments,
            operation: super::super::operation::operation_id(),
            traceparent: sealed.tp.clone(),
            mark: sealed.x.clone(),
            live: false,
            remove_at: Instant::now() + left + LINGER,
            state: Mutex::new(Overlay::default()),
        });
        // Unbounded here would let ids alone fill the table: past
        // ADOPT_MAX an adopted task is served without being kept. Under one
        // lock, so two requests adopting the same id share one overlay.
        self.sweep(engine, Instant::now());
        let mut live = self.table();
        if let Some(t) = live.get(id) {
            return t.clone();
        }
        if live.len() < ADOPT_MAX {
            live.insert(id.to_owned(), adopted.clone());
        }
        adopted
    }
}

/// Most tasks a replica adopts from their ids alone (another replica's,
/// lost): beyond it they are served without remembering red marks.
const ADOPT_MAX: usize = 65_536;

/// `tasks/get`, `tasks/update` or `tasks/cancel` for a relayed task on a
/// route with `[route.tasks]` whose server speaks 2026-07-28.
pub async fn serve(
    engine: &Arc<Engine>,
    route: &Arc<Route>,
    principal: &Principal,
    req: &ClientRequest,
) -> Outgoing {
    // ext-tasks "Error Handling": "Servers MUST return this error [-32021]
    // for non-declaring clients issuing `tasks/get`, `tasks/update`, and
    // `tasks/cancel` requests."
    if !tasks::declared_on(&req.ctx) {
        return Outgoing::reject(
            Some(&req.id),
            &tasks::extension_required(&format!(
                "`{}` needs the {} extension declared in the request's client capabilities",
                req.method,
                tasks::EXTENSION
            )),
        );
    }
    let Some(task_id) = req.params.get("taskId").and_then(Value::as_str) else {
        return Outgoing::reject(
            Some(&req.id),
            &Reject::new(
                Reason::InvalidParams,
                format!("`params.taskId` is required for {}", req.method),
            ),
        );
    };
    let now = engine.clock.unix_now().as_secs();
    let sealed =
        crate::mrtr::task_id::open(&engine.keys, task_id, &route.name, &principal.name, now);
    let Some(sealed) = sealed.ok().filter(Sealed::is_relayed) else {
        return Outgoing::reject(Some(&req.id), &tasks::unknown(task_id));
    };
    engine.relayed_tasks.sweep_now_and_then(engine);
    let task = match engine.relayed_tasks.get(task_id) {
        Some(task) => task,
        // A task this replica did not relay is taken over: its arguments
        // are read from the shared store, if it keeps them.
        None => {
            let arguments = shared::read(engine, &sealed.x).await;
            engine
                .relayed_tasks
                .adopt(engine, task_id, &sealed, principal, arguments)
        }
    };
    let span = tracing::info_span!(
        "task_request",
        otel.name = %req.method,
        otel.kind = "server",
        mcp.method.name = %req.method,
        gen_ai.tool.name = %task.target,
        redmark.route = %route.name,
    );
    traces::adopt_parent(&span, task.traceparent.as_deref(), None);
    let relay = Relay {
        engine,
        route,
        principal,
        req,
        task: &task,
        sealed: &sealed,
        span,
    };
    match req.method {
        Method::TasksGet => relay.read().await,
        Method::TasksUpdate => relay.update().await,
        Method::TasksCancel => relay.cancel().await,
        _ => Outgoing::reject(
            Some(&req.id),
            &Reject::new(
                Reason::MethodNotFound,
                format!("Method not found: `{}`", req.method),
            ),
        ),
    }
}

/// One `tasks/*` request on a relayed task.
struct Relay<'a> {
    engine: &'a Arc<Engine>,
    route: &'a Arc<Route>,
    principal: &'a Principal,
    req: &'a ClientRequest,
    task: &'a Arc<Relayed>,
    sealed: &'a Sealed,
    span: tracing::Span,
}

/// What the server answered a `tasks/*` request.
enum Heard {
    Result(Value),
    /// A JSON-RPC error of the server's.
    Error(ErrorObject),
    /// Not heard at all (transport): redmark's own error.
    Unreached(Reject),
}

impl Relay<'_> {
    /// Sends `method` for the server's task, with `extra` params (the
    /// client's protocol version and capabilities, the extension declared:
    /// the server serves `tasks/*` only to a declaring request).
    async fn upstream(&self, method: Method, extra: Map<String, Value>) -> Heard {
        let mut params = upstream_params(self.req, Some(&self.span));
        params.remove("inputResponses");
        declare_tasks(&mut params, self.req);
        params.insert("taskId".into(), Value::String(self.task.server_id.clone()));
        params.extend(extra);
        let sent = self
            .route
            .native
            .request(NativeRequest {
                method: method.as_str(),
                params: Value::Object(params),
                // ext-tasks "Streamable HTTP: Routing Headers": `Mcp-Name`
                // is the task id the server knows.
                name: Some(&self.task.server_id),
                param_headers: Vec::new(),
                timeout: self.route.pool.request_timeout(),
                notify: None,
            })
            .await;
        match sent {
            Ok(Ok(result)) => Heard::Result(result),
            Ok(Err(e)) => Heard::Error(e),
            Err(e) => Heard::Unreached(e.into_reject()),
        }
    }

    /// The server's answer that is not a result, as the client gets it.
    fn relay_failure(&self, heard: Heard) -> Outgoing {
        match heard {
            Heard::Error(e) => {
                let (status, body, reason) = upstream_error_reply(&self.req.id, e);
                Outgoing::Final {
                    status,
                    body: body.into(),
                    outcome: crate::mrtr::Outcome::Error(reason),
                }
            }
            Heard::Unreached(r) => Outgoing::reject(Some(&self.req.id), &r),
            Heard::Result(_) => Outgoing::reject(
                Some(&self.req.id),
                &Reject::new(Reason::InternalError, "a result taken for a failure"),
            ),
        }
    }

    fn ack(&self) -> Outgoing {
        Outgoing::result(&self.req.id, json!({"resultType": "complete"}))
    }

    /// Ends the task with redmark's own verdict: the server hears
    /// `tasks/cancel` (its questions are never answered), and the task reads
    /// as `ended` from now on.
    async fn end(&self, ended: Ended, outcome: &str) {
        {
            let mut state = self.task.state();
            if state.ended.is_some() {
                return;
            }
            state.ended = Some(EndedAt {
                ended,
                at: std::time::SystemTime::now(),
            });
        }
        self.finished(outcome);
        match self.upstream(Method::TasksCancel, Map::new()).await {
            Heard::Result(_) => {}
            Heard::Error(e) => {
                tracing::warn!(operation = %self.task.operation, code = e.code, "the server refused to cancel a task redmark ended");
            }
            Heard::Unreached(r) => {
                tracing::warn!(operation = %self.task.operation, reason = %r.reason, "the server could not be told to cancel a task redmark ended");
            }
        }
    }
}

/// `params._meta`'s client capabilities as the client declared them, the
/// tasks extension included: on a route that relays tasks the server may
/// answer a declaring client with a task (`upstream_params` withholds it
/// everywhere else).
pub(super) fn declare_tasks(params: &mut Map<String, Value>, req: &ClientRequest) {
    if !tasks::declared_on(&req.ctx) {
        return;
    }
    if let Some(m) = params.get_mut("_meta").and_then(Value::as_object_mut) {
        m.insert(
            meta::CLIENT_CAPABILITIES.into(),
            req.ctx.capabilities.clone(),
        );
    }
}

/// The error object a reject reads as inside a task (`error`).
fn error_value(reject: &Reject) -> Value {
    serde_json::to_value(reject.error_object()).unwrap_or_default()
}

/// Keys redmark gives a question it asks again: the server's key, then
/// `.redmark-` and the asking's number (a form no server is likely to use;
/// one that does anyway ends the task, see `read::guard`), never one the
/// task used before nor one the server uses now.
fn fresh_key(server_key: &str, used: &HashSet<String>, current: &Map<String, Value>) -> String {
    (2u32..)
        .map(|n| format!("{server_key}.redmark-{n}"))
        .find(|k| !used.contains(k) && !current.contains_key(k))
        .unwrap_or_else(|| format!("{server_key}.redmark"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_red_marked_question_gets_a_key_the_task_never_used() {
        let mut used = HashSet::new();
        let current =
            serde_json::from_value::<Map<String, Value>>(json!({"a": {}, "a.redmark-2": {}}))
                .unwrap();
        // The server's own `a.redmark-2` is outstanding: not that one.
        assert_eq!(fresh_key("a", &used, &current), "a.redmark-3");
        used.insert("a.redmark-3".to_owned());
        assert_eq!(fresh_key("a", &used, &current), "a.redmark-4");
        assert_eq!(fresh_key("b", &used, &current), "b.redmark-2");
    }

    #[test]
    fn the_task_extension_is_declared_to_the_server_only_as_the_client_declared_it() {
        use crate::protocol::ClientParams;
        let declared = json!({"elicitation": {}, "extensions": {tasks::EXTENSION: {}}});
        for (caps, expected) in [
            (declared.clone(), declared),
            (json!({}), json!("untouched")),
        ] {
            let ctx = crate::protocol::RequestContext {
                protocol_version: "2026-07-28".into(),
                capabilities: caps,
                client_info: None,
                log_level: None,
                progress_token: None,
                profile: crate::protocol::profile::Profile::default(),
                traceparent: None,
                tracestate: None,
                access: Default::default(),
            };
            let req = ClientRequest::new(
                crate::jsonrpc::Id::Number(1),
                Method::TasksGet,
                ClientParams::default(),
                ctx,
                Vec::new(),
            );
            let mut params = Map::new();
            params.insert(
                "_meta".into(),
                json!({meta::CLIENT_CAPABILITIES: "untouched"}),
            );
            declare_tasks(&mut params, &req);
            assert_eq!(params["_meta"][meta::CLIENT_CAPABILITIES], expected);
        }
    }
}
