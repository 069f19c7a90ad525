//! The server asked: each of its `inputRequests` guarded (policy, the
//! client's declared capabilities, declines on the user's behalf) before the
//! client sees it, and the questions sealed with the server's own state into
//! redmark's state, which the client's retry presents.

use serde_json::{Map, Value, json};

use super::Run;
use super::screen::{Screen, Screened};
use crate::jsonrpc::code;
use crate::mrtr::convert::{Kind, Question};
use crate::mrtr::ending::Ending;
use crate::mrtr::outgoing::Outgoing;
use crate::mrtr::remember::Remembering;
use crate::mrtr::state::{
    CLAIMS_VERSION, Claims, NATIVE, Wrapped, WrappedAsk, principal_digest, request_digest,
};
use crate::protocol::{ClientRequest, Reason};
use crate::telemetry::audit::Outcome;

impl Run {
    /// The server asked: each input request guarded, then all of them put
    /// to the client under the server's keys, with redmark's state.
    pub(super) async fn questions(
        &mut self,
        req: &ClientRequest,
        result: Value,
        mut asked: u32,
    ) -> Outgoing {
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
        let (policy, target, op_id) =
            (self.policy.clone(), self.target.clone(), self.op_id.clone());
        let trace_id = self.trace_id.clone();
        let screen = Screen {
            policy: &policy,
            target: &target,
            profile: &req.ctx.profile,
            on_missing_capability: self.route.on_missing_capability,
            operation: &op_id,
            trace_id: trace_id.as_deref(),
        };
        for (key, request) in requests {
            asked += 1;
            let mut q = match screen.screen(&key, &request, asked) {
                Screened::Ask(q) => q,
                Screened::Decline(q) => {
                    self.declined = true;
                    // As a converted question's: never put to a person.
                    let verdict = Reason::MissingCapability.as_str();
                    self.audit(&q, Outcome::Refused, verdict, None, None, None);
                    declined.insert(key, json!({"action": "decline"}));
                    continue;
                }
                Screened::Refused {
                    question,
                    verdict,
                    ending,
                } => {
                    self.audit(&question, Outcome::Refused, verdict, None, None, None);
                    return self.end(req, &ending);
                }
                Screened::NotRelayed(r) => {
                    self.engine.metrics.record_operation(
                        &self.route.name,
                        &self.target,
                        r.reason.as_str(),
                    );
                    return Outgoing::reject(Some(&req.id), &r);
                }
            };
            let mut request = request.clone();
            if q.kind == Kind::Elicitation && !q.url_mode {
                // Narrowed before defaults are offered, as a converted question is.
                q.shape(
                    self.route
                        .shape_questions
                        .then(|| policy.shaping(&target))
                        .flatten(),
                );
                self.remembering().offer(&mut q).await;
                with_offered_schema(&mut request, &q);
            }
            asks.push(WrappedAsk {
                k: key,
                r: request,
                msg: q.base_message.clone(),
                rk: 0,
                at: now,
                of: q.offered.iter().map(|(f, _)| f.clone()).collect(),
                nw: q.narrowed.clone(),
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

    /// This call's remembered answers: its principal's, for its tool.
    pub(super) fn remembering(&self) -> Remembering<'_> {
        Remembering {
            remembered: &self.engine.remembered,
            policy: &self.policy,
            route: &self.route.name,
            principal: &self.principal,
            tool: &self.target,
            arguments: &self.arguments,
        }
    }

    /// An `InputRequiredResult` of redmark's: the questions of `wrapped`, and
    /// `wrapped` sealed as the state the retry presents.
    pub(super) fn ask(&mut self, req: &ClientRequest, wrapped: Wrapped, meta: Value) -> Outgoing {
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
            rq: request_digest(
                &self.route.name,
                req.method.as_str(),
                &req.params,
                req.arguments.value(),
            ),
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
}

/// The server's input request as the client sees it: narrowed by the policy
/// and with the defaults `q` was offered (its `requestedSchema`), the rest
/// exactly the server's.
fn with_offered_schema(request: &mut Value, q: &Question) {
    if q.offered.is_empty() && q.narrowed.is_empty() {
        return;
    }
    if let (Some(schema), Some(params)) = (
        q.schema(),
        request.get_mut("params").and_then(Value::as_object_mut),
    ) {
        params.insert("requestedSchema".into(), schema);
    }
}
