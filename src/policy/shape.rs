//! The policy shapes the question: a form's `requestedSchema` narrowed, for
//! the client only, by the field rules the flat 2026-07-28 schema can say
//! (numeric bounds, string lengths, `format`, `enum` choices, `required`),
//! so a person sees the rules before answering and the red mark is the
//! second line of defence, not the first.
//!
//! Narrowing only removes values: every answer valid under the narrowed
//! schema is valid under the server's own, so the answer redmark forwards
//! still satisfies the question the server asked. What the schema cannot
//! say (`pattern`: spec 2026-07-28 client/elicitation.mdx `StringSchema`
//! has no such member; CEL `authz`; a number or boolean `enum`) stays in
//! the red mark. A field whose rules leave no value the server's schema
//! also accepts is [`Unsatisfiable`]: the question is refused
//! (`policy_unsatisfiable`), never put to a person as a form nobody can
//! answer.

use serde_json::{Map, Value, json};

use super::FieldRules;
use super::answer::{against_rules, property_accepts};

/// A field whose policy rules and the server's schema together accept no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no answer to `{field}` can satisfy both the server's schema and the policy: {why}")]
pub struct Unsatisfiable {
    pub field: String,
    pub why: String,
}

fn unsat(field: &str, why: impl Into<String>) -> Unsatisfiable {
    Unsatisfiable {
        field: field.to_owned(),
        why: why.into(),
    }
}

/// Narrows `schema` (a flat form schema the guard passed) in place under
/// `rules`, the tool's field rules. Returns the fields it narrowed, in the
/// form's order; `Err` names the first field no answer can satisfy.
pub fn narrow(
    rules: &foldhash::HashMap<String, FieldRules>,
    schema: &mut Value,
) -> Result<Vec<String>, Unsatisfiable> {
    let mut narrowed = Vec::new();
    let mut required_added = Vec::new();
    {
        let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
            return Ok(narrowed);
        };
        for (field, prop) in props.iter_mut() {
            let (Some(r), Some(prop)) = (rules.get(field), prop.as_object_mut()) else {
                continue;
            };
            let mut changed = narrow_property(field, r, prop)?;
            if r.required {
                required_added.push(field.clone());
            }
            // spec SEP-1034 defaults: a default the narrowed field or the
            // policy refuses would be confirmed into a red mark.
            if let Some(default) = prop.get("default")
                && (against_rules(field, r, default, true).is_some()
                    || !property_accepts(&Value::Object(prop.clone()), default))
            {
                prop.remove("default");
                changed = true;
            }
            if changed {
                narrowed.push(field.clone());
            }
        }
    }
    if !required_added.is_empty()
        && let Some(obj) = schema.as_object_mut()
    {
        let required = obj
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(list) = required.as_array_mut() {
            for field in required_added {
                if !list.iter().any(|v| v.as_str() == Some(field.as_str())) {
                    list.push(Value::String(field.clone()));
                    if !narrowed.contains(&field) {
                        narrowed.push(field);
                    }
                }
            }
        }
    }
    Ok(narrowed)
}

/// A native server's input request (`{method, params}`) as the client
/// sees it: a form's `requestedSchema` narrowed by `rules`, the rest as the
/// server sent it. A field no answer can satisfy leaves it as it is: the
/// guard refused such a question already.
pub fn request(request: &Value, rules: Option<&foldhash::HashMap<String, FieldRules>>) -> Value {
    let mut out = request.clone();
    if let (Some(rules), Some(schema)) = (rules, out.pointer_mut("/params/requestedSchema")) {
        let mut narrowed = schema.clone();
        if narrow(rules, &mut narrowed).is_ok() {
            *schema = narrowed;
        }
    }
    out
}

/// A bound as JSON: an integer where it is one, so a form shows `100000`, not `100000.0`.
fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        // Whole and well inside i64: the cast is exact.
        #[allow(clippy::cast_possible_truncation)]
        let whole = n as i64;
        json!(whole)
    } else {
        json!(n)
    }
}

fn textual(r: &FieldRules) -> bool {
    r.min_length.is_some() || r.max_length.is_some() || r.pattern.is_some() || r.format.is_some()
}

/// One property narrowed in place; `Ok(true)` when it changed.
fn narrow_property(
    field: &str,
    r: &FieldRules,
    prop: &mut Map<String, Value>,
) -> Result<bool, Unsatisfiable> {
    match prop.get("type").and_then(Value::as_str) {
        Some(t @ ("number" | "integer")) => {
            if textual(r) {
                return Err(unsat(
                    field,
                    format!("the policy's text rules cannot hold a {t}"),
                ));
            }
            narrow_number(field, r, prop, t == "integer")
        }
        Some("string") => {
            if r.minimum.is_some() || r.maximum.is_some() {
                return Err(unsat(
                    field,
                    "the policy bounds a number; the server asks for text",
                ));
            }
            if prop.contains_key("enum") || prop.contains_key("oneOf") {
                narrow_options(field, r, prop)
            } else {
                narrow_text(field, r, prop)
            }
        }
        Some("boolean") => {
            if textual(r) || r.minimum.is_some() || r.maximum.is_some() {
                return Err(unsat(field, "the policy's rules cannot hold a boolean"));
            }
            if let Some(allowed) = &r.allowed
                && !allowed.iter().any(Value::is_boolean)
            {
                return Err(unsat(field, "the policy's `enum` has no boolean"));
            }
            // A one-value boolean cannot be said in the flat schema: the red mark keeps it.
            Ok(false)
        }
        // Multi-selects and anything else: the red mark alone.
        _ => Ok(false),
    }
}

