//! Every `data.reason` redmark puts in an error, in one table: its string, the
//! JSON-RPC code and HTTP status a client gets with it, and the side the fault
//! lies on. Every error that reaches a client is built from a [`Reason`], so a
//! program can match on `data.reason` and an operator can tell at a glance
//! whether to look at the client, the server behind redmark, or redmark.

use http::StatusCode;

use crate::jsonrpc::code;

/// Where a fault lies: decides the log level of a refusal and lets an
/// operator tell whom to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Client,
    Upstream,
    Gateway,
}

macro_rules! reasons {
    ($( $(#[doc = $doc:literal])* $variant:ident => $text:literal, $status:ident, $code:expr, $fault:ident; )*) => {
        /// A `data.reason`: one row of the table of refusals and endings.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Reason {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl Reason {
            /// Every reason, in table order.
            pub const ALL: &'static [Reason] = &[ $( Reason::$variant, )* ];

            /// The string clients match on.
            pub const fn as_str(self) -> &'static str {
                match self { $( Reason::$variant => $text, )* }
            }

            /// The HTTP status of a response that carries this reason.
            pub const fn status(self) -> StatusCode {
                match self { $( Reason::$variant => StatusCode::$status, )* }
            }

            /// The JSON-RPC error code redmark uses with this reason.
            pub const fn code(self) -> i64 {
                match self { $( Reason::$variant => $code, )* }
            }

            pub const fn fault(self) -> Fault {
                match self { $( Reason::$variant => Fault::$fault, )* }
            }
        }
    };
}

