//! End to end, Python client: PyPI `mcp` 2.3.0 (`Client(url, mode="2026-07-28")`
//! with an elicitation callback) drives redmark, which fronts real legacy
//! servers that push `elicitation/create` while a `tools/call` is pending.
//! Each push reaches the client as an `InputRequiredResult` round, the SDK
//! answers it through its callback and retries, and the server's own result
//! shows exactly the outcome it received.
//!
//! The Node client (`@modelcontextprotocol/client` 2.4.0) runs the same cells
//! in tests/mrtr_e2e_ts.rs; the per-server checks live in tests/mrtr_e2e_support/.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod mrtr_e2e_support;

use mrtr_e2e_support::*;
use serde_json::json;

const PY: Client = Client::Py;

// --- server-everything --------------------------------------------------------

#[tokio::test]
async fn py_client_answers_server_everything_over_stdio() {
    let fronted = Server::EverythingStdio.front().await;
    let out = fronted.run(PY, &everything_script()).await;
    everything_outcomes(&out, &fronted).await;
    fronted.stop().await;
}

#[tokio::test]
async fn py_client_answers_server_everything_over_http() {
    let fronted = Server::EverythingHttp.front().await;
    let out = fronted.run(PY, &everything_script()).await;
    everything_outcomes(&out, &fronted).await;
    fronted.stop().await;
}

// --- the rooms example ----------------------------------------------------------

#[tokio::test]
async fn py_client_books_the_big_room_through_two_questions() {
    let fronted = Server::Rooms.front().await;
    let out = fronted.run(PY, &seed_story_script()).await;
    let booking = seed_story_outcome(&out);
    fronted.counted("book_room", "completed", 1.0).await;
    seed_story_booking_exists(&fronted, PY, &booking).await;
    fronted.stop().await;
}

#[tokio::test]
async fn py_client_meets_the_rooms_policy_denial_and_red_mark() {
    let fronted = Server::Rooms.front().await;
    let out = fronted.run_as(PY, BOB, &policy_script()).await;
    policy_outcomes(&out, &fronted).await;
    fronted.stop().await;
}

#[tokio::test]
async fn py_client_answers_the_ticket_priority_three_ways() {
    let fronted = Server::Rooms.front().await;
    let out = fronted.run(PY, &ticket_script()).await;
    ticket_outcomes(&out, &fronted).await;
    fronted.stop().await;
}

// --- PyPI mcp 1.30.0 FastMCP (`ctx.elicit`) ------------------------------------------

#[tokio::test]
async fn py_client_answers_a_fastmcp_server_over_stdio() {
    let fronted = Server::LegacyPyStdio.front().await;
    fastmcp_register().run(&fronted, PY).await;
    fronted.stop().await;
}

#[tokio::test]
async fn py_client_answers_a_fastmcp_server_over_http() {
    let fronted = Server::LegacyPyHttp.front().await;
    fastmcp_register().run(&fronted, PY).await;
    fronted.stop().await;
}

// --- npm sdk 1.32.2 (`elicitInput` with relatedRequestId) ----------------------------

#[tokio::test]
async fn py_client_answers_a_typescript_sdk_server_over_http() {
    let fronted = Server::LegacyTsHttp.front().await;
    ts_sdk_survey().run(&fronted, PY).await;
    fronted.stop().await;
}

#[tokio::test]
async fn py_client_answers_a_typescript_sdk_server_over_stdio() {
    let fronted = Server::LegacyTsStdio.front().await;
    ts_sdk_survey().run(&fronted, PY).await;
    fronted.stop().await;
}

// --- a client that cannot answer questions ---------------------------------------

