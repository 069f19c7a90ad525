//! A call to a native 2026-07-28 server: relayed statelessly, and the
//! server's own `InputRequiredResult` held to the same policy as a converted
//! push. Each of its `inputRequests` is guarded before the client sees it
//! (under the server's own key), the server's `requestState` is wrapped in
//! redmark's sealed state together with the questions (so any replica can
//! validate the retry, with no shared store), and on the retry every answer
//! is checked (schema, field rules, CEL authz) before the server sees it. An
//! invalid answer is asked again by redmark itself, without the server.
//!
//! spec 2026-07-28 basic/patterns/mrtr.mdx "Server Requirements": "servers
//! MUST treat `requestState` as an attacker-controlled input": the server's
//! state rides sealed (AEAD) inside redmark's, bound to principal, request
//! and expiry, and each round's state is used once.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::Engine;
use super::convert::{self, Kind, Question};
use super::ending::Ending;
use super::operation::questions::{Answered, Asker, Checked, check_answer, question_record};
use super::operation::relayable;
use super::operation::spans::{record_error, root_span, round_trip_span};
use super::outgoing::Outgoing;
use super::resume::{consume, input_responses, verify};
use super::state::{
    CLAIMS_VERSION, Claims, NATIVE, Wrapped, WrappedAsk, principal_digest, request_digest,
};
use crate::config::MissingCapability;
use crate::jsonrpc::{Id, code};
use crate::policy::Policy;
use crate::policy::answer::Subject;
use crate::policy::guard::{self, Verdict};
use crate::protocol::shape::Stamp;
use crate::protocol::{ClientRequest, IntoReject, Principal, Reason, Reject, meta};
use crate::route::Route;
use crate::telemetry::audit::{Origin, Outcome};
use crate::telemetry::traces;
use crate::upstream::native::{NativeRequest, headers, request_meta};
use crate::upstream::pool::PoolKey;

/// Notifications (and the final answer) queued for the client at most; one
/// slot stays free for the answer, so a client that does not read loses
/// notifications, never the answer, and never holds the call.
const QUEUE: usize = 64;

/// Starts one round of a call to a native server: what it sends the client
/// (the notifications the server streams, then the one answer) arrives on
/// the receiver. A client that goes away stops the round (dropping its
/// request to the server, as when the call ran in the client's own task).
pub fn start(
    engine: Arc<Engine>,
    route: Arc<Route>,
    principal: Principal,
    req: ClientRequest,
) -> mpsc::Receiver<Outgoing> {
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(async move {
        let to_client = tx.clone();
        tokio::select! {
            out = call(engine, route, principal, req, Some(to_client)) => {
                let _ = tx.send(out).await;
            }
            () = tx.closed() => {}
        }
    });
    rx
}

/// One round of a call to a native server, from the client's request to the
/// one answer it gets; request-scoped notifications the server streams go
/// to `to_client` as they arrive.
pub async fn call(
    engine: Arc<Engine>,
    route: Arc<Route>,
    principal: Principal,
    req: ClientRequest,
    to_client: Option<mpsc::Sender<Outgoing>>,
) -> Outgoing {
    let target = req.target().to_owned();
    let retry = req.is_retry();
    let opened = if retry {
        match open(&engine, &route, &principal, &req).await {
            Ok(c) => Some(c),
            Err(r) => return Outgoing::reject(Some(&req.id), &r),
        }
    } else {
        None
    };
    let op_id = opened
        .as_ref()
        .map_or_else(super::operation::operation_id, |c| c.op.clone());
    let round = opened.as_ref().map_or(0, |c| c.rd);
    let parent = opened.as_ref().and_then(|c| c.tc.clone());
    let root = root_span(&route.name, &req, &target, &op_id, parent.as_deref());
    let span = round_trip_span(
        &root,
        req.method,
        &target,
        &req.id,
        round + 1,
        &req.ctx.protocol_version,
    );
    req.ctx
        .access
        .note(&op_id, round + 1, traces::trace_id(&root).as_deref());
    let mut run = Run {
        trace_id: traces::trace_id(&root),
        tc: parent.or_else(|| traces::traceparent(&root)),
        engine,
        policy: route.policy.current(),
        arguments: req.params.get("arguments").cloned().unwrap_or(Value::Null),
        route,
        principal,
        target,
        op_id,
        round,
        root,
        declined: false,
        cancelled: false,
        relayed: 0,
        to_client,
    };
    let out = match opened {
        Some(claims) => run.retry(&req, claims).await,
        None => run.forward(&req, None, Map::new(), 0).await,
    };
    if let Outgoing::Final {
        outcome: super::Outcome::Error(reason),
        ..
    } = &out
    {
        record_error(&span, reason.as_str());
    }
    out
}

