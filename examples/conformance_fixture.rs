//! `conformance_fixture`: an MCP server on rmcp 3 with every tool, prompt and
//! resource the MCP conformance suite's 2026-07-28 and 2025-11-25 server
//! scenarios call (`scripts/conformance.sh` runs them directly and through
//! redmark; the 2025-11-25 ones through redmark only, which serves the
//! 2025-era session).
//!
//! By default it is a LEGACY, push-style server (protocol 2025-11-25), what
//! redmark fronts in practice: a server that knows nothing of 2026-07-28.
//! Where a scenario expects an `InputRequiredResult`, it does what legacy
//! servers do: while the call is pending it *pushes* `elicitation/create`,
//! `sampling/createMessage` or `roots/list` and waits for the answer. redmark
//! turns each push into an input request, and the client's retry into the
//! answer. The input request keys the scenarios expect (`user_name`,
//! `capital_question`, ...) then come from redmark's policy file
//! (`policies/conformance.toml`): a legacy server has no keys. Like the rooms
//! example it caps `initialize` at 2025-11-25 (so rmcp allows the pushes) and
//! hides rmcp's built-in `server/discover` ([`Legacy`]).
//!
//! With `--native` the same tools speak 2026-07-28 themselves: rmcp's
//! `server/discover`, and each question returned as rmcp's
//! `InputRequiredResult` under the tool's own keys with a sealed
//! `requestState` (see `conformance_fixture/ask.rs`); `--native --http ADDR`
//! serves that over stateless Streamable HTTP at `/mcp` instead of stdio.
//! The native mode also serves the tasks extension (`io.modelcontextprotocol/
//! tasks`) with rmcp's `TaskManager`: the tools of the suite's `tasks-*`
//! scenarios (`slow_compute`, `failing_job`, ...: `conformance_fixture/tasks.rs`).
//! The legacy mode has those scenarios' tools too, as plain legacy tools
//! that redmark makes tasks of (`conformance_fixture/legacy_tasks.rs`).
//! Newline-delimited JSON-RPC on stdio otherwise; logs go to stderr.

// An example/benchmark may panic on what it cannot do: it is not on a request path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "shared/legacy.rs"]
mod legacy;
use legacy::Legacy;

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;

use ask::{Ask, Outcome};

use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt, model::*, service::RequestContext,
    task_manager::TaskManager, transport::stdio,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

#[path = "conformance_fixture/ask.rs"]
mod ask;
#[path = "conformance_fixture/content.rs"]
mod content;
#[path = "conformance_fixture/legacy_tasks.rs"]
mod legacy_tasks;
#[path = "conformance_fixture/tasks.rs"]
mod tasks;
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

/// A complete result from its JSON wire form, with the `resultType` that
/// 2026-07-28 requires (rmcp's constructors set it, deserializing does not;
/// rmcp strips it again for a legacy peer).
fn result<T: DeserializeOwned>(mut value: Value) -> T {
    if let Value::Object(fields) = &mut value {
        fields.insert("resultType".into(), json!("complete"));
    }
    de(value)
}

/// The client's capabilities: those of the 2026-07-28 request (`_meta`), or
/// as declared in `initialize` (redmark declares exactly those of the
/// 2026-07-28 request it serves).
fn client_declared(ctx: &Ctx, capability: &str) -> bool {
    let caps = ctx.client_capabilities();
    let caps = caps.map(|c| serde_json::to_value(&c).unwrap_or_default());
    caps.is_some_and(|c| c.get(capability).is_some())
}

#[derive(Clone)]
struct Fixture {
    /// Speaks 2026-07-28 itself (`--native`): asks with `InputRequiredResult`.
    native: bool,
    /// Seals the native mode's `requestState` (a key per process).
    codec: Arc<RequestStateCodec>,
    /// The native mode's tasks (`tasks.rs`); clones share them.
    tasks: TaskManager,
}

impl Fixture {
    fn new(native: bool) -> Fixture {
        let key: [u8; 32] = rand::random();
        let codec = RequestStateCodec::try_new(key.to_vec()).expect("a 32-byte key");
        Fixture {
            native,
            codec: Arc::new(codec),
            tasks: TaskManager::new(),
        }
    }

