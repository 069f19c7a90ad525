//! Conversion between a legacy server's pushed requests and 2026-07-28 input
//! requests: which pushes can be asked, what capability each needs, the
//! stable keys they are asked under, and which answers are well formed.

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::jsonrpc::Id;
use crate::policy::KeyNames;
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

/// The client capability a question needs (`requiredCapabilities` when the
/// client did not declare it). A tag, not JSON: ten thousand waiting
/// questions would each hold the same few small objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// A question known only by its key (a replay-mode round's state).
    Unknown,
    ElicitationForm,
    ElicitationUrl,
    Sampling,
    SamplingTools,
    Roots,
}

impl Needs {
    pub fn to_value(self) -> Value {
        match self {
            Needs::Unknown => Value::Null,
            Needs::ElicitationForm => json!({"elicitation": {"form": {}}}),
            Needs::ElicitationUrl => json!({"elicitation": {"url": {}}}),
            Needs::Sampling => json!({"sampling": {}}),
            Needs::SamplingTools => json!({"sampling": {"tools": {}}}),
            Needs::Roots => json!({"roots": {}}),
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
    /// The 2026-07-28 `InputRequest` (`{method, params}`) as JSON text
    /// ([`Question::request`] reads it): a question may wait for minutes, ten
    /// thousand at once, and the text is a fraction of a `Value` tree's
    /// size (each object an index table, each entry a hash and a slot).
    /// The round's `InputRequiredResult` writes it as it is.
    request: Box<RawValue>,
    /// `requiredCapabilities` when the client cannot answer it.
    pub needs: Needs,
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
    /// Remembered answers offered as its fields' `default` (field, value).
    pub offered: Vec<(String, Value)>,
    /// Fields the policy narrowed in the form the client sees ([`Question::shape`]).
    pub narrowed: Vec<String>,
}

impl Question {
    /// The 2026-07-28 `InputRequest` (`{method, params}`); `null` for a
    /// question known only by its key ([`Question::recorded`]).
    pub fn request(&self) -> Value {
        // Our own serialisation of a `Value`: it always parses.
        serde_json::from_str(self.request.get()).unwrap_or(Value::Null)
    }

    /// [`Question::request`] as the JSON text it is kept as.
    pub fn request_text(&self) -> &RawValue {
        &self.request
    }

    fn set_request(&mut self, request: &Value) {
        self.request = text_of(request);
    }

    /// Narrows the form the client sees by the policy's field rules
    /// ([`crate::policy::shape`]); `rules` from [`Policy::shaping`]. Only the
    /// question's text changes: the server's own request (and a replay
    /// fingerprint taken from it) stays as the server sent it. Run before
    /// defaults are offered, so a remembered value is offered only where the
    /// narrowed field accepts it. A field no answer can satisfy leaves the
    /// form as it is: the guard refused such a question already.
    ///
    /// [`Policy::shaping`]: crate::policy::Policy::shaping
    pub fn shape(&mut self, rules: Option<&foldhash::HashMap<String, crate::policy::FieldRules>>) {
        let Some(rules) = rules else {
            return;
        };
        let mut request = self.request();
        let Some(schema) = request.pointer_mut("/params/requestedSchema") else {
            return;
        };
        if let Ok(narrowed) = crate::policy::shape::narrow(rules, schema)
            && !narrowed.is_empty()
        {
            self.set_request(&request);
            self.narrowed = narrowed;
        }
    }

    /// Offers remembered values as the form fields' `default` (spec
    /// 2026-07-28 client/elicitation.mdx: "All primitive types support
    /// optional default values"), each only where the field exists, has no
    /// default of its own and the value fits its type; keeps what it offered.
    pub fn offer_defaults(&mut self, defaults: Vec<(String, Value)>) {
        let mut request = self.request();
        let Some(props) = request
            .pointer_mut("/params/requestedSchema/properties")
            .and_then(Value::as_object_mut)
        else {
            return;
        };
        let mut offered = Vec::new();
        for (field, value) in defaults {
            let Some(p) = props.get_mut(&field).and_then(Value::as_object_mut) else {
                continue;
            };
            if p.contains_key("default") || !fits(p, &value) {
                continue;
            }
            p.insert("default".into(), value.clone());
            offered.push((field, value));
        }
        if !offered.is_empty() {
            self.set_request(&request);
            self.offered = offered;
        }
    }

    /// The remembered answers offered to `fields`, read back from the
    /// defaults of the question as it was asked (a native server's question
    /// rebuilt from redmark's state on the retry), so its audit line can say
    /// which were offered and kept.
    pub fn recall_offered(&mut self, fields: &[String]) {
        let Some(props) = self
            .schema()
            .and_then(|mut s| s.get_mut("properties").map(Value::take))
        else {
            return;
        };
        self.offered = fields
            .iter()
            .filter_map(|f| Some((f.clone(), props.get(f)?.get("default")?.clone())))
            .collect();
    }

    /// Asks again with a red mark: the server's message, then what was wrong.
    pub fn mark(&mut self, mark: &str) {
        self.reasks += 1;
        let base = self.base_message.clone().unwrap_or_default();
        let mut request = self.request();
        if let Some(params) = request.get_mut("params").and_then(Value::as_object_mut) {
            params.insert(
                "message".into(),
                Value::String(format!("{base}\n\n✗ {mark}.")),
            );
        }
        self.set_request(&request);
    }

    /// The form's `requestedSchema` (form-mode elicitation only). Only the
    /// schema is read into a `Value`; the rest of the text is skipped.
    pub fn schema(&self) -> Option<Value> {
        self.requested_schema::<Value>()
    }

    /// The names of the form's fields, in the server's order (for the audit
    /// line), without reading the rest of the question.
    pub fn field_names(&self) -> Vec<String> {
        #[derive(serde::Deserialize)]
        struct Schema {
            properties: Option<Keys>,
        }
        self.requested_schema::<Schema>()
            .and_then(|s| s.properties)
            .map(|k| k.0)
            .unwrap_or_default()
    }

    /// `params.requestedSchema` of a form-mode elicitation, read as `S` by a
    /// typed read that skips every other member of the question's text.
    fn requested_schema<S: serde::de::DeserializeOwned>(&self) -> Option<S> {
        #[derive(serde::Deserialize)]
        struct Request<S> {
            params: Option<Params<S>>,
        }
        #[derive(serde::Deserialize)]
        struct Params<S> {
            #[serde(rename = "requestedSchema")]
            requested_schema: Option<S>,
        }
        if self.kind != Kind::Elicitation || self.url_mode {
            return None;
        }
        serde_json::from_str::<Request<S>>(self.request.get())
            .ok()?
            .params?
            .requested_schema
    }
}

/// A question's request as the text it is held as (a `Value` always serialises).
fn text_of(request: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(request).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// An object's keys in order, its values skipped unread.
struct Keys(Vec<String>);

impl<'de> serde::Deserialize<'de> for Keys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Keys;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(k) = map.next_key::<String>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    keys.push(k);
                }
                Ok(Keys(keys))
            }
        }
        d.deserialize_map(Visitor)
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
    question_and_params(upstream_id, method, params).map(|(q, _)| q)
}

