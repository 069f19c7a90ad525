//! Helpers of the interoperability tests (tests/interop_gaps.rs, tests/interop_rmcp.rs)
//! beyond tests/mrtr_e2e_support: gateways in front of the two servers behind the
//! matrix's traps, and the checks of what those servers received.
//!
//! * tests/fixtures/interop_ts_get_stream.mjs: npm sdk 1.32.2 over Streamable HTTP,
//!   pushing its question WITHOUT `relatedRequestId`, so it travels on the standalone
//!   GET stream (and is dropped by the sdk if that stream is not open);
//! * tests/fixtures/interop_py2_server.py: PyPI mcp 2.3.0 (`MCPServer`, `ctx.elicit`)
//!   over stdio, a server that also speaks 2026-07-28 natively.
#![allow(dead_code)]

use serde_json::{Value, json};
use tokio::process::Command;

use crate::common::*;
use crate::mrtr_e2e_support::{Fronted, Output, three_calls};

/// The extra servers of the interoperability tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    /// interop_ts_get_stream.mjs (npm sdk 1.32.2, push without relatedRequestId), HTTP.
    TsGetStream,
    /// interop_py2_server.py (PyPI mcp 2.3.0, `ctx.elicit`), stdio.
    Py2Stdio,
}

impl Extra {
    /// A gateway whose `/mcp` route fronts this server; a server process of
    /// its own (HTTP) is killed when the `Fronted` is dropped.
    pub async fn front(self) -> Fronted {
        ensure_deps();
        let (config, peer) = match self {
            Extra::TsGetStream => {
                let mut cmd = Command::new("node");
                cmd.arg(fixture_file("interop_ts_get_stream.mjs"))
                    .env("PORT", "0")
                    .env("REDMARK_NPM_DIR", repo().join(".cache/npm"));
                let ready = "interop-ts-get-stream listening on port";
                let (peer, port) = spawn_listening(cmd, ready).await;
                let url = format!("http://127.0.0.1:{port}/mcp");
                (http_config(&url, ""), Some(peer))
            }
            Extra::Py2Stdio => {
                let py = client_python();
                let script = fixture_file("interop_py2_server.py");
                let command = [py.to_str().unwrap(), script.to_str().unwrap()];
                (stdio_config(&command, ""), None)
            }
        };
        Fronted::new(TestGateway::start(&config).await, None, peer)
    }

    /// The tool that asks.
    pub fn tool(self) -> &'static str {
        match self {
            Extra::TsGetStream => "survey",
            Extra::Py2Stdio => "register",
        }
    }

    pub fn arguments(self) -> Value {
        match self {
            Extra::TsGetStream => json!({"topic": "the new coffee machine"}),
            Extra::Py2Stdio => json!({"event": "the launch party"}),
        }
    }

    /// The content an accepting user gives.
    pub fn accept(self) -> Value {
        match self {
            Extra::TsGetStream => json!({"rating": 4, "comment": "strong"}),
            Extra::Py2Stdio => json!({"name": "Ada", "guests": 2}),
        }
    }

    /// The question the tool asks, and its one required field.
    pub fn question(self) -> (&'static str, &'static str) {
        match self {
            Extra::TsGetStream => ("What do you think of the new coffee machine?", "rating"),
            Extra::Py2Stdio => ("Who is coming to the launch party?", "name"),
        }
    }

    /// What the server must report for accept, decline and cancel, in order.
    pub fn received(self) -> [Value; 3] {
        match self {
            // Each question was pushed while the gateway's GET stream was open.
            Extra::TsGetStream => [
                json!({"action": "accept", "content": self.accept(), "getStreamOpen": true}),
                json!({"action": "decline", "content": null, "getStreamOpen": true}),
                json!({"action": "cancel", "content": null, "getStreamOpen": true}),
            ],
            // A legacy session: redmark initialized it with 2025-11-25.
            Extra::Py2Stdio => [
                json!({"action": "accept", "data": self.accept(), "protocolVersion": "2025-11-25"}),
                json!({"action": "decline", "data": null, "protocolVersion": "2025-11-25"}),
                json!({"action": "cancel", "data": null, "protocolVersion": "2025-11-25"}),
            ],
        }
    }

    /// A client-driver script: three calls answered accept, decline, cancel.
    pub fn script(self) -> Value {
        three_calls(self.tool(), self.arguments(), self.accept())
    }

    /// Checks the output of `Extra::script` from either client driver: one
    /// question per call, and the server received accept (with the content),
    /// decline and cancel; the gateway counted the three endings.
    pub async fn three_ways_outcomes(self, out: &Output, fronted: &Fronted) {
        let (message, required) = self.question();
        for step in 0..3 {
            let asked = out.asked_in(step);
            assert_eq!(asked.len(), 1, "{asked:#?}");
            assert_eq!(asked[0]["message"], message);
            assert_eq!(asked[0]["requestedSchema"]["required"], json!([required]));
            if let Some(key) = out.key_of(asked[0]) {
                assert_eq!(key, "elicitation-1");
            }
        }
        for (step, want) in self.received().iter().enumerate() {
            assert_eq!(&out.received(step), want, "step {step}");
        }
        fronted.counted_three_ways(self.tool()).await;
    }
}
