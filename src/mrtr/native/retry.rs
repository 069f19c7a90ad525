//! A retry of a native call: redmark's sealed state opened and used once,
//! then every answer checked (shape, field rules, CEL authz) before the
//! server sees it; an invalid answer is asked again by redmark itself.

use serde_json::{Value, json};

use super::Run;
use crate::mrtr::Engine;
use crate::mrtr::convert::{self, Question};
use crate::mrtr::ending::Ending;
use crate::mrtr::operation::questions::{Checked, check_answer};
use crate::mrtr::outgoing::Outgoing;
use crate::mrtr::resume::{consume, input_responses, verify};
use crate::mrtr::state::{Claims, Wrapped, WrappedAsk};
use crate::policy::answer::Subject;
use crate::protocol::{ClientRequest, Principal, Reason, Reject, meta};
use crate::route::Route;
use crate::telemetry::audit::Outcome;

/// A retry's state, opened and checked like any other (malformed, key,
/// seal, expiry, principal, request), then used once.
pub(super) async fn open(
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
impl Run {
    /// A retry: every answer held to the policy; the invalid ones asked
    /// again from here, the rest (with the server's own state) forwarded.
    pub(super) async fn retry(&mut self, req: &ClientRequest, claims: Claims) -> Outgoing {
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
                    self.remembering().keep(&q, &answer).await;
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
                        of: ask.of.clone(),
                        nw: ask.nw.clone(),
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
}

/// A wrapped question as a [`Question`] the policy can hold answers to.
fn question(ask: &WrappedAsk) -> Option<Question> {
    let mut q = convert::input_request(&ask.k, &ask.r)?;
    q.reasks = ask.rk;
    // The defaults offered are in the question as asked; `of` names ours.
    q.recall_offered(&ask.of);
    // The narrowing is in the question as asked; `nw` names its fields.
    q.narrowed.clone_from(&ask.nw);
    Some(q)
}

fn outcome_of(answer: &Value) -> Outcome {
    match answer.get("action").and_then(Value::as_str) {
        Some("decline") => Outcome::Declined,
        Some("cancel") => Outcome::Cancelled,
        _ => Outcome::Accepted,
    }
}
