//! Step 6: from the body's bytes to the typed request. The body is one
//! JSON-RPC request: a notification is accepted here with 202 and no body
//! (spec streamable-http.mdx "Sending Messages"); a response is refused ("The
//! client MUST NOT send JSON-RPC responses"). Then, in this order, the
//! mirrored protocol headers ([`super::protocol`]), `_meta` ([`super::meta`]),
//! `Mcp-Name` ([`super::name`]), and a `requestState` on a method that has
//! no retry ([`state_without_retry`]).

use http::{HeaderMap, StatusCode};

use super::{Check, Envelope, Halt, Incoming, RequestCx, meta, name, protocol};
use crate::jsonrpc::{FramingError, Message, Read, ReadError};
use crate::mrtr::Outcome;
use crate::protocol::{ClientParams, ClientRequest, Reason, Reject};

pub struct Parse;

impl Check for Parse {
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        match incoming(&cx.head.headers, &cx.bytes, &mut cx.method_label)? {
            Incoming::Request(request) => {
                cx.request = Some(request);
                Ok(())
            }
            Incoming::Notification(_) => Err(Halt::Respond {
                status: StatusCode::ACCEPTED,
                headers: Vec::new(),
                outcome: Outcome::Ok,
            }),
        }
    }
}

/// The checks of this step, in order; `label` gets the method as sent as soon
/// as it is read (for metrics, refusals included).
pub(super) fn incoming(
    headers: &HeaderMap,
    bytes: &[u8],
    label: &mut Option<String>,
) -> Result<Incoming, Halt> {
    let envelope = match message(bytes)? {
        Parsed::Request(envelope) => envelope,
        Parsed::Notification(method) => {
            *label = Some(method.clone());
            return Ok(Incoming::Notification(method));
        }
    };
    *label = Some(envelope.method.clone());
    let mut headers = protocol::Mirrored::read(headers);
    protocol::check(&headers, &envelope.id, &envelope.method)?;
    // The params move into the typed request: no copy of the body's tree.
    let request = meta::request(&mut headers, envelope)?;
    name::check(&headers, &request)?;
    state_without_retry(&request)?;
    Ok(Incoming::Request(Box::new(request)))
}

/// A `requestState` on a method that cannot answer `input_required`
/// (`server/discover`, the lists, `completion/complete`,
/// `subscriptions/listen`): the 2026-07-28 schema has the member only on
/// `tools/call`, `prompts/get` and `resources/read` (CallToolRequestParams,
/// GetPromptRequestParams, ReadResourceRequestParams). There is no question
/// it could answer, so it is refused here, before the rate limits: were it
/// counted as a retry, it would move the request out of `per_principal`
/// and `per_route` (issue 42).
fn state_without_retry(request: &ClientRequest) -> Result<(), Halt> {
    if !request.has_state() || request.method.is_operation() {
        return Ok(());
    }
    Err(Halt::refuse(
        Some(&request.id),
        Reject::new(
            Reason::StateNotAllowed,
            format!(
                "`params.requestState` is not allowed on {}: only tools/call, prompts/get and resources/read are retried",
                request.method
            ),
        ),
    ))
}

/// One message from a client.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    Request(Envelope),
    Notification(String),
}

/// Reads one request or notification from the body's bytes.
pub fn message(bytes: &[u8]) -> Result<Parsed, Halt> {
    let message = Message::read_request::<Box<ClientParams>>(bytes).map_err(|e| match e {
        ReadError::Json(e) => Halt::refuse(
            None,
            Reject::new(
                Reason::ParseError,
                format!("the body is not valid JSON: {e}"),
            ),
        ),
        ReadError::Framing { id, error } => {
            let reason = match error {
                FramingError::NotAnObject => Reason::NotASingleMessage,
                _ => Reason::InvalidRequest,
            };
            Halt::refuse(id.as_ref(), Reject::new(reason, error.to_string()))
        }
    })?;
    match message {
        Read::Request { id, method, params } => {
            Ok(Parsed::Request(Envelope { id, method, params }))
        }
        Read::Notification { method, .. } => Ok(Parsed::Notification(method)),
        Read::Response { id, .. } => Err(Halt::refuse(
            Some(&id),
            Reject::new(
                Reason::ResponseNotAllowed,
                "clients must not send JSON-RPC responses to a 2026-07-28 endpoint",
            ),
        )),
    }
}
