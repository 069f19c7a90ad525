//! The configuration reference pages (`docs/src/reference/config.md` and
//! `policy.md`), written from the JSON Schema of the config types: every
//! key with its type, default and description (the doc comment), grouped by
//! TOML table. Generated, so a key cannot be added, renamed or given a new
//! default without the page changing (`tests/generated.rs` compares).

use std::fmt::Write as _;

use schemars::Schema;
use serde_json::{Map, Value};

/// Which page to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// `redmark.toml`.
    Config,
    /// A policy file.
    Policy,
}

impl Page {
    fn intro(self) -> &'static str {
        match self {
            Page::Config => {
                "# Configuration reference\n\n\
                Every key of `redmark.toml`, table by table: its type, its default, and what it \
                does. Keys not listed here are errors (`redmark check` names them, and so does an \
                editor given the [schema](editor-schema.md)).\n\n\
                This page is generated from the configuration types by \
                `redmark config-schema --markdown`; the JSON Schema \
                `schemas/redmark.schema.json` is generated from the same types.\n"
            }
            Page::Policy => {
                "# Policy file reference\n\n\
                Every key of a policy file (the file a route names with `policy = \"...\"`): its \
                type, its default, and what it does. Keys not listed here are errors.\n\n\
                This page is generated from the policy file types by \
                `redmark config-schema --policy --markdown`; the JSON Schema \
                `schemas/policy.schema.json` is generated from the same types.\n"
            }
        }
    }
}

/// The reference page for `schema` (one made by [`super::schema`]).
pub fn markdown(schema: &Schema, page: Page) -> String {
    let root = schema.as_value();
    let defs = root
        .get("definitions")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut out = String::from(page.intro());
    out.push_str(
        "\nTypes: a *duration* is a number and a unit, several summed (`\"30s\"`, `\"10m\"`, \
         `\"1h 30m\"`); a *rate* is `COUNT/UNIT` with unit `s`, `m` or `h` (`\"20/s\"`); \
         relative paths resolve against the file they are written in.\n",
    );
    let walker = Walker { defs: &defs };
    walker.section(&mut out, None, root, None);
    out
}

struct Walker<'a> {
    defs: &'a Map<String, Value>,
}

