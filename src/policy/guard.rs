//! Guarding the question: what a server may ask a person, checked before the
//! question reaches any client.
//!
//! spec 2026-07-28 client/elicitation.mdx "Requested Schema": form mode
//! schemas "are limited to flat objects with primitive properties only";
//! "Servers MUST NOT use form mode elicitation to request sensitive
//! information such as passwords, API keys, access tokens, or payment
//! credentials" and "MUST use URL mode for interactions involving such
//! sensitive information".

use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::Policy;
use crate::protocol::Reason;

/// Why a question is refused: a `data.reason`, the field concerned, and words for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: Reason,
    pub field: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Ask,
    Refuse(Refusal),
    /// The model, not a person, owns this value: tell the model precisely what is missing.
    ModelOwned {
        field: String,
        guidance: String,
    },
}

fn refuse(reason: Reason, field: Option<&str>, message: String) -> Verdict {
    Verdict::Refuse(Refusal {
        reason,
        field: field.map(str::to_owned),
        message,
    })
}

/// Names, titles and descriptions that ask for a secret.
fn secret_words() -> &'static regex::Regex {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(
            r"(?i)\b(password|passphrase|passwd|pass[ _-]?code|secret|api[ _-]?key|apikey|access[ _-]?token|auth[ _-]?token|refresh[ _-]?token|bearer|token|credentials?|private[ _-]?key|card[ _-]?number|credit[ _-]?card|cvv|cvc|security[ _-]?code|ssn|social[ _-]?security)\b",
        )
        .unwrap_or_else(|_| unreachable!("the secret-word pattern is a valid regex"))
    })
}

/// True when a property (by name, title, description or `format`) asks for a secret.
pub fn looks_secret(name: &str, property: &Value) -> bool {
    // `api_key` and `apiKey` read as words once separators and case are opened up.
    let spaced = |s: &str| {
        let mut out = String::with_capacity(s.len() + 4);
        let mut previous_lower = false;
        for c in s.chars() {
            if c.is_uppercase() && previous_lower {
                out.push(' ');
            }
            previous_lower = c.is_lowercase();
            out.push(if c == '_' || c == '-' { ' ' } else { c });
        }
        out
    };
    let texts = [
        Some(name),
        property.get("title").and_then(Value::as_str),
        property.get("description").and_then(Value::as_str),
    ];
    property.get("format").and_then(Value::as_str) == Some("password")
        || texts
            .into_iter()
            .flatten()
            .any(|t| secret_words().is_match(&spaced(t)))
}

const COMMON_KEYS: [&str; 4] = ["type", "title", "description", "default"];

/// Checks one property against the primitive shapes of the 2026-07-28 schema
/// (`PrimitiveSchemaDefinition`); `Err` says what is not flat.
fn primitive(property: &Value) -> Result<(), String> {
    let obj = property
        .as_object()
        .ok_or("a property must be a schema object")?;
    let allowed: &[&str] = match obj.get("type").and_then(Value::as_str) {
        Some("string") => &[
            "minLength",
            "maxLength",
            "format",
            "enum",
            "enumNames",
            "oneOf",
        ],
        Some("number" | "integer") => &["minimum", "maximum"],
        Some("boolean") => &[],
        Some("array") => {
            let items = obj
                .get("items")
                .and_then(Value::as_object)
                .ok_or("an array property needs `items`")?;
            let strings = items.get("type").and_then(Value::as_str) == Some("string")
                && items.get("enum").is_some_and(Value::is_array);
            let titled = items
                .get("anyOf")
                .and_then(Value::as_array)
                .is_some_and(|a| {
                    a.iter()
                        .all(|o| o.get("const").is_some_and(Value::is_string))
                });
            if !(strings || titled) {
                return Err("an array property must be a multi-select of string options".into());
            }
            &["items", "minItems", "maxItems"]
        }
        Some(other) => return Err(format!("type `{other}` is not a primitive")),
        None => return Err("a property needs a single primitive `type`".into()),
    };
    if let Some(one_of) = obj.get("oneOf") {
        let ok = one_of.as_array().is_some_and(|a| {
            a.iter()
                .all(|o| o.get("const").is_some_and(Value::is_string))
        });
        if !ok {
            return Err("`oneOf` must list `{const, title}` options".into());
        }
    }
    match obj
        .keys()
        .find(|k| !COMMON_KEYS.contains(&k.as_str()) && !allowed.contains(&k.as_str()))
    {
        Some(extra) => Err(format!("`{extra}` is not allowed in a flat form field")),
        None => Ok(()),
    }
}

/// The fields of a form's `requestedSchema`, if it is a flat object of primitives.
fn flat_properties(schema: &Value) -> Result<&Map<String, Value>, (Option<String>, String)> {
    let obj = schema
        .as_object()
        .ok_or((None, "requestedSchema must be an object".to_owned()))?;
    if obj.get("type").and_then(Value::as_str) != Some("object") {
        return Err((None, "requestedSchema must have `type: \"object\"`".into()));
    }
    if let Some(extra) = obj.keys().find(|k| {
        ![
            "type",
            "properties",
            "required",
            "$schema",
            "title",
            "description",
        ]
        .contains(&k.as_str())
    }) {
        return Err((
            None,
            format!("`{extra}` is not allowed at the top of a form schema"),
        ));
    }
    let props = obj
        .get("properties")
        .and_then(Value::as_object)
        .ok_or((None, "requestedSchema needs `properties`".to_owned()))?;
    for (name, p) in props {
        primitive(p).map_err(|why| (Some(name.clone()), why))?;
    }
    Ok(props)
}

