//! The call-level hook: whether this principal may make this call at all,
//! before the server sees it. The third place a policy acts, beside
//! [`super::guard`] (the server's questions) and [`super::answer`] (the
//! person's answers).
//!
//! A `tools/call` is refused (`policy_denied`, `data.tool`) when the policy's
//! `[defaults] tools = "deny"` and the tool has no `[tool.NAME]` section, or
//! when the tool's `allow` rule (CEL over `principal` and `tool`) is false.
//! Checking the arguments here is what closes the bypass of an answer rule:
//! a value the server would have asked for, passed as an argument instead,
//! meets the call's rule. A rule that fails at run time (a name that does not
//! exist, a type error) refuses the call with `policy_error` and an ERROR log
//! naming the rule, its file and line: never a silent allow.

use serde_json::{Map, Value, json};

use super::{CallRule, Policy, ToolsDefault};
use crate::protocol::{Principal, Reason, Reject};

/// The call a rule looks at.
pub struct Call<'a> {
    pub principal: &'a Principal,
    pub method: &'a str,
    /// Tool or prompt name, or resource URI.
    pub target: &'a str,
    pub arguments: &'a Map<String, Value>,
}

/// What the policy says of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Allow,
    Deny(String),
    /// The rule could not be evaluated: `error` says why.
    Error {
        rule: String,
        at: String,
        error: String,
    },
}

/// `Err`: the call never reaches the server, and the client hears why.
pub fn on_call(policy: &Policy, call: &Call<'_>) -> Result<(), Reject> {
    if call.method != "tools/call" {
        return Ok(());
    }
    match decide(policy, call.principal, call.target, call.arguments) {
        Decision::Allow => Ok(()),
        Decision::Deny(message) => {
            tracing::info!(tool = call.target, principal = %call.principal.name, "call refused by policy");
            Err(Reject::new(Reason::PolicyDenied, message).with("tool", call.target))
        }
        Decision::Error { rule, at, error } => {
            tracing::error!(
                tool = call.target,
                rule,
                at,
                error,
                "the allow rule failed at run time; the call is refused"
            );
            Err(Reject::new(
                Reason::PolicyError,
                format!(
                    "the policy's rule for `{}` could not be evaluated; the call is refused",
                    call.target
                ),
            )
            .with("tool", call.target))
        }
    }
}

/// Whether deciding a call of `tool` reads its arguments: only an `allow`
/// rule does. A call's arguments are kept as the client's text until
/// something reads them (`protocol::Arguments`), and a tree of them for no
/// rule was, for a few kilobytes of arguments, most of the call's cost.
pub fn reads_arguments(policy: &Policy, tool: &str) -> bool {
    policy.tool(tool).is_some_and(|rules| rules.allow.is_some())
}

/// Whether `principal` may call `tool` with `arguments`.
pub fn decide(
    policy: &Policy,
    principal: &Principal,
    tool: &str,
    arguments: &Map<String, Value>,
) -> Decision {
    let Some(rules) = policy.tool(tool) else {
        return match policy.defaults.tools {
            ToolsDefault::Allow => Decision::Allow,
            ToolsDefault::Deny => {
                Decision::Deny(format!("`{tool}` is not among the tools this route allows"))
            }
        };
    };
    let Some(rule) = &rules.allow else {
        return Decision::Allow;
    };
    match evaluate(policy, rule, principal, tool, arguments) {
        Ok(true) => Decision::Allow,
        Ok(false) => Decision::Deny(
            rule.deny_message
                .clone()
                .unwrap_or_else(|| format!("the policy does not allow this call of `{tool}`")),
        ),
        Err(error) => Decision::Error {
            rule: rule.source.clone(),
            at: rule.at.clone(),
            error,
        },
    }
}

/// Whether `tools/list` shows `tool` to `principal`: hidden when no call of
/// it can be allowed: refused by `[defaults] tools = "deny"`, or by an
/// `allow` rule that is false before any argument is known. A rule that
/// needs the arguments to decide (it fails without them) keeps the tool
/// listed; the call itself is judged with its arguments.
pub fn listed(policy: &Policy, principal: &Principal, tool: &str) -> bool {
    !matches!(
        decide(policy, principal, tool, &Map::new()),
        Decision::Deny(_)
    )
}

/// `tools/list` as `principal` may see it: tools it may not call removed.
pub fn filter_tool_list(policy: &Policy, principal: &Principal, mut result: Value) -> Value {
    if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
        tools.retain(|t| {
            t.get("name")
                .and_then(Value::as_str)
                .is_none_or(|name| listed(policy, principal, name))
        });
    }
    result
}

fn evaluate(
    policy: &Policy,
    rule: &CallRule,
    principal: &Principal,
    tool: &str,
    arguments: &Map<String, Value>,
) -> Result<bool, String> {
    let mut ctx = cel::Context::with_env(policy.cel_env().clone());
    let vars = [
        ("principal", principal.cel_value()),
        ("tool", json!({"name": tool, "arguments": arguments})),
    ];
    for (name, value) in vars {
        let value = cel::to_value(value).map_err(|e| format!("`{name}`: {e}"))?;
        ctx.add_variable_from_value(name, value);
    }
    match rule.program.execute(&ctx) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("the rule gave {other:?}, not a bool")),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
[defaults]
tools = "deny"