    /// How this request asks: pushes (legacy), or the native replay of `target`.
    fn ask<'a>(
        &self,
        ctx: &'a Ctx,
        target: &str,
        responses: Option<InputResponses>,
        state: Option<&str>,
    ) -> Result<Ask<'a>, ErrorData> {
        if self.native {
            Ask::native(ctx, &self.codec, target, responses, state)
        } else {
            Ok(Ask::push(ctx))
        }
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities: ServerCapabilities = de(json!({
            "tools": {"listChanged": true},
            "prompts": {"listChanged": true},
            // Its resources never change, so a subscription is accepted and
            // never sees an update (the 2025-11-25 scenarios ask for the RPC).
            "resources": {"subscribe": true},
            "completions": {},
            "logging": {},
        }));
        if self.native {
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(TASKS_EXTENSION_ID.to_owned(), Default::default());
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("redmark-conformance-fixture", VERSION))
            .with_protocol_version(self.newest())
            .with_instructions(
                "Fixture for the MCP conformance suite (legacy, or native with --native).",
            )
    }

    /// Legacy: this caps `initialize` negotiation and rejects inline 2026-07-28 requests.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&self.newest()))
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: Ctx,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut list = tools::list();
        if self.native {
            list.tools.extend(tasks::list());
        } else {
            list.tools.extend(legacy_tasks::list());
        }
        Ok(list)
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        ctx: Ctx,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.native {
            let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
            let responses = request.input_responses.as_ref();
            if let Some(answer) =
                tasks::call(&self.tasks, &request.name, &arguments, responses, &ctx)
            {
                return answer;
            }
        }
        let (responses, state) = (request.input_responses.take(), request.request_state.take());
        let ask = self.ask(&ctx, &request.name, responses, state.as_deref())?;
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        if !self.native
            && let Some(answer) = legacy_tasks::call(&request.name, &arguments, &ctx, &ask).await
        {
            return answer.map(Into::into);
        }
        let result = tools::call(&request.name, arguments, &ctx, &ask).await;
        match ask.finish(&self.codec, result)? {
            Outcome::Done(result) => result.map(Into::into),
            Outcome::Input(input) => Ok(input.into()),
        }
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
        mut request: GetPromptRequestParams,
        ctx: Ctx,
    ) -> Result<GetPromptResponse, ErrorData> {
        let (responses, state) = (request.input_responses.take(), request.request_state.take());
        let ask = self.ask(&ctx, &request.name, responses, state.as_deref())?;
        let result = content::prompt(&request, &ask).await;
        match ask.finish(&self.codec, result)? {
            Outcome::Done(result) => result.map(Into::into),
            Outcome::Input(input) => Ok(input.into()),
        }
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

    async fn get_task(&self, request: GetTaskParams, _: Ctx) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(&self, request: UpdateTaskParams, _: Ctx) -> Result<(), ErrorData> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(&self, request: CancelTaskParams, _: Ctx) -> Result<(), ErrorData> {
        self.tasks.cancel_task(&request.task_id)
    }

    // Logging is SEP-2577-deprecated in rmcp, but part of 2025-11-25. The
    // fixture logs at every level regardless: which messages a 2026-07-28
    // client receives is redmark's decision (`_meta` logLevel).
    #[allow(deprecated)]
    async fn set_level(&self, _: SetLevelRequestParams, _: Ctx) -> Result<(), ErrorData> {
        Ok(())
    }

    // Legacy subscriptions (2025-11-25 server/resources.mdx "Subscriptions"):
    // redmark subscribes on its upstream session for a 2025-era client's
    // standalone stream.
    #[allow(deprecated)]
    async fn subscribe(&self, _: SubscribeRequestParams, _: Ctx) -> Result<(), ErrorData> {
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(&self, _: UnsubscribeRequestParams, _: Ctx) -> Result<(), ErrorData> {
        Ok(())
    }
}

impl Fixture {
    fn newest(&self) -> ProtocolVersion {
        if self.native {
            ProtocolVersion::V_2026_07_28
        } else {
            ProtocolVersion::V_2025_11_25
        }
    }
}

/// Serves the native fixture over stateless Streamable HTTP on `listen`
/// (port 0 picks one); prints `conformance-fixture listening on http://ADDR/mcp`.
async fn serve_http(listen: &str) -> Result<(), Box<dyn std::error::Error>> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
    };
    let fixture = Fixture::new(true);
    // 2026-07-28 only: no sessions, and every request carries its own `_meta`.
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_stateless_protocol_metadata_required(true);
    let service = StreamableHttpService::new(
        move || Ok(fixture.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let listener = tokio::net::TcpListener::bind(listen).await?;
    eprintln!(
        "conformance-fixture listening on http://{}/mcp",
        listener.local_addr()?
    );
    loop {
        let (stream, _) = listener.accept().await?;
        let service = service.clone();
        tokio::spawn(async move {
            let handle = hyper::service::service_fn(move |request| {
                let service = service.clone();
                async move { Ok::<_, Infallible>(service.handle(request).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let served = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, handle)
                .await;
            if let Err(e) = served {
                eprintln!("conformance-fixture: connection: {e}");
            }
        });
    }
}

/// `conformance_fixture` (legacy, stdio), `--native` (2026-07-28, stdio), or
/// `--native --http ADDR` (2026-07-28, stateless Streamable HTTP at /mcp).
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let native = args.iter().any(|a| a == "--native");
    let http = args
        .iter()
        .position(|a| a == "--http")
        .map(|i| args.get(i + 1));
    match (native, http) {
        (true, Some(Some(listen))) => serve_http(listen).await,
        (false, Some(_)) => Err("--http needs --native (the legacy fixture is stdio only)".into()),
        (_, Some(None)) => Err("--http needs an address (127.0.0.1:0)".into()),
        (true, None) => {
            eprintln!("conformance-fixture {VERSION}: native 2026-07-28 MCP server on stdio");
            let running = Fixture::new(true).serve(stdio()).await?;
            let reason = running.waiting().await?;
            eprintln!("conformance-fixture: stopped ({reason:?})");
            Ok(())
        }
        (false, None) => {
            eprintln!(
                "conformance-fixture {VERSION}: legacy MCP server on stdio (pushes requests)"
            );
            let running = Legacy(Fixture::new(false)).serve(stdio()).await?;
            let reason = running.waiting().await?;
            eprintln!("conformance-fixture: stopped ({reason:?})");
            Ok(())
        }
    }
}