/// Checks a question a server pushed for `tool`; `asked` counts the
/// operation's questions including this one.
pub fn check(policy: &Policy, tool: &str, method: &str, params: &Value, asked: usize) -> Verdict {
    let max = policy.max_questions(tool);
    if asked > max {
        return refuse(
            Reason::PolicyTooManyQuestions,
            None,
            format!("`{tool}` asked {asked} questions in one operation; the policy allows {max}"),
        );
    }
    if method != "elicitation/create" {
        return Verdict::Ask;
    }
    if params.get("mode").and_then(Value::as_str) == Some("url") {
        return check_url(
            policy,
            params
                .get("url")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
    }
    let schema = params.get("requestedSchema").unwrap_or(&Value::Null);
    let props = match flat_properties(schema) {
        Ok(p) => p,
        Err((field, why)) => {
            return refuse(
                Reason::PolicySchemaNotFlat,
                field.as_deref(),
                format!(
                    "`{tool}` asked with a form that is not a flat object of primitive fields: {why}"
                ),
            );
        }
    };
    if policy.defaults.deny_secrets
        && let Some((name, _)) = props.iter().find(|(name, p)| looks_secret(name, p))
    {
        return refuse(
            Reason::PolicySecretRequest,
            Some(name),
            format!(
                "`{tool}` asked for `{name}`, which looks like a secret; secrets must not be asked for in a form (the server should use URL mode)"
            ),
        );
    }
    // Whether or not the form is narrowed for the client (`shape_questions`),
    // a field no answer can satisfy would only collect red marks.
    if let Some(rules) = policy
        .tool(tool)
        .map(|t| &t.fields)
        .filter(|f| !f.is_empty())
        && let Err(e) = super::shape::narrow(rules, &mut schema.clone())
    {
        return refuse(
            Reason::PolicyUnsatisfiable,
            Some(&e.field),
            format!("`{tool}` asked a question nobody can answer: {e}"),
        );
    }
    let owned = policy.tool(tool).map(|t| &t.model_owned);
    if let Some((field, property)) = props
        .iter()
        .find(|(name, _)| owned.is_some_and(|o| o.contains(*name)))
    {
        return Verdict::ModelOwned {
            field: field.clone(),
            guidance: guidance(tool, field, property, schema),
        };
    }
    Verdict::Ask
}

fn check_url(policy: &Policy, raw: &str) -> Verdict {
    let bad = |why: String| refuse(Reason::PolicyUrlNotAllowed, None, why);
    let Ok(url) = url::Url::parse(raw) else {
        return bad(format!("`{raw}` is not a valid URL"));
    };
    let host = url
        .host_str()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_ascii_lowercase();
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        other => {
            return bad(format!(
                "URL-mode elicitation must use https (http only for loopback); got `{other}`"
            ));
        }
    }
    if let Some(hosts) = &policy.defaults.url_hosts
        && !hosts.contains(&host)
    {
        return bad(format!(
            "`{host}` is not on this route's list of hosts URL-mode elicitation may open"
        ));
    }
    Verdict::Ask
}

/// The precise tool error for a model-owned value (seed 003: "tell the model
/// precisely what it is missing and what shape an acceptable answer takes").
fn guidance(tool: &str, field: &str, property: &Value, schema: &Value) -> String {
    let kind = property
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("value");
    let mut text = format!(
        "`{field}` is required: pass it in the arguments of `{tool}` instead of asking the user."
    );
    text.push_str(&format!(" It is a {kind}"));
    let options: Vec<String> = if let Some(values) = property.get("enum").and_then(Value::as_array)
    {
        values
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    } else if let Some(one_of) = property.get("oneOf").and_then(Value::as_array) {
        one_of
            .iter()
            .filter_map(|o| {
                let c = o.get("const")?.as_str()?;
                Some(match o.get("title").and_then(Value::as_str) {
                    Some(t) => format!("{c} ({t})"),
                    None => c.to_owned(),
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    if !options.is_empty() {
        text.push_str(&format!(", one of: {}", options.join(", ")));
    }
    for (word, key) in [("at least", "minimum"), ("at most", "maximum")] {
        if let Some(n) = property.get(key) {
            text.push_str(&format!(", {word} {n}"));
        }
    }
    if let Some(format) = property.get("format").and_then(Value::as_str) {
        text.push_str(&format!(", in {format} format"));
    }
    text.push('.');
    if let Some(d) = property.get("description").and_then(Value::as_str) {
        text.push_str(&format!(" {d}"));
    }
    let others: Vec<&String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().filter(|k| *k != field).collect())
        .unwrap_or_default();
    if !others.is_empty() {
        text.push_str(&format!(
            " (The server also wanted: {}.)",
            others
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    text
}
