//! Byte transports to legacy servers. A transport moves JSON-RPC messages in
//! both directions and reports when the peer is gone; the session above it
//! owns ids, correlation and the MCP lifecycle.

pub mod http;
pub mod memory;
pub mod stdio;

use tokio::sync::mpsc;

use crate::jsonrpc::{Id, Message};

/// What a transport hands up to its session.
#[derive(Debug)]
pub enum Inbound {
    /// A message with no stream of its own: stdio, a plain JSON answer, or
    /// HTTP's standalone GET stream.
    Message(Message),
    /// A message that arrived on the response stream of our request `Id`
    /// (HTTP: the SSE answer to its POST), so it belongs to that request.
    OnStream(Id, Message),
    /// The answer to our request `id`, its result kept as the server sent
    /// it ([`crate::jsonrpc::Payload`]): a call's answer on its SSE stream.
    Answer(
        Id,
        Result<crate::jsonrpc::Payload, crate::jsonrpc::ErrorObject>,
    ),
    /// The peer is gone; no more messages will arrive.
    Closed(String),
}

/// Queue depth between a session and its transport, in messages.
pub const QUEUE_DEPTH: usize = 256;

/// A running transport: send messages with `outbound`, receive on `inbound`.
pub struct Link {
    /// Requests the caller's own task may POST (HTTP; `None` elsewhere).
    pub direct: Option<http::Direct>,
    pub outbound: mpsc::Sender<Message>,
    pub inbound: mpsc::Receiver<Inbound>,
    /// Set once the transport knows its peer-assigned session id (HTTP only).
    pub session_id: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    /// The negotiated protocol version, which HTTP sends as a header.
    pub protocol_version: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    /// Closes the transport (kills the process / ends the HTTP session).
    pub shutdown: tokio::sync::oneshot::Sender<()>,
    /// Turns `true` once the peer is fully gone (process reaped, HTTP session deleted).
    pub ended: tokio::sync::watch::Receiver<bool>,
}
