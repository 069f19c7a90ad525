//! The policy file format (TOML) and its checks: what a security engineer
//! writes, read strictly (unknown keys are errors) and compiled into rules,
//! with every problem located by file and line.

use std::collections::HashSet;

use foldhash::{HashMap, HashMapExt};
use std::sync::Arc;

use super::raw::{PolicyFile as RawPolicy, RawField, SecretFields};
use super::{CallRule, Defaults, FieldRules, Policy, ToolRules};
use crate::config::{ConfigError, ConfigErrors};

/// What `redmark check` looks at beyond compiling: each `[tool.NAME]`
/// section, each `authz` rule and each `remember` rule, with their spans in
/// the file.
pub(super) struct Outline {
    pub tools: Vec<(String, std::ops::Range<usize>)>,
    /// (tool, field (`None`: the tool's `allow` rule), rule source, its span).
    pub rules: Vec<(String, Option<String>, String, std::ops::Range<usize>)>,
    /// (tool, field, the field's span) of each field rule with `remember`.
    pub remembers: Vec<(String, String, std::ops::Range<usize>)>,
    /// `[defaults] secret_fields = "allow"`: forms asking for secrets reach people.
    pub secrets_allowed: bool,
}

/// The [`Outline`] of a policy file that parses (`None` otherwise: `parse`
/// reports why).
pub(super) fn outline(text: &str) -> Option<Outline> {
    let raw: RawPolicy = toml::from_str(text).ok()?;
    let mut out = Outline {
        tools: Vec::new(),
        rules: Vec::new(),
        remembers: Vec::new(),
        secrets_allowed: raw.defaults.secret_fields == Some(SecretFields::Allow),
    };
    for (name, tool) in &raw.tool {
        out.tools.push((name.clone(), tool.span()));
        if let Some(allow) = &tool.get_ref().allow {
            out.rules
                .push((name.clone(), None, allow.get_ref().clone(), allow.span()));
        }
        for (field, rules) in &tool.get_ref().fields {
            if rules.get_ref().remember.is_some() {
                out.remembers
                    .push((name.clone(), field.clone(), rules.span()));
            }
            if let Some(authz) = &rules.get_ref().authz {
                out.rules.push((
                    name.clone(),
                    Some(field.clone()),
                    authz.clone(),
                    rules.span(),
                ));
            }
        }
    }
    Some(out)
}

pub(super) fn parse(text: &str, file: &str) -> Result<Policy, ConfigErrors> {
    let raw: RawPolicy = toml::from_str(text).map_err(|e| {
        ConfigErrors(vec![ConfigError::at(
            file,
            text,
            e.span(),
            e.message().trim(),
        )])
    })?;
    let mut problems = Vec::new();
    let at = |span: std::ops::Range<usize>, message: String| {
        ConfigError::at(file, text, Some(span), &message)
    };
    let d = &raw.defaults;
    // What a key left out means, in one place (the schema's defaults too).
    let base = Defaults::default();
    let defaults = Defaults {
        tools: d.tools.unwrap_or(base.tools),
        on_invalid: d.on_invalid.unwrap_or(base.on_invalid),
        max_reasks: d.max_reasks.unwrap_or(base.max_reasks),
        max_questions: d.max_questions.unwrap_or(base.max_questions),
        deny_secrets: d
            .secret_fields
            .map_or(base.deny_secrets, |s| s == SecretFields::Deny),
        on_refused: d.on_refused.unwrap_or(base.on_refused),
        url_hosts: d
            .url_hosts
            .clone()
            .map(|h| h.into_iter().map(|h| h.to_ascii_lowercase()).collect()),
        mode: d.mode.unwrap_or(base.mode),
        task: d.task,
        shape_questions: d.shape_questions.unwrap_or(base.shape_questions),
    };
    let env = Arc::new(cel::Env::stdlib());
    let mut tools = HashMap::new();
    for (name, tool) in &raw.tool {
        let span = tool.span();
        let t = tool.get_ref();
        let mut seen = HashSet::new();
        for key in t.keys.0.all() {
            if key.is_empty() || !seen.insert(key) {
                problems.push(at(
                    span.clone(),
                    format!("tool `{name}`: key names must be non-empty and unique (`{key}`)"),
                ));
            }
        }
        if let Some(scopes) = &t.scopes {
            if scopes.get_ref().is_empty() {
                problems.push(at(
                    scopes.span(),
                    format!("tool `{name}`: scopes is empty (leave it out to require none)"),
                ));
            }
            for s in scopes.get_ref() {
                if !crate::config::is_scope_token(s) {
                    problems.push(at(
                        scopes.span(),
                        format!("tool `{name}`: `{s}` is not a scope token (RFC 6749 §3.3)"),
                    ));
                }
            }
        }
        let mut fields = HashMap::new();
        for (field, rules) in &t.fields {
            match compile_field(&env, name, field, rules.get_ref()) {
                Ok(mut r) => {
                    if r.authz.is_some() {
                        r.authz_at =
                            Some(format!("{file}:{}", at(rules.span(), String::new()).line));
                    }
                    fields.insert(field.clone(), r);
                }
                Err(messages) => problems.extend(messages.into_iter().map(|m| at(rules.span(), m))),
            }
        }
        let allow = match &t.allow {
            None => None,
            Some(rule) => match compile_rule(&env, "allow", rule.get_ref()) {
                Ok(program) => Some(CallRule {
                    program: Arc::new(program),
                    source: rule.get_ref().clone(),
                    at: format!("{file}:{}", at(rule.span(), String::new()).line),
                    deny_message: t.deny_message.clone(),
                }),
                Err(message) => {
                    problems.push(at(rule.span(), format!("tool `{name}`: {message}")));
                    None
                }
            },
        };
        if t.deny_message.is_some() && t.allow.is_none() {
            problems.push(at(
                span.clone(),
                format!("tool `{name}`: deny_message without allow"),
            ));
        }
        tools.insert(
            name.clone(),
            ToolRules {
                keys: t.keys.0.clone(),
                mode: t.mode,
                task: t.task.or(defaults.task),
                model_owned: t.model_owned.iter().cloned().collect(),
                on_invalid: t.on_invalid.unwrap_or(defaults.on_invalid),
                max_reasks: t.max_reasks.unwrap_or(defaults.max_reasks),
                max_questions: t.max_questions.unwrap_or(defaults.max_questions),
                fields,
                shape_questions: t.shape_questions.unwrap_or(defaults.shape_questions),
                rate: t.rate,
                allow,
                scopes: t
                    .scopes
                    .as_ref()
                    .map(|s| s.get_ref().clone())
                    .unwrap_or_default(),
            },
        );
    }
    if problems.is_empty() {
        Ok(Policy {
            defaults,
            tools,
            env,
        })
    } else {
        Err(ConfigErrors(problems))
    }
}

