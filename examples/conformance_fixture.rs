//! `conformance_fixture`: a LEGACY, push-style MCP server (protocol 2025-11-25)
//! with every tool, prompt and resource the MCP conformance suite's 2026-07-28
//! server scenarios call (`scripts/conformance.sh` runs them through redmark).
//!
//! It is what redmark fronts in practice: a server that knows nothing of
//! 2026-07-28. Where a scenario expects an `InputRequiredResult`, this server
//! does what legacy servers do: while the call is pending it *pushes*
//! `elicitation/create`, `sampling/createMessage` or `roots/list` and waits for
//! the answer. redmark turns each push into an input request, and the client's
//! retry into the answer. The input request keys the scenarios expect
//! (`user_name`, `capital_question`, ...) come from redmark's policy file
//! (`policies/conformance.toml`), not from here: a legacy server has no keys.
//!
//! Like the rooms example it caps `initialize` at 2025-11-25 (so rmcp allows
//! the pushes) and hides rmcp's built-in `server/discover` ([`Legacy`]); it
//! speaks newline-delimited JSON-RPC on stdio and logs to stderr.

// An example/benchmark may panic on what it cannot do: it is not on a request path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "shared/legacy.rs"]
mod legacy;
use legacy::Legacy;

use std::borrow::Cow;

use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt, model::*, service::RequestContext,
    transport::stdio,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

#[path = "conformance_fixture/content.rs"]
mod content;
#[path = "conformance_fixture/tools.rs"]
mod tools;

const VERSION: &str = match option_env!("CARGO_PKG_VERSION") {
    Some(version) => version,
    None => "0.1.0",
};

type Ctx = RequestContext<RoleServer>;

/// A 1x1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// Builds an rmcp model value from its JSON wire form (the fixture's data is
/// easiest to read, and to compare with the scenarios, as JSON).
fn de<T: DeserializeOwned>(value: Value) -> T {
    match serde_json::from_value(value) {
        Ok(v) => v,
        Err(e) => panic!("fixture data does not fit the rmcp model: {e}"),
    }
}

/// The pushes a legacy server makes while a request is pending. Each returns
/// the client's answer as JSON, or why there is none.
mod push {
    use super::*;

    async fn send<T: serde::Serialize>(
        ctx: &Ctx,
        what: &str,
        pushed: impl Future<Output = Result<T, rmcp::ServiceError>>,
    ) -> Result<Value, String> {
        eprintln!("conformance-fixture: pushing {what}");
        let answer = tokio::select! {
            answer = pushed => answer.map_err(|e| format!("{what} failed: {e}"))?,
            () = ctx.ct.cancelled() => return Err(format!("{what}: the request was cancelled")),
        };
        serde_json::to_value(answer).map_err(|e| e.to_string())
    }

    /// `elicitation/create` in form mode for one required field.
    pub async fn elicit(ctx: &Ctx, message: &str, field: &str, ty: &str) -> Result<Value, String> {
        let params: ElicitRequestParams = de(json!({
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {field: {"type": ty}},
                "required": [field],
            },
        }));
        send(
            ctx,
            "elicitation/create",
            ctx.peer.create_elicitation(params),
        )
        .await
    }

    /// `sampling/createMessage` with one user message. It is pushed whatever
    /// the client declared: telling the client it lacks the capability is
    /// the gateway's job.
    #[allow(deprecated)] // sampling is SEP-2577-deprecated in rmcp, but part of 2025-11-25
    pub async fn sample(ctx: &Ctx, text: &str, max_tokens: u32) -> Result<Value, String> {
        let params: CreateMessageRequestParams = de(json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens,
        }));
        send(
            ctx,
            "sampling/createMessage",
            ctx.peer.create_message(params),
        )
        .await
    }

    /// `roots/list`.
    #[allow(deprecated)] // roots, as above
    pub async fn roots(ctx: &Ctx) -> Result<Value, String> {
        send(ctx, "roots/list", ctx.peer.list_roots()).await
    }
}

/// The client's capabilities as declared in `initialize` (redmark declares
/// exactly those of the 2026-07-28 request it serves).
fn client_declared(ctx: &Ctx, capability: &str) -> bool {
    let info = ctx.peer.peer_info();
    let caps = info.map(|i| serde_json::to_value(&i.capabilities).unwrap_or_default());
    caps.is_some_and(|c| c.get(capability).is_some())
}

struct Fixture;

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        let capabilities: ServerCapabilities = de(json!({
            "tools": {"listChanged": true},
            "prompts": {"listChanged": true},
            "resources": {},
            "completions": {},
            "logging": {},
        }));
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("redmark-conformance-fixture", VERSION))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_instructions("Legacy fixture for the MCP conformance suite, fronted by redmark.")
    }

    /// Legacy only: this caps `initialize` negotiation and rejects inline 2026-07-28 requests.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: Ctx,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(tools::list())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: Ctx,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        tools::call(&request.name, arguments, ctx)
            .await
            .map(Into::into)
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        _: Ctx,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(content::prompts())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: Ctx,
    ) -> Result<GetPromptResponse, ErrorData> {
        content::prompt(request, ctx).await.map(Into::into)
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: Ctx,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(content::resources())
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: Ctx,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(content::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: Ctx,
    ) -> Result<ReadResourceResponse, ErrorData> {
        content::read(&request.uri).map(Into::into)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _: Ctx,
    ) -> Result<CompleteResult, ErrorData> {
        Ok(content::complete(&request))
    }

    // Logging is SEP-2577-deprecated in rmcp, but part of 2025-11-25. The
    // fixture logs at every level regardless: which messages a 2026-07-28
    // client receives is redmark's decision (`_meta` logLevel).
    #[allow(deprecated)]
    async fn set_level(&self, _: SetLevelRequestParams, _: Ctx) -> Result<(), ErrorData> {
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    eprintln!("conformance-fixture {VERSION}: legacy MCP server on stdio (pushes requests)");
    let running = Legacy(Fixture).serve(stdio()).await?;
    let reason = running.waiting().await?;
    eprintln!("conformance-fixture: stopped ({reason:?})");
    Ok(())
}
