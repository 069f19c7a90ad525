//! Interoperability, the cells tests/mrtr_e2e.rs and tests/mrtr_e2e_ts.rs leave
//! open, and the traps behind the matrix, with the same real clients: PyPI
//! `mcp` 2.3.0 (`mode="2026-07-28"`) and npm `@modelcontextprotocol/client`
//! 2.4.0 (pinned to 2026-07-28 unless a test says otherwise).
//!
//! * the Node client in front of FastMCP 1.30 over Streamable HTTP (the only
//!   cell of those two columns the e2e tests did not run), and in front of the
//!   npm sdk 1.32.2 server over stdio (a row beyond the matrix that
//!   tests/mrtr_e2e.rs runs with the Python client);
//! * an npm sdk 1.32.2 server that pushes WITHOUT `relatedRequestId`: the sdk
//!   sends that push on the standalone GET stream and drops it when none is
//!   open, so it only arrives because redmark opens that stream right after
//!   `notifications/initialized`, before any call;
//! * a PyPI mcp 2.3.0 server, which also speaks 2026-07-28: redmark still
//!   `initialize`s it, so its `ctx.elicit` pushes as in any legacy session;
//! * the Node client in `auto` mode: over HTTP it probes `server/discover` in
//!   place (the sibling-process probe is only for its stdio transport) and
//!   lands on 2026-07-28.

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

use interop_support::*;
use mrtr_e2e_support::*;
use serde_json::json;

// --- FastMCP 1.30 over Streamable HTTP, Node client ------------------------------------

#[tokio::test]
async fn ts_client_answers_a_fastmcp_server_over_http() {
    let fronted = Server::LegacyPyHttp.front().await;
    let out = fastmcp_register().run(&fronted, Client::Ts).await;
    assert_eq!(
        out.lines[0]["serverInfo"]["name"], "e2e-legacy-py",
        "discover answered from FastMCP's initialize: {}",
        out.lines[0]
    );
    fronted.stop().await;
}

// --- npm sdk 1.32.2 over stdio, Node client ---------------------------------------------

#[tokio::test]
async fn ts_client_answers_a_typescript_sdk_server_over_stdio() {
    let fronted = Server::LegacyTsStdio.front().await;
    ts_sdk_survey().run(&fronted, Client::Ts).await;
    fronted.stop().await;
}

/// `client` runs `server`'s three calls (accept, decline, cancel) through the gateway.
async fn three_ways(server: Extra, client: Client) {
    let fronted = server.front().await;
    server.three_ways().run(&fronted, client).await;
    fronted.stop().await;
}

// --- npm sdk 1.32.2, a push without relatedRequestId (standalone GET stream) ------------

#[tokio::test]
async fn py_client_answers_a_push_sent_on_the_standalone_get_stream() {
    three_ways(Extra::TsGetStream, Client::Py).await;
}

#[tokio::test]
async fn ts_client_answers_a_push_sent_on_the_standalone_get_stream() {
    three_ways(Extra::TsGetStream, Client::Ts).await;
}

// --- PyPI mcp 2.3.0, a server that also speaks 2026-07-28 ------------------------------

/// redmark initializes the upstream session (2025-11-25) even though this server
/// would answer `server/discover`: in a 2026-07-28 exchange its `ctx.elicit` has no
/// back-channel and fails the call (-32600), in the legacy session it pushes.
#[tokio::test]
async fn py_client_answers_an_mcp2_server_through_a_legacy_session() {
    three_ways(Extra::Py2Stdio, Client::Py).await;
}

#[tokio::test]
async fn ts_client_answers_an_mcp2_server_through_a_legacy_session() {
    three_ways(Extra::Py2Stdio, Client::Ts).await;
}

// --- the Node client in `auto` mode ---------------------------------------------------

/// `versionNegotiation: {mode: 'auto'}` over HTTP probes `server/discover` on the
/// connection itself, gets 2026-07-28 from redmark (Client::run asserts the
/// negotiated version) and then drives the same rounds as the pinned client.
/// The gateway saw exactly one `server/discover`, and every request it counted was `ok`.
#[tokio::test]
async fn ts_client_in_auto_mode_negotiates_2026_and_answers_server_everything() {
    let fronted = Server::EverythingStdio.front().await;
    let mut script = everything_script();
    script["mode"] = json!("auto");
    let out = fronted.run(Client::Ts, &script).await;
    everything_outcomes(&out, &fronted).await;
    fronted
        .gw
        .wait_metric(&common::requests("server/discover", "ok"), 1.0)
        .await;
    // No legacy fallback: an `initialize` (or anything else refused) would show
    // as a request with another outcome (a refused parse is counted as method "-").
    let metrics = fronted.gw.metrics().await;
    let counted: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("redmark_requests_total{"))
        .collect();
    assert!(
        counted.iter().all(|l| l.contains("outcome=\"ok\"")),
        "{counted:#?}"
    );
    assert!(
        !counted.iter().any(|l| l.contains("method=\"initialize\"")),
        "{counted:#?}"
    );
    fronted.stop().await;
}
