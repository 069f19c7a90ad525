//! Reading a POST's answer: its one JSON message, or its SSE stream handed
//! to the pump; a refusal (non-2xx) ends the session or fails the request.

use http::StatusCode;

use super::{PostAnswer, Shared, message_from_body};
use crate::jsonrpc::{ErrorObject, Id, Message, code};
use crate::upstream::client::{ResponseBody, read_limited};
use crate::upstream::transport::Inbound;

impl Shared {
    /// The answer to a POST: an SSE stream (a tool call's stays open while
    /// the answers to its pushed questions are POSTed) or one JSON message.
    pub(super) async fn read_answer(&self, answer: PostAnswer) {
        let PostAnswer {
            body,
            is_sse,
            request_id,
        } = answer;
        if is_sse {
            self.pump_sse(body, request_id).await;
        } else if let Some(msg) = self.read_json(body, request_id).await {
            let _ = self.inbound.send(Inbound::Message(msg)).await;
        }
    }

    /// A JSON answer's one message; `None` for an empty body, or when the
    /// body could not be read (the request is failed) or is no JSON-RPC
    /// message (logged).
    async fn read_json(&self, body: ResponseBody, request_id: Option<Id>) -> Option<Message> {
        let body = self.read_body(body, request_id).await?;
        match message_from_body(&body) {
            Ok(msg) => Some(msg),
            Err(e) => {
                self.not_json_rpc(&e);
                None
            }
        }
    }

    /// A JSON answer's bytes; `None` for an empty body, or when the body
    /// could not be read (the request is failed).
    pub(super) async fn read_body(
        &self,
        body: ResponseBody,
        request_id: Option<Id>,
    ) -> Option<Vec<u8>> {
        match read_limited(body, self.max_message_bytes).await {
            Ok(body) if body.is_empty() => None,
            Ok(body) => Some(body),
            Err(e) => {
                self.fail_request(
                    request_id,
                    ErrorObject::new(code::INTERNAL_ERROR, e.to_string()),
                )
                .await;
                None
            }
        }
    }

    /// A non-2xx answer to a POST: the session is gone, the server's own
    /// JSON-RPC error, or an HTTP failure of the request.
    pub(super) async fn refused(
        &self,
        resp: http::Response<ResponseBody>,
        had_session: bool,
        request_id: Option<Id>,
    ) {
        let status = resp.status();
        let body = read_limited(resp.into_body(), 4096)
            .await
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        // Some servers (server-everything among them) answer an unknown or
        // expired session with 400 instead of 404.
        if had_session
            && status == StatusCode::BAD_REQUEST
            && text.to_ascii_lowercase().contains("session")
        {
            self.closed(format!(
                "the server no longer knows the HTTP session: {}",
                text.trim()
            ))
            .await;
            return;
        }
        // A JSON-RPC error body is the server's own answer: pass it on as is.
        if let Ok(Message::Response {
            id,
            outcome: Err(e),
        }) = message_from_body(&body)
        {
            self.fail_request(Some(id), e).await;
            return;
        }
        self.fail_request(
            request_id,
            ErrorObject::new(
                code::INTERNAL_ERROR,
                format!("upstream HTTP {status}: {}", text.trim()),
            ),
        )
        .await;
    }

    pub(super) fn not_json_rpc(&self, error: &str) {
        tracing::warn!(route = %self.route, %error, "upstream sent a message that is not JSON-RPC");
    }
}
