//! Step 7: the route's rate limits (`[route.rate_limit]`, a policy's
//! `[tool.NAME] rate`; [`crate::limits`]). Over a limit: HTTP 429 with
//! `Retry-After` and `data.reason: "rate_limited"` naming the limit, before
//! anything reaches the server. A `tools/call`, `prompts/get` or
//! `resources/read` that carries a `requestState` is a retry (a person
//! answering) and counts only against the retries bucket; a `requestState`
//! on any other method was refused by step 6 (`state_not_allowed`), so it
//! never passes for a retry here. A 2025-era client's messages count too:
//! its answers to pushed questions as retries, everything else as requests.

use super::{Check, Halt, RequestCx};
use crate::limits::{Limited, Request};
use crate::protocol::{Method, Reason, Reject};
use http::HeaderValue;
use http::header::RETRY_AFTER;

pub struct RateLimit;

impl Check for RateLimit {
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        let Some(req) = cx.request.as_deref() else {
            return era2025(cx);
        };
        let policy = cx.route.policy.current();
        let tool_rate = (req.method == Method::ToolsCall)
            .then(|| policy.tool(req.target()).and_then(|t| t.rate))
            .flatten();
        let request = Request {
            principal: &cx.principal.name,
            retry: req.is_retry(),
            tool: tool_rate.map(|rate| (req.target(), rate)),
        };
        cx.route
            .limits
            .check(request)
            .map_err(|limited| refusal(Some(&req.id), &limited))
    }
}

/// A 2025-era message that is no call (`initialize`, `ping`, a
/// notification, `GET`, `DELETE`) is a request like any other; the answer
/// to a question redmark pushed is a person answering, a retry.
fn era2025(cx: &RequestCx) -> Result<(), Halt> {
    use crate::front::era2025::Message2025;
    let Some(era) = cx.era2025.as_deref() else {
        return cx.request().map(drop);
    };
    let id = match &era.message {
        Message2025::Request(e) => Some(&e.id),
        _ => None,
    };
    let request = Request {
        principal: &cx.principal.name,
        retry: matches!(era.message, Message2025::Response { .. }),
        tool: None,
    };
    cx.route
        .limits
        .check(request)
        .map_err(|limited| refusal(id, &limited))
}

fn refusal(id: Option<&crate::jsonrpc::Id>, limited: &Limited) -> Halt {
    // RFC 9110 §10.2.3: whole seconds; never 0, which would invite an
    // immediate retry that is refused again.
    let wait = limited.retry_after;
    let seconds = (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1);
    let retry_ms = u64::try_from(limited.retry_after.as_millis()).unwrap_or(u64::MAX);
    let reject = Reject::new(
        Reason::RateLimited,
        format!(
            "rate limit `{}` ({}) reached; retry in {retry_ms} ms",
            limited.scope.as_str(),
            limited.rate
        ),
    )
    .with("limit", limited.scope.as_str())
    .with("rate", limited.rate.to_string())
    .with("retryAfterMs", retry_ms);
    Halt::refuse(id, reject).with_header(RETRY_AFTER, HeaderValue::from(seconds))
}
