//! A 2026-07-28 client request, typed: the method, the params as sent, and
//! the per-request context from `_meta` (spec 2026-07-28 `basic/index.mdx`
//! "Per-request protocol fields").
//!
//! The checks that build one live in `front/pipeline/` (one step each); what
//! is here is the vocabulary they share with the layers below.

use serde_json::{Map, Value};

use crate::jsonrpc::Id;
use crate::protocol::params::{Arguments, ClientParams};
use crate::protocol::profile::Profile;

/// Client-to-server methods of 2026-07-28 (schema `ClientRequest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Discover,
    ToolsList,
    ToolsCall,
    PromptsList,
    PromptsGet,
    ResourcesList,
    ResourcesTemplatesList,
    ResourcesRead,
    CompletionComplete,
    SubscriptionsListen,
    /// The tasks extension's methods (ext-tasks), served only on a route
    /// with `[route.tasks]` (`front::tasks`).
    TasksGet,
    TasksUpdate,
    TasksCancel,
}

impl Method {
    pub const ALL: [Method; 13] = [
        Method::Discover,
        Method::ToolsList,
        Method::ToolsCall,
        Method::PromptsList,
        Method::PromptsGet,
        Method::ResourcesList,
        Method::ResourcesTemplatesList,
        Method::ResourcesRead,
        Method::CompletionComplete,
        Method::SubscriptionsListen,
        Method::TasksGet,
        Method::TasksUpdate,
        Method::TasksCancel,
    ];

    pub fn parse(method: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == method)
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Method::Discover => "server/discover",
            Method::ToolsList => "tools/list",
            Method::ToolsCall => "tools/call",
            Method::PromptsList => "prompts/list",
            Method::PromptsGet => "prompts/get",
            Method::ResourcesList => "resources/list",
            Method::ResourcesTemplatesList => "resources/templates/list",
            Method::ResourcesRead => "resources/read",
            Method::CompletionComplete => "completion/complete",
            Method::SubscriptionsListen => "subscriptions/listen",
            Method::TasksGet => "tasks/get",
            Method::TasksUpdate => "tasks/update",
            Method::TasksCancel => "tasks/cancel",
        }
    }

    /// The params member `Mcp-Name` mirrors (spec streamable-http.mdx "Standard Headers").
    pub const fn name_param(self) -> Option<&'static str> {
        match self {
            Method::ToolsCall | Method::PromptsGet => Some("name"),
            Method::ResourcesRead => Some("uri"),
            // ext-tasks "Streamable HTTP: Routing Headers": "the client MUST
            // set the `Mcp-Name` header to the value of `params.taskId`".
            Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => Some("taskId"),
            _ => None,
        }
    }

    /// Methods whose results carry caching hints (spec 2026-07-28
    /// `server/utilities/caching.mdx` "Cacheable Results": "Servers MUST
    /// include caching hints on results with `resultType: "complete"`
    /// returned by ...").
    pub const fn cacheable(self) -> bool {
        matches!(
            self,
            Method::Discover
                | Method::ToolsList
                | Method::PromptsList
                | Method::ResourcesList
                | Method::ResourcesTemplatesList
                | Method::ResourcesRead
        )
    }

    /// The tasks extension's methods.
    pub const fn is_task(self) -> bool {
        matches!(
            self,
            Method::TasksGet | Method::TasksUpdate | Method::TasksCancel
        )
    }

    /// Methods that may involve a person, and so become operations.
    pub const fn is_operation(self) -> bool {
        matches!(
            self,
            Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead
        )
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Per-request context from `_meta`.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestContext {
    pub protocol_version: String,
    pub capabilities: Value,
    pub client_info: Option<Value>,
    pub log_level: Option<String>,
    pub progress_token: Option<Value>,
    pub profile: Profile,
    /// W3C trace context of the caller (`_meta.traceparent`, SEP-414, else the HTTP header).
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
    /// Filled in by the operation engine for the access log.
    pub access: AccessNote,
}

/// What the operation engine tells the front's access log about a request:
/// the operation it belongs to, its round, and the trace id when traced.
/// Shared (one `Arc`) by every clone of the request's context, so the front,
/// which logs, hears what the engine, which knows, noted.
#[derive(Debug, Clone, Default)]
pub struct AccessNote(std::sync::Arc<std::sync::Mutex<Noted>>);

/// The operation, round and trace of one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Noted {
    pub operation: Option<String>,
    pub round: Option<u32>,
    pub trace_id: Option<String>,
}

impl AccessNote {
    pub fn note(&self, operation: &str, round: u32, trace_id: Option<&str>) {
        let mut n = self.lock();
        n.operation = Some(operation.to_owned());
        n.round = Some(round);
        n.trace_id = trace_id.filter(|t| !t.is_empty()).map(str::to_owned);
    }

