//! Relaying a call (`tools/call`, `prompts/get`, `resources/read`) to its
//! leased session: request-scoped notifications go to the client's SSE
//! stream when it asked for them, and a client that goes away cancels the
//! upstream request.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Route;
use super::body::Outgoing;
use super::dispatch::{Reply, notification, upstream_error_reply};
use super::request::{ClientRequest, RequestContext};
use super::shape;
use crate::auth::Principal;
use crate::error::IntoReject;
use crate::jsonrpc::{ErrorObject, code, error_response, result_response};
use crate::protocol::log_level_rank;
use crate::upstream::UpstreamError;
use crate::upstream::session::{CallEvent, CallStep};

/// Queue depth between a relay and the client's response stream.
const STREAM_DEPTH: usize = 64;

/// Starts the relay and waits for its first output: a final answer becomes a
/// JSON response, a notification opens an SSE stream.
pub async fn start(route: Arc<Route>, principal: Principal, req: ClientRequest) -> Reply {
    let (tx, mut rx) = mpsc::channel(STREAM_DEPTH);
    let id = req.id.clone();
    tokio::spawn(async move {
        tokio::select! {
            out = run(&route, &principal, &req, &tx) => { let _ = tx.send(out).await; }
            // The client is gone (its stream or connection closed): dropping
            // `run` drops the call, which cancels it upstream.
            () = tx.closed() => tracing::info!(route = %route.name, id = %req.id, "client went away; upstream request cancelled"),
        }
    });
    match rx.recv().await {
        Some(Outgoing::Final { status, body }) => Reply::Json { status, body },
        Some(Outgoing::Notification(first)) => Reply::Stream { first, rx },
        None => Reply::reject(
            &id,
            &crate::error::Reject::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                code::INTERNAL_ERROR,
                "internal_error",
                "the relay ended without an answer",
            ),
        ),
    }
}

fn final_reject(req: &ClientRequest, e: UpstreamError) -> Outgoing {
    let reject = e.into_reject();
    Outgoing::Final {
        status: reject.status,
        body: error_response(Some(&req.id), &reject.error_object()),
    }
}

async fn run(
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
    tx: &mpsc::Sender<Outgoing>,
) -> Outgoing {
    let lease = match route.lease(principal, req).await {
        Ok(l) => l,
        Err(e) => return final_reject(req, e),
    };
    let session = lease.session().clone();
    if let Some(level) = &req.ctx.log_level {
        // Legacy servers take a session-wide level; the session serves one call at a time.
        if session.init.capabilities.get("logging").is_some() {
            let _ = session
                .request(
                    "logging/setLevel",
                    Some(json!({"level": level})),
                    route.pool.request_timeout(),
                )
                .await;
        }
    }
    let mut call = match session
        .call(&req.method, Some(shape::upstream_params(&req.params)))
        .await
    {
        Ok(c) => c,
        Err(e) => return final_reject(req, e),
    };
    loop {
        let step = match tokio::time::timeout(route.pool.call_timeout(), call.next()).await {
            Ok(step) => step,
            Err(_) => {
                call.cancel("redmark: the server was silent for too long");
                return final_reject(req, UpstreamError::Timeout(route.pool.call_timeout()));
            }
        };
        match step {
            CallStep::Event(CallEvent::Notification { method, params }) => {
                if let Some(n) = relayable(&req.ctx, &method, params)
                    && tx.send(Outgoing::Notification(n)).await.is_err()
                {
                    return final_reject(req, UpstreamError::Lost("client gone".into()));
                }
            }
            CallStep::Event(CallEvent::ServerRequest { id, method, .. }) => {
                // Converting pushed questions into MRTR round trips belongs to
                // `mrtr`; a request it does not handle is refused so the server
                // is never left waiting.
                tracing::info!(route = %route.name, %method, "upstream pushed a request that is not converted; refused");
                let err = ErrorObject::new(
                    code::METHOD_NOT_FOUND,
                    format!("redmark does not relay `{method}` to this client"),
                )
                .with_data(json!({"reason": "not_relayed"}));
                let _ = session.respond(id, Err(err)).await;
            }
            CallStep::Done(Ok(result)) => {
                let shaped =
                    shape::complete(&req.method, result, &route.stamp(&session.init.server_info));
                return Outgoing::Final {
                    status: StatusCode::OK,
                    body: result_response(&req.id, shaped),
                };
            }
            CallStep::Done(Err(e)) => {
                let (status, body) = upstream_error_reply(&req.id, e);
                return Outgoing::Final { status, body };
            }
            CallStep::Lost(e) => return final_reject(req, e),
        }
    }
}

/// Which request-scoped notifications reach the client, in 2026-07-28 shape.
fn relayable(ctx: &RequestContext, method: &str, params: Option<Value>) -> Option<Value> {
    match method {
        // spec 2026-07-28 basic/patterns/progress.mdx: progress only for a request that sent a token.
        "notifications/progress" => {
            let token = ctx.progress_token.as_ref()?;
            let p = params?;
            (p.get("progressToken") == Some(token)).then(|| notification(method, Some(p)))
        }
        // spec 2026-07-28 server/utilities/logging.mdx: "The server MUST NOT emit
        // notifications/message for a request that does not include this field."
        "notifications/message" => {
            let wanted = log_level_rank(ctx.log_level.as_deref()?)?;
            let p = params?;
            let level = log_level_rank(p.get("level").and_then(Value::as_str)?)?;
            (level >= wanted).then(|| notification(method, Some(p)))
        }
        // A server cancelling its own pushed request, or anything else: not for a 2026 client.
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::profile::Profile;

    fn ctx(token: Option<Value>, level: Option<&str>) -> RequestContext {
        RequestContext {
            protocol_version: "2026-07-28".into(),
            capabilities: json!({}),
            client_info: None,
            log_level: level.map(str::to_owned),
            progress_token: token,
            profile: Profile::default(),
        }
    }

    #[test]
    fn progress_only_with_a_matching_token() {
        let p = json!({"progressToken": 7, "progress": 1});
        assert!(relayable(&ctx(None, None), "notifications/progress", Some(p.clone())).is_none());
        assert!(
            relayable(
                &ctx(Some(json!(8)), None),
                "notifications/progress",
                Some(p.clone())
            )
            .is_none()
        );
        assert_eq!(
            relayable(
                &ctx(Some(json!(7)), None),
                "notifications/progress",
                Some(p.clone())
            )
            .unwrap()["params"],
            p
        );
    }

    #[test]
    fn log_messages_only_when_asked_and_at_or_above_the_level() {
        let warn = json!({"level": "warning", "data": "x"});
        assert!(
            relayable(
                &ctx(None, None),
                "notifications/message",
                Some(warn.clone())
            )
            .is_none()
        );
        assert!(
            relayable(
                &ctx(None, Some("error")),
                "notifications/message",
                Some(warn.clone())
            )
            .is_none()
        );
        assert!(
            relayable(
                &ctx(None, Some("info")),
                "notifications/message",
                Some(warn)
            )
            .is_some()
        );
        assert!(
            relayable(
                &ctx(None, Some("debug")),
                "notifications/cancelled",
                Some(json!({}))
            )
            .is_none()
        );
    }
}
