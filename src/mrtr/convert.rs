//! Conversion between a legacy server's pushed requests and 2026-07-28 input
//! requests: which pushes can be asked, what capability each needs, the
//! stable keys they are asked under, and which answers are well formed.

use serde_json::{Map, Value, json};

use crate::jsonrpc::Id;
use crate::protocol::profile::Profile;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Elicitation,
    Sampling,
    Roots,
}

impl Kind {
    pub fn key_prefix(self) -> &'static str {
        match self {
            Kind::Elicitation => "elicitation",
            Kind::Sampling => "sampling",
            Kind::Roots => "roots",
        }
    }
}

/// A question the server asked, held until the client answers it.
#[derive(Debug, Clone)]
pub struct Question {
    pub key: String,
    /// The id of the server's pushed request: the answer goes back under it.
    pub upstream_id: Id,
    pub kind: Kind,
    pub url_mode: bool,
    /// The 2026-07-28 `InputRequest` (`{method, params}`).
    pub request: Value,
    /// `requiredCapabilities` when the client cannot answer it.
    pub needs: Value,
    /// The server's own message, before any red mark.
    pub base_message: Option<String>,
    /// How many times it was asked again after an invalid answer.
    pub reasks: u32,
    /// Method, message and requested schema as the server asked them
    /// ([`crate::mrtr::state::fingerprint`]): replay mode gives a collected
    /// answer again only to the question it was given for.
    pub fingerprint: String,
    /// When the server asked it.
    pub asked_at: tokio::time::Instant,
    /// Its span, from the push to the answer.
    pub span: tracing::Span,
}

impl Question {
    /// Asks again with a red mark: the server's message, then what was wrong.
    pub fn mark(&mut self, mark: &str) {
        self.reasks += 1;
        let base = self.base_message.clone().unwrap_or_default();
        if let Some(params) = self
            .request
            .get_mut("params")
            .and_then(Value::as_object_mut)
        {
            params.insert(
                "message".into(),
                Value::String(format!("{base}\n\n✗ {mark}.")),
            );
        }
    }

    /// The form's `requestedSchema` (form-mode elicitation only).
    pub fn schema(&self) -> Option<&Value> {
        (self.kind == Kind::Elicitation && !self.url_mode)
            .then(|| {
                self.request
                    .get("params")
                    .and_then(|p| p.get("requestedSchema"))
            })
            .flatten()
    }
}

/// The server pushed something that is not a question a client can answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a request redmark can put to a 2026-07-28 client")]
pub struct NotAQuestion(pub String);

/// Reads a pushed request as a question (its key is assigned by the caller).
pub fn question(
    upstream_id: Id,
    method: &str,
    params: Option<Value>,
) -> Result<Question, NotAQuestion> {
    let mut params = match params {
        Some(Value::Object(p)) => p,
        None => Map::new(),
        Some(_) => return Err(NotAQuestion(method.to_owned())),
    };
    // Legacy-only members: `_meta` (progress tokens of the server's own
    // request), `task` (moved to the tasks extension) and URL mode's
    // `elicitationId` (2026-07-28 correlates through requestState instead).
    params.remove("_meta");
    params.remove("task");
    let (kind, url_mode, needs) = match method {
        "elicitation/create" => {
            params.remove("elicitationId");
            let url = params.get("mode").and_then(Value::as_str) == Some("url");
            let needs = if url {
                json!({"elicitation": {"url": {}}})
            } else {
                json!({"elicitation": {"form": {}}})
            };
            (Kind::Elicitation, url, needs)
        }
        "sampling/createMessage" => {
            let needs = if params.contains_key("tools") {
                json!({"sampling": {"tools": {}}})
            } else {
                json!({"sampling": {}})
            };
            (Kind::Sampling, false, needs)
        }
        "roots/list" => (Kind::Roots, false, json!({"roots": {}})),
        other => return Err(NotAQuestion(other.to_owned())),
    };
    let base_message = params
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned);
    // Built by hand, not with `json!`, which would serialise `params` into a copy.
    let mut request = Map::with_capacity(2);
    request.insert("method".into(), method.into());
    if kind != Kind::Roots || !params.is_empty() {
        request.insert("params".into(), Value::Object(params));
    }
    let request = Value::Object(request);
    Ok(Question {
        key: String::new(),
        upstream_id,
        kind,
        url_mode,
        request,
        needs,
        base_message,
        reasks: 0,
        // Set by the caller that compares them (replay mode): a SHA-256
        // over canonical JSON that a hold-mode question never needs.
        fingerprint: String::new(),
        asked_at: tokio::time::Instant::now(),
        span: tracing::Span::none(),
    })
}

impl Kind {
    /// The name a replay-mode state records a question's kind under
    /// (`url` for URL-mode elicitation).
    pub fn label(self, url_mode: bool) -> &'static str {
        match self {
            Kind::Elicitation if url_mode => "url",
            other => other.key_prefix(),
        }
    }

    /// [`Kind::label`] read back: the kind and whether it is URL mode.
    pub fn from_label(label: &str) -> Option<(Kind, bool)> {
        match label {
            "elicitation" => Some((Kind::Elicitation, false)),
            "url" => Some((Kind::Elicitation, true)),
            "sampling" => Some((Kind::Sampling, false)),
            "roots" => Some((Kind::Roots, false)),
            _ => None,
        }
    }
}