[tool.book_room]
allow = '!has(tool.arguments.room_hint) || tool.arguments.room_hint != "atrium" || "facilities" in principal.groups'
deny_message = "only facilities may book the Atrium"

[tool.list_rooms]

[tool.broken]
allow = 'principal.grups.size() > 0'

[tool.admins_only]
allow = '"admin" in principal.groups'
"#;

    fn policy() -> Policy {
        Policy::parse(POLICY, "rooms.toml").unwrap()
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn an_argument_rule_refuses_what_an_answer_rule_would_have() {
        let p = policy();
        let ann = Principal::new("ann", vec![]);
        let fac = Principal::new("fay", vec!["facilities".into()]);
        let atrium = args(json!({"room_hint": "atrium", "day": "2026-09-18"}));
        assert_eq!(
            decide(&p, &ann, "book_room", &atrium),
            Decision::Deny("only facilities may book the Atrium".into())
        );
        assert_eq!(decide(&p, &fac, "book_room", &atrium), Decision::Allow);
        let nook = args(json!({"room_hint": "nook"}));
        assert_eq!(decide(&p, &ann, "book_room", &nook), Decision::Allow);
        assert_eq!(decide(&p, &ann, "book_room", &Map::new()), Decision::Allow);
    }

    /// Only a tool with an `allow` rule has its arguments read (and so
    /// built into a tree) to decide a call.
    #[test]
    fn only_an_allow_rule_reads_the_arguments() {
        let p = policy();
        assert!(reads_arguments(&p, "book_room"));
        assert!(
            !reads_arguments(&p, "list_rooms"),
            "a section without `allow`"
        );
        assert!(
            !reads_arguments(&p, "unknown"),
            "decided by `[defaults] tools`"
        );
    }

    #[test]
    fn default_deny_allows_only_named_tools() {
        let p = policy();
        let ann = Principal::new("ann", vec![]);
        assert_eq!(decide(&p, &ann, "list_rooms", &Map::new()), Decision::Allow);
        assert!(matches!(
            decide(&p, &ann, "cancel_booking", &Map::new()),
            Decision::Deny(m) if m.contains("cancel_booking")
        ));
        let open = Policy::parse("", "p.toml").unwrap();
        assert_eq!(
            decide(&open, &ann, "cancel_booking", &Map::new()),
            Decision::Allow
        );
    }

    #[test]
    fn a_rule_that_fails_at_run_time_is_an_error_with_its_line() {
        let p = policy();
        let ann = Principal::new("ann", vec!["x".into()]);
        let Decision::Error { rule, at, error } = decide(&p, &ann, "broken", &Map::new()) else {
            panic!("a failing rule must not decide");
        };
        assert_eq!(rule, "principal.grups.size() > 0");
        assert_eq!(at, "rooms.toml:12");
        assert!(!error.is_empty());
        let reject = on_call(
            &p,
            &Call {
                principal: &ann,
                method: "tools/call",
                target: "broken",
                arguments: &Map::new(),
            },
        )
        .unwrap_err();
        assert_eq!(reject.reason, Reason::PolicyError);
    }

    #[test]
    fn the_list_hides_what_no_call_can_do() {
        let p = policy();
        let ann = Principal::new("ann", vec![]);
        let admin = Principal::new("root", vec!["admin".into()]);
        let all = json!({"tools": [
            {"name": "book_room"}, {"name": "list_rooms"}, {"name": "cancel_booking"},
            {"name": "broken"}, {"name": "admins_only"}
        ]});
        let names = |v: Value| -> Vec<String> {
            v["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(
            names(filter_tool_list(&p, &ann, all.clone())),
            ["book_room", "list_rooms", "broken"]
        );
        assert_eq!(
            names(filter_tool_list(&p, &admin, all)),
            ["book_room", "list_rooms", "broken", "admins_only"]
        );
    }

    #[test]
    fn bad_rules_are_refused_at_load_with_their_line() {
        let e = Policy::parse("[tool.x]\n\nallow = 'principal.name =='\n", "p.toml").unwrap_err();
        assert_eq!(e.0[0].line, 3, "{e}");
        assert!(e.0[0].message.contains("allow is not valid CEL"), "{e}");
        let e = Policy::parse("[tool.x]\ndeny_message = \"no\"\n", "p.toml").unwrap_err();
        assert!(e.0[0].message.contains("deny_message without allow"), "{e}");
        let e = Policy::parse("[defaults]\ntools = \"maybe\"\n", "p.toml").unwrap_err();
        assert_eq!(e.0[0].line, 2, "{e}");
    }

    #[test]
    fn a_call_rule_sees_what_an_answer_rule_sees_of_the_principal() {
        // Regression: call rules saw only name, groups and claims, so a rule
        // on `principal.issuer` (or subject, scopes) failed as policy_error.
        let p = Policy::parse(
            "[tool.t]\nallow = 'principal.issuer == \"https://idp\" && principal.subject == \"ann\" && \"pay\" in principal.scopes'\n",
            "p.toml",
        )
        .unwrap();
        let ann =
            Principal::from_token("https://idp", "ann", vec![], vec!["pay".into()], Map::new());
        assert_eq!(decide(&p, &ann, "t", &Map::new()), Decision::Allow);
        let bob =
            Principal::from_token("https://idp", "bob", vec![], vec!["pay".into()], Map::new());
        assert!(matches!(
            decide(&p, &bob, "t", &Map::new()),
            Decision::Deny(_)
        ));
    }
}
