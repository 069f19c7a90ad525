//! What `redmark check` finds in a policy beyond what stops it loading:
//! `authz` and `allow` rules that name something that does not exist. A
//! rule reading `principal.grups` compiles, and then fails on every answer
//! or call: each is refused with `policy_error`, so everyone is refused.
//! Every rule is walked for the names it reads, checked against the
//! variables its kind of rule is given (`authz`: `principal`, `tool`,
//! `field`, `value`, `content`; `allow`: `principal`, `tool`) and the fields
//! of the fixed ones (`principal.name|groups|claims|issuer|subject|scopes`,
//! `tool.name|arguments`), then evaluated against a sample context of those
//! variables: an error there that is not a missing map key is a warning.
//!
//! A `remember` rule under `secret_fields = "allow"` is a warning too: the
//! file names the field, but only a question shows what it asks for, and a
//! form may ask for it as a secret (`format: password`, a secret-looking
//! title or description), whose answer is then never remembered.

use std::path::Path;

use cel::common::ast::Expr;

use super::file;
use crate::config::ConfigError;

/// The fields of `principal` (what [`crate::protocol::Principal::cel_value`] gives).
const PRINCIPAL: &[&str] = &["name", "groups", "claims", "issuer", "subject", "scopes"];
const TOOL: &[&str] = &["name", "arguments"];