impl Question {
    /// A question known only by its key and kind (a replay-mode round's
    /// state): enough to check an answer's shape before the round is used.
    pub fn recorded(key: &str, kind: Kind, url_mode: bool) -> Question {
        Question {
            key: key.to_owned(),
            upstream_id: Id::Number(0),
            kind,
            url_mode,
            request: Value::Null,
            needs: Value::Null,
            base_message: None,
            reasks: 0,
            fingerprint: String::new(),
            asked_at: tokio::time::Instant::now(),
            span: tracing::Span::none(),
        }
    }
}

/// spec 2026-07-28 mrtr.mdx "Server Requirements": "Servers MUST NOT send an
/// `inputRequests` that the client has not declared support for".
pub fn covered(profile: &Profile, q: &Question) -> bool {
    match q.kind {
        Kind::Elicitation if q.url_mode => profile.elicitation_url,
        Kind::Elicitation => profile.elicitation_form,
        Kind::Sampling => {
            profile.sampling
                && (profile.sampling_tools || q.needs["sampling"].get("tools").is_none())
        }
        Kind::Roots => profile.roots,
    }
}

/// Names questions: the route's names for this tool first (`keys = [...]`),
/// then `elicitation-1`, `sampling-1`, `roots-1`, ... in order.
#[derive(Debug, Default)]
pub struct KeyNamer {
    names: Vec<String>,
    asked: usize,
    counts: [usize; 3],
}

impl KeyNamer {
    pub fn new(names: Vec<String>) -> Self {
        Self {
            names,
            ..Self::default()
        }
    }

    pub fn next(&mut self, kind: Kind) -> String {
        let slot = match kind {
            Kind::Elicitation => 0,
            Kind::Sampling => 1,
            Kind::Roots => 2,
        };
        self.counts[slot] += 1;
        let named = self.names.get(self.asked).cloned();
        self.asked += 1;
        named.unwrap_or_else(|| format!("{}-{}", kind.key_prefix(), self.counts[slot]))
    }
}

/// Why an answer cannot be given to the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("inputResponses[\"{key}\"]: {why}")]
pub struct Malformed {
    pub key: String,
    pub why: String,
}

/// What the server receives for a question: the client's answer in legacy shape.
pub fn answer(q: &Question, response: &Value) -> Result<Value, Malformed> {
    let bad = |why: &str| Malformed {
        key: q.key.clone(),
        why: why.to_owned(),
    };
    let obj = response
        .as_object()
        .ok_or_else(|| bad("an answer must be a JSON object"))?;
    match q.kind {
        Kind::Elicitation => {
            let action = obj
                .get("action")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("`action` must be \"accept\", \"decline\" or \"cancel\""))?;
            let content = obj.get("content");
            match action {
                "accept" if q.url_mode => {
                    // spec client/elicitation.mdx "Response Actions": for URL mode the content is omitted.
                    if content.is_some_and(|c| !c.is_null()) {
                        return Err(bad("a URL-mode answer carries no `content`"));
                    }
                    Ok(json!({"action": "accept"}))
                }
                "accept" => {
                    let content = content
                        .and_then(Value::as_object)
                        .ok_or_else(|| bad("`accept` needs a `content` object"))?;
                    if let Some((field, _)) = content.iter().find(|(_, v)| !is_primitive_answer(v))
                    {
                        return Err(bad(&format!(
                            "`content.{field}` must be a string, number, boolean or list of strings"
                        )));
                    }
                    Ok(json!({"action": "accept", "content": content}))
                }
                "decline" | "cancel" => {
                    if content.is_some_and(|c| !c.is_null()) {
                        return Err(bad(&format!("`{action}` carries no `content`")));
                    }
                    Ok(json!({"action": action}))
                }
                other => Err(bad(&format!(
                    "unknown action `{other}`; use \"accept\", \"decline\" or \"cancel\""
                ))),
            }
        }
        Kind::Sampling => {
            for field in ["role", "content", "model"] {
                if obj.get(field).is_none_or(Value::is_null) {
                    return Err(bad(&format!("a sampling answer needs `{field}`")));
                }
            }
            Ok(response.clone())
        }
        Kind::Roots => {
            let roots = obj
                .get("roots")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("a roots answer needs a `roots` list"))?;
            if roots
                .iter()
                .any(|r| r.get("uri").and_then(Value::as_str).is_none())
            {
                return Err(bad("every root needs a `uri`"));
            }
            Ok(response.clone())
        }
    }
}

fn is_primitive_answer(v: &Value) -> bool {
    match v {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => true,
        Value::Array(items) => items.iter().all(Value::is_string),
        _ => false,
    }
}

/// What the server hears when nobody will answer (expiry, rounds exhausted,
/// a capability the client lacks): `cancel` for elicitation, an error otherwise.
pub fn abandon(q: &Question, why: &str) -> Result<Value, crate::jsonrpc::ErrorObject> {
    match q.kind {
        Kind::Elicitation => Ok(json!({"action": "cancel"})),
        _ => Err(crate::jsonrpc::ErrorObject::new(
            crate::jsonrpc::code::INTERNAL_ERROR,
            why.to_owned(),
        )),
    }
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
