//! Part of step 6: `Mcp-Name` mirrors `params.name` (tools, prompts) or `params.uri`
//! (resources), after decoding (spec streamable-http.mdx "Value Encoding":
//! servers MUST decode an encoded `Mcp-Name` before comparing it to the body).
//! An `Mcp-Name` sent more than once must carry the same value each time
//! (see [`HeaderText`](super::protocol::HeaderText)).

use super::Halt;
use super::protocol::{BadEncoding, Mirrored, decode_header_value, mismatch, required};
use crate::protocol::{ClientRequest, Reason, Reject};

/// Whether `Mcp-Name` mirrors the typed request. The tasks extension's
/// methods are checked by [`check_task`], once the route is known to serve
/// them: on any other route they are methods it does not have (-32601),
/// whatever their headers.
pub fn check(headers: &Mirrored<'_>, req: &ClientRequest) -> Result<(), Halt> {
    if req.method.is_task() {
        return Ok(());
    }
    mirrors(headers, req)
}

/// `Mcp-Name` of `tasks/get`, `tasks/update` and `tasks/cancel` mirrors
/// `params.taskId` (ext-tasks "Streamable HTTP: Routing Headers": "the
/// client MUST set the `Mcp-Name` header to the value of `params.taskId`").
pub fn check_task(headers: &Mirrored<'_>, req: &ClientRequest) -> Result<(), Halt> {
    mirrors(headers, req)
}

fn mirrors(headers: &Mirrored<'_>, req: &ClientRequest) -> Result<(), Halt> {
    let Some(field) = req.method.name_param() else {
        return Ok(());
    };
    let id = &req.id;
    let body_name = req
        .params
        .get(field)
        .and_then(|v| v.as_str())
        .ok_or_else(|| {
            Halt::refuse(
                Some(id),
                Reject::new(
                    Reason::InvalidParams,
                    format!("`params.{field}` is required for {}", req.method),
                ),
            )
        })?;
    let raw = required(headers.name, id, "Mcp-Name", Some(req.method.as_str()))?;
    let decoded = decode_header_value(raw).map_err(|BadEncoding| {
        mismatch(
            id,
            Reason::HeaderInvalid,
            "Mcp-Name carries an invalid base64 value".into(),
        )
    })?;
    if decoded != body_name {
        return Err(mismatch(
            id,
            Reason::HeaderMismatch,
            format!(
                "Header mismatch: Mcp-Name header value '{decoded}' does not match body value '{body_name}'"
            ),
        ));
    }
    Ok(())
}
