//! A legacy server as a child process speaking newline-delimited JSON-RPC on
//! stdin/stdout (spec 2025-06-18 `basic/transports.mdx` "stdio"); its stderr
//! goes to redmark's log.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, FramedRead};

use super::{Inbound, Link, QUEUE_DEPTH};
use crate::jsonrpc::Message;
use crate::upstream::UpstreamError;

/// How long a server gets to exit after its stdin closes before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The most of one stderr line that is logged; the rest is read and dropped.
const STDERR_LINE_BYTES: usize = 4096;

/// The framing of a server's stdout: one message per line, each line at most
/// `max_message_bytes`. Lines are bytes: one that is not UTF-8 is a bad
/// message, skipped like bad JSON, not the end of the session.
pub fn line_codec(max_message_bytes: usize) -> AnyDelimiterCodec {
    AnyDelimiterCodec::new_with_max_length(b"\n".to_vec(), Vec::new(), max_message_bytes)
}

/// One line of a server's stdout (without its line ending): `None` for a
/// blank line, else the JSON-RPC message or why it is not one.
pub fn message_from_line(line: &[u8]) -> Option<Result<Message, String>> {
    if line.trim_ascii().is_empty() {
        return None;
    }
    Some(Message::from_slice(line).map_err(|e| e.to_string()))
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
    let (out_tx, mut out_rx) = mpsc::channel::<Message>(QUEUE_DEPTH);
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
            // `to_vec`, not `to_string`: Display writes through `fmt` a token at a time.
            let mut line = serde_json::to_vec(&msg).unwrap_or_default();
            line.push(b'\n');
            if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                break;
            }
        }
    });

    let reader_tx = in_tx.clone();
    let reader_route = route.clone();
    tokio::spawn(async move {
        // A line longer than `max_message_bytes` ends the link: the message it
        // carried is lost for good.
        let mut lines = FramedRead::new(stdout, line_codec(max_message_bytes));
        while let Some(line) = lines.next().await {
            let line = match line {
                Ok(line) => line,
                Err(e) => {
                    let why = match e {
                        AnyDelimiterCodecError::MaxChunkLengthExceeded => format!(
                            "the server wrote a message larger than max_message_bytes ({max_message_bytes})"
                        ),
                        AnyDelimiterCodecError::Io(e) => format!("unreadable stdout: {e}"),
                    };
                    let _ = reader_tx.send(Inbound::Closed(why)).await;
                    return;
                }
            };
            let msg = match message_from_line(&line) {
                None => continue,
                Some(Ok(msg)) => msg,
                // A server must not write anything but MCP to stdout; say so once per line and go on.
                Some(Err(e)) => {
                    tracing::warn!(route = %reader_route, pid, error = %e, "upstream wrote a non-JSON-RPC line on stdout");
                    continue;
                }
            };
            if reader_tx.send(Inbound::Message(msg)).await.is_err() {
                return;
            }
        }
        let _ = reader_tx
            .send(Inbound::Closed("the server closed its stdout".into()))
            .await;
    });

    let stderr_route = route.clone();
    tokio::spawn(drain_stderr(stderr, stderr_route, pid));

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
        direct: None,
        outbound: out_tx,
        inbound: in_rx,
        session_id: Arc::new(Mutex::new(None)),
        protocol_version: Arc::new(Mutex::new(None)),
        shutdown: shutdown_tx,
        ended: ended_rx,
    })
}

/// Reads the server's stderr to its end, whatever its line lengths: a pipe
/// nobody reads fills up, and one that is closed gets the server EPIPE (or
/// SIGPIPE) on its next write. Each line is logged, cut at [`STDERR_LINE_BYTES`].
async fn drain_stderr(stderr: tokio::process::ChildStderr, route: Arc<str>, pid: u32) {
    let mut reader = BufReader::new(stderr);
    let mut sink = |line: &[u8], cut: bool| {
        let text = String::from_utf8_lossy(line);
        let more = if cut { " [...]" } else { "" };
        tracing::debug!(target: "redmark::upstream::stderr", route = %route, pid, "{text}{more}");
    };
    let _ = read_lines_bounded(&mut reader, STDERR_LINE_BYTES, &mut sink).await;
}

/// Calls `sink` with each line of `reader` (without its newline), at most
/// `max` bytes of it and whether it was cut; reads until end of file or an
/// error. Memory stays within `max` plus the reader's buffer.
async fn read_lines_bounded<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
    sink: &mut impl FnMut(&[u8], bool),
) -> std::io::Result<()> {
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            if !line.is_empty() || cut {
                sink(&line, cut);
            }
            return Ok(());
        }
        let newline = buf.iter().position(|b| *b == b'\n');
        let part = &buf[..newline.unwrap_or(buf.len())];
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&part[..part.len().min(room)]);
        cut |= part.len() > room;
        let used = newline.map_or(buf.len(), |i| i + 1);
        reader.consume(used);
        if newline.is_some() {
            sink(&line, cut);
            line.clear();
            cut = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stderr_lines_of_any_length_are_read_to_the_end_and_cut_for_the_log() {
        let long = vec![b'x'; 200 * 1024];
        let mut input = long.clone();
        input.extend_from_slice(b"\nshort\n");
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\nlast");
        let mut reader = BufReader::with_capacity(1024, &input[..]);
        let mut seen = Vec::new();
        read_lines_bounded(&mut reader, 100, &mut |l: &[u8], cut| {
            seen.push((l.to_vec(), cut));
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            seen,
            [
                (vec![b'x'; 100], true),
                (b"short".to_vec(), false),
                (vec![b'x'; 100], true),
                (b"last".to_vec(), false),
            ]
        );
    }
}
