//! A legacy server as a child process speaking newline-delimited JSON-RPC on
//! stdin/stdout (spec 2025-06-18 `basic/transports.mdx` "stdio"); its stderr
//! goes to redmark's log.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, LinesCodec};

use super::{Inbound, Link, QUEUE_DEPTH};
use crate::jsonrpc::Message;
use crate::upstream::UpstreamError;

/// How long a server gets to exit after its stdin closes before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The framing of a server's stdout: one message per line, each line at most
/// `max_message_bytes` (a longer line or one that is not UTF-8 ends the link).
pub fn line_codec(max_message_bytes: usize) -> LinesCodec {
    LinesCodec::new_with_max_length(max_message_bytes)
}

/// One line of a server's stdout (without its line ending): `None` for a
/// blank line, else the JSON-RPC message or why it is not one.
pub fn message_from_line(line: &str) -> Option<Result<Message, String>> {
    if line.trim().is_empty() {
        return None;
    }
    Some(
        serde_json::from_str::<Value>(line)
            .map_err(|e| e.to_string())
            .and_then(|v| Message::from_value(v).map_err(|e| e.to_string())),
    )
}

pub fn spawn(
    program: &Path,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: &Path,
    route: Arc<str>,
    max_message_bytes: usize,
) -> Result<Link, UpstreamError> {
    let mut child = Command::new(program)
        .args(args)
        .envs(env)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            UpstreamError::Unavailable(format!("cannot start `{}`: {e}", program.display()))
        })?;
    let pid = child.id().unwrap_or_default();
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(UpstreamError::Unavailable(
            "child process has no pipes".into(),
        ));
    };
    let (out_tx, mut out_rx) = mpsc::channel::<Value>(QUEUE_DEPTH);
    let (in_tx, in_rx) = mpsc::channel::<Inbound>(QUEUE_DEPTH);
    let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
    let (ended_tx, ended_rx) = tokio::sync::watch::channel(false);

    // Writer: one JSON text per line; closing stdin (on shutdown or when the
    // session drops its sender) is how a stdio server is asked to exit.
    let (close_stdin_tx, mut close_stdin_rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        loop {
            let msg = tokio::select! {
                // What was queued before the close (a `notifications/cancelled`
                // for the call that retired the session) is written first.
                biased;
                msg = out_rx.recv() => match msg { Some(m) => m, None => break },
                _ = &mut close_stdin_rx => break,
            };
            let mut line = msg.to_string();
            line.push('\n');
            if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                break;
            }
        }
    });

    let reader_tx = in_tx.clone();
    let reader_route = route.clone();
    tokio::spawn(async move {
        let mut lines = FramedRead::new(stdout, line_codec(max_message_bytes));
        while let Some(line) = lines.next().await {
            let line = match line {
                Ok(line) => line,
                Err(e) => {
                    let _ = reader_tx
                        .send(Inbound::Closed(format!("unreadable stdout: {e}")))
                        .await;
                    return;
                }
            };
            let Some(read) = message_from_line(&line) else {
                continue;
            };
            match read {
                Ok(msg) => {
                    if reader_tx.send(Inbound::Message(msg)).await.is_err() {
                        return;
                    }
                }
                // A server must not write anything but MCP to stdout; say so once per line and go on.
                Err(e) => {
                    tracing::warn!(route = %reader_route, pid, error = %e, "upstream wrote a non-JSON-RPC line on stdout");
                }
            }
        }
        let _ = reader_tx
            .send(Inbound::Closed("the server closed its stdout".into()))
            .await;
    });

    let stderr_route = route.clone();
    tokio::spawn(async move {
        let mut lines = FramedRead::new(stderr, LinesCodec::new_with_max_length(64 * 1024));
        while let Some(Ok(line)) = lines.next().await {
            tracing::debug!(target: "redmark::upstream::stderr", route = %stderr_route, pid, "{line}");
        }
    });

    // Supervisor: reports the exit, or ends the process when the session shuts down.
    tokio::spawn(async move {
        tokio::select! {
            status = child.wait() => {
                let why = match status {
                    Ok(s) => format!("the server process exited ({s})"),
                    Err(e) => format!("the server process could not be waited on: {e}"),
                };
                let _ = in_tx.send(Inbound::Closed(why)).await;
            }
            _ = shutdown_rx => {
                // spec 2025-06-18 transports.mdx "stdio" shutdown: close stdin,
                // give the server a moment to exit by itself, then kill it.
                let _ = close_stdin_tx.send(());
                if tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_err() {
                    let _ = child.kill().await;
                }
            }
        }
        ended_tx.send_replace(true);
    });

    Ok(Link {
        outbound: out_tx,
        inbound: in_rx,
        session_id: Arc::new(Mutex::new(None)),
        protocol_version: Arc::new(Mutex::new(None)),
        shutdown: shutdown_tx,
        ended: ended_rx,
    })
}
