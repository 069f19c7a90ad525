//! Child processes: legacy servers (guarded, killed on drop), the port a
//! child listens on, the `redmark` binary as a user runs it, and the
//! 2026-07-28 SDK client drivers (tests/peers/).

use std::collections::HashSet;
use std::future::ready;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::{PATIENCE, client_python, ensure_deps, eventually, everything_js, legacy_python, repo};

/// A child process killed when the guard is dropped.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

impl ChildGuard {
    pub fn pid(&self) -> u32 {
        self.0.id().expect("the child is running")
    }
}

/// Starts a process and waits (bounded) for a line containing `ready` on stdout or stderr.
pub async fn spawn_until(cmd: Command, ready: &str) -> ChildGuard {
    spawn_until_kept(cmd, ready).await.0
}

/// Every line a child printed so far (stdout and stderr, as they came).
pub type Output = Arc<Mutex<Vec<String>>>;

/// [`spawn_until`], keeping every line the child prints for as long as it
/// runs (a test then asserts on what a real server logged).
pub async fn spawn_until_kept(mut cmd: Command, ready: &str) -> (ChildGuard, Output) {
    let kept = Output::default();
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
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
        let kept = kept.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                kept.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(line.clone());
                let _ = tx.send(line);
            }
        });
    }
    let mut seen = Vec::new();
    let found = tokio::time::timeout(PATIENCE, async {
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
    (ChildGuard(child), kept)
}

/// The TCP ports process `pid` listens on, from /proc: its socket inodes
/// (`/proc/PID/fd`) looked up among the LISTEN entries of its network
/// namespace's `tcp` and `tcp6` tables.
pub fn listening_ports(pid: u32) -> Vec<u16> {
    let inodes: HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|link| {
            let link = link.to_str()?.to_owned();
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut ports = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let port = local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if *state == "0A" && inodes.contains(*inode) {
                ports.extend(port);
            }
        }
    }
    ports
}

/// Waits until process `pid`, told to bind port 0, listens, and returns its
/// port: for peers that do not say which port they got.
pub async fn listening_port(pid: u32) -> u16 {
    eventually(&format!("process {pid} to listen on a TCP port"), || {
        let ports = listening_ports(pid);
        ready(match ports[..] {
            [port] => Ok(port),
            _ => Err(format!("ports {ports:?}")),
        })
    })
    .await
}

/// Starts an HTTP peer told to bind port 0, waits for `ready` and returns it
/// with the port it got.
pub async fn spawn_listening(cmd: Command, ready: &str) -> (ChildGuard, u16) {
    let guard = spawn_until(cmd, ready).await;
    let port = listening_port(guard.pid()).await;
    (guard, port)
}

/// server-everything over Streamable HTTP on `port` (0: any free one);
/// returns it with its port.
pub async fn everything_http_on(port: u16) -> (ChildGuard, u16) {
    let mut cmd = Command::new("node");
    cmd.arg(everything_js())
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    // It prints the port it was given ("listening on port 0"), not the one it got.
    let (guard, got) = spawn_listening(cmd, "listening on port").await;
    assert!(port == 0 || port == got, "asked for port {port}, got {got}");
    (guard, got)
}

/// server-everything over Streamable HTTP on a free port; returns its `/mcp` URL.
pub async fn everything_http() -> (ChildGuard, String) {
    let (guard, port) = everything_http_on(0).await;
    (guard, format!("http://127.0.0.1:{port}/mcp"))
}

/// Runs a client driver program (`cmd`: program + script path) against `url`
/// with `script`, returning its JSON output lines; `what` names it in failures.
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

/// Runs the PyPI `mcp` 2.3.0 client driver (tests/peers/py_client.py) against
/// `url` with `script`, returning its JSON output lines.
pub async fn py_client(url: &str, script: &Value) -> Vec<Value> {
    let mut cmd = Command::new(client_python());
    cmd.arg(repo().join("tests/peers/py_client.py"));
    run_driver("py_client", cmd, url, script).await
}

