//! Which request-scoped notifications a legacy server sends during a call
//! reach the attached client request, in 2026-07-28 shape.

use serde_json::Value;

use crate::protocol::RequestContext;
use crate::protocol::log_level_rank;
use crate::protocol::shape::notification;

/// Which request-scoped notifications reach the client, in 2026-07-28 shape.
/// `upstream_token` is the progress token the upstream call was made with.
pub fn relayable(
    ctx: &RequestContext,
    upstream_token: Option<&Value>,
    method: &str,
    params: Option<Value>,
) -> Option<Value> {
    match method {
        // spec 2026-07-28 basic/patterns/progress.mdx: progress only for a
        // request that sent a token, and under that request's token.
        "notifications/progress" => {
            let token = ctx.progress_token.as_ref()?;
            let mut p = params?;
            if p.get("progressToken") != upstream_token {
                return None;
            }
            p["progressToken"] = token.clone();
            Some(notification(method, Some(p)))
        }
        // spec 2026-07-28 server/utilities/logging.mdx: "The server MUST NOT emit
        // notifications/message for a request that does not include this field."
        "notifications/message" => {
            let wanted = log_level_rank(ctx.log_level.as_deref()?)?;
            let p = params?;
            let level = log_level_rank(p.get("level").and_then(Value::as_str)?)?;
            (level >= wanted).then(|| notification(method, Some(p)))
        }
        // A server cancelling its own pushed request, URL elicitation
        // completion notices, anything else: not for a 2026 client.
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::profile::Profile;
    use serde_json::json;

    fn ctx(token: Option<Value>, level: Option<&str>) -> RequestContext {
        RequestContext {
            protocol_version: "2026-07-28".into(),
            capabilities: json!({}),
            client_info: None,
            log_level: level.map(str::to_owned),
            progress_token: token,
            profile: Profile::default(),
            traceparent: None,
            tracestate: None,
            access: Default::default(),
        }
    }

    #[test]
    fn progress_only_with_a_matching_token() {
        let p = json!({"progressToken": 7, "progress": 1});
        let up = Some(json!(7));
        assert!(
            relayable(
                &ctx(None, None),
                up.as_ref(),
                "notifications/progress",
                Some(p.clone())
            )
            .is_none()
        );
        assert!(
            relayable(
                &ctx(Some(json!(7)), None),
                Some(&json!(8)),
                "notifications/progress",
                Some(p.clone())
            )
            .is_none()
        );
        assert_eq!(
            relayable(
                &ctx(Some(json!(7)), None),
                up.as_ref(),
                "notifications/progress",
                Some(p.clone())
            )
            .unwrap()["params"],
            p
        );
        // A retry with its own token hears the upstream call's progress under that token.
        let retried = relayable(
            &ctx(Some(json!("r2")), None),
            up.as_ref(),
            "notifications/progress",
            Some(p),
        )
        .unwrap();
        assert_eq!(retried["params"]["progressToken"], "r2");
    }

    #[test]
    fn log_messages_only_when_asked_and_at_or_above_the_level() {
        let warn = json!({"level": "warning", "data": "x"});
        assert!(
            relayable(
                &ctx(None, None),
                None,
                "notifications/message",
                Some(warn.clone())
            )
            .is_none()
        );
        assert!(
            relayable(
                &ctx(None, Some("error")),
                None,
                "notifications/message",
                Some(warn.clone())
            )
            .is_none()
        );
        assert!(
            relayable(
                &ctx(None, Some("info")),
                None,
                "notifications/message",
                Some(warn)
            )
            .is_some()
        );
        assert!(
            relayable(
                &ctx(None, Some("debug")),
                None,
                "notifications/elicitation/complete",
                Some(json!({}))
            )
            .is_none()
        );
    }
}
