//! Shared helpers for integration tests: an in-process gateway on port 0,
//! a 2026-07-28 client over raw HTTP, schema validation against the spec's
//! JSON schema, and real legacy servers (installed by
//! `scripts/setup-test-deps.sh`) as guarded child processes.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

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

/// The rooms example binary. `cargo test --all-targets` builds examples;
/// a single `cargo test --test X` does not, so build it once if it is missing.
pub fn rooms_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = PathBuf::from(env!("CARGO_BIN_EXE_redmark"));
            let bin = exe.parent().expect("target dir").join("examples/rooms");
            if !bin.exists() {
                let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                let status = std::process::Command::new(cargo)
                    .args(["build", "--example", "rooms"])
                    .current_dir(repo())
                    .status()
                    .expect("run cargo build --example rooms");
                assert!(status.success(), "building the rooms example failed");
            }
            bin
        })
        .clone()
}

/// A TOML string literal.
pub fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
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

pub fn everything_stdio_config(extra: &str) -> String {
    let js = everything_js();
    stdio_config(&["node", js.to_str().unwrap(), "stdio"], extra)
}

pub fn rooms_config(extra: &str) -> String {
    let bin = rooms_bin();
    stdio_config(&[bin.to_str().unwrap()], extra)
}

/// `_meta` of a 2026-07-28 request with these client capabilities.
pub fn meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "redmark-tests", "version": "0"},
    })
}

/// The answer to one POST: every JSON-RPC message in it (one for JSON, all
/// events for SSE), plus status and content type.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub content_type: String,
    pub headers: reqwest::header::HeaderMap,
    pub messages: Vec<Value>,
    pub raw: String,
}

impl Resp {
    /// The final message (the response).
    pub fn last(&self) -> &Value {
        self.messages.last().unwrap_or_else(|| {
            panic!(
                "no message in response: status {} body {:?}",
                self.status, self.raw
            )
        })
    }

    pub fn result(&self) -> &Value {
        let last = self.last();
        assert!(
            last.get("result").is_some(),
            "expected a result, got {last}"
        );
        &last["result"]
    }

    pub fn error(&self) -> &Value {
        let last = self.last();
        assert!(last.get("error").is_some(), "expected an error, got {last}");
        &last["error"]
    }

    pub fn reason(&self) -> String {
        self.error()["data"]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub fn is_sse(&self) -> bool {
        self.content_type.starts_with("text/event-stream")
    }
}

pub async fn read_resp(resp: reqwest::Response) -> Resp {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let raw = resp.text().await.unwrap_or_default();
    let messages = if content_type.starts_with("text/event-stream") {
        let mut d = redmark::sse::Decoder::new(1 << 24);
        d.feed(raw.as_bytes())
            .expect("sse")
            .into_iter()
            .filter(|e| !e.data.is_empty())
            .map(|e| serde_json::from_str(&e.data).expect("SSE event is JSON"))
            .collect()
    } else if raw.trim().is_empty() {
        Vec::new()
    } else {
        vec![serde_json::from_str(&raw).unwrap_or_else(|e| panic!("body is not JSON ({e}): {raw}"))]
    };
    Resp {
        status,
        content_type,
        headers,
        messages,
        raw,
    }
}

/// An in-process gateway on ephemeral ports.
pub struct TestGateway {
    pub url: String,
    pub admin: String,
    pub http: reqwest::Client,
    running: Option<redmark::Running>,
    next_id: std::sync::atomic::AtomicI64,
}

impl TestGateway {
    pub async fn start(config_toml: &str) -> TestGateway {
        let config = redmark::config::Config::parse(config_toml, "test.toml", repo())
            .unwrap_or_else(|e| panic!("config: {e}\n{config_toml}"));
        let running = redmark::start(config).await.expect("gateway starts");
        TestGateway {
            url: format!("http://{}/mcp", running.addr),
            admin: format!("http://{}", running.admin_addr.expect("admin listener")),
            http: reqwest::Client::new(),
            running: Some(running),
            next_id: std::sync::atomic::AtomicI64::new(1),
        }
    }

    pub fn next_id(&self) -> i64 {
        self.next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// POSTs a well-formed request: headers mirrored from the body.
    pub fn request(&self, method: &str, params: Value) -> reqwest::RequestBuilder {
        mcp_post(
            &self.http,
            &self.url,
            json!(self.next_id()),
            method,
            &params,
        )
    }

    /// Sends a well-formed request with `_meta` for `capabilities` added to `params`.
    pub async fn rpc(&self, method: &str, mut params: Value, capabilities: Value) -> Resp {
        params
            .as_object_mut()
            .expect("params object")
            .entry("_meta")
            .or_insert_with(|| meta(capabilities));
        read_resp(self.request(method, params).send().await.expect("POST")).await
    }

    pub async fn metrics(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.admin))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text")
    }

    /// The value of one sample in /metrics, e.g. `redmark_upstream_sessions{route="main",state="leased"}`.
    pub async fn metric(&self, sample: &str) -> Option<f64> {
        let text = self.metrics().await;
        text.lines().find_map(|l| {
            l.strip_prefix(sample)
                .and_then(|rest| rest.trim().parse().ok())
        })
    }

