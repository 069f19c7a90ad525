//! The spans of an operation (OpenTelemetry MCP semantic conventions): the
//! root, one per HTTP round trip, and the upstream call.

use crate::jsonrpc::Id;
use crate::protocol::{ClientRequest, Method};
use crate::route::Route;
use crate::telemetry::traces;
use crate::upstream::session::Session;

/// The root span of an operation: span name `{mcp.method.name} {target}`
/// (OpenTelemetry MCP semantic conventions), parented to the caller's trace,
/// or to `parent` (a replay-mode run: the operation's first root span).
pub(crate) fn root_span(
    route: &str,
    req: &ClientRequest,
    target: &str,
    id: &str,
    parent: Option<&str>,
) -> tracing::Span {
    let span = tracing::info_span!(
        "operation",
        otel.name = %format!("{} {}", req.method, target),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
        mcp.method.name = %req.method,
        mcp.protocol.version = %req.ctx.protocol_version,
        gen_ai.tool.name = tracing::field::Empty,
        gen_ai.prompt.name = tracing::field::Empty,
        mcp.resource.uri = tracing::field::Empty,
        redmark.route = %route,
        redmark.operation.id = %id,
        redmark.outcome = tracing::field::Empty,
        redmark.rounds = tracing::field::Empty,
    );
    record_target(&span, req.method, target);
    match parent {
        Some(tp) => traces::adopt_parent(&span, Some(tp), None),
        None => traces::adopt_parent(
            &span,
            req.ctx.traceparent.as_deref(),
            req.ctx.tracestate.as_deref(),
        ),
    }
    span
}

/// One HTTP round trip of the operation (the first request or a retry): a
/// `{mcp.method.name} {target}` server span of its own, so it carries the
/// attributes the OpenTelemetry MCP semantic conventions ask of every MCP
/// request span, not only the root's.
pub(crate) fn round_trip_span(
    root: &tracing::Span,
    method: Method,
    target: &str,
    id: &Id,
    round: u32,
    protocol_version: &str,
) -> tracing::Span {
    // The id itself: `Id`'s Display quotes a string id as JSON would.
    let request_id = match id {
        Id::Number(n) => n.to_string(),
        Id::String(s) => s.clone(),
    };
    let span = tracing::info_span!(
        parent: root,
        "round_trip",
        otel.name = %format!("{method} {target}"),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
        mcp.method.name = %method,
        mcp.protocol.version = %protocol_version,
        gen_ai.tool.name = tracing::field::Empty,
        gen_ai.prompt.name = tracing::field::Empty,
        mcp.resource.uri = tracing::field::Empty,
        jsonrpc.request.id = %request_id,
        redmark.round = i64::from(round),
    );
    record_target(&span, method, target);
    span
}

/// The semantic conventions' name of what a request is about.
fn record_target(span: &tracing::Span, method: Method, target: &str) {
    match method {
        Method::ToolsCall => span.record("gen_ai.tool.name", target),
        Method::PromptsGet => span.record("gen_ai.prompt.name", target),
        _ => span.record("mcp.resource.uri", target),
    };
}

/// Marks a span failed with the error's reason (`error.type`).
pub(crate) fn record_error(span: &tracing::Span, reason: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("error.type", reason);
}

/// The call to the legacy server, for the whole operation.
pub(super) fn upstream_span(
    root: &tracing::Span,
    method: Method,
    target: &str,
    session: &Session,
    route: &Route,
) -> tracing::Span {
    let (transport, address) = route.pool.address();
    let span = tracing::info_span!(
        parent: root,
        "upstream",
        otel.name = %format!("{method} {target}"),
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
        mcp.method.name = %method,
        gen_ai.tool.name = tracing::field::Empty,
        gen_ai.prompt.name = tracing::field::Empty,
        mcp.resource.uri = tracing::field::Empty,
        // Only when there is one (stdio sessions have none).
        mcp.session.id = tracing::field::Empty,
        mcp.protocol.version = %session.init.protocol_version,
        network.transport = transport,
        server.address = %address,
    );
    record_target(&span, method, target);
    if let Some(id) = session.upstream_session_id() {
        span.record("mcp.session.id", id.as_str());
    }
    span
}
