//! The client matrix (issue 53): the MCP client libraries and hosts people
//! run, each first straight at a PyPI `mcp` 1.30 FastMCP server (the control,
//! so a client's own limits are told apart from redmark's), then through
//! redmark in front of the same server over stdio and over Streamable HTTP
//! (tests/fixtures/interop_clients_server.py). Cells: list tools, call a tool,
//! a tool error, read a resource, get a prompt, a question answered wrong (a
//! red mark from the policy) then right, red marks run out, and a client that
//! declares no elicitation. A cell the client has no API for is asserted
//! "unsupported", never a pass. The drivers are tests/peers/interop_py.py and
//! tests/peers/interop_node.mjs; the machinery is tests/interop_clients_support.

// A test may panic (that is how it fails).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod interop_clients_support;

use interop_clients_support::*;

fn all_pass() -> Expect {
    Expect::default()
}

/// PyPI `mcp` 1.9.4 predates elicitation: no callback API, and it
/// negotiates 2025-03-26.
#[tokio::test(flavor = "multi_thread")]
async fn pypi_mcp_1_9_client_session() {
    let driver = Driver::python("mcp 1.9.4 ClientSession", "venv-mcp19", "session");
    let expect = Expect {
        unsupported: vec!["reask", "run_out"],
        ..Expect::default()
    };
    check_client(&driver, &expect).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pypi_mcp_1_10_client_session() {
    let driver = Driver::python("mcp 1.10.1 ClientSession", "venv-mcp110", "session");
    check_client(&driver, &all_pass()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pypi_mcp_1_30_client_session() {
    let driver = Driver::python("mcp 1.30.0 ClientSession", "venv-legacy", "session");
    check_client(&driver, &all_pass()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pypi_mcp_2_client() {
    let driver = Driver::python("mcp 2.3.0 Client", "venv-client", "mcp2");
    check_client(&driver, &all_pass()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fastmcp_2_client() {
    let driver = Driver::python("fastmcp 2.14.7 Client", "venv-fastmcp", "fastmcp");
    check_client(&driver, &all_pass()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fastmcp_4_client() {
    let driver = Driver::python("fastmcp 4.2.3 Client", "venv-fastmcp4", "fastmcp");
    check_client(&driver, &all_pass()).await;
}

/// pydantic-ai 2.78 `MCPToolset` (on fastmcp 4's client), its own methods.
#[tokio::test(flavor = "multi_thread")]
async fn pydantic_ai_mcp_toolset() {
    let driver = Driver::python(
        "pydantic-ai 2.78.0 MCPToolset",
        "venv-pydantic-ai",
        "pydantic_ai",
    );
    check_client(&driver, &all_pass()).await;
}

/// pydantic-ai 1.107 `MCPServerStreamableHTTP` / `MCPServerStdio` (on the
/// PyPI `mcp` 1.x `ClientSession`), its own methods.
#[tokio::test(flavor = "multi_thread")]
async fn pydantic_ai_1_mcp_server() {
    let driver = Driver::python(
        "pydantic-ai 1.107.10 MCPServerStreamableHTTP",
        "venv-pydantic-ai1",
        "pydantic_ai1",
    );
    check_client(&driver, &all_pass()).await;
}

/// openai-agents 0.25 has no elicitation handler API: it never declares
/// the capability, so its questions cannot be answered.
#[tokio::test(flavor = "multi_thread")]
async fn openai_agents_mcp_server() {
    let driver = Driver::python(
        "openai-agents 0.25.0 MCPServer*",
        "venv-openai-agents",
        "openai_agents",
    );
    let expect = Expect {
        unsupported: vec!["reask", "run_out"],
        ..Expect::default()
    };
    check_client(&driver, &expect).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn langchain_mcp_adapters() {
    let driver = Driver::python(
        "langchain-mcp-adapters 0.3.2",
        "venv-langchain-mcp",
        "langchain",
    );
    check_client(&driver, &all_pass()).await;
}

/// npm `@modelcontextprotocol/sdk` 1.32: `close()` sends no DELETE.
#[tokio::test(flavor = "multi_thread")]
async fn npm_sdk_1_client() {
    let driver = Driver::node("npm sdk 1.32.2 Client", "sdk1");
    let expect = Expect {
        sessions: true,
        ..Expect::default()
    };
    check_client(&driver, &expect).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn npm_client_2() {
    let driver = Driver::node("npm @modelcontextprotocol/client 2.4.0", "client2");
    check_client(&driver, &all_pass()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ai_sdk_mcp() {
    let driver = Driver::node("npm @ai-sdk/mcp 2.0.102", "aisdk");
    check_client(&driver, &all_pass()).await;
}

/// mcp-remote 0.15 (a stdio proxy to a URL) with the npm sdk 1.x client as
/// its stdio host; its control is against the HTTP server (it reaches URLs
/// only). One mcp-remote process per session, none DELETEd.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_remote() {
    let mut driver = Driver::node(
        "mcp-remote 0.15.1 (host: npm sdk 1.32.2 stdio)",
        "mcp-remote",
    );
    driver.control_over_http = true;
    let expect = Expect {
        sessions: true,
        ..Expect::default()
    };
    check_client(&driver, &expect).await;
}

/// What the Inspector CLI cannot do: it has no elicitation handler (it
/// declares no elicitation; a question pushed anyway is answered `cancel`).
fn inspector() -> Expect {
    Expect {
        unsupported: vec!["reask", "run_out"],
        ..Expect::default()
    }
}

/// Inspector CLI 2.12, `--protocol-era legacy` (the default of ad-hoc
/// runs): one session per command, never DELETEd.
#[tokio::test(flavor = "multi_thread")]
async fn inspector_cli_legacy() {
    let driver = Driver::node("Inspector CLI 2.12.0 legacy", "inspector-legacy");
    let expect = Expect {
        sessions: true,
        ..inspector()
    };
    check_client(&driver, &expect).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn inspector_cli_auto() {
    let driver = Driver::node("Inspector CLI 2.12.0 auto", "inspector-auto");
    check_client(&driver, &inspector()).await;
}

/// `modern` pins 2026-07-28: it cannot talk to the legacy server alone (the
/// control fails), only through redmark.
#[tokio::test(flavor = "multi_thread")]
async fn inspector_cli_modern() {
    let driver = Driver::node("Inspector CLI 2.12.0 modern", "inspector-modern");
    let expect = Expect {
        control_cannot: true,
        ..inspector()
    };
    check_client(&driver, &expect).await;
}

/// Inspector CLI 0.15 (`@modelcontextprotocol/inspector-cli`, an old
/// Inspector) with `--transport http` replaces any path not ending in `/mcp`
/// by `/mcp`: a route at `/<name>/mcp` works, one at `/mcp/<name>` is out of
/// its reach (its requests land on `/mcp`). Inspector 2.12 keeps the path.
#[tokio::test(flavor = "multi_thread")]
async fn inspector_cli_0_15_reaches_only_paths_ending_in_mcp() {
    let (gw, _server) = three_routes_gateway().await;
    let old = common::repo().join(
        ".cache/npm-inspector015/node_modules/@modelcontextprotocol/inspector-cli/build/index.js",
    );
    let old = |path: &str| {
        let args = [old.to_str().unwrap(), &gw.url(path), "--transport", "http"];
        inspector_tools_list(args.map(str::to_owned).to_vec())
    };
    let served = |route: &str| {
        let needle = format!("route=\"{route}\" method=\"tools/list\"");
        gw.stderr_lines()
            .iter()
            .filter(|l| l.contains(&needle))
            .count()
    };
    let out = old("/mine/mcp").await;
    assert!(out.contains("\"echo\""), "0.15 on /mine/mcp: {out}");
    assert_eq!(served("suffix"), 1, "{:#?}", gw.stderr_lines());
    let out = old("/mcp/mine").await;
    assert!(out.contains("\"echo\""), "0.15 on /mcp/mine: {out}");
    assert_eq!(
        (served("prefix"), served("root")),
        (0, 1),
        "0.15 went to /mcp"
    );
    let launcher = common::repo()
        .join(".cache/npm-interop/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    let url = gw.url("/mcp/mine");
    let args = [
        launcher.to_str().unwrap(),
        "--cli",
        &url,
        "--transport",
        "http",
        "--method",
        "tools/list",
    ];
    let out = inspector_tools_list(args.map(str::to_owned).to_vec()).await;
    assert!(out.contains("\"echo\""), "2.12 on /mcp/mine: {out}");
    assert_eq!(
        (served("prefix"), served("root")),
        (1, 1),
        "2.12 kept the path"
    );
}