/// A native server's input request (`{"method", "params"}`, as an
/// `InputRequiredResult` or a task's `inputRequests` carries it) as the
/// question under `key` that answers to it are judged against.
pub fn input_request(key: &str, request: &Value) -> Option<Question> {
    let method = request.get("method").and_then(Value::as_str)?;
    let mut q = question(Id::Number(0), method, request.get("params").cloned()).ok()?;
    key.clone_into(&mut q.key);
    Some(q)
}

/// [`question`], and the params it will be asked with (for the policy's
/// checks, without reading the question's text back).
pub fn question_and_params(
    upstream_id: Id,
    method: &str,
    params: Option<Value>,
) -> Result<(Question, Value), NotAQuestion> {
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
                Needs::ElicitationUrl
            } else {
                Needs::ElicitationForm
            };
            (Kind::Elicitation, url, needs)
        }
        "sampling/createMessage" => {
            let needs = if params.contains_key("tools") {
                Needs::SamplingTools
            } else {
                Needs::Sampling
            };
            (Kind::Sampling, false, needs)
        }
        "roots/list" => (Kind::Roots, false, Needs::Roots),
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
    let mut request = Value::Object(request);
    let text = text_of(&request);
    let params = request.get_mut("params").map_or(Value::Null, Value::take);
    let request = text;
    let q = Question {
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
        offered: Vec::new(),
        narrowed: Vec::new(),
    };
    Ok((q, params))
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
            request: RawValue::NULL.to_owned(),
            needs: Needs::Unknown,
            base_message: None,
            reasks: 0,
            fingerprint: String::new(),
            asked_at: tokio::time::Instant::now(),
            span: tracing::Span::none(),
            offered: Vec::new(),
            narrowed: Vec::new(),
        }
    }
}

/// Whether `value` is of the property's primitive type (and in its enum).
fn fits(property: &Map<String, Value>, value: &Value) -> bool {
    let typed = match property.get("type").and_then(Value::as_str) {
        Some("string") => value.is_string(),
        Some("number") => value.is_number(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("boolean") => value.is_boolean(),
        _ => false,
    };
    typed
        && property
            .get("enum")
            .and_then(Value::as_array)
            .is_none_or(|allowed| allowed.contains(value))
}

/// spec 2026-07-28 mrtr.mdx "Server Requirements": "Servers MUST NOT send an
/// `inputRequests` that the client has not declared support for".
pub fn covered(profile: &Profile, q: &Question) -> bool {
    match q.kind {
        Kind::Elicitation if q.url_mode => profile.elicitation_url,
        Kind::Elicitation => profile.elicitation_form,
        Kind::Sampling => {
            profile.sampling && (profile.sampling_tools || q.needs != Needs::SamplingTools)
        }
        Kind::Roots => profile.roots,
    }
}

/// Names questions: the policy's names for this tool first (`keys`, in
/// arrival order overall or per kind), then `elicitation-1`, `sampling-1`,
/// `roots-1`, ... numbered per kind.
#[derive(Debug, Default)]
pub struct KeyNamer {
    names: KeyNames,
    asked: usize,
    counts: [usize; 3],
}

impl KeyNamer {
    pub fn new(names: KeyNames) -> Self {
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
        let nth_of_kind = self.counts[slot];
        self.counts[slot] += 1;
        let named = match &self.names {
            KeyNames::InOrder(names) => names.get(self.asked),
            KeyNames::ByKind {
                elicitation,
                sampling,
                roots,
            } => match kind {
                Kind::Elicitation => elicitation,
                Kind::Sampling => sampling,
                Kind::Roots => roots,
            }
            .get(nth_of_kind),
        };
        self.asked += 1;
        named
            .cloned()
            .unwrap_or_else(|| format!("{}-{}", kind.key_prefix(), self.counts[slot]))
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
