//! Part of step 6: the per-request `_meta` (spec 2026-07-28 basic/index.mdx
//! "Per-request protocol fields": "A request missing any required field is
//! malformed; the server MUST reject it with JSON-RPC error code -32602 ...
//! 400 Bad Request"), the body's version against its header, the log level;
//! then the typed [`ClientRequest`] every later step and layer uses.

use serde_json::{Map, Value};

use super::protocol::{HeaderText, Mirrored, mismatch};
use super::{Envelope, Halt};
use crate::jsonrpc::Id;
use crate::protocol::profile::Profile;
use crate::protocol::{ClientMeta, ClientRequest, Method, Reason, Reject, RequestContext, meta};
use crate::protocol::{LOG_LEVELS, log_level_rank};

/// Checks `_meta` and builds the typed request.
pub fn request(headers: &mut Mirrored<'_>, envelope: Envelope) -> Result<ClientRequest, Halt> {
    let Envelope { id, method, params } = envelope;
    // `protocol` admitted only 2026-07-28 methods.
    let method = Method::parse(&method).ok_or_else(|| {
        Halt::refuse(
            Some(&id),
            Reject::new(Reason::MethodNotFound, "Method not found"),
        )
    })?;
    let Some(params) = params else {
        return Err(Halt::refuse(
            Some(&id),
            Reject::new(
                Reason::MissingMeta,
                "`params` with `_meta` is required on every request",
            ),
        ));
    };
    let mut params = *params;
    let ctx = read_meta(headers, &id, params.meta.as_mut())?;
    let param_headers = std::mem::take(&mut headers.params);
    Ok(ClientRequest::new(id, method, params, ctx, param_headers))
}

/// The members of `_meta` redmark reads beyond the protocol's (which
/// [`ClientMeta`] holds typed), found in one pass over the rest (each
/// lookup by name would hash the name again).
#[derive(Default)]
struct MetaFields<'a> {
    progress_token: Option<&'a Value>,
    traceparent: Option<&'a Value>,
    tracestate: Option<&'a Value>,
}

impl<'a> MetaFields<'a> {
    fn of(other: &'a Map<String, Value>) -> Self {
        let mut f = MetaFields::default();
        for (k, v) in other {
            let slot = match k.as_str() {
                "progressToken" => &mut f.progress_token,
                "traceparent" => &mut f.traceparent,
                "tracestate" => &mut f.tracestate,
                _ => continue,
            };
            *slot = Some(v);
        }
        f
    }
}

/// The required fields first, then the body's version against its header,
/// then the log level. The capabilities and client info move into the
/// context: the request keeps only `_meta`'s other members.
fn read_meta(
    headers: &Mirrored<'_>,
    id: &Id,
    meta_obj: Option<&mut ClientMeta>,
) -> Result<RequestContext, Halt> {
    let invalid =
        |message: String| Halt::refuse(Some(id), Reject::new(Reason::MissingMeta, message));
    let meta_obj = meta_obj.ok_or_else(|| invalid("`params._meta` is required".into()))?;
    let body_version = meta_obj
        .protocol_version
        .as_ref()
        .and_then(Value::as_str)
        .ok_or_else(|| {
            invalid(format!(
                "`_meta[\"{}\"]` is required",
                meta::PROTOCOL_VERSION
            ))
        })?;
    let capabilities = match meta_obj.capabilities.take() {
        Some(c) if c.is_object() => c,
        _ => {
            return Err(invalid(format!(
                "`_meta[\"{}\"]` is required and must be an object",
                meta::CLIENT_CAPABILITIES
            )));
        }
    };
    let version_header = headers.version.get().ok().flatten().unwrap_or_default();
    if body_version != version_header {
        return Err(mismatch(
            id,
            Reason::HeaderMismatch,
            format!(
                "Header mismatch: MCP-Protocol-Version header value '{version_header}' does not match body value '{body_version}'"
            ),
        ));
    }
    let log_level = match &meta_obj.log_level {
        None => None,
        Some(Value::String(l)) if log_level_rank(l).is_some() => Some(l.clone()),
        Some(other) => {
            return Err(Halt::refuse(
                Some(id),
                Reject::new(
                    Reason::InvalidLogLevel,
                    format!(
                        "`{}` must be one of {}; got {other}",
                        meta::LOG_LEVEL,
                        LOG_LEVELS.join(", ")
                    ),
                ),
            ));
        }
    };
    let version = body_version.to_owned();
    let client_info = meta_obj.client_info.take();
    Ok(context(
        headers,
        &MetaFields::of(&meta_obj.other),
        version,
        capabilities,
        client_info,
        log_level,
    ))
}

fn context(
    headers: &Mirrored<'_>,
    fields: &MetaFields<'_>,
    version: String,
    capabilities: Value,
    client_info: Option<Value>,
    log_level: Option<String>,
) -> RequestContext {
    // `_meta.traceparent` (SEP-414) wins over the HTTP header.
    let trace = |in_meta: Option<&Value>, header: HeaderText<'_>| {
        in_meta
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| header.get().ok().flatten().map(str::to_owned))
    };
    RequestContext {
        protocol_version: version,
        profile: Profile::from_client_capabilities(&capabilities),
        capabilities,
        client_info,
        log_level,
        progress_token: fields
            .progress_token
            .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
            .cloned(),
        traceparent: trace(fields.traceparent, headers.traceparent),
        tracestate: trace(fields.tracestate, headers.tracestate),
        access: Default::default(),
    }
}
