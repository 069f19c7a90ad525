//! Interoperability, the Rust column: the official Rust SDK `rmcp` 3.11 as a
//! CLIENT, talking Streamable HTTP to redmark in its 2026-07-28 "Discover"
//! lifecycle (`ClientLifecycleMode::Discover` with `ProtocolVersion::V_2026_07_28`:
//! `server/discover` first, then self-contained requests with `_meta`).
//!
//! `RunningService::call_tool` drives MRTR itself: each `InputRequiredResult`
//! goes through `ClientHandler::create_elicitation` (the context's request id
//! is the `inputRequests` key) and the call is retried with `inputResponses`
//! and `requestState`. One test per server row of the matrix; each answers
//! accept, decline and cancel and asserts what the SERVER received.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod interop_support;
mod mrtr_e2e_support;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation, NumberOrString, ProtocolVersion,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, RequestContext, RoleClient, ServiceError,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData as McpError};
use serde_json::{Value, json};

use common::VERSION;
use interop_support::Extra;
use mrtr_e2e_support::{
    ALICE, BOB, EVERYTHING_TOOL, Fronted, Server, ThreeWays, fastmcp_register, ts_sdk_survey,
};

/// One question as the rmcp client's `create_elicitation` saw it.
#[derive(Debug, Clone)]
struct Asked {
    /// The `inputRequests` key (rmcp hands it over as the context's request id).
    key: String,
    /// `form` or `url`.
    mode: &'static str,
    message: String,
    /// The requested schema, re-serialized from rmcp's typed `ElicitationSchema`.
    schema: Value,
}

/// A `ClientHandler` that answers elicitations from a queue (then `cancel`)
/// and records every question.
#[derive(Clone, Default)]
struct Scripted {
    answers: Arc<Mutex<VecDeque<ElicitResult>>>,
    asked: Arc<Mutex<Vec<Asked>>>,
}

impl Scripted {
    fn answer(&self, answers: impl IntoIterator<Item = ElicitResult>) {
        self.answers.lock().unwrap().extend(answers);
    }

    /// The questions asked since the last call, emptying the record.
    fn take_asked(&self) -> Vec<Asked> {
        std::mem::take(&mut *self.asked.lock().unwrap())
    }
}

impl ClientHandler for Scripted {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let key = match &context.id {
            NumberOrString::String(s) => s.to_string(),
            NumberOrString::Number(n) => n.to_string(),
        };
        let asked = match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => Asked {
                key,
                mode: "form",
                message,
                schema: serde_json::to_value(&requested_schema).expect("schema serializes"),
            },
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => Asked {
                key,
                mode: "url",
                message,
                schema: json!({ "url": url }),
            },
            other => panic!("an elicitation rmcp 3.11 does not know: {other:?}"),
        };
        self.asked.lock().unwrap().push(asked);
        let next = self.answers.lock().unwrap().pop_front();
        Ok(next.unwrap_or_else(|| ElicitResult::new(ElicitationAction::Cancel)))
    }

    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({"elicitation": {"form": {}}})).expect("capabilities");
        ClientConfig::new(
            capabilities,
            Implementation::new("redmark-rmcp-client", "0"),
        )
    }
}

fn accept(content: Value) -> ElicitResult {
    ElicitResult::new(ElicitationAction::Accept).with_content(content)
}

fn decline() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Decline)
}

fn cancel() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Cancel)
}

/// An rmcp client connected to a fronted server in Discover mode.
struct Rust {
    handler: Scripted,
    service: rmcp::service::RunningService<RoleClient, Scripted>,
}

impl Rust {
    /// Connects in Discover mode pinned to 2026-07-28, as `api_key` if given.
    async fn connect(fronted: &Fronted, api_key: Option<&str>) -> Rust {
        Rust::connect_url(&fronted.gw.url, api_key).await
    }

