//! `/readyz` tells the truth about every route's upstream: 503 with each
//! route's state and last error while one cannot be reached (a stdio command
//! that does not exist, an HTTP server that is not up yet), 200 once it can;
//! `/healthz` stays 200 throughout. The failure is logged at ERROR once per
//! change of state, not once per request or probe.

// A test may panic (that is how it fails).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

async fn get(url: &str) -> (u16, String) {
    let resp = reqwest::get(url).await.expect("GET");
    (resp.status().as_u16(), resp.text().await.expect("body"))
}

async fn readyz(admin: &str) -> (u16, Value) {
    let (status, text) = get(&format!("{admin}/readyz")).await;
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (status, body)
}

/// A port nothing listens on (bound, then released).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test]
async fn a_missing_stdio_command_makes_readyz_503_with_the_reason() {
    let fx = Fixture::new();
    let missing = fx.path("no-such-server");
    let gw = TestGateway::start(&stdio_config(&[missing.to_str().unwrap()], "")).await;
    let (status, body) = readyz(&gw.admin).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "not_ready");
    let route = &body["routes"][0];
    assert_eq!(route["route"], "main");
    assert_eq!(route["path"], "/mcp");
    assert_eq!(route["state"], "down");
    assert_eq!(route["last_reason"], "upstream_unavailable");
    let error = route["last_error"].as_str().unwrap();
    assert!(error.contains("no-such-server"), "{error}");
    // Liveness is not readiness: the process itself is fine.
    assert_eq!(get(&format!("{}/healthz", gw.admin)).await.0, 200);
    // A client meanwhile gets the same reason.
    let r = gw.rpc("tools/list", json!({}), json!({})).await;
    assert_eq!(r.reason(), "upstream_unavailable", "{}", r.raw);
    gw.stop().await;
}

#[tokio::test]
async fn an_http_upstream_started_later_turns_readyz_200_and_is_logged_once() {
    let port = free_port();
    let fx = Fixture::new();
    let config = fx.path("redmark.toml");
    std::fs::write(
        &config,
        http_config(&format!("http://127.0.0.1:{port}/mcp"), ""),
    )
    .unwrap();
    let gw = RedmarkProcess::start(&config, true, &[]).await;
    for _ in 0..3 {
        let (status, body) = readyz(&gw.admin).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["routes"][0]["state"], "down", "{body}");
    }
    // Requests meanwhile fail too, and are no new state either.
    for _ in 0..2 {
        let r = McpClient::new(gw.url("/mcp"))
            .rpc("tools/list", json!({}), json!({}))
            .await;
        assert_eq!(r.reason(), "upstream_unavailable", "{}", r.raw);
    }
    let (_server, _) = everything_http_on(port).await;
    let body = eventually("/readyz to be 200", || async {
        match readyz(&gw.admin).await {
            (200, body) => Ok(body),
            (status, body) => Err(format!("{status} {body}")),
        }
    })
    .await;
    assert_eq!(body["status"], "ready");
    assert_eq!(body["routes"][0]["state"], "up");
    let lines = gw.stop().await;
    let logs: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let down: Vec<&Value> = logs
        .iter()
        .filter(|l| l["message"] == "upstream cannot be reached: the route is not ready")
        .collect();
    assert_eq!(down.len(), 1, "one ERROR per change of state: {lines:#?}");
    assert_eq!(down[0]["level"], "ERROR");
    assert_eq!(down[0]["route"], "main");
    assert_eq!(down[0]["reason"], "upstream_unavailable");
    let up = logs
        .iter()
        .filter(|l| l["message"] == "upstream reachable again")
        .count();
    assert_eq!(up, 1, "{lines:#?}");
}