/// A retry's state, opened and checked like any other (malformed, key,
/// seal, expiry, principal, request), then used once.
async fn open(
    engine: &Engine,
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
) -> Result<Claims, Reject> {
    let claims = verify(engine, route, principal, req)?;
    if !claims.is_native() || claims.nat.is_none() {
        return Err(Reject::new(
            Reason::OperationUnknown,
            "this requestState is from before the route's server answered natively; call again without requestState",
        )
        .with("operation", claims.op.clone()));
    }
    input_responses(&req.params)?;
    consume(engine, &claims).await?;
    Ok(claims)
}

struct Run {
    engine: Arc<Engine>,
    route: Arc<Route>,
    policy: Arc<Policy>,
    principal: Principal,
    target: String,
    arguments: Value,
    op_id: String,
    round: u32,
    root: tracing::Span,
    trace_id: Option<String>,
    /// The operation's trace context, sealed into every state.
    tc: Option<String>,
    declined: bool,
    cancelled: bool,
    /// Retries redmark sent the server itself (declines on the user's
    /// behalf), bounded with the client's rounds by `max_rounds`.
    relayed: u32,
    to_client: Option<mpsc::Sender<Outgoing>>,
}

impl Run {
    fn stamp(&self) -> Stamp {
        self.route.stamp(&self.route.native.server_info())
    }

    /// Ends the operation: metrics, span, log, and the client's reply.
    fn end(&self, req: &ClientRequest, ending: &Ending) -> Outgoing {
        let outcome = ending.outcome();
        self.root.record("redmark.outcome", outcome);
        self.root.record("redmark.rounds", i64::from(self.round));
        if ending.is_failure() {
            record_error(&self.root, outcome);
        }
        if let Some(reason) = ending.policy_reason() {
            self.engine.metrics.record_policy_rejection(
                &self.route.name,
                &self.target,
                reason.as_str(),
            );
        }
        self.engine
            .metrics
            .record_rounds(&self.route.name, &self.target, self.round);
        self.engine
            .metrics
            .record_operation(&self.route.name, &self.target, outcome);
        // At INFO only when a question was asked (see `Operation::finish`).
        macro_rules! ended {
            ($level:expr) => {
                tracing::event!($level, operation = %self.op_id, trace_id = self.trace_id.as_deref(), route = %self.route.name, tool = %self.target, outcome, rounds = self.round, mode = "native", "operation ended")
            };
        }
        if self.round > 0 {
            ended!(tracing::Level::INFO);
        } else {
            ended!(tracing::Level::DEBUG);
        }
        match ending {
            // The server's own result, with its own caching hints.
            Ending::Completed { result, .. } => {
                let mut result = result.clone().into_value();
                if let Some(o) = result.as_object_mut() {
                    o.entry("resultType").or_insert_with(|| "complete".into());
                }
                Outgoing::result(&req.id, result)
            }
            other => other
                .reply(req.method, &req.id, &self.stamp())
                .unwrap_or_else(|| {
                    Outgoing::reject(
                        Some(&req.id),
                        &Reject::new(
                            Reason::InternalError,
                            "the operation ended without an answer",
                        ),
                    )
                }),
        }
    }

