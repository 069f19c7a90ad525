//! Step 6: from the body's bytes to the typed request. The body is one
//! JSON-RPC request: a notification is accepted here with 202 and no body
//! (spec streamable-http.mdx "Sending Messages"); a response is refused ("The
//! client MUST NOT send JSON-RPC responses"). Then, in this order, the
//! mirrored protocol headers ([`super::protocol`]), `_meta` ([`super::meta`]),
//! `Mcp-Name` ([`super::name`]), and a `requestState` on a method that has
//! no retry ([`state_without_retry`]).

use http::{HeaderMap, StatusCode};

use super::{Check, Envelope, Halt, Incoming, RequestCx, meta, name, protocol};
use crate::front::era2025::{self, Era2025, Message2025};
use crate::jsonrpc::{FramingError, Message, Read, ReadError};
use crate::mrtr::Outcome;
use crate::protocol::{ClientParams, ClientRequest, Reason, Reject};

pub struct Parse;

impl Check for Parse {
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        // GET and DELETE carry no message: they are 2025-era (`post_only`).
        if cx.head.method != http::Method::POST {
            cx.method_label = Some(cx.head.method.as_str().to_owned());
            cx.era2025 = Some(Box::new(Era2025::new(Message2025::of_http(
                &cx.head.method,
            ))));
            return Ok(());
        }
        match incoming(&cx.head.headers, &cx.bytes, &mut cx.method_label)? {
            Incoming::Request(request) => {
                if request.method.is_task() {
                    if cx.route.tasks.is_none() {
                        return Err(Halt::refuse(
                            Some(&request.id),
                            crate::front::tasks::not_served(request.method.as_str()),
                        ));
                    }
                    name::check_task(&protocol::Mirrored::read(&cx.head.headers), &request)?;
                }
                cx.request = Some(request);
                Ok(())
            }
            Incoming::Era2025(message) => {
                cx.era2025 = Some(Box::new(Era2025::new(*message)));
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
    // spec 2026-07-28 basic/versioning.mdx "Backward Compatibility": "A
    // dual-era server selects its behavior from how the client opens": a
    // request with the modern `_meta` is 2026-07-28; `initialize`, or any
    // message in a session redmark opened with it, is 2025-era.
    // A request naming an initialization-based version in its header is a
    // 2025-era client's too, one that lost its session (it is told so).
    let in_session = headers.contains_key(era2025::SESSION_HEADER)
        || headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| crate::protocol::LEGACY_VERSIONS.contains(&v.trim()));
    let envelope = match message(bytes)? {
        Read::Request { id, method, params } => Envelope { id, method, params },
        Read::Notification { method, params } => {
            *label = Some(method.clone());
            if in_session {
                return Ok(Incoming::Era2025(Box::new(Message2025::Notification {
                    method,
                    params,
                })));
            }
            return Ok(Incoming::Notification(method));
        }
        Read::Response { id, outcome } => {
            // An answer to a pushed question: named by what it is, not a method.
            *label = Some("response".into());
            if in_session {
                return Ok(Incoming::Era2025(Box::new(Message2025::Response {
                    id,
                    outcome,
                })));
            }
            return Err(Halt::refuse(
                Some(&id),
                Reject::new(
                    Reason::ResponseNotAllowed,
                    "clients must not send JSON-RPC responses to a 2026-07-28 endpoint",
                ),
            ));
        }
    };
    *label = Some(envelope.method.clone());
    if era2025::is_2025_request(&envelope, in_session) {
        return Ok(Incoming::Era2025(Box::new(Message2025::Request(envelope))));
    }
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

/// Reads one message (request, notification or response) from the body's bytes.
pub fn message(bytes: &[u8]) -> Result<Read<Box<ClientParams>>, Halt> {
    Message::read_request::<Box<ClientParams>>(bytes).map_err(|e| match e {
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
    })
}