reasons! {
    // The HTTP front (spec 2026-07-28 streamable-http.mdx, basic/index.mdx).
    /// `Origin` present and not allowed (DNS rebinding protection).
    OriginNotAllowed => "origin_not_allowed", FORBIDDEN, code::INVALID_REQUEST, Client;
    /// GET or DELETE on the endpoint: 405 with `Allow: POST`, no body.
    MethodNotAllowed => "method_not_allowed", METHOD_NOT_ALLOWED, code::INVALID_REQUEST, Client;
    /// No `Authorization: Bearer` credentials.
    Unauthenticated => "unauthenticated", UNAUTHORIZED, code::INVALID_REQUEST, Client;
    /// Credentials presented and not valid.
    InvalidCredentials => "invalid_credentials", UNAUTHORIZED, code::INVALID_REQUEST, Client;
    // OAuth 2.1 bearer JWTs (spec 2026-07-28 basic/authorization/index.mdx
    // "Error Handling": invalid or expired tokens 401, insufficient scopes 403).
    /// A bearer JWT that is malformed, badly signed, of a refused algorithm, from another issuer, or not yet valid.
    InvalidToken => "invalid_token", UNAUTHORIZED, code::INVALID_REQUEST, Client;
    /// A bearer JWT past its `exp` (beyond the leeway).
    TokenExpired => "token_expired", UNAUTHORIZED, code::INVALID_REQUEST, Client;
    /// A bearer JWT whose `aud` is not this route's resource (RFC 8707).
    WrongAudience => "wrong_audience", UNAUTHORIZED, code::INVALID_REQUEST, Client;
    /// A valid token without the scopes the route or the tool requires.
    InsufficientScope => "insufficient_scope", FORBIDDEN, code::INVALID_REQUEST, Client;
    UnsupportedMediaType => "unsupported_media_type", UNSUPPORTED_MEDIA_TYPE, code::INVALID_REQUEST, Client;
    NotAcceptable => "not_acceptable", NOT_ACCEPTABLE, code::INVALID_REQUEST, Client;
    BodyTooLarge => "body_too_large", PAYLOAD_TOO_LARGE, code::INVALID_REQUEST, Client;
    BodyUnreadable => "body_unreadable", BAD_REQUEST, code::INVALID_REQUEST, Client;
    /// The body did not arrive within `body_read_timeout` (a trickle, or a
    /// `Content-Length` longer than what was sent).
    BodyTimeout => "body_timeout", REQUEST_TIMEOUT, code::INVALID_REQUEST, Client;
    /// A body would take its connection's or the listener's request-body
    /// memory past its bound (`front::body_budget`): 503 with `Retry-After`, `data.scope`.
    BodyMemoryExhausted => "body_memory_exhausted", SERVICE_UNAVAILABLE, code::INTERNAL_ERROR, Gateway;
    /// `max_connections` are open: 503 with `Retry-After`, then the connection is closed.
    TooManyConnections => "too_many_connections", SERVICE_UNAVAILABLE, code::INTERNAL_ERROR, Gateway;
    ParseError => "parse_error", BAD_REQUEST, code::PARSE_ERROR, Client;
    /// A JSON array (batch) or other non-object body.
    NotASingleMessage => "not_a_single_message", BAD_REQUEST, code::INVALID_REQUEST, Client;
    InvalidRequest => "invalid_request", BAD_REQUEST, code::INVALID_REQUEST, Client;
    /// Clients must not send JSON-RPC responses.
    ResponseNotAllowed => "response_not_allowed", BAD_REQUEST, code::INVALID_REQUEST, Client;
    HeaderMissing => "header_missing", BAD_REQUEST, code::HEADER_MISMATCH, Client;
    HeaderInvalid => "header_invalid", BAD_REQUEST, code::HEADER_MISMATCH, Client;
    HeaderMismatch => "header_mismatch", BAD_REQUEST, code::HEADER_MISMATCH, Client;
    UnsupportedProtocolVersion => "unsupported_protocol_version", BAD_REQUEST, code::UNSUPPORTED_PROTOCOL_VERSION, Client;
    /// A method earlier revisions had (`initialize`, `ping`, ...).
    MethodRemoved => "method_removed", NOT_FOUND, code::METHOD_NOT_FOUND, Client;
    MethodNotFound => "method_not_found", NOT_FOUND, code::METHOD_NOT_FOUND, Client;
    // 2025-era clients' sessions (spec 2025-11-25 basic/transports.mdx "Session Management").
    /// A 2025-era request other than `initialize` without `Mcp-Session-Id` (400).
    SessionRequired => "session_required", BAD_REQUEST, code::INVALID_REQUEST, Client;
    /// An `Mcp-Session-Id` that is ended, expired, another principal's, or not redmark's (404: initialize again).
    SessionUnknown => "session_unknown", NOT_FOUND, code::INVALID_REQUEST, Client;
    /// The principal holds `[sessions] max_per_principal` sessions already,
    /// each with a call in flight (an idle one would have made room).
    TooManySessions => "too_many_sessions", TOO_MANY_REQUESTS, code::INTERNAL_ERROR, Client;
    /// The replica holds `[sessions] max_total` sessions already, each with
    /// a call in flight.
    SessionsFull => "sessions_full", SERVICE_UNAVAILABLE, code::INTERNAL_ERROR, Gateway;
    /// A second `GET` on a session whose standalone stream is open (409).
    StreamAlreadyOpen => "stream_already_open", CONFLICT, code::INVALID_REQUEST, Client;
    /// A JSON-RPC response POSTed for no question that is waiting (answered already, ended, or never asked).
    AnswerUnexpected => "answer_unexpected", BAD_REQUEST, code::INVALID_REQUEST, Client;
    /// An `initialize` whose kept capability member (`elicitation`, `sampling`, `roots`) is longer than a session keeps (400).
    CapabilitiesTooLarge => "capabilities_too_large", BAD_REQUEST, code::INVALID_PARAMS, Client;
    /// A `resources/subscribe` past the most subscriptions one session (or listen) may hold.
    TooManySubscriptions => "too_many_subscriptions", BAD_REQUEST, code::INVALID_PARAMS, Client;
    /// A resource subscription whose URI is longer than redmark keeps.
    UriTooLong => "uri_too_long", BAD_REQUEST, code::INVALID_PARAMS, Client;
    MissingMeta => "missing_meta", BAD_REQUEST, code::INVALID_PARAMS, Client;
    InvalidLogLevel => "invalid_log_level", BAD_REQUEST, code::INVALID_PARAMS, Client;
    InvalidParams => "invalid_params", BAD_REQUEST, code::INVALID_PARAMS, Client;
    /// `tools/call` for a tool the server does not list (spec server/tools.mdx: -32602).
    UnknownTool => "unknown_tool", OK, code::INVALID_PARAMS, Client;
    /// A bug in redmark: a request path ended without an answer.
    InternalError => "internal_error", INTERNAL_SERVER_ERROR, code::INTERNAL_ERROR, Gateway;

    /// A `requestState` on a method without retries (only `tools/call`,
    /// `prompts/get` and `resources/read` have one): refused before the rate
    /// limits, so it can never pass for a retry.
    StateNotAllowed => "state_not_allowed", BAD_REQUEST, code::INVALID_PARAMS, Client;
    // requestState, checked in this order (DESIGN "requestState").
    StateMalformed => "state_malformed", OK, code::INVALID_PARAMS, Client;
    /// A requestState sealed by a newer redmark in a format this one cannot
    /// read (replicas of two versions mid-upgrade): the client calls again.
    StateNewerFormat => "state_newer_format", OK, code::INVALID_PARAMS, Gateway;
    StateUnknownKey => "state_unknown_key", OK, code::INVALID_PARAMS, Client;
    StateBadSignature => "state_bad_signature", OK, code::INVALID_PARAMS, Client;
    StateExpired => "state_expired", OK, code::INVALID_PARAMS, Client;
    StateWrongPrincipal => "state_wrong_principal", OK, code::INVALID_PARAMS, Client;
    StateWrongRequest => "state_wrong_request", OK, code::INVALID_PARAMS, Client;
    /// A round's state presented a second time.
    StateReplayed => "state_replayed", OK, code::INVALID_PARAMS, Client;
    /// A requestState longer than `[state] max_bytes` presented, or one that
    /// would grow past it (replay mode's collected answers): the operation ends.
    StateTooLarge => "state_too_large", OK, code::INVALID_PARAMS, Client;
    /// The store that marks each round's state used (`[state] store`) could
    /// not answer: the retry is refused, never accepted unchecked.
    StateStoreUnavailable => "state_store_unavailable", SERVICE_UNAVAILABLE, code::INTERNAL_ERROR, Gateway;
    /// No operation for this state on this node (restart, or long ended).
    OperationUnknown => "operation_unknown", OK, code::INVALID_PARAMS, Client;
    /// A task id that is no live task of this principal on this route (ext-tasks: -32602).
    TaskUnknown => "task_unknown", OK, code::INVALID_PARAMS, Client;
    /// A gateway-made task whose replica restarted: what its failed task carries (`data.node`).
    TaskLost => "task_lost", OK, code::INTERNAL_ERROR, Gateway;
    /// `inputResponses` not an object, or an answer of the wrong shape.
    MalformedInputResponse => "malformed_input_response", OK, code::INVALID_PARAMS, Client;

    // How operations end.
    /// Nobody answered within `[mrtr] ttl`.
    OperationExpired => "operation_expired", OK, code::INVALID_PARAMS, Client;
    /// The server asked more than `max_rounds` rounds.
    RoundsExhausted => "rounds_exhausted", OK, code::INTERNAL_ERROR, Upstream;
    /// The server needs a capability the client did not declare (spec basic/index.mdx: 400, -32021).
    MissingCapability => "missing_capability", BAD_REQUEST, code::MISSING_REQUIRED_CLIENT_CAPABILITY, Client;
    /// The principal has `max_pending_per_principal` operations waiting.
    TooManyPending => "too_many_pending", TOO_MANY_REQUESTS, code::INTERNAL_ERROR, Client;
    /// Over a `[route.rate_limit]` or a tool's `rate`: 429 with `Retry-After`, `data.limit`.
    RateLimited => "rate_limited", TOO_MANY_REQUESTS, code::INTERNAL_ERROR, Client;
    ShuttingDown => "shutting_down", SERVICE_UNAVAILABLE, code::INTERNAL_ERROR, Gateway;

    // Several replicas (docs/src/guides/replicas.md).
    /// The replica that holds a hold-mode operation did not take the
    /// forwarded retry within the connect timeout (`data.node` names it).
    OwnerUnreachable => "owner_unreachable", SERVICE_UNAVAILABLE, code::INTERNAL_ERROR, Gateway;
    /// A new operation on a replica that is draining for a restart.
    Draining => "draining", SERVICE_UNAVAILABLE, code::INTERNAL_ERROR, Gateway;
    /// The internal endpoint: a request without the forward signature headers.
    ForwardUnsigned => "forward_unsigned", UNAUTHORIZED, code::INVALID_REQUEST, Client;
    /// The internal endpoint: a signature that is not the cluster secret's over this request.
    ForwardBadSignature => "forward_bad_signature", UNAUTHORIZED, code::INVALID_REQUEST, Client;
    /// The internal endpoint: a forward signed more than 30 s from this replica's clock.
    ForwardStale => "forward_stale", UNAUTHORIZED, code::INVALID_REQUEST, Client;
    /// The internal endpoint: a signed forward whose principal cannot be
    /// read (a field missing, a newer format): replicas of versions too far
    /// apart, the operator's to fix, so the gateway's fault; never served
    /// as a caller with fewer fields.
    ForwardBadPrincipal => "forward_bad_principal", INTERNAL_SERVER_ERROR, code::INTERNAL_ERROR, Gateway;
    /// The internal endpoint: a signed request that is not a hold-mode retry.
    ForwardNotRetry => "forward_not_retry", BAD_REQUEST, code::INVALID_REQUEST, Client;

    // The server behind redmark.
    /// The server answered with an error: relayed with its own code and message.
    UpstreamError => "upstream_error", OK, code::INTERNAL_ERROR, Upstream;
    /// The server's legacy -32002, relayed as 2026-07-28's -32602.
    ResourceNotFound => "resource_not_found", OK, code::INVALID_PARAMS, Upstream;
    /// The server process exited or its HTTP session was dropped.
    UpstreamLost => "upstream_lost", OK, code::INTERNAL_ERROR, Upstream;
    UpstreamUnavailable => "upstream_unavailable", BAD_GATEWAY, code::INTERNAL_ERROR, Upstream;
    UpstreamIncompatible => "upstream_incompatible", BAD_GATEWAY, code::INTERNAL_ERROR, Upstream;
    /// A native server's result 2026-07-28 does not allow on the method:
    /// `input_required` (or any `resultType` but `complete`) on discovery,
    /// a list, `completion/complete` or a listen's end. Never relayed.
    UpstreamInvalidResult => "upstream_invalid_result", BAD_GATEWAY, code::INTERNAL_ERROR, Upstream;
    /// No upstream session became free within `lease_timeout`.
    UpstreamBusy => "upstream_busy", SERVICE_UNAVAILABLE, code::INTERNAL_ERROR, Gateway;
    UpstreamTimeout => "upstream_timeout", GATEWAY_TIMEOUT, code::INTERNAL_ERROR, Upstream;
    /// Sent to the server: a pushed request redmark cannot put to a 2026 client.
    NotRelayed => "not_relayed", OK, code::METHOD_NOT_FOUND, Upstream;
    /// Sent to the server: it pushed a request while no call of its session was in flight.
    NoRequestInFlight => "no_request_in_flight", OK, code::INTERNAL_ERROR, Upstream;

    // Policy (`policies/*.toml`).
    PolicySchemaNotFlat => "policy_schema_not_flat", OK, code::INTERNAL_ERROR, Upstream;
    PolicySecretRequest => "policy_secret_request", OK, code::INTERNAL_ERROR, Upstream;
    PolicyUrlNotAllowed => "policy_url_not_allowed", OK, code::INTERNAL_ERROR, Upstream;
    PolicyTooManyQuestions => "policy_too_many_questions", OK, code::INTERNAL_ERROR, Upstream;
    /// A form field no answer can satisfy: the policy's rules and the
    /// server's schema leave no common value (`minimum` above the server's
    /// `maximum`, no choice of the server's in the policy's `enum`). Never
    /// put to a person; `redmark check --probe` reports it ahead.
    PolicyUnsatisfiable => "policy_unsatisfiable", OK, code::INTERNAL_ERROR, Gateway;
    /// The question asks a person for a value the model owns (seed 003).
    PolicyModelOwned => "policy_model_owned", OK, code::INVALID_PARAMS, Client;
    PolicyInvalidAnswer => "policy_invalid_answer", OK, code::INVALID_PARAMS, Client;
    PolicyDenied => "policy_denied", OK, code::INVALID_PARAMS, Client;
    /// A policy rule failed at run time (a name that does not exist, a type error): refused, logged at ERROR.
    PolicyError => "policy_error", OK, code::INTERNAL_ERROR, Gateway;
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn no_two_reasons_share_a_string() {
        let strings: HashSet<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(strings.len(), Reason::ALL.len());
    }

    /// The first integer in a table cell (`-32603, or the server's own` -> -32603).
    fn first_number(cell: &str) -> Option<i64> {
        let start = cell.find(|c: char| c == '-' || c.is_ascii_digit())?;
        let rest = &cell[start..];
        let end = rest[1..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(rest.len(), |i| i + 1);
        rest[..end].parse().ok()
    }

    /// The reference page's rows, `| `reason` | HTTP | code | fault | when |`,
    /// checked both ways against the table above: every reason has exactly one
    /// row with its status, code and fault side, and no row names a reason
    /// the code does not have.
    #[test]
    fn every_reason_is_documented_with_its_code_and_status() {
        let page = include_str!("../../docs/src/reference/reasons.md");
        let mut rows = std::collections::HashMap::new();
        let mut problems = Vec::new();
        for line in page.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells[1].trim_matches('`');
            if rows.insert(name, cells.clone()).is_some() {
                problems.push(format!("{name}: two rows"));
            }
        }
        for r in Reason::ALL {
            let Some(cells) = rows.remove(r.as_str()) else {
                problems.push(format!("{r}: no row"));
                continue;
            };
            let fault = format!("{:?}", r.fault()).to_lowercase();
            let documented = (first_number(cells[2]), first_number(cells[3]), cells[4]);
            let actual = (
                Some(i64::from(r.status().as_u16())),
                Some(r.code()),
                fault.as_str(),
            );
            if documented != actual {
                problems.push(format!(
                    "{r}: page says {documented:?}, code says {actual:?}"
                ));
            }
        }
        problems.extend(
            rows.keys()
                .map(|name| format!("{name}: a row for no reason")),
        );
        assert!(
            problems.is_empty(),
            "docs/src/reference/reasons.md and src/protocol/reason.rs differ: {problems:#?}"
        );
    }

    #[test]
    fn client_faults_are_never_5xx_and_gateway_statuses_are_errors() {
        for r in Reason::ALL {
            if r.fault() == Fault::Client {
                assert!(!r.status().is_server_error(), "{r} is a client fault");
            }
        }
        assert_eq!(Reason::MissingCapability.status(), StatusCode::BAD_REQUEST);
        assert_eq!(Reason::MissingCapability.code(), -32021);
    }
}
