//! Validating an answer before the server sees it: the server's own
//! requested schema, then the policy's field rules (which can only tighten
//! it), then the CEL authorization rules ("an enum you built from a
//! permission check is not a permission check", seed 001).
//!
//! A failure produces a red mark: the field, the rule, and (unless the field
//! is sensitive) the value that broke it.

use std::sync::{Arc, LazyLock};

use serde_json::{Map, Value, json};

use super::{FieldRules, Format, Policy};
use crate::protocol::Principal;

/// Who answered, and the call the question belongs to (CEL's `principal` and `tool`).
pub struct Subject<'a> {
    pub principal: &'a Principal,
    pub tool: &'a str,
    pub arguments: &'a Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Judgement {
    /// The content to forward: only the fields the server asked for.
    Valid(Map<String, Value>),
    Invalid {
        field: String,
        rule: String,
        mark: String,
    },
    Denied {
        field: String,
        message: String,
    },
    /// The field's `authz` rule failed at run time (a name that does not
    /// exist, a type error): the answer is refused, never silently allowed.
    Error {
        field: String,
        rule: String,
        at: String,
        error: String,
    },
}

fn shown(value: &Value, sensitive: bool) -> String {
    if sensitive {
        "a value".to_owned()
    } else {
        format!("{value} was given")
    }
}

fn invalid(field: &str, rule: &str, text: String) -> Judgement {
    Judgement::Invalid {
        field: field.to_owned(),
        rule: rule.to_owned(),
        mark: text,
    }
}