    async fn connect_url(url: &str, api_key: Option<&str>) -> Rust {
        let mut config = StreamableHttpClientTransportConfig::with_uri(url);
        if let Some(key) = api_key {
            config = config.auth_header(key);
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let handler = Scripted::default();
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let service = handler
            .clone()
            .serve_with_lifecycle(transport, lifecycle)
            .await
            .unwrap_or_else(|e| panic!("rmcp Discover startup failed: {e:?}"));
        let info = service.peer_info().expect("peer info after discover");
        assert_eq!(
            info.protocol_version,
            ProtocolVersion::V_2026_07_28,
            "{info:?}"
        );
        assert_eq!(info.protocol_version.as_str(), VERSION);
        Rust { handler, service }
    }

    /// Calls `tool` (driving every MRTR round) and returns the result as JSON.
    async fn call(&self, tool: &'static str, arguments: Value) -> Result<Value, ServiceError> {
        let arguments = arguments.as_object().expect("arguments object").clone();
        let params = CallToolRequestParams::new(tool).with_arguments(arguments);
        let result = self.service.call_tool(params).await?;
        Ok(serde_json::to_value(&result).expect("result serializes"))
    }

    /// `call`, which must succeed; returns the result's text blocks and the result.
    async fn texts(&self, tool: &'static str, arguments: Value) -> (Vec<String>, Value) {
        let result = self
            .call(tool, arguments)
            .await
            .unwrap_or_else(|e| panic!("{tool} failed: {e:?}"));
        let texts = result["content"]
            .as_array()
            .unwrap_or_else(|| panic!("no content: {result}"))
            .iter()
            .filter_map(|c| c["text"].as_str().map(str::to_owned))
            .collect();
        (texts, result)
    }

    /// Calls a fixture tool whose text result is the JSON of what the server received.
    async fn received(&self, tool: &'static str, arguments: Value) -> Value {
        let (texts, result) = self.texts(tool, arguments).await;
        assert_ne!(result["isError"], true, "{result}");
        let text = texts.join("\n");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    async fn tool_names(&self) -> Vec<String> {
        let tools = self.service.list_all_tools().await.expect("tools/list");
        tools.into_iter().map(|t| t.name.to_string()).collect()
    }

    async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// Waits (bounded) until the gateway answered `n` requests of `method` with `outcome`.
async fn requests(gw: &common::TestGateway, method: &str, outcome: &str, n: f64) {
    gw.wait_metric(&common::requests(method, outcome), n).await;
}

/// Asserts one question, asked under `key`, with `message`; returns it.
fn one_question(rust: &Rust, key: &str, message: &str) -> Asked {
    let asked = rust.handler.take_asked();
    assert_eq!(asked.len(), 1, "one question per call: {asked:#?}");
    let q = asked.into_iter().next().unwrap();
    assert_eq!(q.key, key, "{q:?}");
    assert_eq!(q.mode, "form", "{q:?}");
    assert_eq!(q.message, message, "{q:?}");
    q
}

// --- server-everything ------------------------------------------------------------

async fn everything_three_ways(server: Server) {
    let fronted = server.front().await;
    let rust = Rust::connect(&fronted, None).await;
    let tools = rust.tool_names().await;
    assert!(tools.iter().any(|t| t == EVERYTHING_TOOL), "{tools:?}");
    rust.handler.answer([
        accept(json!({"name": "Ada Lovelace", "check": true, "integer": 7})),
        decline(),
        cancel(),
    ]);
    let message = "Please provide inputs for the following fields:";

    let (accepted, _) = rust.texts(EVERYTHING_TOOL, json!({})).await;
    let q = one_question(&rust, "elicitation-1", message);
    assert_eq!(q.schema["required"], json!(["name"]), "{}", q.schema);
    assert_eq!(q.schema["properties"]["name"]["type"], "string");
    // rmcp's typed ElicitationSchema keeps all thirteen fields of server-everything's
    // form: formats, titled and untitled enums, multi-selects and legacy enumNames.
    let fields = q.schema["properties"].as_object().expect("properties");
    assert_eq!(fields.len(), 13, "{}", q.schema);
    let pet = &q.schema["properties"]["legacyTitledEnum"];
    assert_eq!(pet["enumNames"][0], "Cats", "{pet}");
    let fish = &q.schema["properties"]["titledMultipleSelectEnum"];
    assert_eq!(fish["items"]["anyOf"][1]["title"], "Salmon", "{fish}");
    assert_eq!(accepted[0], "✅ User provided the requested information!");
    assert!(accepted[1].contains("- Name: Ada Lovelace"), "{accepted:?}");
    assert!(accepted[1].contains("- Agreed to terms: true"));
    assert!(accepted[1].contains("- Favorite Integer: 7"));

    let (declined, _) = rust.texts(EVERYTHING_TOOL, json!({})).await;
    one_question(&rust, "elicitation-1", message);
    assert_eq!(
        declined[0],
        "❌ User declined to provide the requested information."
    );
    assert!(declined[1].contains("\"action\": \"decline\""));

    let (cancelled, _) = rust.texts(EVERYTHING_TOOL, json!({})).await;
    one_question(&rust, "elicitation-1", message);
    assert_eq!(cancelled[0], "⚠️ User cancelled the elicitation dialog.");
    assert!(cancelled[1].contains("\"action\": \"cancel\""));

    fronted.counted_three_ways(EVERYTHING_TOOL).await;
    // On the wire: one server/discover, one tools/list, and two tools/call per
    // call (the InputRequiredResult, then the retry with inputResponses). Unlike
    // the Python client, rmcp does not follow a call with tools/list.
    requests(&fronted.gw, "server/discover", "ok", 1.0).await;
    requests(&fronted.gw, "tools/list", "ok", 1.0).await;
    requests(&fronted.gw, "tools/call", "ok", 6.0).await;
    rust.close().await;
    fronted.stop().await;
}

#[tokio::test]
async fn rmcp_client_answers_server_everything_over_stdio() {
    everything_three_ways(Server::EverythingStdio).await;
}

#[tokio::test]
async fn rmcp_client_answers_server_everything_over_http() {
    everything_three_ways(Server::EverythingHttp).await;
}

// --- PyPI mcp 1.30.0 FastMCP (`ctx.elicit`) ---------------------------------------------

/// Three calls of `cell`'s tool through rmcp, answered accept, decline,
/// cancel: one question each, and the server received exactly those.
async fn rmcp_three_ways(fronted: &Fronted, cell: &ThreeWays) {
    let rust = Rust::connect(fronted, None).await;
    rust.handler
        .answer([accept(cell.accept.clone()), decline(), cancel()]);
    for want in &cell.received {
        let got = rust.received(cell.tool, cell.arguments.clone()).await;
        let q = one_question(&rust, "elicitation-1", cell.message);
        assert_eq!(q.schema["required"], json!([cell.required]), "{}", q.schema);
        assert_eq!(&got, want);
    }
    fronted.counted_three_ways(cell.tool).await;
    rust.close().await;
}

async fn fastmcp_three_ways(server: Server) {
    let fronted = server.front().await;
    rmcp_three_ways(&fronted, &fastmcp_register()).await;
    fronted.stop().await;
}

#[tokio::test]
async fn rmcp_client_answers_a_fastmcp_server_over_stdio() {
    fastmcp_three_ways(Server::LegacyPyStdio).await;
}

#[tokio::test]
async fn rmcp_client_answers_a_fastmcp_server_over_http() {
    fastmcp_three_ways(Server::LegacyPyHttp).await;
}

// --- npm sdk 1.32.2 (`elicitInput` with relatedRequestId) ------------------------------

async fn ts_sdk_three_ways(server: Server) {
    let fronted = server.front().await;
    rmcp_three_ways(&fronted, &ts_sdk_survey()).await;
    fronted.stop().await;
}

#[tokio::test]
async fn rmcp_client_answers_a_typescript_sdk_server_over_http() {
    ts_sdk_three_ways(Server::LegacyTsHttp).await;
}

#[tokio::test]
async fn rmcp_client_answers_a_typescript_sdk_server_over_stdio() {
    ts_sdk_three_ways(Server::LegacyTsStdio).await;
}

// --- examples/rooms (rmcp server) behind policies/rooms.toml -------------------------------

#[tokio::test]
async fn rmcp_client_books_the_big_room_and_answers_the_ticket_priority() {
    let fronted = Server::Rooms.front().await;
    let rust = Rust::connect(&fronted, Some(ALICE)).await;

    // The seed story: "the big room" is ambiguous, Studio B is taken at 09:00.
    rust.handler.answer([
        accept(json!({"room_id": "studio-b"})),
        accept(json!({"choice": "atrium"})),
    ]);
    let booking = json!({"day": "2026-09-17", "hour": 9, "room_hint": "the big room"});
    let (texts, booked) = rust.texts("book_room", booking).await;
    let asked = rust.handler.take_asked();
    assert_eq!(asked.len(), 2, "two rounds: {asked:#?}");
    assert_eq!(
        (asked[0].key.as_str(), asked[1].key.as_str()),
        ("room", "alternative"),
        "keys named by policies/rooms.toml"
    );
    assert_eq!(
        asked[0].message,
        "'the big room' matches more than one room. Which did you mean?"
    );
    assert_eq!(
        asked[0].schema["properties"]["room_id"]["enum"],
        json!(["atrium", "studio-b", "nook"])
    );
    assert_eq!(
        asked[1].message,
        "Studio B is already booked on 2026-09-17 at 09:00 (bk-1). Book another room instead?"
    );
    assert_eq!(
        asked[1].schema["properties"]["choice"]["enum"],
        json!(["atrium", "nook", "cancel"])
    );
    let sc = &booked["structuredContent"];
    assert_eq!(sc["room_id"], "atrium", "{booked}");
    let id = sc["booking_id"].as_str().expect("booking id").to_owned();
    assert_eq!(
        texts.join("\n"),
        format!("Booked The Atrium (atrium, 24 seats) on 2026-09-17 at 09:00. Booking id: {id}.")
    );
    fronted.counted("book_room", "completed", 1.0).await;
    // The server really holds it: it cancels exactly that booking.
    let (cancelled, _) = rust
        .texts("cancel_booking", json!({"booking_id": id}))
        .await;
    assert_eq!(
        cancelled.join("\n"),
        format!("Cancelled booking {id}: The Atrium on 2026-09-17 at 09:00.")
    );
    assert!(rust.handler.take_asked().is_empty());

    // create_ticket's priority, three ways.
    rust.handler
        .answer([accept(json!({"priority": 4})), decline(), cancel()]);
    let ticket = json!({"title": "Printer on fire"});
    let message = "What priority (1-5) should the ticket 'Printer on fire' have?";
    let (created, result) = rust.texts("create_ticket", ticket.clone()).await;
    let q = one_question(&rust, "priority", message);
    assert_eq!(q.schema["properties"]["priority"]["type"], "integer");
    assert_eq!(result["structuredContent"]["priority"], 4, "{result}");
    let ticket_id = result["structuredContent"]["ticket_id"].as_str().unwrap();
    assert_eq!(
        created.join("\n"),
        format!("Created ticket {ticket_id} 'Printer on fire' with priority 4.")
    );
    let (declined, _) = rust.texts("create_ticket", ticket.clone()).await;
    one_question(&rust, "priority", message);
    assert_eq!(
        declined.join("\n"),
        "No priority chosen; no ticket created."
    );
    let (cancelled, _) = rust.texts("create_ticket", ticket).await;
    one_question(&rust, "priority", message);
    assert_eq!(cancelled.join("\n"), "Ticket creation cancelled.");
    fronted.counted_three_ways("create_ticket").await;
    rust.close().await;
    fronted.stop().await;
}

/// The rooms policy as bob (not in facilities): the Atrium answer fails `authz`,
/// which reaches rmcp's `call_tool` as `ServiceError::McpError` carrying the
/// gateway's -32602 and `data.reason`; an out-of-range priority is re-asked
/// under the same key with the red mark, and rmcp's loop answers it again.
#[tokio::test]
async fn rmcp_client_meets_the_rooms_policy_denial_and_red_mark() {
    let fronted = Server::Rooms.front().await;
    let rust = Rust::connect(&fronted, Some(BOB)).await;
    rust.handler.answer([
        accept(json!({"room_id": "studio-b"})),
        accept(json!({"choice": "atrium"})),
    ]);
    let booking = json!({"day": "2026-09-17", "hour": 9, "room_hint": "the big room"});
    let denied = match rust.call("book_room", booking).await {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected the gateway's error, got {other:?}"),
    };
    assert_eq!(denied.code.0, -32602, "{denied:?}");
    assert_eq!(
        denied.message,
        "only the facilities group may book the Atrium"
    );
    assert_eq!(
        denied.data,
        Some(json!({"reason": "policy_denied", "field": "choice"}))
    );
    assert_eq!(rust.handler.take_asked().len(), 2);
    fronted.counted("book_room", "policy_denied", 1.0).await;

    rust.handler.answer([
        accept(json!({"priority": 9})),
        accept(json!({"priority": 3})),
    ]);
    let (_, result) = rust
        .texts("create_ticket", json!({"title": "Printer on fire"}))
        .await;
    let asked = rust.handler.take_asked();
    assert_eq!(asked.len(), 2, "asked, then re-asked: {asked:#?}");
    let plain = "What priority (1-5) should the ticket 'Printer on fire' have?";
    assert_eq!(
        (asked[0].key.as_str(), asked[1].key.as_str()),
        ("priority", "priority")
    );
    assert_eq!(asked[0].message, plain);
    assert_eq!(
        asked[1].message,
        format!("{plain}\n\n✗ priority must be at most 5; 9 was given.")
    );
    assert_eq!(result["structuredContent"]["priority"], 3, "{result}");
    fronted.counted("create_ticket", "completed", 1.0).await;
    rust.close().await;
    fronted.stop().await;
}

// --- the servers behind the traps (tests/interop_support) --------------------------------

async fn extra_three_ways(server: Extra) {
    let fronted = server.front().await;
    rmcp_three_ways(&fronted, &server.three_ways()).await;
    fronted.stop().await;
}

/// npm sdk 1.32.2 pushing without `relatedRequestId`: the question travels on the
/// standalone GET stream redmark opened before the call.
#[tokio::test]
async fn rmcp_client_answers_a_push_sent_on_the_standalone_get_stream() {
    extra_three_ways(Extra::TsGetStream).await;
}

/// PyPI mcp 2.3.0 (speaks 2026-07-28 too), initialized by redmark as a legacy session.
#[tokio::test]
async fn rmcp_client_answers_an_mcp2_server_through_a_legacy_session() {
    extra_three_ways(Extra::Py2Stdio).await;
}

// --- an rmcp trap: Peer::call_tool does not drive MRTR ------------------------------------

/// `RunningService::call_tool` drives the rounds, but the `Peer` it derefs to
/// (`service.peer()`, or a `Peer` clone handed to another task) has its own
/// `call_tool`, which treats an `InputRequiredResult` as
/// `ServiceError::UnexpectedResponse` and sends nothing more. redmark cannot
/// tell, so the operation is held (its upstream call still waiting for the
/// answer) until `[mrtr] ttl`, when the server hears `cancel`.
#[tokio::test]
async fn rmcp_peer_call_tool_drops_the_question_and_leaves_it_held_until_the_ttl() {
    let fronted = Server::EverythingStdio
        .front_with("[mrtr]\nttl = \"15s\"\n")
        .await;
    let rust = Rust::connect(&fronted, None).await;
    let tools = rust.tool_names().await;
    assert!(tools.iter().any(|t| t == EVERYTHING_TOOL), "{tools:?}");
    let params = CallToolRequestParams::new(EVERYTHING_TOOL);
    let refused = rust.service.peer().call_tool(params).await;
    assert!(
        matches!(refused, Err(ServiceError::UnexpectedResponse)),
        "{refused:?}"
    );
    assert!(rust.handler.take_asked().is_empty(), "never asked");
    fronted
        .gw
        .wait_metric("redmark_pending_operations", 1.0)
        .await;
    fronted
        .counted(EVERYTHING_TOOL, "operation_expired", 1.0)
        .await;
    fronted
        .gw
        .wait_metric("redmark_pending_operations", 0.0)
        .await;
    rust.close().await;
    fronted.stop().await;
}