/// The capability is part of the upstream session's profile: a client
/// without it meets a server that was initialized without it, so
/// server-everything never registers its elicitation tool for that client,
/// even after a capable client listed it through the same gateway.
#[tokio::test]
async fn py_client_without_elicitation_does_not_see_the_elicitation_tool() {
    let fronted = Server::EverythingStdio.front().await;
    let url = &fronted.gw.url;
    let capable = PY
        .run(
            url,
            &json!({"steps": [{"op": "list_tools"}], "elicitation": []}),
        )
        .await;
    assert!(
        capable.tool_names(0).iter().any(|t| t == EVERYTHING_TOOL),
        "{:?}",
        capable.tool_names(0)
    );

    let script = json!({"steps": [
        {"op": "list_tools"},
        {"op": "call_tool", "name": EVERYTHING_TOOL, "arguments": {}},
        {"op": "call_tool", "name": "echo", "arguments": {"message": "still here"}},
    ]});
    let out = fronted.run(PY, &script).await;
    let tools = out.tool_names(0);
    assert!(tools.iter().any(|t| t == "echo"), "{tools:?}");
    assert!(
        !tools.iter().any(|t| t.starts_with("trigger-elicitation")),
        "{tools:?}"
    );
    // Not among this client's tools: the gateway refuses the call itself.
    let refused = out.step(1);
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(
        refused["error"]["data"]["reason"], "unknown_tool",
        "{refused}"
    );
    assert_eq!(out.text(2), "Echo: still here");
    assert!(out.elicitations().is_empty(), "{:#?}", out.lines);
    fronted.stop().await;
}

#[tokio::test]
async fn py_client_without_elicitation_gets_the_rooms_fallback() {
    let fronted = Server::Rooms.front().await;
    let script = json!({"steps": [
        {"op": "call_tool", "name": "book_room",
         "arguments": {"day": "2026-09-17", "hour": 9, "room_hint": "the big room"}},
        {"op": "call_tool", "name": "create_ticket", "arguments": {"title": "Printer"}},
        // An exact hint needs no question: it still books.
        {"op": "call_tool", "name": "book_room",
         "arguments": {"day": "2026-09-17", "hour": 9, "room_hint": "atrium"}},
    ]});
    let out = fronted.run(PY, &script).await;
    rooms_fallback(&out, 0);
    let ticket = out.texts(1).join("\n");
    assert_eq!(out.result(1)["isError"], true, "{}", out.step(1));
    assert!(
        ticket.contains("the client did not declare the `elicitation` capability"),
        "{ticket}"
    );
    assert_eq!(out.result(2)["structuredContent"]["room_id"], "atrium");
    // The server's fallback is its own answer: the call completed, nothing was refused.
    fronted.counted("book_room", "completed", 2.0).await;
    fronted.stop().await;
}

// --- a client whose elicitation handler fails ------------------------------------

/// Interoperability finding, recorded as it behaves: when the client's
/// elicitation handler fails, the SDK (mcp 2.3.0 here; @modelcontextprotocol/
/// client 2.4.0 does the same) ends the call locally and sends nothing: a
/// 2026-07-28 client has no message for "I give up on this round". The
/// gateway cannot tell, so the operation keeps its leased upstream session
/// and the server keeps waiting until `[mrtr] ttl` (default 10 minutes);
/// then the server hears `cancel` and the session is released.
#[tokio::test]
async fn py_client_error_answer_leaves_the_operation_held_until_the_ttl() {
    let fronted = Server::EverythingStdio
        .front_with("[mrtr]\nttl = \"15s\"\n")
        .await;
    let script = json!({
        "steps": [{"op": "call_tool", "name": EVERYTHING_TOOL, "arguments": {}}],
        "elicitation": [{"error": {"code": -32000, "message": "the user closed the app"}}],
    });
    let out = fronted.run(PY, &script).await;
    assert_eq!(out.asked_in(0).len(), 1);
    let failed = out.step(0);
    assert_eq!(failed["ok"], false, "{failed}");
    assert_eq!(
        failed["error"]["message"], "the user closed the app",
        "{failed}"
    );

    let leased = common::sessions("leased");
    assert_eq!(
        fronted.gw.metric(&leased).await,
        Some(1.0),
        "still held for the server's open question"
    );
    assert_eq!(
        fronted.gw.metric("redmark_pending_operations").await,
        Some(1.0)
    );
    fronted
        .counted(EVERYTHING_TOOL, "operation_expired", 1.0)
        .await;
    fronted.gw.wait_metric(&leased, 0.0).await;
    fronted.stop().await;
}