fn narrow_number(
    field: &str,
    r: &FieldRules,
    prop: &mut Map<String, Value>,
    integer: bool,
) -> Result<bool, Unsatisfiable> {
    let server_lo = prop.get("minimum").and_then(Value::as_f64);
    let server_hi = prop.get("maximum").and_then(Value::as_f64);
    // An integer field's bounds, as the whole numbers they admit.
    let round_lo = |x: f64| if integer { x.ceil() } else { x };
    let round_hi = |x: f64| if integer { x.floor() } else { x };
    let mut lo = server_lo;
    let mut hi = server_hi;
    let mut changed = false;
    if let Some(min) = r.minimum.map(round_lo)
        && lo.is_none_or(|l| min > l)
    {
        lo = Some(min);
        prop.insert("minimum".into(), number(min));
        changed = true;
    }
    if let Some(max) = r.maximum.map(round_hi)
        && hi.is_none_or(|h| max < h)
    {
        hi = Some(max);
        prop.insert("maximum".into(), number(max));
        changed = true;
    }
    if let (Some(l), Some(h)) = (lo.map(round_lo), hi.map(round_hi))
        && l > h
    {
        return Err(unsat(
            field,
            format!(
                "it must be at least {} and at most {}",
                number(l),
                number(h)
            ),
        ));
    }
    if let Some(allowed) = &r.allowed {
        let fits = |v: &Value| {
            v.as_f64().is_some_and(|n| {
                lo.is_none_or(|l| n >= l)
                    && hi.is_none_or(|h| n <= h)
                    && (!integer || n.fract() == 0.0)
            })
        };
        if !allowed.iter().any(fits) {
            return Err(unsat(
                field,
                "no value of the policy's `enum` is within the field's bounds",
            ));
        }
    }
    Ok(changed)
}

/// A field with choices (`enum`, with `enumNames` kept aligned, or titled
/// `oneOf`): only the choices every rule accepts remain.
fn narrow_options(
    field: &str,
    r: &FieldRules,
    prop: &mut Map<String, Value>,
) -> Result<bool, Unsatisfiable> {
    let ok = |v: &Value| against_rules(field, r, v, true).is_none();
    let mut changed = false;
    if let Some(values) = prop.get("enum").and_then(Value::as_array).cloned() {
        let keep: Vec<bool> = values.iter().map(ok).collect();
        if keep.iter().any(|k| !k) {
            let kept = |list: &[Value]| -> Vec<Value> {
                list.iter()
                    .zip(&keep)
                    .filter(|(_, k)| **k)
                    .map(|(v, _)| v.clone())
                    .collect()
            };
            prop.insert("enum".into(), Value::Array(kept(&values)));
            // `enumNames` names the n-th value: it loses the same entries.
            if let Some(names) = prop.get("enumNames").and_then(Value::as_array).cloned() {
                prop.insert("enumNames".into(), Value::Array(kept(&names)));
            }
            changed = true;
        }
    }
    if let Some(options) = prop.get("oneOf").and_then(Value::as_array).cloned() {
        let kept: Vec<Value> = options
            .iter()
            .filter(|o| o.get("const").is_some_and(ok))
            .cloned()
            .collect();
        if kept.len() != options.len() {
            prop.insert("oneOf".into(), Value::Array(kept));
            changed = true;
        }
    }
    let empty = |key: &str| {
        prop.get(key)
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
    };
    if empty("enum") || empty("oneOf") {
        return Err(unsat(
            field,
            "none of the server's choices passes the policy",
        ));
    }
    Ok(changed)
}

/// A free-text field: lengths intersected, the policy's `format` added
/// where the server gave none, and a policy `enum` turned into a choice.
fn narrow_text(
    field: &str,
    r: &FieldRules,
    prop: &mut Map<String, Value>,
) -> Result<bool, Unsatisfiable> {
    if let Some(allowed) = &r.allowed {
        // Each choice must pass the server's own property and every rule.
        let server = Value::Object(prop.clone());
        let choices: Vec<Value> = allowed
            .iter()
            .filter(|v| v.is_string() && property_accepts(&server, v))
            .filter(|v| against_rules(field, r, v, true).is_none())
            .cloned()
            .collect();
        if choices.is_empty() {
            return Err(unsat(
                field,
                "no value of the policy's `enum` is text the server's field accepts",
            ));
        }
        // The choices already satisfy the lengths and format: the property
        // becomes the spec's untitled single-select shape.
        for key in ["minLength", "maxLength", "format"] {
            prop.remove(key);
        }
        prop.insert("enum".into(), Value::Array(choices));
        return Ok(true);
    }
    let mut changed = false;
    let server_lo = prop.get("minLength").and_then(Value::as_u64).unwrap_or(0);
    let server_hi = prop.get("maxLength").and_then(Value::as_u64);
    let mut lo = server_lo;
    let mut hi = server_hi;
    if let Some(min) = r.min_length
        && min > server_lo
    {
        lo = min;
        prop.insert("minLength".into(), json!(min));
        changed = true;
    }
    if let Some(max) = r.max_length
        && server_hi.is_none_or(|h| max < h)
    {
        hi = Some(max);
        prop.insert("maxLength".into(), json!(max));
        changed = true;
    }
    if let Some(h) = hi
        && lo > h
    {
        return Err(unsat(
            field,
            format!("it must be at least {lo} and at most {h} characters long"),
        ));
    }
    if let Some(format) = r.format
        && !prop.contains_key("format")
    {
        prop.insert("format".into(), json!(format));
        changed = true;
    }
    Ok(changed)
}

#[cfg(test)]
#[path = "tests/shape.rs"]
mod tests;