    pub fn get(&self) -> Noted {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Noted> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A note is bookkeeping, not part of what a request means.
impl PartialEq for AccessNote {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClientRequest {
    pub id: Id,
    pub method: Method,
    /// The params as sent, but `_meta` and `arguments`.
    pub params: Map<String, Value>,
    /// `_meta`'s members other than the protocol's, which are in `ctx`
    /// (`progressToken`, `traceparent`, extensions' keys), in the order sent.
    pub meta: Map<String, Value>,
    /// `params.arguments`, as the client's text until something reads it.
    pub arguments: Arguments,
    pub ctx: RequestContext,
    /// `Mcp-Param-*` headers, lower-cased; `None` when the value was not visible ASCII.
    pub param_headers: Vec<(String, Option<String>)>,
    /// [`ClientRequest::target`], read once: a dozen steps and layers ask
    /// for it, and each lookup in `params` hashes its key.
    target: String,
    /// [`ClientRequest::is_retry`], read once with the target.
    retry: bool,
    /// Whether params carry a `requestState` at all, on any method (see
    /// [`ClientRequest::has_state`]).
    has_state: bool,
    /// The called tool as its server lists it, once the known-tool step
    /// found it (the operation reads its annotations without a second lookup).
    pub tool: Option<std::sync::Arc<crate::protocol::tool::Tool>>,
}

impl ClientRequest {
    pub fn new(
        id: Id,
        method: Method,
        params: ClientParams,
        ctx: RequestContext,
        param_headers: Vec<(String, Option<String>)>,
    ) -> Self {
        let ClientParams {
            members: params,
            meta,
            arguments,
        } = params;
        let meta = meta.map(|m| m.other).unwrap_or_default();
        // One pass over the members: each lookup by name hashes the name.
        let (mut name, mut uri, mut has_state) = (None, None, false);
        for (k, v) in &params {
            match k.as_str() {
                "name" => name = Some(v),
                "uri" => uri = Some(v),
                "requestState" => has_state = true,
                _ => {}
            }
        }
        // Only the methods that can answer `input_required` have a retry
        // (schema 2026-07-28: `requestState` is a member of
        // CallToolRequestParams, GetPromptRequestParams and
        // ReadResourceRequestParams only). A `requestState` on any other
        // method makes nothing a retry: it must never move a request out of
        // the call limits (the parse step refuses it, see `has_state`).
        let retry = has_state && method.is_operation();
        let target = name
            .or(uri)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        ClientRequest {
            id,
            method,
            params,
            meta,
            arguments,
            ctx,
            param_headers,
            target,
            retry,
            has_state,
            tool: None,
        }
    }

    /// Whether the request is a retry of an operation: a `tools/call`,
    /// `prompts/get` or `resources/read` that carries a `requestState`
    /// (which the `owner` step then opens, or refuses). A `requestState` on
    /// any other method is never a retry.
    pub fn is_retry(&self) -> bool {
        self.retry
    }

    /// Whether it came from a 2025-era client's session (`front::era2025`),
    /// which negotiated an initialization-based version.
    pub fn is_2025_era(&self) -> bool {
        crate::protocol::LEGACY_VERSIONS.contains(&self.ctx.protocol_version.as_str())
    }

    /// The same request as a retry carrying `inputResponses` and the
    /// `requestState` they answer: how redmark retries for a 2025-era
    /// client, which answers pushed questions instead.
    pub fn retried_with(&self, responses: Map<String, Value>, state: String) -> ClientRequest {
        let mut retry = self.clone();
        retry
            .params
            .insert("inputResponses".into(), Value::Object(responses));
        retry
            .params
            .insert("requestState".into(), Value::String(state));
        retry.retry = true;
        retry.has_state = true;
        retry
    }

    /// Whether params carry a `requestState` member, whatever the method.
    pub fn has_state(&self) -> bool {
        self.has_state
    }

    /// The tool or prompt name, or resource URI, the request is about ("" for none).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// `params.arguments`, or an empty object.
    pub fn arguments(&self) -> &Map<String, Value> {
        self.arguments.object()
    }

    /// The params whole, `arguments` as a tree, `_meta` without the
    /// protocol's members (a copy: for what forwards them whole, which
    /// calls to a legacy server do not).
    pub fn full_params(&self) -> Map<String, Value> {
        let mut all = self.params.clone();
        if !self.meta.is_empty() {
            all.insert("_meta".into(), Value::Object(self.meta.clone()));
        }
        if self.arguments.text().is_some() {
            all.insert("arguments".into(), self.arguments.value().clone());
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_round_trip_and_only_2026_methods_parse() {
        for m in Method::ALL {
            assert_eq!(Method::parse(m.as_str()), Some(m));
        }
        assert_eq!(Method::parse("initialize"), None);
        assert_eq!(Method::parse("tools/Call"), None);
        assert_eq!(Method::ToolsCall.name_param(), Some("name"));
        assert_eq!(Method::ResourcesRead.name_param(), Some("uri"));
        assert!(Method::ResourcesRead.cacheable() && !Method::ToolsCall.cacheable());
    }
}
