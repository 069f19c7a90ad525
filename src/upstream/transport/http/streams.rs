//! The session's SSE streams: the pump that hands up what a POST's stream or
//! the standalone GET stream carries, and the standalone stream itself, opened
//! once the handshake is over and reopened while the session lives.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::Method;

use super::{Shared, carries_message};
use crate::jsonrpc::{ErrorObject, Id, Relayable, code};
use crate::sse;
use crate::upstream::client::{ResponseBody, next_chunk};
use crate::upstream::transport::Inbound;

/// How long the standalone GET stream may take to open before it is skipped.
const STANDALONE_OPEN_TIMEOUT: Duration = Duration::from_secs(5);

impl Shared {
    /// Hands up one message; `stream` is the request whose POST answer
    /// carried it. A result is handed up as the server sent it.
    async fn deliver_on(&self, stream: Option<&Id>, data: &[u8]) {
        let item = match Relayable::from_slice(data) {
            Ok(Relayable::Response { id, outcome }) => Inbound::Answer(id, outcome),
            Ok(Relayable::Message(msg)) => match stream {
                Some(id) => Inbound::OnStream(id.clone(), msg),
                None => Inbound::Message(msg),
            },
            Err(e) => return self.not_json_rpc(&e.to_string()),
        };
        let _ = self.inbound.send(item).await;
    }

    pub(super) async fn pump_sse(&self, mut body: ResponseBody, request_id: Option<Id>) {
        let mut decoder = sse::Decoder::new(self.max_message_bytes);
        while let Some(chunk) = next_chunk(&mut body).await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(route = %self.route, error = %e, "upstream SSE stream broke");
                    break;
                }
            };
            match decoder.feed(&chunk) {
                Ok(events) => {
                    for ev in events.iter().filter(|e| carries_message(e)) {
                        Box::pin(self.deliver_on(request_id.as_ref(), ev.data.as_bytes())).await;
                    }
                }
                Err(e) => {
                    Box::pin(self.fail_request(
                        request_id.clone(),
                        ErrorObject::new(code::INTERNAL_ERROR, e.to_string()),
                    ))
                    .await;
                    return;
                }
            }
        }
    }

    /// Opens the GET stream before any call, so pushes a server sends there
    /// (for example without `relatedRequestId`) are not lost.
    pub(super) async fn open_standalone_stream(
        self: &Arc<Self>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        // Bounded: a server that never answers the GET must not hold up the session.
        let opening = self.client.send(
            Method::GET,
            &self.url,
            self.headers("text/event-stream"),
            Bytes::new(),
        );
        let resp = tokio::time::timeout(STANDALONE_OPEN_TIMEOUT, opening)
            .await
            .ok()?
            .ok()?;
        if !resp.status().is_success() {
            // 405: the server offers no standalone stream, which is allowed.
            return None;
        }
        // Flagged before `ready`, not when the pump's task first runs.
        self.standalone_open.store(true, Ordering::Release);
        let this = Arc::clone(self);
        Some(tokio::spawn(async move {
            this.pump_standalone(resp.into_body()).await;
            let mut failures = 0u32;
            // Servers may close the stream at any time; reopen it while the session lives.
            while failures < 5 && !this.inbound.is_closed() {
                tokio::time::sleep(Duration::from_millis(500 * u64::from(failures + 1))).await;
                match this
                    .client
                    .send(
                        Method::GET,
                        &this.url,
                        this.headers("text/event-stream"),
                        Bytes::new(),
                    )
                    .await
                {
                    Ok(resp) if resp.status().is_success() => {
                        failures = 0;
                        this.pump_standalone(resp.into_body()).await;
                    }
                    // spec 2025-06-18 transports.mdx "Session Management": once the
                    // server has ended the session it "MUST respond to requests
                    // containing that session ID with HTTP 404". The session is
                    // lost now, and replaced before a call is sent on it.
                    Ok(resp) if resp.status() == http::StatusCode::NOT_FOUND => {
                        this.closed("the server ended the HTTP session (404)".into())
                            .await;
                        break;
                    }
                    _ => failures += 1,
                }
            }
        }))
    }

    /// Reads the standalone stream until it ends, flagged open meanwhile.
    async fn pump_standalone(&self, body: ResponseBody) {
        self.standalone_open.store(true, Ordering::Release);
        self.pump_sse(body, None).await;
        self.standalone_open.store(false, Ordering::Release);
    }
}
