//! The forward client: a hold-mode retry that landed here while its
//! operation lives on another replica goes to that owner's internal endpoint
//! (`front::cluster`), signed with the cluster secret, and the owner's answer
//! (JSON, or an SSE stream) streams back to the client as it arrives.
//!
//! An owner that does not take the connection within [`CONNECT_TIMEOUT`]
//! (crashed, stopped, partitioned) is an error at once, `owner_unreachable`
//! with `data.node`: never a hang, and never a silent restart of the
//! operation here (its server call lives only on the owner).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, Request, Response};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client as Legacy;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tracing::Instrument;

use super::Gateway;
use super::http::RequestOutcome;
use super::pipeline::RequestCx;
use super::pipeline::owner::ForwardTo;
use super::response::Body;
use crate::jsonrpc::Id;
use crate::mrtr::Outcome;
use crate::protocol::{Principal, Reason, Reject};
use crate::route::Route;

/// How long the owner has to accept the connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Request headers that travel with a forward: the content negotiation and
/// the 2026-07-28 mirrored headers the owner's parse step checks again, and
/// the caller's trace context.
fn travels(name: &HeaderName) -> bool {
    let n = name.as_str();
    n == "content-type"
        || n == "accept"
        || n == "traceparent"
        || n == "tracestate"
        || n.starts_with("mcp-")
}

/// Response headers not passed back: they describe the hop, not the answer.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection" | "keep-alive" | "transfer-encoding" | "content-length" | "upgrade"
    )
}

/// HTTP/1.1 connections to the other replicas, pooled.
#[derive(Clone)]
pub struct Client {
    http: Legacy<HttpConnector, Full<Bytes>>,
    node: String,
    secret: super::cluster::Secret,
}

impl Client {
    pub fn new(node: String, secret: super::cluster::Secret) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        let http = Legacy::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Self { http, node, secret }
    }
}

/// What a forward sends: the client's request as it came, and who sent it.
pub struct Forwarding {
    pub route: Arc<Route>,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The caller this replica authenticated: sent whole, every field
    /// (`cluster::principal`), for the owner judges with exactly it.
    pub principal: Principal,
    pub id: Option<Id>,
}

impl Forwarding {
    pub fn of(cx: &RequestCx) -> Self {
        Self {
            route: cx.route.clone(),
            headers: cx.head.headers.clone(),
            body: cx.bytes.clone(),
            principal: cx.principal.clone(),
            id: cx.request.as_ref().map(|r| r.id.clone()),
        }
    }
}