/// How a key is written in TOML.
enum Shape<'a> {
    /// `[name]`: a table of keys.
    Table(&'a Value),
    /// `[[name]]`: an array of tables.
    ArrayOfTables(&'a Value),
    /// `[name.KEY]`: a table of tables keyed by a name of the user's.
    MapOfTables(&'a Value),
    /// `name = value`.
    Leaf,
}

impl<'a> Walker<'a> {
    /// The schema a `$ref` (or draft-07's `allOf: [{$ref}]` wrapper) points at.
    fn target(&self, schema: &'a Value) -> &'a Value {
        let inner = match schema.get("allOf").and_then(Value::as_array) {
            Some(all) if all.len() == 1 => &all[0],
            _ => schema,
        };
        match inner.get("$ref").and_then(Value::as_str) {
            Some(r) => r
                .strip_prefix("#/definitions/")
                .and_then(|name| self.defs.get(name))
                .unwrap_or(inner),
            None => inner,
        }
    }

    fn ref_name(schema: &Value) -> Option<&str> {
        let inner = match schema.get("allOf").and_then(Value::as_array) {
            Some(all) if all.len() == 1 => &all[0],
            _ => schema,
        };
        inner
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/definitions/"))
    }

    fn shape(&self, schema: &'a Value) -> Shape<'a> {
        let t = self.target(schema);
        if t.get("properties").is_some() {
            return Shape::Table(t);
        }
        if let Some(items) = t.get("items") {
            let items = self.target(items);
            if items.get("properties").is_some() {
                return Shape::ArrayOfTables(items);
            }
        }
        if let Some(values) = t.get("additionalProperties").filter(|v| v.is_object()) {
            let values = self.target(values);
            if values.get("properties").is_some() {
                return Shape::MapOfTables(values);
            }
        }
        Shape::Leaf
    }

    /// One table: its description, a row per plain key, then its sub-tables.
    fn section(&self, out: &mut String, path: Option<&str>, table: &Value, about: Option<&str>) {
        if let Some(about) = about.filter(|a| !a.is_empty()) {
            let _ = writeln!(out, "\n{}", one_paragraph(about));
        }
        let Some(props) = table.get("properties").and_then(Value::as_object) else {
            return;
        };
        let required: Vec<&str> = table
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut rows = String::new();
        let mut subsections = Vec::new();
        for (key, schema) in props {
            let description = schema
                .get("description")
                .or_else(|| self.target(schema).get("description"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let dotted = match path {
                Some(p) => format!("{p}.{key}"),
                None => key.clone(),
            };
            match self.shape(schema) {
                Shape::Table(t) => {
                    subsections.push((format!("[{dotted}]"), dotted, t, description));
                }
                Shape::ArrayOfTables(t) => {
                    subsections.push((format!("[[{dotted}]]"), dotted, t, description));
                }
                Shape::MapOfTables(t) => {
                    let named = format!("{dotted}.{}", placeholder(key));
                    subsections.push((format!("[{named}]"), named, t, description));
                }
                Shape::Leaf => {
                    let default = if required.contains(&key.as_str()) {
                        "required".to_owned()
                    } else {
                        default_text(schema)
                    };
                    let _ = writeln!(
                        rows,
                        "| `{key}` | {} | {default} | {} |",
                        self.type_text(schema),
                        cell(&self.with_values(schema, description)),
                    );
                }
            }
        }
        if !rows.is_empty() {
            out.push_str("\n| Key | Type | Default | Description |\n|---|---|---|---|\n");
            out.push_str(&rows);
        }
        for (heading, dotted, t, description) in subsections {
            let _ = writeln!(out, "\n## `{heading}`");
            let about = if description.is_empty() {
                t.get("description").and_then(Value::as_str)
            } else {
                Some(description)
            };
            self.section(out, Some(&dotted), t, about);
        }
    }

    /// The description, followed by what each value of an enum means when
    /// the enum documents its values.
    fn with_values(&self, schema: &Value, description: &str) -> String {
        let t = self.target(schema);
        let Some(variants) = t.get("oneOf").and_then(Value::as_array) else {
            return description.to_owned();
        };
        let explained: Vec<String> = variants
            .iter()
            .filter_map(|v| {
                let value = v.get("const").or_else(|| {
                    v.get("enum")
                        .and_then(Value::as_array)
                        .and_then(|e| e.first())
                })?;
                let text = v.get("description").and_then(Value::as_str)?;
                let text = one_paragraph(text);
                Some(format!("{}: {}", inline(value), text.trim_end_matches('.')))
            })
            .collect();
        if explained.is_empty() || description.contains("`: ") {
            return description.to_owned();
        }
        format!("{description} {}.", explained.join("; "))
    }

    fn type_text(&self, schema: &Value) -> String {
        match Self::ref_name(schema) {
            Some("Duration") => return "duration".into(),
            Some("Rate") => return "rate".into(),
            _ => {}
        }
        let t = self.target(schema);
        if let Some(values) = enum_values(t) {
            return values.join(" or ");
        }
        if let Some(any) = t.get("anyOf").and_then(Value::as_array) {
            let kinds: Vec<String> = any.iter().map(|v| self.type_text(v)).collect();
            return kinds.join(", or ");
        }
        if let Some(props) = t.get("properties").and_then(Value::as_object) {
            let keys: Vec<String> = props.keys().map(|k| format!("`{k}`")).collect();
            return format!("table ({})", keys.join(", "));
        }
        match t.get("type").and_then(Value::as_str) {
            Some("array") => match t.get("items") {
                Some(items) => format!("array of {}", plural(&self.type_text(items))),
                None => "array".into(),
            },
            Some("object") => match t.get("additionalProperties") {
                Some(v) if v.is_object() => format!("table of {}", plural(&self.type_text(v))),
                _ => "table".into(),
            },
            Some("integer") => match t.get("minimum").and_then(Value::as_u64) {
                Some(min) if min > 0 => format!("integer ≥ {min}"),
                _ => "integer".into(),
            },
            Some(other) => other.into(),
            None => "any value".into(),
        }
    }
}

/// `fields` → `FIELD`, `tool` → `NAME`: the placeholder for a user's key.
fn placeholder(key: &str) -> String {
    match key {
        "tool" => "NAME".into(),
        "fields" => "FIELD".into(),
        other => other.trim_end_matches('s').to_ascii_uppercase(),
    }
}

fn enum_values(t: &Value) -> Option<Vec<String>> {
    if let Some(values) = t.get("enum").and_then(Value::as_array) {
        return Some(values.iter().map(inline).collect());
    }
    let variants = t.get("oneOf").and_then(Value::as_array)?;
    variants
        .iter()
        .map(|v| {
            v.get("const")
                .or_else(|| v.get("enum").and_then(Value::as_array)?.first())
                .map(inline)
        })
        .collect()
}

fn plural(kind: &str) -> String {
    match kind {
        "string" | "integer" | "number" | "boolean" | "duration" | "rate" => format!("{kind}s"),
        other => other.to_owned(),
    }
}

fn default_text(schema: &Value) -> String {
    if let Some(text) = schema.get("x-default").and_then(Value::as_str) {
        return text.to_owned();
    }
    match schema.get("default") {
        Some(v) => inline(v),
        None => "unset".into(),
    }
}

/// A value as it would be written in TOML, in code style.
fn inline(value: &Value) -> String {
    fn toml(value: &Value) -> String {
        match value {
            Value::Array(items) => {
                let items: Vec<String> = items.iter().map(toml).collect();
                format!("[{}]", items.join(", "))
            }
            Value::Object(map) if map.is_empty() => "{}".into(),
            other => other.to_string(),
        }
    }
    format!("`{}`", toml(value))
}

/// Doc comments keep their line breaks; a table cell cannot.
fn one_paragraph(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn cell(text: &str) -> String {
    one_paragraph(text).replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_every_table_is_on_the_page() {
        let page = markdown(&crate::config::config_schema(), Page::Config);
        for heading in [
            "## `[server]`",
            "## `[server.tls]`",
            "## `[[route]]`",
            "## `[route.upstream]`",
            "## `[[state.keys]]`",
            "## `[audit]`",
        ] {
            assert!(page.contains(heading), "{heading} missing:\n{page}");
        }
        // A duration key with its default, as a user writes it.
        assert!(
            page.contains("| `shutdown_grace` | duration | `\"10s\"` |"),
            "{page}"
        );
        // A key without a default says it is required.
        assert!(page.contains("| `listen` | string | required |"), "{page}");
        // The machine-dependent default is described, not a number.
        assert!(
            page.contains("| `event_loops` | integer | one per core |"),
            "{page}"
        );
    }

    /// These pages are what users read: a key added without a doc comment
    /// would be a row with an empty description.
    #[test]
    fn every_key_has_a_description() {
        for (schema, page) in [
            (crate::config::config_schema(), Page::Config),
            (crate::policy::policy_schema(), Page::Policy),
        ] {
            let text = markdown(&schema, page);
            let bare: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("| `") && l.ends_with("|  |"))
                .collect();
            assert!(bare.is_empty(), "keys without a description: {bare:#?}");
        }
    }

    #[test]
    fn the_policy_page_names_tools_and_fields_by_placeholder() {
        let page = markdown(&crate::policy::policy_schema(), Page::Policy);
        for heading in [
            "## `[defaults]`",
            "## `[tool.NAME]`",
            "## `[tool.NAME.fields.FIELD]`",
        ] {
            assert!(page.contains(heading), "{heading} missing:\n{page}");
        }
        assert!(page.contains("| `max_reasks` | integer | `2` |"), "{page}");
        assert!(
            page.contains("| `on_invalid` | `\"reask\"` or `\"error\"` | `\"reask\"` |"),
            "{page}"
        );
    }
}