/// A variable a rule is given, and its fields when their shape is fixed.
type Variable = (&'static str, Option<&'static [&'static str]>);

/// The variables an `authz` rule is given.
const AUTHZ: &[Variable] = &[
    ("principal", Some(PRINCIPAL)),
    ("tool", Some(TOOL)),
    ("field", None),
    ("value", None),
    ("content", None),
];

/// The variables a call's `allow` rule is given.
const ALLOW: &[Variable] = &[("principal", Some(PRINCIPAL)), ("tool", Some(TOOL))];

/// A problem found by `check`: an error (exit 1) or a warning (exit 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub warning: bool,
    pub error: ConfigError,
}

/// A policy file's `[tool.NAME]` sections and the findings in its rules.
#[derive(Debug, Clone, Default)]
pub struct Lint {
    /// Tool (or prompt) names of the sections, with the line each is on.
    pub tools: Vec<(String, ConfigError)>,
    pub findings: Vec<Finding>,
}

/// Lints the policy at `path`; a file that does not parse gives an empty
/// lint (loading it reports why).
pub fn lint(path: &Path) -> Lint {
    let file = path.display().to_string();
    let Ok(text) = std::fs::read_to_string(path) else {
        return Lint::default();
    };
    let Some(outline) = file::outline(&text) else {
        return Lint::default();
    };
    let env = std::sync::Arc::new(cel::Env::stdlib());
    let at = |span, message: String| ConfigError::at(&file, &text, Some(span), &message);
    let mut out = Lint {
        tools: outline
            .tools
            .iter()
            .map(|(name, span)| (name.clone(), at(span.clone(), String::new())))
            .collect(),
        findings: Vec::new(),
    };
    for (tool, field, source, span) in outline.rules {
        let Ok(program) = file::compile_authz(&env, &source) else {
            continue;
        };
        let (here, variables, refused) = match &field {
            Some(field) => (
                format!("tool `{tool}` field `{field}`: authz"),
                AUTHZ,
                "every answer",
            ),
            None => (format!("tool `{tool}`: allow"), ALLOW, "every call"),
        };
        for (name, hint) in unknown_names(program.expression(), variables) {
            let hint = hint
                .map(|h| format!(" (did you mean `{h}`?)"))
                .unwrap_or_default();
            out.findings.push(Finding {
                warning: false,
                error: at(
                    span.clone(),
                    format!("{here} reads `{name}`, which does not exist{hint}, so {refused} is refused (policy_error)"),
                ),
            });
        }
        if let Some(why) = sample_failure(&env, &program, &tool, field.as_deref()) {
            out.findings.push(Finding {
                warning: true,
                error: at(
                    span.clone(),
                    format!(
                        "{here} fails on a sample ({why}); a failing rule refuses (policy_error)"
                    ),
                ),
            });
        }
    }
    if outline.secrets_allowed {
        for (tool, field, span) in outline.remembers {
            out.findings.push(Finding {
                warning: true,
                error: at(
                    span,
                    format!(
                        "tool `{tool}` field `{field}`: remember: secret_fields = \"allow\" lets a form ask for `{field}` as a secret (format: password, or a title or description naming a password, key, token or card number); such an answer is never remembered nor offered"
                    ),
                ),
            });
        }
    }
    out
}

/// The names a rule reads that do not exist, each with the closest one that does.
pub fn unknown_names(
    root: &cel::IdedExpr,
    variables: &[Variable],
) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut stack: Vec<(&cel::IdedExpr, Vec<String>)> = vec![(root, Vec::new())];
    while let Some((node, bound)) = stack.pop() {
        match &node.expr {
            Expr::Ident(name) => {
                if !bound.contains(name) && !variables.iter().any(|(v, _)| v == name) {
                    let hint = closest(name, variables.iter().map(|(v, _)| *v));
                    out.push((name.clone(), hint.map(str::to_owned)));
                }
            }
            Expr::Select(select) => {
                if let Expr::Ident(var) = &select.operand.expr
                    && !bound.contains(var)
                    && let Some((_, Some(fields))) = variables.iter().find(|(v, _)| v == var)
                    && !fields.contains(&select.field.as_str())
                {
                    let hint = closest(&select.field, fields.iter().copied());
                    out.push((
                        format!("{var}.{}", select.field),
                        hint.map(|h| format!("{var}.{h}")),
                    ));
                } else {
                    stack.push((&select.operand, bound));
                }
            }
            Expr::Comprehension(c) => {
                let mut inner = bound.clone();
                inner.push(c.iter_var.clone());
                inner.extend(c.iter_var2.clone());
                inner.push(c.accu_var.clone());
                stack.push((&c.iter_range, bound.clone()));
                stack.push((&c.accu_init, bound));
                for e in [&c.loop_cond, &c.loop_step, &c.result] {
                    stack.push((e, inner.clone()));
                }
            }
            Expr::Call(call) => {
                for e in call.target.as_deref().into_iter().chain(call.args.iter()) {
                    stack.push((e, bound.clone()));
                }
            }
            Expr::List(list) => {
                for e in &list.elements {
                    stack.push((e, bound.clone()));
                }
            }
            Expr::Map(_) | Expr::Struct(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The known name closest to `name`, if it is close enough to be a typo.
pub fn closest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    known
        .map(|k| (strsim::jaro_winkler(name, k), k))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// Runs the rule on samples of what it is given (for `authz`, the answer a
/// string, a number, a boolean; `field` is `None` for an `allow` rule); the
/// error when every sample fails, unless it is only a key the sample lacks
/// (`tool.arguments.room`, `content.choice`).
fn sample_failure(
    env: &std::sync::Arc<cel::Env>,
    program: &cel::Program,
    tool: &str,
    field: Option<&str>,
) -> Option<String> {
    let principal = crate::protocol::Principal::from_token(
        "https://sample.example",
        "sample",
        vec!["sample".into()],
        vec!["sample".into()],
        serde_json::Map::new(),
    )
    .cel_value();
    let mut last = None;
    for value in [
        serde_json::json!("sample"),
        serde_json::json!(1),
        serde_json::json!(true),
    ] {
        let mut ctx = cel::Context::with_env(env.clone());
        let mut vars = vec![
            ("principal", principal.clone()),
            ("tool", serde_json::json!({"name": tool, "arguments": {}})),
        ];
        if let Some(field) = field {
            vars.push(("field", serde_json::json!(field)));
            vars.push(("content", serde_json::json!({ field: value.clone() })));
            vars.push(("value", value));
        }
        for (name, v) in vars {
            ctx.add_variable_from_value(name, cel::to_value(v).ok()?);
        }
        match program.execute(&ctx) {
            Ok(_) => return None,
            Err(e) => {
                let text = e.to_string();
                if text.contains("No such key") {
                    return None;
                }
                last = Some(text);
            }
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(rule: &str) -> Vec<(String, Option<String>)> {
        let env = cel::Env::stdlib();
        let program = file::compile_authz(&env, rule).unwrap();
        unknown_names(program.expression(), AUTHZ)
    }

    #[test]
    fn names_that_do_not_exist_are_found() {
        assert_eq!(
            names(r#"value != "atrium" || "facilities" in principal.grups"#),
            [(
                "principal.grups".to_owned(),
                Some("principal.groups".to_owned())
            )]
        );
        assert_eq!(
            names(r#"princpal.name == "a""#),
            [("princpal".to_owned(), Some("principal".to_owned()))]
        );
        assert_eq!(names("nobody == 1"), [("nobody".to_owned(), None)]);
        assert!(names(r#"value != "atrium" || "facilities" in principal.groups"#).is_empty());
        assert!(
            names(r#"principal.groups.exists(g, g == "x") && tool.arguments.room == value"#)
                .is_empty()
        );
        assert!(names(r#"principal.claims.sub == content.who && field == "x""#).is_empty());
        assert!(
            names(
                r#"principal.issuer == "i" && principal.subject == "s" && "x" in principal.scopes"#
            )
            .is_empty()
        );
    }

    #[test]
    fn an_allow_rule_has_no_answer_to_read() {
        let env = cel::Env::stdlib();
        let program = file::compile_authz(&env, r#"value == "x" && tool.name == "t""#).unwrap();
        assert_eq!(
            unknown_names(program.expression(), ALLOW),
            [("value".to_owned(), None)]
        );
    }

    #[test]
    fn typos_get_a_suggestion() {
        let tools = ["book_room", "create_ticket"];
        assert_eq!(
            closest("book_rom", tools.iter().copied()),
            Some("book_room")
        );
        assert_eq!(closest("launch_rocket", tools.iter().copied()), None);
    }
}