/// Longest `authz` rule, in bytes: bounds the work of compiling it.
pub const MAX_AUTHZ_BYTES: usize = 4096;

/// Deepest `authz` expression. Evaluation recurses once per level, for every
/// answer, on a runtime worker's 2 MiB stack (about 30 KiB a level in a debug
/// build, 1.5 KiB in release): a rule of some thousand `+` compiled and then
/// aborted the whole gateway on the first answer it judged.
pub const MAX_AUTHZ_DEPTH: usize = 24;

/// The stack rules are compiled on. The CEL parser (ANTLR) recurses once per
/// nesting level and once per operator of a chain, about 100 KiB a level in a
/// debug build: 20 nested parentheses overflowed a 2 MiB thread, a chain of
/// 20000 `+` the main thread. Only what is used is committed.
const COMPILE_STACK_BYTES: usize = 64 << 20;

pub(super) fn compile_authz(env: &cel::Env, source: &str) -> Result<cel::Program, String> {
    compile_rule(env, "authz", source)
}

/// Compiles a CEL rule of the policy (`authz`, `allow`), bounded in size and depth.
fn compile_rule(env: &cel::Env, key: &str, source: &str) -> Result<cel::Program, String> {
    if source.len() > MAX_AUTHZ_BYTES {
        return Err(format!(
            "{key} is {} bytes long; at most {MAX_AUTHZ_BYTES} are allowed",
            source.len()
        ));
    }
    // A rule refused for its depth is dropped on that thread too (dropping recurses).
    let compile = || {
        let program = env.compile(source).map_err(|e| {
            format!(
                "{key} is not valid CEL: {}",
                e.to_string().lines().next().unwrap_or_default()
            )
        })?;
        if depth_exceeds(program.expression(), MAX_AUTHZ_DEPTH) {
            return Err(format!(
                "{key} nests deeper than {MAX_AUTHZ_DEPTH} levels (each `||` or `&&` of a chain is one; `value in [...]` lists alternatives flat)"
            ));
        }
        Ok(program)
    };
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("redmark-cel-compile".into())
            .stack_size(COMPILE_STACK_BYTES)
            .spawn_scoped(scope, compile)
            .map_err(|e| format!("{key}: cannot start the CEL compiler: {e}"))?
            .join()
            .map_err(|_| format!("{key}: the CEL compiler panicked"))?
    })
}

/// Whether a CEL expression is deeper than `max`, found without recursion.
fn depth_exceeds(root: &cel::IdedExpr, max: usize) -> bool {
    let mut stack = vec![(root, 1)];
    while let Some((node, depth)) = stack.pop() {
        if depth > max {
            return true;
        }
        stack.extend(children(node).into_iter().map(|c| (c, depth + 1)));
    }
    false
}

fn entries(entries: &[cel::common::ast::IdedEntryExpr]) -> Vec<&cel::IdedExpr> {
    use cel::common::ast::EntryExpr;
    entries
        .iter()
        .flat_map(|e| match &e.expr {
            EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
            EntryExpr::StructField(f) => vec![&f.value],
        })
        .collect()
}

