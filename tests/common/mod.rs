//! The shared harness of the integration tests. Include with `mod common;`.
//!
//! * [`gateway`]: `TestGateway` (in process, port 0), `McpClient` (2026-07-28
//!   POSTs to one endpoint), `Resp`, `SseReader`, metric samples;
//! * [`fixture_log`]: `eventually` (the one bounded wait), `FixtureLog` (the
//!   JSON-lines log a fixture server writes) and `Fixture` (its private
//!   directory; each area's support module adds the config of its own server
//!   in an `impl Fixture` block);
//! * [`walker`]: `Op`, one logical operation walked round by round, and the
//!   checks of `InputRequiredResult`s and complete results;
//! * [`certs`]: a test CA (rcgen), server and client certificates, HTTPS clients;
//! * [`era2025`]: `Session2025`, a 2025-era client spoken by hand;
//! * [`errors`]: `assert_error`, the one check of an error answer;
//! * [`schema`]: validation against the 2026-07-28 JSON schema;
//! * [`peers`]: child processes (legacy servers, the `redmark` binary, the
//!   SDK client drivers) and the port a child listens on.
//!
//! This file: where the test peers are, and gateway configs.
#![allow(dead_code)]

pub mod certs;
pub mod era2025;
pub mod errors;
pub mod fixture_log;
pub mod gateway;
pub mod peers;
pub mod schema;
pub mod tasks;
pub mod walker;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

#[allow(unused_imports)]
pub use certs::*;
#[allow(unused_imports)]
pub use era2025::*;
#[allow(unused_imports)]
pub use errors::*;
#[allow(unused_imports)]
pub use fixture_log::*;
#[allow(unused_imports)]
pub use gateway::*;
#[allow(unused_imports)]
pub use peers::*;
#[allow(unused_imports)]
pub use schema::*;
#[allow(unused_imports)]
pub use tasks::*;
#[allow(unused_imports)]
pub use walker::*;

pub const VERSION: &str = "2026-07-28";

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Installs the test peers once per test binary (idempotent and quick when done).
pub fn ensure_deps() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let status = std::process::Command::new("bash")
            .arg(repo().join("scripts/setup-test-deps.sh"))
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run scripts/setup-test-deps.sh");
        assert!(status.success(), "scripts/setup-test-deps.sh failed");
    });
}

pub fn everything_js() -> PathBuf {
    ensure_deps();
    repo().join(".cache/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

pub fn client_python() -> PathBuf {
    ensure_deps();
    repo().join(".cache/venv-client/bin/python")
}

pub fn legacy_python() -> PathBuf {
    ensure_deps();
    repo().join(".cache/venv-legacy/bin/python")
}

/// The venv with PyPI `fastmcp` 2.x (the standalone FastMCP), a legacy server SDK.
pub fn fastmcp_python() -> PathBuf {
    ensure_deps();
    repo().join(".cache/venv-fastmcp/bin/python")
}

/// A file under tests/fixtures/.
pub fn fixture_file(name: &str) -> PathBuf {
    repo().join("tests/fixtures").join(name)
}

/// The rooms example binary, `<target>/<profile>/examples/rooms`.
pub fn rooms_bin() -> PathBuf {
    example_bin("rooms")
}

/// An example binary, `<target>/<profile>/examples/NAME`. Only a whole
/// `cargo test --all-targets` builds examples; when a single test target runs
/// (`cargo test --test mrtr_e2e`), it is built here once, into the same
/// target directory and profile as the test.
pub fn example_bin(name: &'static str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<&'static str, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(Mutex::default);
    let mut built = built
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    built
        .entry(name)
        .or_insert_with(|| {
            let exe = PathBuf::from(env!("CARGO_BIN_EXE_redmark"));
            let profile_dir = exe.parent().expect("profile dir");
            let bin = profile_dir.join("examples").join(name);
            if !bin.exists() {
                let target_dir = profile_dir.parent().expect("target dir");
                let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                let mut build = std::process::Command::new(cargo);
                build
                    .current_dir(repo())
                    .args(["build", "--example", name, "--target-dir"])
                    .arg(target_dir);
                if profile_dir.file_name().is_some_and(|p| p == "release") {
                    build.arg("--release");
                }
                let status = build.status().expect("run cargo build --example");
                assert!(status.success(), "cargo build --example {name} failed");
            }
            assert!(bin.exists(), "no {name} example at {}", bin.display());
            bin
        })
        .clone()
}

/// A TOML string literal.
pub fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// A TOML string literal of a path.
pub fn toml_path(p: &std::path::Path) -> String {
    toml_str(p.to_str().expect("UTF-8 path"))
}

/// A config with one route at `/mcp` in front of a stdio command.
pub fn stdio_config(command: &[&str], extra: &str) -> String {
    let cmd: Vec<String> = command.iter().map(|c| toml_str(c)).collect();
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{extra}\n[[route]]\nname = \"main\"\npath = \"/mcp\"\n[route.upstream]\ncommand = [{}]\n",
        cmd.join(", ")
    )
}

pub fn http_config(url: &str, extra: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{extra}\n[[route]]\nname = \"main\"\npath = \"/mcp\"\n[route.upstream]\nurl = {}\n",
        toml_str(url)
    )
}

/// An `[[auth.api_key]]` table: the principal of API key `key`, in `groups`.
pub fn api_key(key: &str, principal: &str, groups: &[&str]) -> String {
    let groups: Vec<String> = groups.iter().map(|g| toml_str(g)).collect();
    format!(
        "[[auth.api_key]]\nsha256 = \"{}\"\nprincipal = {}\ngroups = [{}]\n",
        redmark::config::key_digest_hex(key),
        toml_str(principal),
        groups.join(", ")
    )
}

pub fn everything_stdio_config(extra: &str) -> String {
    let js = everything_js();
    stdio_config(&["node", js.to_str().unwrap(), "stdio"], extra)
}

pub fn rooms_config(extra: &str) -> String {
    let bin = rooms_bin();
    stdio_config(&[bin.to_str().unwrap()], extra) + &rooms_state_env()
}

/// The `env` line of a rooms upstream: a bookings file of its own, shared
/// by every process redmark runs of it (examples/rooms/store.rs), under
/// cargo's target tmp dir.
pub fn rooms_state_env() -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("rooms-{}-{n}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    format!("env = {{ ROOMS_STATE = {} }}\n", toml_path(&path))
}

/// `examples/rooms/redmark.toml` as shipped, written to `dir` with the rooms
/// binary of this test's own target directory (`CARGO_TARGET_DIR` may not be
/// `<repo>/target`; the binary is built if missing) and its other paths made
/// absolute. Returns the config's path.
pub fn rooms_example(dir: &std::path::Path) -> std::path::PathBuf {
    let shipped = std::fs::read_to_string(repo().join("examples/rooms/redmark.toml")).unwrap();
    let adapted = shipped
        .replace(
            "\"../../target/debug/examples/rooms\"",
            &toml_path(&rooms_bin()),
        )
        .replace(
            "\"../../policies/rooms.toml\"",
            &toml_path(&repo().join("policies/rooms.toml")),
        )
        .replace(
            "\"../../target/rooms-state.json\"",
            &toml_path(&dir.join("rooms-state.json")),
        )
        .replace(
            "\"../../target/rooms-audit.jsonl\"",
            &toml_path(&dir.join("audit.jsonl")),
        );
    assert!(
        !adapted.contains("../../"),
        "a path in the example config changed: {adapted}"
    );
    let config = dir.join("redmark.toml");
    std::fs::write(&config, adapted).unwrap();
    config
}