/// Runs the 2025-era PyPI `mcp` 1.30.0 `ClientSession` driver
/// (tests/peers/py_client_2025.py: `initialize`, a session, pushed
/// questions answered by its elicitation callback) against `url`.
pub async fn py_client_2025(url: &str, script: &Value) -> Vec<Value> {
    let mut cmd = Command::new(legacy_python());
    cmd.arg(repo().join("tests/peers/py_client_2025.py"));
    run_driver("py_client_2025", cmd, url, script).await
}

/// Runs the 2025-era npm `@modelcontextprotocol/sdk` 1.32.2 `Client` driver
/// (tests/peers/ts_client_2025.mjs) against `url`.
pub async fn ts_client_2025(url: &str, script: &Value) -> Vec<Value> {
    ensure_deps();
    let mut cmd = Command::new("node");
    cmd.arg(repo().join("tests/peers/ts_client_2025.mjs"))
        .env("REDMARK_NPM_DIR", repo().join(".cache/npm"));
    run_driver("ts_client_2025", cmd, url, script).await
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

/// The `redmark` binary serving on ephemeral ports; its stderr is collected.
pub struct RedmarkProcess {
    child: Child,
    /// `http://127.0.0.1:<port>`
    pub base: String,
    pub admin: String,
    stderr: Arc<Mutex<Vec<String>>>,
    readers: Vec<JoinHandle<()>>,
}

impl RedmarkProcess {
    /// `redmark [--log-format json] serve --listen 127.0.0.1:0 --admin 127.0.0.1:0 --config ...`
    /// with `RUST_LOG=info`, no inherited `OTEL_*` and these variables; waits
    /// for the two lines that say where it listens.
    pub async fn start(config: &Path, json_logs: bool, env: &[(&str, String)]) -> RedmarkProcess {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_redmark"));
        if json_logs {
            cmd.args(["--log-format", "json"]);
        }
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
            .arg("--config")
            .arg(config)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // Whatever `OTEL_*` the developer's shell or CI carries: only what a test sets applies.
        for (var, _) in std::env::vars().filter(|(k, _)| k.starts_with("OTEL_")) {
            cmd.env_remove(var);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn redmark");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let err_lines = stderr.clone();
        let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
        let err_reader = tokio::spawn(async move {
            while let Ok(Some(line)) = err.next_line().await {
                err_lines.lock().unwrap().push(line);
            }
        });
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut line = async |prefix: &str| {
            let line = tokio::time::timeout(PATIENCE, out.next_line())
                .await
                .expect("redmark printed its addresses in time")
                .unwrap()
                .unwrap_or_default();
            match line.strip_prefix(prefix) {
                Some(addr) => addr.to_owned(),
                None => panic!(
                    "expected {prefix:?}..., got {line:?}; stderr: {:?}",
                    stderr.lock().unwrap()
                ),
            }
        };
        let base = line("redmark listening on ").await;
        let admin = line("redmark admin on ").await;
        // Keep reading stdout so a later write never meets a closed pipe.
        let out_reader =
            tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });
        RedmarkProcess {
            child,
            base,
            admin,
            stderr,
            readers: vec![err_reader, out_reader],
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("still running")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// What it has written to stderr so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// SIGTERM (redmark flushes its traces on the way out), a clean exit, and
    /// every stderr line it wrote.
    pub async fn stop(self) -> Vec<String> {
        self.stop_within(PATIENCE).await
    }

    /// [`RedmarkProcess::stop`], the exit due within `within`.
    pub async fn stop_within(mut self, within: Duration) -> Vec<String> {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = tokio::time::timeout(within, self.child.wait())
            .await
            .expect("redmark exits after SIGTERM")
            .unwrap();
        for r in std::mem::take(&mut self.readers) {
            let _ = tokio::time::timeout(PATIENCE, r).await;
        }
        let lines = self.stderr.lock().unwrap().clone();
        assert!(exit.success(), "redmark exited with {exit}: {lines:#?}");
        lines
    }
}
