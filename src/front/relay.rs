//! Glue between an HTTP request and the operation engine: a call starts or
//! resumes an operation, whose first output decides the response: a final
//! answer becomes a JSON body, a notification opens an SSE stream.

use std::sync::Arc;

use http::StatusCode;
use tokio::sync::mpsc;

use super::body::Outgoing;
use super::dispatch::Reply;
use super::request::ClientRequest;
use super::{Gateway, Route};
use crate::auth::Principal;
use crate::error::Reject;
use crate::jsonrpc::code;
use crate::mrtr;

/// Queue depth between an operation and the client's response stream.
const STREAM_DEPTH: usize = 64;

pub async fn start(
    gw: &Arc<Gateway>,
    route: Arc<Route>,
    principal: Principal,
    req: ClientRequest,
) -> Reply {
    let (tx, mut rx) = mpsc::channel(STREAM_DEPTH);
    let id = req.id.clone();
    let engine = gw.engine.clone();
    if req.params.contains_key("requestState") {
        tokio::spawn(mrtr::resume::resume(engine, route, principal, req, tx));
    } else {
        tokio::spawn(mrtr::operation::begin(engine, route, principal, req, tx));
    }
    // The operation notices a client that goes away (this receiver dropped)
    // and cancels upstream what nobody will receive.
    match rx.recv().await {
        Some(Outgoing::Final { status, body }) => Reply::Json { status, body },
        Some(Outgoing::Notification(first)) => Reply::Stream { first, rx },
        None => Reply::reject(
            &id,
            &Reject::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                code::INTERNAL_ERROR,
                "internal_error",
                "the operation ended without an answer",
            ),
        ),
    }
}