/// Forwards the retry to its owner and answers with what the owner answers.
/// `None`: the owner of a native server's relayed task cannot be reached,
/// and this replica serves the task itself (the server still holds it;
/// only what the owner remembered of it, red marks in flight, is lost).
pub async fn forward(
    gw: &Gateway,
    cx: Forwarding,
    to: ForwardTo,
) -> Option<(Response<Body>, RequestOutcome)> {
    let id = cx.id.clone();
    // A relayed task is served here when its relaying replica fails, at
    // connect or later (a pooled connection to a replica that died fails
    // only when used): the server still holds the task, and an update the
    // owner may have delivered before failing is not delivered twice, as
    // answers are judged against the questions still outstanding.
    let unreachable = |why: String| {
        gw.metrics
            .record_forward(&cx.route.name, "owner_unreachable");
        if let Some(task) = &to.task {
            if task.sealed.is_relayed() {
                tracing::warn!(node = %to.node, error = %why, "the replica relaying a task is unreachable; serving it here");
                return None;
            }
            tokio::spawn(super::tasks::count_lost(
                gw.engine.clone(),
                task.sealed.clone(),
            ));
            return Some(task_unreachable(task, id.as_ref(), &to.node, &why));
        }
        tracing::warn!(node = %to.node, addr = %to.addr, error = %why, "the owner of a hold-mode operation is unreachable");
        let reject = Reject::new(
            Reason::OwnerUnreachable,
            format!("the replica holding this operation ({}) cannot be reached: {why}; its question is lost, call again without requestState", to.node),
        )
        .with("node", to.node.clone())
        .with("operation", to.operation.clone());
        Some((
            super::response::json(reject.status(), &reject.response(id.as_ref())),
            RequestOutcome::Done(Outcome::Error(reject.reason)),
        ))
    };
    let Some(cluster) = &gw.cluster else {
        return unreachable("this replica has no [cluster] to forward with".into());
    };
    let client = &cluster.client;
    let uri = format!("{}{}", to.addr.trim_end_matches('/'), cx.route.path);
    let mut builder = Request::post(&uri);
    for (name, value) in &cx.headers {
        if travels(name) {
            builder = builder.header(name, value);
        }
    }
    let signed = client
        .secret
        .sign(SystemTime::now(), &cx.route.path, &cx.principal, &cx.body);
    let signed = match signed {
        Ok(signed) => signed,
        Err(e) => return unreachable(format!("the caller cannot be sent to it: {e}")),
    };
    for (name, value) in signed {
        builder = builder.header(name, value);
    }
    builder = builder.header(super::cluster::FROM, client.node.as_str());
    let request = match builder.body(Full::new(cx.body.clone())) {
        Ok(r) => r,
        Err(e) => return unreachable(format!("`{uri}` is not a usable address ({e})")),
    };
    let span = tracing::info_span!(
        "redmark.forward",
        redmark.forwarded_to = %to.node,
        redmark.operation = %to.operation,
        otel.kind = "client",
    );
    // Where it lands, a retry belongs to the operation's trace, whose root is on the owner.
    crate::telemetry::traces::adopt_parent(&span, to.tc.as_deref(), None);
    // Only the connect is bounded: once the owner has the request, its
    // answer may take as long as the server's next step does.
    let sent = client.http.request(request).instrument(span).await;
    let resp = match sent {
        Ok(resp) => resp,
        Err(e) => return unreachable(error_chain(&e)),
    };
    gw.metrics.record_forward(&cx.route.name, "forwarded");
    Some((passthrough(resp), RequestOutcome::Forwarded))
}

/// A task whose replica cannot be reached is lost with it: `tasks/get`
/// reads it `failed`, with a message saying so; `tasks/update` and
/// `tasks/cancel` get the same error as the task's.
fn task_unreachable(
    task: &super::pipeline::owner::TaskAt,
    id: Option<&Id>,
    node: &str,
    why: &str,
) -> (Response<Body>, RequestOutcome) {
    tracing::warn!(node = %node, error = %why, "the replica holding a task is unreachable");
    let reject = Reject::new(
        Reason::OwnerUnreachable,
        format!("the replica holding this task ({node}) cannot be reached ({why}): the task is lost with it; call the tool again"),
    )
    .with("node", node.to_owned());
    if task.method == crate::protocol::Method::TasksGet
        && let Some(id) = id
    {
        let error = serde_json::to_value(reject.error_object()).unwrap_or_default();
        let result = super::tasks::lost(&task.id, &task.sealed, error);
        let body = crate::jsonrpc::result_response(id, result);
        return (
            super::response::json(http::StatusCode::OK, &body),
            RequestOutcome::Done(Outcome::Ok),
        );
    }
    (
        super::response::json(reject.status(), &reject.response(id)),
        RequestOutcome::Done(Outcome::Error(reject.reason)),
    )
}

/// An error and each of its `source()`s, joined by ": " (as `{:#}` prints them).
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// The owner's response, streamed as it arrives. A stream the owner cuts
/// short (it died mid-answer) ends here too; the client sees the stream
/// end without a final response, as it would from the owner directly.
fn passthrough(resp: Response<Incoming>) -> Response<Body> {
    let (parts, body) = resp.into_parts();
    let frames = futures::stream::unfold(Some(body), |body| async move {
        let mut body = body?;
        match body.frame().await {
            Some(Ok(frame)) => Some((Ok::<_, Infallible>(frame), Some(body))),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "the owner's answer broke off");
                None
            }
            None => None,
        }
    });
    let mut out = Response::new(StreamBody::new(frames).boxed_unsync());
    *out.status_mut() = parts.status;
    for (name, value) in &parts.headers {
        if !hop_by_hop(name) {
            out.headers_mut().append(name, value.clone());
        }
    }
    out
}