    /// A retry: every answer held to the policy; the invalid ones asked
    /// again from here, the rest (with the server's own state) forwarded.
    async fn retry(&mut self, req: &ClientRequest, claims: Claims) -> Outgoing {
        let Some(wrapped) = claims.nat else {
            return Outgoing::reject(
                Some(&req.id),
                &Reject::new(Reason::StateMalformed, "no native state"),
            );
        };
        let responses = input_responses(&req.params).unwrap_or_default();
        // Input requests are bound to the capabilities of the request that carries them.
        for ask in &wrapped.q {
            if let Some(q) = question(ask)
                && !convert::covered(&req.ctx.profile, &q)
            {
                let r = Ending::MissingCapability(q.needs.to_value()).reject();
                if let Some(r) = r {
                    return Outgoing::reject(Some(&req.id), &r);
                }
            }
        }
        let subject = Subject {
            principal: &self.principal,
            tool: &self.target,
            arguments: &self.arguments,
        };
        let mut checked = Vec::new();
        for ask in &wrapped.q {
            let Some(q) = question(ask) else { continue };
            let Some(given) = responses.get(&ask.k) else {
                checked.push((ask, q, None));
                continue;
            };
            match convert::answer(&q, given) {
                Ok(a) => {
                    let verdict = check_answer(&self.policy, &subject, &q, a);
                    checked.push((ask, q, Some(verdict)));
                }
                Err(e) => {
                    let r = Reject::new(Reason::MalformedInputResponse, e.to_string())
                        .with("key", e.key.clone());
                    return Outgoing::reject(Some(&req.id), &r);
                }
            }
        }
        let mut ok = wrapped.ok.clone();
        let mut again = Vec::new();
        for (ask, q, verdict) in checked {
            match verdict {
                // Not answered: asked again, as the server would.
                None => again.push(ask.clone()),
                Some(Checked::Deliver(answer)) => {
                    self.note(&answer);
                    self.audit(
                        &q,
                        outcome_of(&answer),
                        "ok",
                        Some(ask.at),
                        Some(&answer),
                        None,
                    );
                    ok.insert(ask.k.clone(), answer);
                }
                Some(Checked::Reask { field, rule, mark }) => {
                    self.engine.metrics.record_policy_rejection(
                        &self.route.name,
                        &self.target,
                        "policy_invalid_answer",
                    );
                    tracing::info!(operation = %self.op_id, trace_id = self.trace_id.as_deref(), key = %ask.k, field = %field, rule = %rule, "answer broke a rule; asking again with a red mark (native)");
                    self.audit(
                        &q,
                        Outcome::Invalid,
                        "policy_invalid_answer",
                        Some(ask.at),
                        None,
                        Some(&rule),
                    );
                    let mut marked = q;
                    marked.base_message.clone_from(&ask.msg);
                    marked.reasks = ask.rk;
                    marked.mark(&mark);
                    let mut r = ask.r.clone();
                    if let (Some(p), Some(m)) = (
                        r.get_mut("params").and_then(Value::as_object_mut),
                        marked.request().pointer("/params/message").cloned(),
                    ) {
                        p.insert("message".into(), m);
                    }
                    again.push(WrappedAsk {
                        k: ask.k.clone(),
                        r,
                        msg: ask.msg.clone(),
                        rk: marked.reasks,
                        at: self.engine.clock.unix_now_ms(),
                    });
                }
                Some(Checked::End(ending)) => {
                    let (outcome, verdict) = ending.question_verdict();
                    self.audit(&q, outcome, verdict, Some(ask.at), None, None);
                    return self.end(req, &ending);
                }
            }
        }
        if !again.is_empty() {
            let next = Wrapped {
                s: wrapped.s.clone(),
                q: again,
                ok,
                n: wrapped.n,
            };
            let meta = json!({meta::SERVER_INFO: Value::clone(&self.route.native.server_info())});
            return self.ask(req, next, meta);
        }
        self.forward(req, wrapped.s.clone(), ok, wrapped.n).await
    }

