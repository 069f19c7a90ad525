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

use serde_json::json;
use tokio::process::Command;

use crate::common::*;
use crate::mrtr_e2e_support::{Fronted, ThreeWays, fastmcp_register, ts_sdk_survey};

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
                // Pinned: under `auto` this server would be fronted natively.
                let config = format!("{}protocol = \"legacy\"\n", stdio_config(&command, ""));
                (config, None)
            }
        };
        Fronted::new(TestGateway::start(&config).await, None, peer)
    }

    /// The tool that asks, its question, and what the server must report.
    pub fn three_ways(self) -> ThreeWays {
        match self {
            // Each question was pushed while the gateway's GET stream was open.
            Extra::TsGetStream => {
                let mut cell = ts_sdk_survey();
                cell.mode = None;
                for r in &mut cell.received {
                    r["getStreamOpen"] = json!(true);
                }
                cell
            }
            // A legacy session: redmark initialized it with 2025-11-25.
            Extra::Py2Stdio => {
                let mut cell = fastmcp_register();
                for r in &mut cell.received {
                    r["protocolVersion"] = json!("2025-11-25");
                }
                cell
            }
        }
    }
}
