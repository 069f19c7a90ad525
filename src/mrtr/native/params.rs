//! The params a native server gets for a client's request: without the
//! client's own `inputResponses` and `requestState`, and with a `_meta` that
//! tells the server about the client.

use serde_json::{Map, Value, json};

use crate::protocol::{ClientRequest, meta, shape, tasks};
use crate::telemetry::traces;
use crate::upstream::native::request_meta;

/// The params of `req` as a native server gets them: no `inputResponses`,
/// `requestState` or 2025-11-25 `task` of the client's (answers given in
/// advance on a fresh call were never held to the policy: the server asks,
/// and its questions go through the guard), and a `_meta` with the protocol
/// version, the client's capabilities (but the tasks extension) and info,
/// and the client's other `_meta` keys (progress token, extensions);
/// `traceparent` from `span` when traced.
pub fn upstream_params(req: &ClientRequest, span: Option<&tracing::Span>) -> Map<String, Value> {
    // Not `full_params()`: its `_meta` would be copied only to be replaced.
    let mut params: Map<String, Value> = req
        .params
        .iter()
        .filter(|(k, _)| !shape::is_withheld_member(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if req.arguments.text().is_some() {
        params.insert("arguments".into(), req.arguments.value().clone());
    }
    // Withheld unless the route relays tasks (`task::declare_tasks` puts it
    // back there): a server that heard the client declare it could answer
    // with a task nobody can poll (ext-tasks "Capability Negotiation": a
    // server MAY answer a declaring client so).
    let capabilities = match req.ctx.capabilities.as_object() {
        Some(caps) if tasks::declared(&req.ctx.capabilities) => {
            std::borrow::Cow::Owned(Value::Object(tasks::withheld(caps)))
        }
        _ => std::borrow::Cow::Borrowed(&req.ctx.capabilities),
    };
    let mut m = request_meta(&capabilities, req.ctx.client_info.as_ref());
    if let Some(o) = m.as_object_mut() {
        if let Some(level) = &req.ctx.log_level {
            o.insert(meta::LOG_LEVEL.into(), Value::String(level.clone()));
        }
        for (k, v) in &req.meta {
            o.entry(k.clone()).or_insert_with(|| v.clone());
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
pub(super) fn declare_elicitation(params: &mut Map<String, Value>) {
    if let Some(caps) = params
        .get_mut("_meta")
        .and_then(|m| m.get_mut(meta::CLIENT_CAPABILITIES))
        .and_then(Value::as_object_mut)
    {
        caps.entry("elicitation")
            .or_insert_with(|| json!({"form": {}}));
    }
}