    /// Sends the call (with validated answers and the server's own state on a
    /// retry) and handles what the server answers.
    async fn forward(
        &mut self,
        req: &ClientRequest,
        server_state: Option<String>,
        answers: Map<String, Value>,
        asked: u32,
    ) -> Outgoing {
        let mut params = upstream_params(req, Some(&self.root));
        if self.route.on_missing_capability == MissingCapability::Decline {
            declare_elicitation(&mut params);
        }
        if !answers.is_empty() {
            params.insert("inputResponses".into(), Value::Object(answers));
        }
        if let Some(s) = server_state {
            params.insert("requestState".into(), Value::String(s));
        }
        let tool = self
            .route
            .catalog
            .tools(&PoolKey {
                principal: self.principal.name.clone(),
                profile: req.ctx.profile,
            })
            .and_then(|t| t.get(&self.target).cloned());
        let param_headers = tool
            .as_ref()
            .and_then(|t| t.definition.get("inputSchema"))
            .map(|schema| headers::mirrored(schema, req.arguments()))
            .unwrap_or_default();
        let (ntx, mut nrx) = mpsc::channel(QUEUE);
        let (route, target) = (self.route.clone(), self.target.clone());
        let sent = {
            let request = route.native.request(NativeRequest {
                method: req.method.as_str(),
                params: Value::Object(params),
                name: Some(&target),
                param_headers,
                timeout: route.pool.call_timeout(),
                notify: self.to_client.as_ref().map(|_| ntx),
            });
            tokio::pin!(request);
            loop {
                tokio::select! {
                    sent = &mut request => break sent,
                    Some(n) = nrx.recv() => self.relay(req, n),
                }
            }
        };
        // What the server sent before its answer goes first.
        while let Ok(n) = nrx.try_recv() {
            self.relay(req, n);
        }
        match sent {
            Err(e) => {
                let reject = e.into_reject();
                self.engine.metrics.record_operation(
                    &self.route.name,
                    &self.target,
                    reject.reason.as_str(),
                );
                record_error(&self.root, reject.reason.as_str());
                Outgoing::reject(Some(&req.id), &reject)
            }
            // The server checked the capability itself (spec basic/index.mdx
            // "_meta"): the client hears redmark's own -32021, with what is needed.
            Ok(Err(e)) if e.code == code::MISSING_REQUIRED_CLIENT_CAPABILITY => {
                let needs = e
                    .data
                    .as_ref()
                    .and_then(|d| d.get("requiredCapabilities"))
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                self.end(req, &Ending::MissingCapability(needs))
            }
            Ok(Err(e)) => self.end(req, &Ending::UpstreamError(e)),
            Ok(Ok(result)) => {
                if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
                    Box::pin(self.questions(req, result, asked)).await
                } else {
                    let ending = Ending::Completed {
                        result: result.into(),
                        declined: self.declined,
                        cancelled: self.cancelled,
                    };
                    self.end(req, &ending)
                }
            }
        }
    }

    /// The server asked: each input request guarded, then all of them put
    /// to the client under the server's keys, with redmark's state.
    async fn questions(&mut self, req: &ClientRequest, result: Value, mut asked: u32) -> Outgoing {
        if self.round + self.relayed >= self.engine.max_rounds {
            return self.end(req, &Ending::RoundsExhausted(self.engine.max_rounds));
        }
        let requests = result
            .get("inputRequests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut asks = Vec::new();
        // Declined on the user's behalf (`on_missing_capability = "decline"`).
        let mut declined = Map::new();
        let now = self.engine.clock.unix_now_ms();
        for (key, request) in requests {
            let method = request
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let params = request.get("params").cloned();
            let Ok(mut q) = convert::question(Id::Number(0), method, params.clone()) else {
                let r = Reject::new(
                    Reason::NotRelayed,
                    format!(
                        "the server asked `{method}`, which is not an input request redmark relays"
                    ),
                )
                .with("key", key.clone());
                self.engine.metrics.record_operation(
                    &self.route.name,
                    &self.target,
                    r.reason.as_str(),
                );
                return Outgoing::reject(Some(&req.id), &r);
            };
            q.key.clone_from(&key);
            asked += 1;
            let params = params.unwrap_or(Value::Null);
            match guard::check(&self.policy, &self.target, method, &params, asked as usize) {
                Verdict::Ask => {}
                Verdict::Refuse(r) => {
                    tracing::warn!(operation = %self.op_id, trace_id = self.trace_id.as_deref(), tool = %self.target, key = %key, reason = %r.reason, "a native server's question refused by policy");
                    self.audit(&q, Outcome::Refused, r.reason.as_str(), None, None, None);
                    return self.end(
                        req,
                        &Ending::PolicyRefused {
                            reason: r.reason,
                            field: r.field,
                            message: r.message,
                        },
                    );
                }
                Verdict::ModelOwned { field, guidance } => {
                    return self.end(req, &Ending::ModelOwned { field, guidance });
                }
            }
            // spec 2026-07-28 mrtr.mdx "Server Requirements": never send an input
            // request the client has not declared support for.
            if !convert::covered(&req.ctx.profile, &q) {
                if q.kind == Kind::Elicitation
                    && self.route.on_missing_capability == MissingCapability::Decline
                {
                    tracing::info!(operation = %self.op_id, trace_id = self.trace_id.as_deref(), key = %key, "client lacks the capability; declined on the user's behalf as configured (native)");
                    self.declined = true;
                    // As a converted question's: never put to a person.
                    let verdict = Reason::MissingCapability.as_str();
                    self.audit(&q, Outcome::Refused, verdict, None, None, None);
                    declined.insert(key, json!({"action": "decline"}));
                    continue;
                }
                let verdict = Reason::MissingCapability.as_str();
                self.audit(&q, Outcome::Refused, verdict, None, None, None);
                return self.end(req, &Ending::MissingCapability(q.needs.to_value()));
            }
            asks.push(WrappedAsk {
                k: key,
                r: request.clone(),
                msg: q.base_message.clone(),
                rk: 0,
                at: now,
            });
        }
        let server_state = result
            .get("requestState")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if asks.is_empty() && !declined.is_empty() {
            // Nothing left for the client: the server hears the declines at
            // once, with its own state, and the client only its final answer.
            self.relayed += 1;
            return self.forward(req, server_state, declined, asked).await;
        }
        if asks.is_empty() {
            return self.end(
                req,
                &Ending::UpstreamError(crate::jsonrpc::ErrorObject::new(
                    code::INTERNAL_ERROR,
                    "the server answered input_required without inputRequests",
                )),
            );
        }
        let wrapped = Wrapped {
            s: server_state,
            q: asks,
            ok: declined,
            n: asked,
        };
        let meta = result.get("_meta").cloned().unwrap_or_else(|| json!({}));
        self.ask(req, wrapped, meta)
    }

    /// An `InputRequiredResult` of redmark's: the questions of `wrapped`, and
    /// `wrapped` sealed as the state the retry presents.
    fn ask(&mut self, req: &ClientRequest, wrapped: Wrapped, meta: Value) -> Outgoing {
        self.round += 1;
        let requests: Map<String, Value> = wrapped
            .q
            .iter()
            .map(|a| (a.k.clone(), a.r.clone()))
            .collect();
        let claims = Claims {
            v: CLAIMS_VERSION,
            op: self.op_id.clone(),
            node: self.engine.node.clone(),
            addr: None,
            pr: principal_digest(&self.route.name, &self.principal.name),
            exp: (self.engine.clock.unix_now() + self.engine.ttl).as_secs(),
            rq: request_digest(&self.route.name, req.method.as_str(), &req.params),
            rd: self.round,
            m: NATIVE.into(),
            tc: self.tc.clone(),
            ans: Vec::new(),
            ask: Vec::new(),
            nat: Some(Box::new(wrapped)),
        };
        let state = match self.engine.keys.seal_bounded(&claims) {
            Ok(s) => s,
            Err(e) => {
                return self.end(
                    req,
                    &Ending::StateTooLarge {
                        len: e.len,
                        max: e.max,
                    },
                );
            }
        };
        let keys: Vec<&str> = requests.keys().map(String::as_str).collect();
        tracing::info!(operation = %self.op_id, trace_id = self.trace_id.as_deref(), route = %self.route.name, tool = %self.target, round = self.round, keys = ?crate::telemetry::logging::json(&keys), mode = "native", "asking the client");
        self.root.record("redmark.outcome", "input_required");
        self.root.record("redmark.rounds", i64::from(self.round));
        let mut out = json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": state,
        });
        if let (Some(o), Value::Object(m)) = (out.as_object_mut(), meta)
            && !m.is_empty()
        {
            o.insert("_meta".into(), Value::Object(m));
        }
        Outgoing::result(&req.id, out)
    }

    /// A notification the server sent on the call's response stream, to the
    /// client when it is for it (spec 2026-07-28 progress.mdx and
    /// logging.mdx: progress under the client's own token, log messages at
    /// or above the level it asked for), exactly as for a legacy server.
    fn relay(&self, req: &ClientRequest, n: Value) {
        let Some(tx) = &self.to_client else { return };
        let method = n.get("method").and_then(Value::as_str).unwrap_or_default();
        let params = n.get("params").cloned().filter(|p| !p.is_null());
        let Some(n) = relayable(&req.ctx, req.ctx.progress_token.as_ref(), method, params) else {
            return;
        };
        // One slot stays free for the answer.
        if tx.capacity() > 1 {
            let _ = tx.try_send(Outgoing::Notification(n));
        }
    }

    fn note(&mut self, answer: &Value) {
        match answer.get("action").and_then(Value::as_str) {
            Some("decline") => self.declined = true,
            Some("cancel") => self.cancelled = true,
            _ => {}
        }
    }

    /// One audit line per question's ending (and per re-asked attempt), as for
    /// converted questions, with `origin: native`.
    fn audit(
        &self,
        q: &Question,
        outcome: Outcome,
        verdict: &str,
        asked_at_ms: Option<u64>,
        answer: Option<&Value>,
        reask_rule: Option<&str>,
    ) {
        let answer_ms = asked_at_ms
            .filter(|_| answer.is_some() || reask_rule.is_some())
            .map(|at| self.engine.clock.unix_now_ms().saturating_sub(at));
        if let Some(ms) = answer_ms.filter(|_| answer.is_some()) {
            #[allow(clippy::cast_precision_loss)]
            self.engine
                .metrics
                .record_answer(&self.route.name, &self.target, ms as f64 / 1000.0);
        }
        if !self.engine.audit.is_enabled() {
            return;
        }
        let asker = Asker {
            route: &self.route.name,
            tool: &self.target,
            principal: &self.principal.name,
            operation: &self.op_id,
            arguments: &self.arguments,
            trace_id: self.trace_id.as_deref(),
        };
        self.engine.audit.record(question_record(
            &asker,
            q,
            Answered {
                outcome,
                verdict,
                answer_ms,
                answer,
                reask_rule,
            },
            Some(Origin::Native),
        ));
    }
}

