//! What the `upstream_faults*.rs` tests share: a gateway (with an audit log)
//! in front of `tests/fixtures/fault_server.py` over stdio or Streamable
//! HTTP, small configured bounds, and the checks every fault test ends with.
//! Include with `mod upstream_faults_support;` after `mod common;` and `mod mrtr_support;`.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::process::Command;

use crate::common::*;
use crate::mrtr_support::settled;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Stdio,
    Http,
}

/// The bounds every test config sets (small, so a fault shows quickly).
pub const INIT_TIMEOUT: Duration = Duration::from_secs(5);
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
pub const CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// What a bound may overrun by on a loaded machine (process start, polling).
pub const SLACK: Duration = Duration::from_secs(10);

/// A gateway in front of the fault fixture, its audit log and the fixture's log.
pub struct Faulty {
    pub fx: Fixture,
    pub audit: PathBuf,
    pub gw: TestGateway,
    _server: Option<ChildGuard>,
}

/// How the fixture answers `initialize`, and extra `[route.upstream]` / `[mrtr]` lines.
pub struct Setup<'a> {
    via: Via,
    init: &'a str,
    upstream: &'a str,
    mrtr: &'a str,
}

impl<'a> Setup<'a> {
    pub fn new(via: Via) -> Self {
        Setup {
            via,
            init: "ok",
            upstream: "",
            mrtr: "",
        }
    }

    pub fn init(mut self, init: &'a str) -> Self {
        self.init = init;
        self
    }

    pub fn upstream(mut self, lines: &'a str) -> Self {
        self.upstream = lines;
        self
    }

    pub fn mrtr(mut self, lines: &'a str) -> Self {
        self.mrtr = lines;
        self
    }

    pub async fn start(self) -> Faulty {
        let fx = Fixture::new();
        let audit = fx.path("audit.jsonl");
        let py = legacy_python();
        let script = fixture_file("fault_server.py");
        let (target, server) = match self.via {
            Via::Stdio => (
                format!(
                    "command = [{}, {}]\nenv = {{ FIXTURE_LOG = {}, FAULT_INIT = {} }}",
                    toml_path(&py),
                    toml_path(&script),
                    toml_path(&fx.log.path),
                    toml_str(self.init)
                ),
                None,
            ),
            Via::Http => {
                let mut cmd = Command::new(&py);
                cmd.arg(&script)
                    .args(["--http", "0"])
                    .env("FIXTURE_LOG", &fx.log.path)
                    .env("FAULT_INIT", self.init);
                let (guard, port) = spawn_listening(cmd, "fault-server listening on port").await;
                (
                    format!("url = \"http://127.0.0.1:{port}/mcp\""),
                    Some(guard),
                )
            }
        };
        let config = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
             [audit]\npath = {}\n\
             [mrtr]\nttl = \"20s\"\ngather = \"100ms\"\ngather_quiet = \"100ms\"\n{}\n\
             [[route]]\nname = \"main\"\npath = \"/mcp\"\n\
             [route.upstream]\n{target}\ninit_timeout = \"{}s\"\nrequest_timeout = \"{}s\"\ncall_timeout = \"{}s\"\n{}\n",
            toml_path(&audit),
            self.mrtr,
            INIT_TIMEOUT.as_secs(),
            REQUEST_TIMEOUT.as_secs(),
            CALL_TIMEOUT.as_secs(),
            self.upstream,
        );
        let gw = TestGateway::start(&config).await;
        Faulty {
            fx,
            audit,
            gw,
            _server: server,
        }
    }
}

impl Faulty {
    /// The audit lines so far.
    pub fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits for the audit lines of `tool` to be `outcomes` (in order).
    pub async fn audited(&self, tool: &str, outcomes: &[&str]) {
        eventually(
            &format!("the audit log to record {tool}: {outcomes:?}"),
            || {
                let got: Vec<String> = self
                    .audit()
                    .iter()
                    .filter(|l| l["tool"] == tool)
                    .map(|l| l["outcome"].as_str().unwrap_or_default().to_owned())
                    .collect();
                std::future::ready(if got == outcomes {
                    Ok(())
                } else {
                    Err(format!("{got:?}"))
                })
            },
        )
        .await;
    }

    /// `tools/call tool` with `arguments`, from a client with no capabilities.
    pub async fn call(&self, tool: &str, arguments: Value) -> Resp {
        self.call_with(tool, arguments, json!({})).await
    }

    /// `tools/call tool` from a client declaring `capabilities`.
    pub async fn call_with(&self, tool: &str, arguments: Value, capabilities: Value) -> Resp {
        self.gw
            .rpc(
                "tools/call",
                json!({"name": tool, "arguments": arguments}),
                capabilities,
            )
            .await
    }

    /// [`Faulty::call`], answered within `bound` (plus [`SLACK`]); how long it took.
    pub async fn call_within(
        &self,
        bound: Duration,
        tool: &str,
        arguments: Value,
    ) -> (Resp, Duration) {
        within(bound, self.call(tool, arguments)).await
    }

    /// No operation pending, no session leased; then the gateway stops.
    pub async fn done(self) {
        settled(&self.gw).await;
        self.gw.stop().await;
    }
}

/// `f` finishes within `bound` (plus [`SLACK`]); returns what it gave and how long it took.
pub async fn within<T>(bound: Duration, f: impl std::future::Future<Output = T>) -> (T, Duration) {
    let began = Instant::now();
    let out = tokio::time::timeout(bound + SLACK, f)
        .await
        .unwrap_or_else(|_| panic!("nothing within {bound:?} + {SLACK:?}"));
    (out, began.elapsed())
}

/// The text of a complete tool result.
pub fn text(resp: &Resp) -> String {
    let r = resp.result();
    assert_eq!(r["resultType"], "complete", "{r}");
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
