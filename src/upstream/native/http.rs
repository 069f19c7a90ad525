//! A native server over Streamable HTTP (spec 2026-07-28
//! basic/transports/streamable-http.mdx): each request one POST with no
//! session, answered by a JSON body or an SSE stream whose response to our
//! id is the answer (anything else on it is skipped).

use std::collections::BTreeMap;

use crate::upstream::client::ResponseBody;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use serde_json::Value;

use super::{NATIVE_VERSION, NativeRequest, headers};
use crate::jsonrpc::{ErrorObject, Id, Message, code};
use crate::sse;
use crate::upstream::UpstreamError;
use crate::upstream::client::{self, HttpClient, next_chunk};

/// Messages of one subscription queued towards its client at most (the
/// client's reading paces the server's stream).
const LISTEN_QUEUE: usize = 64;

pub struct HttpNative {
    client: HttpClient,
    url: String,
    /// Parsed once, for every request. `None` if it does not parse (config
    /// loading has checked it).
    parsed: Option<client::Url>,
    extra: HeaderMap,
    max_message_bytes: usize,
    next_id: std::sync::atomic::AtomicI64,
}

impl HttpNative {
    pub fn new(
        client: HttpClient,
        url: &str,
        extra: &BTreeMap<String, String>,
        max_message_bytes: usize,
    ) -> Self {
        // Checked when the legacy transport is built from the same table.
        let extra = extra
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    HeaderName::from_bytes(k.as_bytes()).ok()?,
                    HeaderValue::from_str(v).ok()?,
                ))
            })
            .collect();
        Self {
            client,
            url: url.to_owned(),
            parsed: client::parse_url(url).ok(),
            extra,
            max_message_bytes,
            next_id: std::sync::atomic::AtomicI64::new(1),
        }
    }

    pub async fn send(
        &self,
        req: &NativeRequest<'_>,
    ) -> Result<Result<Value, ErrorObject>, UpstreamError> {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": req.method, "params": req.params});
        let mut h = self.headers_for(req.method)?;
        if let Some(name) = req.name {
            h.insert(
                "mcp-name",
                HeaderValue::from_str(&headers::encode(name))
                    .map_err(|_| unsendable("the name"))?,
            );
        }
        for (k, v) in &req.param_headers {
            if let (Ok(k), Ok(v)) = (
                HeaderName::from_bytes(k.as_bytes()),
                HeaderValue::from_str(v),
            ) {
                h.insert(k, v);
            }
        }
        let (status, resp, is_sse) = self.post(h, &body).await?;
        let want = Id::Number(id);
        if is_sse {
            return self
                .answer_on_stream(resp, &want, req.notify.as_ref())
                .await;
        }
        let bytes = read_limited(resp, self.max_message_bytes).await?;
        match Message::from_slice(&bytes).ok() {
            Some(Message::Response { outcome, .. }) => Ok(outcome),
            _ if status.is_success() => Err(UpstreamError::Lost(format!(
                "the server answered HTTP {status} without a JSON-RPC response"
            ))),
            // No JSON-RPC body: a server (or proxy) that does not speak this protocol.
            _ => Ok(Err(ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!(
                    "upstream HTTP {status}: {}",
                    String::from_utf8_lossy(&bytes[..bytes.len().min(256)]).trim()
                ),
            ))),
        }
    }

    /// `subscriptions/listen` (spec 2026-07-28 basic/patterns/subscriptions.mdx):
    /// one POST whose SSE stream stays open; every JSON-RPC message on it
    /// (the acknowledgement, the notifications, the final response) goes to
    /// the receiver as it arrives. Dropping the receiver closes the stream,
    /// which ends the subscription at the server.
    pub async fn listen(
        &self,
        params: Value,
    ) -> Result<tokio::sync::mpsc::Receiver<Message>, UpstreamError> {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let method = "subscriptions/listen";
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (_, resp, is_sse) = self.post(self.headers_for(method)?, &body).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(LISTEN_QUEUE);
        let max = self.max_message_bytes;
        if !is_sse {
            // A refusal answered as one JSON body.
            let bytes = read_limited(resp, max).await?;
            let m = Message::from_slice(&bytes).ok().ok_or_else(|| {
                UpstreamError::Lost("the server answered the listen without JSON-RPC".into())
            })?;
            let _ = tx.try_send(m);
            return Ok(rx);
        }
        tokio::spawn(async move {
            let mut decoder = sse::Decoder::new(max);
            let mut body = resp;
            loop {
                let chunk = tokio::select! {
                    c = next_chunk(&mut body) => c,
                    () = tx.closed() => return,
                };
                let Some(Ok(chunk)) = chunk else { return };
                let Ok(events) = decoder.feed(&chunk) else {
                    return;
                };
                for ev in events {
                    let Ok(m) = Message::from_slice(ev.data.as_bytes()) else {
                        continue;
                    };
                    if tx.send(m).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(rx)
    }

    /// The headers every request to the server carries: the route's own,
    /// the media types, `MCP-Protocol-Version` and `Mcp-Method`.
    fn headers_for(&self, method: &str) -> Result<HeaderMap, UpstreamError> {
        let mut h = self.extra.clone();
        h.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(
            "mcp-protocol-version",
            HeaderValue::from_static(NATIVE_VERSION),
        );
        h.insert(
            "mcp-method",
            HeaderValue::from_str(method).map_err(|_| unsendable("the method"))?,
        );
        Ok(h)
    }

    /// POSTs one JSON-RPC message; the status, the body, and whether it is an SSE stream.
    async fn post(
        &self,
        headers: HeaderMap,
        body: &Value,
    ) -> Result<(StatusCode, ResponseBody, bool), UpstreamError> {
        let url = self.parsed.as_ref().ok_or_else(|| {
            UpstreamError::Unavailable(format!("url `{}` is not a valid URL", self.url))
        })?;
        let bytes = Bytes::from(serde_json::to_vec(body).unwrap_or_default());
        let resp = self
            .client
            .send(Method::POST, url, headers, bytes)
            .await
            .map_err(|e| UpstreamError::Unavailable(format!("POST {} failed: {e}", self.url)))?;
        let is_sse = client::is_event_stream(resp.headers());
        Ok((resp.status(), resp.into_body(), is_sse))
    }

    async fn answer_on_stream(
        &self,
        mut body: ResponseBody,
        want: &Id,
        notify: Option<&tokio::sync::mpsc::Sender<Value>>,
    ) -> Result<Result<Value, ErrorObject>, UpstreamError> {
        let mut decoder = sse::Decoder::new(self.max_message_bytes);
        while let Some(chunk) = next_chunk(&mut body).await {
            let chunk = chunk.map_err(UpstreamError::Lost)?;
            let events = decoder
                .feed(&chunk)
                .map_err(|e| UpstreamError::Lost(e.to_string()))?;
            for ev in events {
                match Message::from_slice(ev.data.as_bytes()) {
                    Ok(Message::Response { id, outcome }) if &id == want => return Ok(outcome),
                    // spec 2026-07-28 streamable-http.mdx: the server MAY send
                    // notifications on the stream before the response; they
                    // relate to this request.
                    Ok(Message::Notification { method, params }) => {
                        if let Some(tx) = notify {
                            let mut n = serde_json::Map::with_capacity(2);
                            n.insert("method".into(), method.into());
                            n.insert("params".into(), params.unwrap_or(Value::Null));
                            let _ = tx.try_send(Value::Object(n));
                        }
                    }
                    _ => {}
                }
            }
        }
        Err(UpstreamError::Lost(
            "the server's response stream ended without an answer".into(),
        ))
    }
}

fn unsendable(what: &str) -> UpstreamError {
    UpstreamError::Unavailable(format!("cannot send {what} as a header"))
}

/// The whole body, refused past `max` bytes with the setting's name.
async fn read_limited(body: ResponseBody, max: usize) -> Result<Vec<u8>, UpstreamError> {
    client::read_limited(body, max).await.map_err(|e| match e {
        client::BodyError::TooLarge(_) => UpstreamError::Lost(format!(
            "the server's answer is larger than max_message_bytes ({max})"
        )),
        client::BodyError::Broken(e) => UpstreamError::Lost(e),
    })
}