    /// Waits (bounded) until `sample` equals `want`; panics with the last value.
    pub async fn wait_metric(&self, sample: &str, want: f64) {
        let mut last = None;
        for _ in 0..200 {
            last = self.metric(sample).await;
            if last == Some(want) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{sample} stayed at {last:?}, wanted {want}");
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
    }
}

/// A 2026-07-28 POST of one request with the headers mirrored from the body
/// (`MCP-Protocol-Version`, `Mcp-Method`, and `Mcp-Name` from `name` or `uri`).
pub fn mcp_post(
    http: &reqwest::Client,
    url: &str,
    id: Value,
    method: &str,
    params: &Value,
) -> reqwest::RequestBuilder {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut rb = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", method);
    if let Some(name) = params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)
    {
        rb = rb.header("mcp-name", name);
    }
    rb.body(body.to_string())
}

/// Runs a client driver program (`program` + `script_path`) against `url` with
/// `script`, returning its JSON output lines; `what` names it in failures.
async fn run_driver(what: &str, mut cmd: Command, url: &str, script: &Value) -> Vec<Value> {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        cmd.arg(url)
            .arg(script.to_string())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{what} finished in time"))
    .unwrap_or_else(|e| panic!("{what} ran: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Validates `value` against `$defs/<definition>` of the 2026-07-28 schema.
pub fn assert_schema(definition: &str, value: &Value) {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    static VALIDATORS: OnceLock<Mutex<HashMap<String, std::sync::Arc<jsonschema::Validator>>>> =
        OnceLock::new();
    let schema = SCHEMA.get_or_init(|| {
        let text = std::fs::read_to_string(repo().join("tests/schema/2026-07-28.json"))
            .expect("schema file");
        serde_json::from_str(&text).expect("schema JSON")
    });
    let validator = {
        let mut map = VALIDATORS
            .get_or_init(|| Mutex::new(HashMap::new()))
            .lock()
            .unwrap();
        map.entry(definition.to_owned())
            .or_insert_with(|| {
                assert!(
                    schema["$defs"].get(definition).is_some(),
                    "no $defs/{definition} in the schema"
                );
                let wrapper = json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "$ref": format!("#/$defs/{definition}"),
                    "$defs": schema["$defs"].clone(),
                });
                std::sync::Arc::new(
                    jsonschema::options()
                        .with_draft(jsonschema::Draft::Draft202012)
                        .build(&wrapper)
                        .expect("schema compiles"),
                )
            })
            .clone()
    };
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "not a valid {definition}: {errors:?}\n{value:#}"
    );
}

/// Validates a whole response: the envelope, and the inner result by its `resultType`.
pub fn assert_response_schema(method: &str, response: &Value) {
    if response.get("error").is_some() {
        assert_schema("JSONRPCErrorResponse", response);
        return;
    }
    let (envelope, result) = match method {
        "server/discover" => ("DiscoverResultResponse", "DiscoverResult"),
        "tools/list" => ("ListToolsResultResponse", "ListToolsResult"),
        "tools/call" => ("CallToolResultResponse", "CallToolResult"),
        "prompts/list" => ("ListPromptsResultResponse", "ListPromptsResult"),
        "prompts/get" => ("GetPromptResultResponse", "GetPromptResult"),
        "resources/list" => ("ListResourcesResultResponse", "ListResourcesResult"),
        "resources/templates/list" => (
            "ListResourceTemplatesResultResponse",
            "ListResourceTemplatesResult",
        ),
        "resources/read" => ("ReadResourceResultResponse", "ReadResourceResult"),
        "completion/complete" => ("CompleteResultResponse", "CompleteResult"),
        other => panic!("no schema mapping for {other}"),
    };
    assert_schema(envelope, response);
    let r = &response["result"];
    match r["resultType"].as_str() {
        Some("complete") => assert_schema(result, r),
        Some("input_required") => assert_schema("InputRequiredResult", r),
        other => panic!("resultType must be complete or input_required, got {other:?}"),
    }
}

/// A child process killed when the guard is dropped.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts a process and waits (bounded) for a line containing `ready` on stdout or stderr.
pub async fn spawn_until(mut cmd: Command, ready: &str) -> ChildGuard {
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn peer");
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    for stream in [
        Box::new(stdout) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
        Box::new(stderr),
    ] {
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = tx.send(line);
            }
        });
    }
    let mut seen = Vec::new();
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = rx.recv().await {
            let hit = line.contains(ready);
            seen.push(line);
            if hit {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(found, Ok(true)),
        "peer never printed {ready:?}; output: {seen:?}"
    );
    ChildGuard(child)
}

/// server-everything over Streamable HTTP on a free port; returns its `/mcp` URL.
pub async fn everything_http() -> (ChildGuard, String) {
    let port = free_port();
    let mut cmd = Command::new("node");
    cmd.arg(everything_js())
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    let guard = spawn_until(cmd, "listening on port").await;
    (guard, format!("http://127.0.0.1:{port}/mcp"))
}

/// Runs the PyPI `mcp` 2.3.0 client driver (tests/peers/py_client.py) against
/// `url` with `script`, returning its JSON output lines.
pub async fn py_client(url: &str, script: &Value) -> Vec<Value> {
    let mut cmd = Command::new(client_python());
    cmd.arg(repo().join("tests/peers/py_client.py"));
    run_driver("py_client", cmd, url, script).await
}

/// Runs the npm `@modelcontextprotocol/client` 2.4.0 driver (tests/peers/ts_client.mjs,
/// pinned to 2026-07-28 unless the script says otherwise) against `url` with `script`,
/// returning its JSON output lines.
pub async fn ts_client(url: &str, script: &Value) -> Vec<Value> {
    ensure_deps();
    let mut cmd = Command::new("node");
    cmd.arg(repo().join("tests/peers/ts_client.mjs"))
        .env("REDMARK_NPM_DIR", repo().join(".cache/npm"));
    run_driver("ts_client", cmd, url, script).await
}
