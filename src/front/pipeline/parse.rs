//! Step 6: the body is one JSON-RPC request. A notification is accepted here
//! with 202 and no body (spec streamable-http.mdx "Sending Messages"); a
//! response is refused ("The client MUST NOT send JSON-RPC responses").

use http::StatusCode;
use serde_json::Value;

use super::{Envelope, Halt, RequestCx, Step};
use crate::jsonrpc::{FramingError, Id, Message};
use crate::mrtr::Outcome;
use crate::protocol::{Reason, Reject};

pub struct Parse;

#[async_trait::async_trait]
impl Step for Parse {
    async fn on_request(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        match message(&cx.bytes)? {
            Parsed::Request(envelope) => {
                cx.method_label = Some(envelope.method.clone());
                cx.envelope = Some(envelope);
                Ok(())
            }
            Parsed::Notification(method) => {
                cx.method_label = Some(method);
                Err(Halt::Respond {
                    status: StatusCode::ACCEPTED,
                    headers: Vec::new(),
                    outcome: Outcome::Ok,
                })
            }
        }
    }
}

/// One message from a client.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    Request(Envelope),
    Notification(String),
}

/// Reads one request or notification from the body's bytes.
pub fn message(bytes: &[u8]) -> Result<Parsed, Halt> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        Halt::refuse(
            None,
            Reject::new(
                Reason::ParseError,
                format!("the body is not valid JSON: {e}"),
            ),
        )
    })?;
    let raw_id = value.get("id").and_then(Id::from_value);
    let message = Message::from_value(value).map_err(|e| {
        let reason = match e {
            FramingError::NotAnObject => Reason::NotASingleMessage,
            _ => Reason::InvalidRequest,
        };
        Halt::refuse(raw_id.as_ref(), Reject::new(reason, e.to_string()))
    })?;
    match message {
        Message::Request { id, method, params } => {
            Ok(Parsed::Request(Envelope { id, method, params }))
        }
        Message::Notification { method, .. } => Ok(Parsed::Notification(method)),
        Message::Response { id, .. } => Err(Halt::refuse(
            Some(&id),
            Reject::new(
                Reason::ResponseNotAllowed,
                "clients must not send JSON-RPC responses to a 2026-07-28 endpoint",
            ),
        )),
    }
}