/// Judges `content` (an `accept` answer) to a form whose schema is `schema`.
pub fn judge(
    policy: &Policy,
    subject: &Subject,
    schema: &Value,
    content: &Map<String, Value>,
) -> Judgement {
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    // Fields the server did not ask for never reach it.
    let content: Map<String, Value> = content
        .iter()
        .filter(|(k, _)| props.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let rules = policy.tool(subject.tool).map(|t| &t.fields);
    let sensitive = |field: &str| {
        rules
            .and_then(|r| r.get(field))
            .is_some_and(|r| r.sensitive)
            || props
                .get(field)
                .is_some_and(|p| super::guard::looks_secret(field, p))
    };

    if let Some(j) = against_schema(schema, &props, &content, &sensitive) {
        return in_the_policys_words(j, rules, &content, &sensitive);
    }
    let Some(rules) = rules else {
        return Judgement::Valid(content);
    };
    let mut names: Vec<&String> = rules.keys().collect();
    names.sort();
    for field in &names {
        let r = &rules[*field];
        match content.get(*field) {
            // A policy's `required` binds the forms that ask for the field, not
            // every question of the tool: no answer could supply a field the
            // server did not ask for (it is dropped above).
            None if r.required && props.contains_key(field.as_str()) => {
                return invalid(field, "required", format!("{field} is required"));
            }
            None => {}
            Some(value) => {
                if let Some(j) = against_rules(field, r, value, r.sensitive || sensitive(field)) {
                    return j;
                }
            }
        }
    }
    for field in names {
        let r = &rules[field];
        let (Some(program), Some(value)) = (&r.authz, content.get(field)) else {
            continue;
        };
        let allowed = match authorized(policy, program, subject, field, value, &content) {
            Ok(allowed) => allowed,
            Err(error) => {
                return Judgement::Error {
                    field: field.clone(),
                    rule: r.authz_source.clone().unwrap_or_default(),
                    at: r.authz_at.clone().unwrap_or_default(),
                    error,
                };
            }
        };
        if !allowed {
            let message = r
                .authz_message
                .clone()
                .unwrap_or_else(|| format!("this answer for {field} is not allowed"));
            return Judgement::Denied {
                field: field.clone(),
                message,
            };
        }
    }
    Judgement::Valid(content)
}

/// A schema failure on a keyword the policy may have put in the form
/// ([`super::shape`]) is reported as the policy's own rule would report it,
/// when that rule also refuses the value: the same red mark, and the same
/// `rule` in the audit line, whether or not the form was narrowed.
fn in_the_policys_words(
    j: Judgement,
    rules: Option<&foldhash::HashMap<String, FieldRules>>,
    content: &Map<String, Value>,
    sensitive: &dyn Fn(&str) -> bool,
) -> Judgement {
    let Judgement::Invalid { field, rule, .. } = &j else {
        return j;
    };
    let shaped = [
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "enum",
        "oneOf",
        "format",
    ];
    if !shaped.contains(&rule.as_str()) {
        return j;
    }
    let (Some(r), Some(value)) = (rules.and_then(|r| r.get(field)), content.get(field)) else {
        return j;
    };
    against_rules(field, r, value, r.sensitive || sensitive(field)).unwrap_or(j)
}

/// Whether `value`, remembered for `field`, may be offered as that field's
/// default in a form whose schema is `schema` ([`crate::mrtr::remember`]):
/// the field's own property accepts it (type, `enum`, bounds, lengths,
/// format), the policy's rules for the field do, and so does its `authz`
/// rule where it can be judged before the person answers. A rule that reads
/// `content` depends on the rest of the answer, unknown until then, and is
/// judged with the answer only. Anything that would refuse the value as an
/// answer refuses it as a default: a pre-filled value the person confirms
/// must not come back with a red mark.
pub fn offerable(
    policy: &Policy,
    subject: &Subject,
    schema: &Value,
    field: &str,
    value: &Value,
) -> bool {
    let Some(property) = schema.get("properties").and_then(|p| p.get(field)) else {
        return false;
    };
    let mut alone = Map::with_capacity(1);
    alone.insert(field.to_owned(), value.clone());
    // The property alone, as the whole form's check would judge this field
    // (formats included); the form's other fields and `required` are not
    // this value's concern.
    let one = json!({"type": "object", "properties": {field: property}});
    if !compiled(&one).is_ok_and(|v| v.is_valid(&Value::Object(alone.clone()))) {
        return false;
    }
    let Some(r) = policy.tool(subject.tool).and_then(|t| t.fields.get(field)) else {
        return true;
    };
    if against_rules(field, r, value, true).is_some() {
        return false;
    }
    match &r.authz {
        Some(program) if !program.references().has_variable("content") => {
            // An error would refuse the answer (`policy_error`): no default either.
            authorized(policy, program, subject, field, value, &alone) == Ok(true)
        }
        _ => true,
    }
}

/// Whether one form property (`{"type": "string", "minLength": 3}`) accepts
/// `value`, formats included: the check a whole form's schema makes of it.
pub(super) fn property_accepts(property: &Value, value: &Value) -> bool {
    let one = json!({"type": "object", "properties": {"v": property}});
    compiled(&one).is_ok_and(|v| v.is_valid(&json!({ "v": value })))
}

/// Compiled schemas kept for reuse, at most. A server asks the same few
/// forms again and again, and compiling one is most of an answer's check
/// (about 33k of 40k instructions); a server that sends a new schema with
/// every question only churns this bounded cache.
const COMPILED_SCHEMAS: usize = 256;

/// The validator for `schema`, compiled once per distinct schema text.
fn compiled(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    static CACHE: LazyLock<quick_cache::sync::Cache<Vec<u8>, Arc<jsonschema::Validator>>> =
        LazyLock::new(|| quick_cache::sync::Cache::new(COMPILED_SCHEMAS));
    // The text is the key: serialising is a small fraction of compiling, and
    // the same form written the same way (the same server) hits.
    let key = serde_json::to_vec(schema).map_err(|e| e.to_string())?;
    CACHE.get_or_insert_with(&key, || {
        jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .map(Arc::new)
            .map_err(|e| e.to_string())
    })
}

/// The server's own schema, checked with the `jsonschema` crate (formats included).
fn against_schema(
    schema: &Value,
    props: &Map<String, Value>,
    content: &Map<String, Value>,
    sensitive: &dyn Fn(&str) -> bool,
) -> Option<Judgement> {
    let validator = match compiled(schema) {
        Ok(v) => v,
        // The guard let it through as flat; a schema the validator cannot read
        // cannot vouch for any answer.
        Err(e) => {
            return Some(invalid(
                "",
                "schema",
                format!("the question's schema cannot be checked: {e}"),
            ));
        }
    };
    let instance = Value::Object(content.clone());
    let error = validator.iter_errors(&instance).next()?;
    let rule = error.kind().keyword().to_owned();
    let field = match error.kind() {
        jsonschema::error::ValidationErrorKind::Required { property } => {
            property.as_str().unwrap_or_default().to_owned()
        }
        _ => error
            .instance_path()
            .as_str()
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
    };
    let value = content.get(&field).cloned().unwrap_or(Value::Null);
    let prop = props.get(&field).cloned().unwrap_or(Value::Null);
    let given = shown(&value, sensitive(&field));
    let text = match rule.as_str() {
        "required" => format!("{field} is required"),
        "minimum" => format!("{field} must be at least {}; {given}", prop["minimum"]),
        "maximum" => format!("{field} must be at most {}; {given}", prop["maximum"]),
        "minLength" => format!(
            "{field} must be at least {} characters long; {given}",
            prop["minLength"]
        ),
        "maxLength" => format!(
            "{field} must be at most {} characters long; {given}",
            prop["maxLength"]
        ),
        "enum" | "oneOf" | "anyOf" => {
            format!("{field} must be one of {}; {given}", options(&prop))
        }
        "minItems" => format!(
            "{field} must have at least {} choice(s); {given}",
            prop["minItems"]
        ),
        "maxItems" => format!(
            "{field} must have at most {} choice(s); {given}",
            prop["maxItems"]
        ),
        "format" => format!(
            "{field} must be a valid {}; {given}",
            prop["format"].as_str().unwrap_or("value")
        ),
        "type" => format!("{field} must be of type {}; {given}", prop["type"]),
        _ => format!("{field} does not satisfy `{rule}` of the requested schema; {given}"),
    };
    Some(invalid(&field, &rule, text))
}

/// The options of a single- or multi-select field (`enum`, `oneOf` consts,
/// or the same on its `items`), for a red mark.
fn options(prop: &Value) -> String {
    let consts = |choices: &Value| {
        choices
            .as_array()
            .map(|a| Value::Array(a.iter().filter_map(|o| o.get("const").cloned()).collect()))
    };
    let items = &prop["items"];
    let found = [&prop["enum"], &items["enum"]]
        .into_iter()
        .find(|v| v.is_array())
        .cloned()
        .or_else(|| consts(&prop["oneOf"]))
        .or_else(|| consts(&items["anyOf"]))
        .unwrap_or(Value::Null);
    list(&found)
}

fn list(values: &Value) -> String {
    values
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// The policy's own rules for one field.
pub(super) fn against_rules(
    field: &str,
    r: &FieldRules,
    value: &Value,
    sensitive: bool,
) -> Option<Judgement> {
    let given = shown(value, sensitive);
    if r.minimum.is_some() || r.maximum.is_some() {
        let Some(n) = value.as_f64() else {
            return Some(invalid(
                field,
                "type",
                format!("{field} must be a number; {given}"),
            ));
        };
        if let Some(min) = r.minimum
            && n < min
        {
            return Some(invalid(
                field,
                "minimum",
                format!("{field} must be at least {min}; {given}"),
            ));
        }
        if let Some(max) = r.maximum
            && n > max
        {
            return Some(invalid(
                field,
                "maximum",
                format!("{field} must be at most {max}; {given}"),
            ));
        }
    }
    if let Some(allowed) = &r.allowed
        && !allowed
            .iter()
            .any(|a| a == value || (a.as_f64().is_some() && a.as_f64() == value.as_f64()))
    {
        return Some(invalid(
            field,
            "enum",
            format!("{field} must be one of {}; {given}", list(&json!(allowed))),
        ));
    }
    let textual = r.min_length.is_some()
        || r.max_length.is_some()
        || r.pattern.is_some()
        || r.format.is_some();
    if textual {
        let Some(s) = value.as_str() else {
            return Some(invalid(
                field,
                "type",
                format!("{field} must be a string; {given}"),
            ));
        };
        let len = s.chars().count() as u64;
        if let Some(min) = r.min_length
            && len < min
        {
            return Some(invalid(
                field,
                "min_length",
                format!("{field} must be at least {min} characters long; {given}"),
            ));
        }
        if let Some(max) = r.max_length
            && len > max
        {
            return Some(invalid(
                field,
                "max_length",
                format!("{field} must be at most {max} characters long; {given}"),
            ));
        }
        if let Some(re) = &r.pattern
            && !re.is_match(s)
        {
            return Some(invalid(
                field,
                "pattern",
                format!("{field} must match {}; {given}", re.as_str()),
            ));
        }
        if let Some(format) = r.format
            && !format_ok(format, s)
        {
            return Some(invalid(
                field,
                "format",
                format!("{field} must be a valid {}; {given}", format_name(format)),
            ));
        }
    }
    None
}

fn format_name(f: Format) -> &'static str {
    match f {
        Format::Email => "email address",
        Format::Uri => "URI",
        Format::Date => "date (YYYY-MM-DD)",
        Format::DateTime => "date-time (RFC 3339)",
    }
}

fn format_ok(format: Format, s: &str) -> bool {
    let name = match format {
        Format::Email => "email",
        Format::Uri => "uri",
        Format::Date => "date",
        Format::DateTime => "date-time",
    };
    // The same checker the server's schema is held to.
    compiled(&json!({"type": "string", "format": name})).is_ok_and(|v| v.is_valid(&json!(s)))
}

fn authorized(
    policy: &Policy,
    program: &cel::Program,
    subject: &Subject,
    field: &str,
    value: &Value,
    content: &Map<String, Value>,
) -> Result<bool, String> {
    let mut ctx = cel::Context::with_env(policy.cel_env().clone());
    let vars = [
        ("principal", subject.principal.cel_value()),
        (
            "tool",
            json!({"name": subject.tool, "arguments": subject.arguments}),
        ),
        ("field", json!(field)),
        ("value", value.clone()),
        ("content", Value::Object(content.clone())),
    ];
    for (name, v) in vars {
        // Fail closed: a rule that cannot see its inputs allows nothing.
        let v = cel::to_value(v).map_err(|e| format!("`{name}`: {e}"))?;
        ctx.add_variable_from_value(name, v);
    }
    match program.execute(&ctx) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("the rule gave {other:?}, not a bool")),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_is_compiled_once_and_a_broken_one_never_cached() {
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}});
        let first = compiled(&schema).unwrap();
        let again = compiled(&schema.clone()).unwrap();
        assert!(
            Arc::ptr_eq(&first, &again),
            "the same schema text is compiled once"
        );
        assert!(!first.is_valid(&json!({"n": 2})));
        let other = compiled(
            &json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}),
        )
        .unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert!(
            other.is_valid(&json!({"n": 2})),
            "a different schema is its own validator"
        );
        let broken = json!({"type": "object", "properties": {"n": {"type": 7}}});
        assert!(compiled(&broken).is_err());
        assert!(
            compiled(&broken).is_err(),
            "an error is not remembered as a validator"
        );
    }
}
