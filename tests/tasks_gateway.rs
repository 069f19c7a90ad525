//! Gateway-made tasks (the `io.modelcontextprotocol/tasks` extension) for a
//! legacy server that has none: the rooms example (a real rmcp server on
//! 2025-era stdio that pushes `elicitation/create` while a call is pending)
//! behind a route with `[route.tasks]` and a policy that says which tools
//! become tasks. Raw HTTP, every rule of the extension redmark implements.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Client capabilities that declare the extension (and form elicitation).
fn declaring() -> Value {
    json!({"elicitation": {"form": {}}, "extensions": {TASKS: {}}})
}

/// The rooms server behind a route with `policy` (a policy file's text)
/// and `[route.tasks]` (`tasks`: its keys; `None`: no section).
fn config(fx: &Fixture, policy: &str, tasks: Option<&str>) -> String {
    let mut text = rooms_config("").replacen(
        "[route.upstream]",
        &format!("{}\n[route.upstream]", fx.policy(policy)),
        1,
    );
    if let Some(tasks) = tasks {
        text.push_str(&format!("\n[route.tasks]\n{tasks}\n"));
    }
    text
}

#[tokio::test]
async fn only_a_route_with_tasks_offers_the_extension() {
    let fx = Fixture::new();
    let with = TestGateway::start(&config(&fx, "", Some(""))).await;
    let discovered = with.rpc("server/discover", json!({}), declaring()).await;
    let caps = &complete("server/discover", &discovered)["capabilities"];
    assert_eq!(caps["extensions"][TASKS], json!({}), "{caps}");

    let fx = Fixture::new();
    let without = TestGateway::start(&config(&fx, "", None)).await;
    let discovered = without.rpc("server/discover", json!({}), declaring()).await;
    let caps = &complete("server/discover", &discovered)["capabilities"];
    assert!(caps.get("extensions").is_none(), "{caps}");
}

#[test]
fn check_refuses_a_task_policy_on_a_route_without_tasks_and_unusable_task_settings() {
    let policy = "[tool.book_room]\ntask = \"required\"\n";
    // Each case has a fixture (a policy file) of its own.
    let (a, b, c) = (Fixture::new(), Fixture::new(), Fixture::new());
    let cases = [
        (
            config(&a, policy, None),
            "the policy sets `task` but the route has no [route.tasks] section",
        ),
        (
            config(&b, "", Some("after = \"2h\"\nttl = \"1h\"")),
            "after (7200s) must be shorter than ttl (3600s)",
        ),
        (
            config(&c, "", Some("max_per_principal = 9\nmax_total = 3")),
            "max_per_principal (9) is larger than max_total (3)",
        ),
    ];
    let fx = Fixture::new();
    for (text, expected) in cases {
        let file = fx.path("redmark.toml");
        std::fs::write(&file, &text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_redmark"))
            .args(["check", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{text}\n{stdout}{stderr}");
        assert!(
            stderr.contains(expected) || stdout.contains(expected),
            "expected `{expected}`:\n{stdout}{stderr}"
        );
    }
    // The same settings, made sound, pass.
    let file = fx.path("redmark.toml");
    std::fs::write(&file, config(&fx, policy, Some("after = \"1s\""))).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_redmark"))
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