fn children(node: &cel::IdedExpr) -> Vec<&cel::IdedExpr> {
    use cel::common::ast::Expr;
    match &node.expr {
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(call.args.iter())
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => entries(&map.entries),
        Expr::Struct(st) => entries(&st.entries),
        Expr::Select(select) => vec![&select.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

fn compile_field(
    env: &Arc<cel::Env>,
    tool: &str,
    field: &str,
    raw: &RawField,
) -> Result<FieldRules, Vec<String>> {
    let mut errors = Vec::new();
    let here = format!("tool `{tool}` field `{field}`");
    if let (Some(min), Some(max)) = (raw.minimum, raw.maximum)
        && min > max
    {
        errors.push(format!(
            "{here}: minimum {min} is greater than maximum {max}: no value could pass"
        ));
    }
    if let (Some(min), Some(max)) = (raw.min_length, raw.max_length)
        && min > max
    {
        errors.push(format!(
            "{here}: min_length {min} is greater than max_length {max}"
        ));
    }
    let numeric = raw.minimum.is_some() || raw.maximum.is_some();
    let textual = raw.min_length.is_some()
        || raw.max_length.is_some()
        || raw.pattern.is_some()
        || raw.format.is_some();
    if numeric && textual {
        errors.push(format!("{here}: number rules (minimum, maximum) and string rules (min_length, max_length, pattern, format) cannot apply to the same field"));
    }
    let allowed: Option<Vec<serde_json::Value>> = raw.allowed.as_ref().map(|values| {
        values
            .iter()
            .filter_map(|v| serde_json::to_value(v).ok())
            .collect()
    });
    if let Some(values) = &allowed {
        let kinds: HashSet<&str> = values
            .iter()
            .map(|v| {
                if v.is_string() {
                    "string"
                } else if v.is_number() {
                    "number"
                } else if v.is_boolean() {
                    "boolean"
                } else {
                    "other"
                }
            })
            .collect();
        if values.is_empty() {
            errors.push(format!("{here}: an empty enum allows nothing"));
        } else if kinds.len() > 1 || kinds.contains("other") {
            errors.push(format!(
                "{here}: enum values must all be strings, all numbers or all booleans"
            ));
        } else if (numeric && kinds.contains("string")) || (textual && !kinds.contains("string")) {
            errors.push(format!(
                "{here}: enum values do not have the type the other rules expect"
            ));
        }
    }
    let pattern = match raw.pattern.as_deref().map(regex::Regex::new) {
        None => None,
        Some(Ok(re)) => Some(re),
        Some(Err(e)) => {
            errors.push(format!("{here}: pattern does not compile: {e}"));
            None
        }
    };
    let authz = match raw
        .authz
        .as_deref()
        .map(|source| compile_authz(env, source))
    {
        None => None,
        Some(Ok(program)) => Some(Arc::new(program)),
        Some(Err(why)) => {
            errors.push(format!("{here}: {why}"));
            None
        }
    };
    if raw.log_value && raw.sensitive {
        errors.push(format!("{here}: a sensitive field cannot have log_value"));
    }
    if raw.authz_message.is_some() && raw.authz.is_none() {
        errors.push(format!("{here}: authz_message without authz"));
    }
    let remember = match raw.remember.as_deref().map(humantime::parse_duration) {
        None => None,
        Some(Ok(d)) if !d.is_zero() && d <= super::MAX_REMEMBER => Some(d),
        Some(_) => {
            errors.push(format!(
                "{here}: remember must be a duration from 1s to 400d (\"30d\")"
            ));
            None
        }
    };
    // A remembered value is stored: never one the guard treats as secret.
    if remember.is_some()
        && (raw.sensitive || super::guard::looks_secret(field, &serde_json::Value::Null))
    {
        errors.push(format!(
            "{here}: remember is refused on a secret or sensitive field (its value would be stored)"
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let rules = FieldRules {
        minimum: raw.minimum,
        maximum: raw.maximum,
        min_length: raw.min_length,
        max_length: raw.max_length,
        pattern,
        format: raw.format,
        allowed,
        required: raw.required,
        authz,
        authz_source: raw.authz.clone(),
        authz_at: None,
        authz_message: raw.authz_message.clone(),
        sensitive: raw.sensitive,
        log_value: raw.log_value,
        remember,
    };
    // Known before any server asks: an `enum` none of whose values passes
    // the field's own bounds, lengths, pattern or format allows nothing,
    // and a form narrowed by it would offer no choice (issue 50).
    if let Some(values) = &rules.allowed
        && values
            .iter()
            .all(|v| super::answer::against_rules(field, &rules, v, true).is_some())
    {
        return Err(vec![format!(
            "{here}: no value of the enum passes the field's other rules (bounds, lengths, pattern, format): no answer could pass"
        )]);
    }
    Ok(rules)
}
