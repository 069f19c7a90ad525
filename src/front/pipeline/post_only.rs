//! Step 2: the HTTP methods the endpoint serves. POST carries every
//! message; GET (the standalone stream) and DELETE (ending a session) are
//! 2025-era (spec 2025-11-25 basic/transports.mdx "Listening for Messages from
//! the Server", "Session Management") and go on to `front::era2025`, which
//! answers them. Anything else gets 405 naming the three.

use http::{HeaderValue, Method, StatusCode, header};

use super::{Check, Halt, RequestCx};
use crate::mrtr::Outcome;
use crate::protocol::Reason;

pub struct PostOnly;

impl Check for PostOnly {
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        if cx.head.method == Method::POST
            || cx.head.method == Method::GET
            || cx.head.method == Method::DELETE
        {
            return Ok(());
        }
        Err(Halt::Respond {
            status: StatusCode::METHOD_NOT_ALLOWED,
            headers: vec![(header::ALLOW, HeaderValue::from_static("POST"))],
            outcome: Outcome::Error(Reason::MethodNotAllowed),
        })
    }
}