/// The params of `req` as a native server gets them: no `inputResponses`
/// or `requestState` of the client's (answers given in advance on a fresh
/// call were never held to the policy: the server asks, and its questions
/// go through the guard), and a `_meta` with the protocol version, the
/// client's capabilities and info, and the client's other `_meta` keys
/// (progress token, extensions); `traceparent` from `span` when traced.
pub fn upstream_params(req: &ClientRequest, span: Option<&tracing::Span>) -> Map<String, Value> {
    let mut params = req.params.clone();
    params.remove("inputResponses");
    params.remove("requestState");
    let mut m = request_meta(&req.ctx.capabilities, req.ctx.client_info.as_ref());
    if let Some(o) = m.as_object_mut() {
        if let Some(Value::Object(client)) = req.params.get("_meta") {
            for (k, v) in client {
                o.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        if let Some(tp) = span.and_then(traces::traceparent) {
            o.insert("traceparent".into(), Value::String(tp));
        }
    }
    params.insert("_meta".into(), m);
    params
}

/// With `on_missing_capability = "decline"` redmark can answer any form
/// question itself (it declines for the user), so the server hears form
/// elicitation declared for a client that declared no elicitation at all.
/// The client still never receives the question (see `questions`).
fn declare_elicitation(params: &mut Map<String, Value>) {
    if let Some(caps) = params
        .get_mut("_meta")
        .and_then(|m| m.get_mut(meta::CLIENT_CAPABILITIES))
        .and_then(Value::as_object_mut)
    {
        caps.entry("elicitation")
            .or_insert_with(|| json!({"form": {}}));
    }
}

/// A wrapped question as a [`Question`] the policy can hold answers to.
fn question(ask: &WrappedAsk) -> Option<Question> {
    let method = ask.r.get("method").and_then(Value::as_str)?;
    let mut q = convert::question(Id::Number(0), method, ask.r.get("params").cloned()).ok()?;
    q.key.clone_from(&ask.k);
    q.reasks = ask.rk;
    Some(q)
}

fn outcome_of(answer: &Value) -> Outcome {
    match answer.get("action").and_then(Value::as_str) {
        Some("decline") => Outcome::Declined,
        Some("cancel") => Outcome::Cancelled,
        _ => Outcome::Accepted,
    }
}

/// Whether the route's server speaks 2026-07-28 natively (asking it once under `auto`).
pub async fn is_native(route: &Route) -> bool {
    route.native.is_native().await
}
