//! The JSON Schema of `redmark.toml` and of policy files, generated from the
//! config types (`schemars`): their doc comments are the descriptions, their
//! serde defaults the defaults, and every table that denies unknown keys says
//! `additionalProperties: false`, so an editor flags a misspelt key as
//! `redmark check` would. `redmark config-schema` prints them; the copies in
//! `schemas/` and the reference pages in `docs/src/reference/` are checked
//! against these by `tests/generated.rs`.

use std::borrow::Cow;

use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use super::Config;

/// Durations as `humantime` reads them (`"30s"`, `"10m"`, `"1h 30m"`,
/// `"250ms"`): the schema type of every `Duration` key.
pub struct HumanDuration;

impl JsonSchema for HumanDuration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "A duration: a number and a unit (ms, s, m, h, d), several summed, e.g. \"30s\", \"10m\", \"1h 30m\".",
            "pattern": DURATION_PATTERN,
        })
    }
}

/// What `humantime::parse_duration` accepts, as far as a config needs:
/// one or more `<integer><unit>` terms, spaces allowed between them.
pub const DURATION_PATTERN: &str = r"^\s*([0-9]+\s*(nanos|nsec|ns|usec|us|µs|millis|msec|ms|seconds|second|secs|sec|s|minutes|minute|mins|min|m|hours|hour|hrs|hr|h|days|day|d|weeks|week|wks|wk|w|months|month|M|years|year|yrs|yr|y)\s*)+$";

/// The draft-07 generator both schemas use: draft-07 because it is what
/// Taplo, VS Code's JSON service and most editors implement fully.
pub fn generator() -> SchemaGenerator {
    let mut settings = SchemaSettings::draft07();
    settings = settings.with_transform(RecursiveTransform(|schema: &mut Schema| {
        drop_null(schema);
        // `const` is draft-06: Taplo documents draft-04, where a one-value
        // `enum` means the same.
        if let Some(value) = schema.remove("const") {
            schema.insert("enum".into(), serde_json::Value::Array(vec![value]));
        }
        // An optional key's `None` default says nothing a reader needs.
        if schema
            .get("default")
            .is_some_and(serde_json::Value::is_null)
        {
            schema.remove("default");
        }
        // A default that depends on the machine (`event_loops`: one per
        // core) would make the schema differ from one build host to the
        // next; such keys carry `x-default` text instead of a value.
        if schema.get("x-default").is_some() {
            schema.remove("default");
        }
    }));
    settings.into_generator()
}

/// TOML has no null: an optional key is one that may be left out, so
/// `Option`'s `"null"` alternative only confuses editors and readers.
fn drop_null(schema: &mut Schema) {
    use serde_json::Value;
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            schema.insert("type".into(), only);
        }
    }
    let Some(Value::Array(any_of)) = schema.get_mut("anyOf") else {
        return;
    };
    any_of.retain(|s| s.get("type").is_none_or(|t| t != "null"));
    if let [only] = any_of.as_slice()
        && let Value::Object(only) = only.clone()
    {
        schema.remove("anyOf");
        if only.contains_key("$ref") {
            // draft-07 ignores a `$ref`'s siblings (the description).
            schema.insert("allOf".into(), Value::Array(vec![Value::Object(only)]));
        } else {
            for (key, value) in only {
                schema.insert(key, value);
            }
        }
    }
}

/// The JSON Schema of `redmark.toml`.
pub fn config_schema() -> Schema {
    config_schema_with(super::compat::CONFIG_RENAMES)
}

/// The schema with the old names of `renames` accepted and marked
/// `deprecated`, so an editor flags them without calling them unknown.
pub fn config_schema_with(renames: &[super::compat::Renamed]) -> Schema {
    let mut schema = generator().into_root_schema_for::<Config>();
    for rename in renames {
        let (Some((old_table, old_key)), Some((new_table, new_key))) =
            (table_of(&schema, rename.old), table_of(&schema, rename.new))
        else {
            continue;
        };
        let value = schema.as_value();
        let mut property = value
            .pointer(&format!("{new_table}/properties/{new_key}"))
            .cloned()
            .unwrap_or(serde_json::Value::Bool(true));
        if let Some(p) = property.as_object_mut() {
            p.remove("default");
            p.insert("deprecated".into(), true.into());
            p.insert(
                "description".into(),
                format!(
                    "Deprecated since {}: write `{}` instead.",
                    rename.since, rename.new
                )
                .into(),
            );
        }
        if let Some(props) = schema
            .as_object_mut()
            .and_then(|root| pointer_mut(root, &format!("{old_table}/properties")))
            .and_then(serde_json::Value::as_object_mut)
        {
            props.insert(old_key.to_owned(), property);
        }
    }
    schema
}

fn pointer_mut<'a>(
    root: &'a mut serde_json::Map<String, serde_json::Value>,
    pointer: &str,
) -> Option<&'a mut serde_json::Value> {
    let mut parts = pointer.trim_start_matches('/').split('/');
    let first = parts.next()?;
    let mut here = root.get_mut(first)?;
    for part in parts {
        here = here.get_mut(part)?;
    }
    Some(here)
}

