//! 2025-era clients in front of legacy servers: PyPI `mcp` 1.30.0
//! `ClientSession` opens a session with `initialize` through redmark, and the
//! server's pushed questions reach it on the call's SSE stream, held to the
//! same policy as a 2026 client's answers (docs/src/concepts/eras.md, "Two eras on one
//! endpoint"). The cells and their checks are tests/mrtr_e2e.rs's: the same
//! servers, scripts and outcomes, with a 2025-era client.

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

const PY25: Client = Client::Py2025;

#[tokio::test]
async fn a_2025_client_answers_server_everything_over_stdio() {
    let fronted = Server::EverythingStdio.front().await;
    let out = fronted.run(PY25, &everything_script()).await;
    everything_outcomes(&out, &fronted).await;
    fronted.stop().await;
}

#[tokio::test]
async fn a_2025_client_answers_server_everything_over_http() {
    let fronted = Server::EverythingHttp.front().await;
    let out = fronted.run(PY25, &everything_script()).await;
    everything_outcomes(&out, &fronted).await;
    fronted.stop().await;
}

#[tokio::test]
async fn a_2025_client_books_the_big_room_through_two_questions() {
    let fronted = Server::Rooms.front().await;
    let out = fronted.run(PY25, &seed_story_script()).await;
    let init = out
        .lines
        .iter()
        .find(|l| l["event"] == "initialized")
        .expect("initialized");
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(
        init["result"]["serverInfo"]["name"], "rooms-example",
        "{init}"
    );
    let session = init["session"].as_str().expect("a session id");
    assert!(
        session.bytes().all(|b| (0x21..=0x7e).contains(&b)),
        "{session}"
    );
    let booking = seed_story_outcome(&out);
    fronted.counted("book_room", "completed", 1.0).await;
    seed_story_booking_exists(&fronted, PY25, &booking).await;
    fronted.stop().await;
}

#[tokio::test]
async fn a_2025_clients_answers_meet_the_policy_and_its_red_mark() {
    let fronted = Server::Rooms.front().await;
    let out = fronted.run_as(PY25, BOB, &policy_script()).await;
    policy_outcomes(&out, &fronted).await;
    fronted.stop().await;
}

#[tokio::test]
async fn a_2025_client_answers_the_ticket_priority_three_ways() {
    let fronted = Server::Rooms.front().await;
    let out = fronted.run(PY25, &ticket_script()).await;
    ticket_outcomes(&out, &fronted).await;
    fronted.stop().await;
}

#[tokio::test]
async fn a_2025_client_answers_a_fastmcp_server_over_stdio() {
    let fronted = Server::LegacyPyStdio.front().await;
    fastmcp_register().run(&fronted, PY25).await;
    fronted.stop().await;
}

#[tokio::test]
async fn a_2025_client_answers_a_fastmcp_server_over_http() {
    let fronted = Server::LegacyPyHttp.front().await;
    fastmcp_register().run(&fronted, PY25).await;
    fronted.stop().await;
}

#[tokio::test]
async fn a_2025_client_answers_a_typescript_sdk_server_over_stdio() {
    let fronted = Server::LegacyTsStdio.front().await;
    ts_sdk_survey().run(&fronted, PY25).await;
    fronted.stop().await;
}

/// ping and logging/setLevel are the session's own; nothing waits afterwards.
#[tokio::test]
async fn a_2025_session_answers_ping_and_set_level_and_leaves_nothing_pending() {
    let fronted = Server::Rooms.front().await;
    let out = fronted
        .run(
            PY25,
            &json!({"steps": [{"op": "ping"}, {"op": "set_level", "level": "debug"},
                               {"op": "list_tools"}]}),
        )
        .await;
    assert_eq!(out.result(0), &json!({}));
    assert_eq!(out.result(1), &json!({}));
    assert!(out.tool_names(2).contains(&"book_room".to_owned()));
    fronted
        .gw
        .wait_metric("redmark_pending_operations", 0.0)
        .await;
    fronted.stop().await;
}

// --- npm @modelcontextprotocol/sdk 1.32.2 `Client`, the other 2025-era SDK ---

const TS25: Client = Client::Ts2025;

#[tokio::test]
async fn a_2025_node_client_books_the_big_room_through_two_questions() {
    let fronted = Server::Rooms.front().await;
    let out = fronted.run(TS25, &seed_story_script()).await;
    let init = out
        .lines
        .iter()
        .find(|l| l["event"] == "initialized")
        .expect("initialized");
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert!(init["session"].as_str().is_some(), "{init}");
    let booking = seed_story_outcome(&out);
    seed_story_booking_exists(&fronted, TS25, &booking).await;
    fronted.stop().await;
}

#[tokio::test]
async fn a_2025_node_client_answers_a_fastmcp_server_over_http() {
    let fronted = Server::LegacyPyHttp.front().await;
    fastmcp_register().run(&fronted, TS25).await;
    fronted.stop().await;
}

#[tokio::test]
async fn a_2025_node_clients_answers_meet_the_policy_and_its_red_mark() {
    let fronted = Server::Rooms.front().await;
    let out = fronted.run_as(TS25, BOB, &policy_script()).await;
    policy_outcomes(&out, &fronted).await;
    fronted.stop().await;
}
