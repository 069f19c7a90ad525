//! End to end, Node client: npm `@modelcontextprotocol/client` 2.4.0, pinned
//! to 2026-07-28 (`versionNegotiation: {mode: {pin}}`, so it starts with
//! `server/discover`) with an `elicitation/create` handler, drives redmark in
//! front of real legacy servers that push their questions mid-call. The SDK
//! auto-fulfils each `InputRequiredResult` round through that handler, which
//! also sees the input request key (tests/peers/ts_client.mjs prints it).
//!
//! The same cells with the Python client are in tests/mrtr_e2e.rs.

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

const TS: Client = Client::Ts;

#[tokio::test]
async fn ts_client_answers_server_everything_over_stdio() {
    let fronted = Server::EverythingStdio.front().await;
    let out = fronted.run(TS, &everything_script()).await;
    assert_eq!(
        out.lines[0]["serverInfo"]["name"], "mcp-servers/everything",
        "discover answered from the legacy initialize: {}",
        out.lines[0]
    );
    everything_outcomes(&out, &fronted).await;
    fronted.stop().await;
}

#[tokio::test]
async fn ts_client_answers_server_everything_over_http() {
    let fronted = Server::EverythingHttp.front().await;
    let out = fronted.run(TS, &everything_script()).await;
    everything_outcomes(&out, &fronted).await;
    fronted.stop().await;
}

#[tokio::test]
async fn ts_client_books_the_big_room_under_the_policy_keys() {
    let fronted = Server::Rooms.front().await;
    let out = fronted.run(TS, &seed_story_script()).await;
    let booking = seed_story_outcome(&out);
    fronted.counted("book_room", "completed", 1.0).await;
    seed_story_booking_exists(&fronted, TS, &booking).await;
    fronted.stop().await;
}

#[tokio::test]
async fn ts_client_meets_the_rooms_policy_denial_and_red_mark() {
    let fronted = Server::Rooms.front().await;
    let out = fronted.run_as(TS, BOB, &policy_script()).await;
    policy_outcomes(&out, &fronted).await;
    fronted.stop().await;
}

#[tokio::test]
async fn ts_client_answers_the_ticket_priority_three_ways() {
    let fronted = Server::Rooms.front().await;
    let out = fronted.run(TS, &ticket_script()).await;
    ticket_outcomes(&out, &fronted).await;
    fronted.stop().await;
}

#[tokio::test]
async fn ts_client_answers_a_fastmcp_server_over_stdio() {
    let fronted = Server::LegacyPyStdio.front().await;
    fastmcp_register().run(&fronted, TS).await;
    fronted.stop().await;
}

#[tokio::test]
async fn ts_client_answers_a_typescript_sdk_server_over_http() {
    let fronted = Server::LegacyTsHttp.front().await;
    ts_sdk_survey().run(&fronted, TS).await;
    fronted.stop().await;
}

#[tokio::test]
async fn ts_client_without_elicitation_never_gets_a_question() {
    let rooms = Server::Rooms.front().await;
    let script = json!({"steps": [
        {"op": "call_tool", "name": "book_room",
         "arguments": {"day": "2026-09-17", "hour": 9, "room_hint": "the big room"}},
    ]});
    let out = rooms.run(TS, &script).await;
    rooms_fallback(&out, 0);
    rooms.stop().await;

    let everything = Server::EverythingStdio.front().await;
    let out = TS
        .run(
            &everything.gw.url,
            &json!({"steps": [{"op": "list_tools"}]}),
        )
        .await;
    let tools = out.tool_names(0);
    assert!(tools.iter().any(|t| t == "echo"), "{tools:?}");
    assert!(!tools.iter().any(|t| t == EVERYTHING_TOOL), "{tools:?}");
    everything.stop().await;
}
