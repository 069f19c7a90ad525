//! Step 2: only POST carries a 2026-07-28 request (spec streamable-http.mdx
//! "Earlier Streamable HTTP Revisions": GET or DELETE SHOULD get 405).

use http::{HeaderValue, Method, StatusCode, header};

use super::{Check, Halt, RequestCx};
use crate::mrtr::Outcome;
use crate::protocol::Reason;

pub struct PostOnly;

impl Check for PostOnly {
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        if cx.head.method == Method::POST {
            return Ok(());
        }
        Err(Halt::Respond {
            status: StatusCode::METHOD_NOT_ALLOWED,
            headers: vec![(header::ALLOW, HeaderValue::from_static("POST"))],
            outcome: Outcome::Error(Reason::MethodNotAllowed),
        })
    }
}