/// The JSON pointer of the table holding the last key of a dotted `path`
/// (`*`: the items of an array of tables), and that key; `None` when the
/// path leads nowhere in the schema (then nothing is added).
fn table_of<'p>(schema: &Schema, path: &'p str) -> Option<(String, &'p str)> {
    let (parents, key) = path.rsplit_once('.').unwrap_or(("", path));
    let root = schema.as_value();
    let mut pointer = String::new();
    for part in parents.split('.').filter(|p| !p.is_empty()) {
        pointer = if part == "*" {
            format!("{pointer}/items")
        } else {
            format!("{pointer}/properties/{part}")
        };
        let next = root.pointer(&pointer)?;
        // A table written once is a `$ref` (draft-07 wraps one with a
        // description in `allOf`); its keys are in the definition.
        let reference = next
            .get("allOf")
            .and_then(|a| a.get(0))
            .unwrap_or(next)
            .get("$ref")
            .and_then(serde_json::Value::as_str)
            .and_then(|r| r.strip_prefix('#'));
        if let Some(target) = reference {
            pointer = target.to_owned();
        }
    }
    Some((pointer, key))
}

/// The schema as committed in `schemas/`: pretty JSON and a final newline.
pub fn to_pretty_json(schema: &Schema) -> String {
    let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// Every table of both files: (its JSON pointer, its schema).
    fn tables(schema: &Schema) -> Vec<(String, Value)> {
        let root = schema.as_value();
        let mut out = vec![("#".to_owned(), root.clone())];
        if let Some(defs) = root.get("definitions").and_then(Value::as_object) {
            for (name, def) in defs {
                if def.get("properties").is_some() {
                    out.push((format!("#/definitions/{name}"), def.clone()));
                }
            }
        }
        out
    }

    #[test]
    fn every_table_refuses_unknown_keys_as_serde_does() {
        for schema in [config_schema(), crate::policy::policy_schema()] {
            let all = tables(&schema);
            assert!(all.len() >= 5, "{} tables", all.len());
            for (at, table) in all {
                assert_eq!(
                    table.get("additionalProperties"),
                    Some(&Value::Bool(false)),
                    "{at} accepts unknown keys"
                );
            }
        }
    }

    #[test]
    fn an_old_key_name_is_accepted_and_marked_deprecated() {
        let schema = config_schema_with(super::super::compat::TEST_RENAMES);
        let value = schema.as_value();
        let grace = &value["definitions"]["ServerConfig"]["properties"]["grace"];
        assert_eq!(grace["deprecated"], true, "{grace}");
        assert_eq!(
            grace["allOf"][0]["$ref"], "#/definitions/Duration",
            "the new key's type: {grace}"
        );
        let timeout = &value["definitions"]["RouteConfig"]["properties"]["timeout"];
        assert_eq!(timeout["deprecated"], true, "{timeout}");
        let validator = jsonschema::validator_for(value).unwrap();
        let old: Value = toml::from_str(
            "[server]\nlisten = \"x\"\ngrace = \"5s\"\n[[route]]\nname = \"r\"\npath = \"/\"\ntimeout = \"1m\"\n[route.upstream]\nurl = \"http://x\"\n",
        )
        .unwrap();
        assert!(
            validator.is_valid(&old),
            "{:?}",
            validator
                .iter_errors(&old)
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
        );
        // The shipped schema has no such key: it is unknown there.
        let plain = jsonschema::validator_for(config_schema().as_value()).unwrap();
        assert!(!plain.is_valid(&old));
    }

    #[test]
    fn durations_carry_their_default_as_written_and_no_null_remains() {
        let schema = config_schema();
        let grace =
            &schema.as_value()["definitions"]["ServerConfig"]["properties"]["shutdown_grace"];
        assert_eq!(grace["default"], "10s", "{grace}");
        // The machine-dependent default is text, not this machine's count.
        let loops = &schema.as_value()["definitions"]["ServerConfig"]["properties"]["event_loops"];
        assert!(loops.get("default").is_none(), "{loops}");
        assert_eq!(loops["x-default"], "one per core");
        let text = serde_json::to_string(&schema).unwrap_or_default();
        assert!(!text.contains("\"null\""), "TOML has no null: {text}");
        let pattern = regex::Regex::new(DURATION_PATTERN).unwrap();
        for ok in ["10s", "1h 30m", "250ms", "7d", "1m"] {
            assert!(pattern.is_match(ok), "{ok}");
            assert!(humantime::parse_duration(ok).is_ok(), "{ok}");
        }
        for bad in ["10", "s", "ten seconds", ""] {
            assert!(!pattern.is_match(bad), "{bad}");
            assert!(humantime::parse_duration(bad).is_err(), "{bad}");
        }
    }
}
