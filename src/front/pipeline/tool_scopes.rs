//! Step 8: a `tools/call` of a tool whose policy names `scopes` needs a
//! credential that grants them all, besides the route's own scopes. Refused
//! with 403 `insufficient_scope` and a challenge naming every scope the call
//! needs (spec 2026-07-28 basic/authorization/index.mdx "Runtime
//! Insufficient Scope Errors": all of them in a single challenge), before
//! any upstream session is leased.

use std::sync::Arc;

use http::header;

use super::{Check, Halt, RequestCx};
use crate::front::auth::{AuthError, Authenticator};
use crate::protocol::{IntoReject, Method};

pub struct ToolScopes {
    authenticator: Arc<dyn Authenticator>,
}

impl ToolScopes {
    pub fn new(authenticator: Arc<dyn Authenticator>) -> Self {
        Self { authenticator }
    }
}

impl Check for ToolScopes {
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        let req = cx.request()?;
        if req.method != Method::ToolsCall {
            return Ok(());
        }
        let policy = cx.route.policy.current();
        let tool = req.target();
        let needed = policy.tool_scopes(tool);
        if cx.principal.has_scopes(needed) {
            return Ok(());
        }
        let route = cx.route.path.as_str();
        let mut all: Vec<String> = self.authenticator.required_scopes(route).to_vec();
        for s in needed {
            if !all.contains(s) {
                all.push(s.clone());
            }
        }
        let error = AuthError::InsufficientScope(all);
        let challenge = self.authenticator.challenge(route, &error);
        Err(
            Halt::refuse(Some(&req.id), error.into_reject().with("tool", tool))
                .with_header(header::WWW_AUTHENTICATE, challenge),
        )
    }
}
