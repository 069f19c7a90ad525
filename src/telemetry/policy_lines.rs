//! The policy lines a suggestion tells the operator to add. Every tool name,
//! field name and string in them is written by the `toml` serializer, so a
//! name is quoted where it must be (`[tool."files.read"]`) and can never
//! close its table and open another (`[defaults]`): the names come from
//! servers and clients, and the operator pastes the lines into a policy.
//!
//! The lines are also safe to print as they are: a character a terminal or
//! page would act on ([`super::visible::is_unsafe`]) is written as a TOML
//! escape, which only a basic (double-quoted) string has.

use toml::{Table, Value};

use super::visible::{is_unsafe, push_escape};

/// What a suggestion sets on a tool or one of its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting<'a> {
    /// `model_owned = ["FIELD"]`, on the tool.
    ModelOwned(&'a str),
    /// `max_questions = N`, on the tool.
    MaxQuestions(u64),
    /// `remember = "DURATION"`, on a field.
    Remember(&'a str),
}

impl Setting<'_> {
    fn key(self) -> &'static str {
        match self {
            Setting::ModelOwned(_) => "model_owned",
            Setting::MaxQuestions(_) => "max_questions",
            Setting::Remember(_) => "remember",
        }
    }
}

/// A one-entry document `KEY = 0`, as the serializer writes it: the only
/// place names are quoted.
fn serialized_key(name: &str) -> Option<String> {
    let mut t = Table::new();
    t.insert(name.to_owned(), Value::Integer(0));
    let line = toml::to_string(&t).ok()?;
    line.strip_suffix(" = 0\n").map(str::to_owned)
}

/// `s` as a one-line basic string, quoted and escaped by the serializer.
///
/// The serializer picks the quoting: bare when it can, a literal string for
/// names holding `"` or `\`, a multi-line string for a value holding a
/// newline. A literal or multi-line string cannot escape the bidi and C1
/// characters it would carry raw, so the serializer is made to choose a
/// basic string: an ASCII control (the sentinel U+0001, appended and taken
/// off again) leaves it no other, and it escapes every quote, backslash and
/// control for us. The non-ASCII characters it still writes raw are then
/// spelled as escapes, valid in a basic string.
fn basic(s: &str) -> Option<String> {
    let key = serialized_key(&format!("{s}\u{1}"))?;
    let body = key.strip_prefix('"')?.strip_suffix("\\u0001\"")?;
    let mut out = String::with_capacity(body.len() + 2);
    out.push('"');
    for c in body.chars() {
        if is_unsafe(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out.push('"');
    Some(out)
}

/// `name` as a key: the serializer's own choice, unless it would carry an
/// unsafe character raw (then a basic string, as [`basic`]).
fn key(name: &str) -> Option<String> {
    if name.chars().any(is_unsafe) {
        basic(name)
    } else {
        serialized_key(name)
    }
}

/// The lines to add for `setting` on `tool` (on its `field` for
/// [`Setting::Remember`]); none if they would not read back as exactly that
/// tool, field and setting (checked with the parser, so a line that names
/// anything else is never suggested).
pub fn lines(tool: &str, field: Option<&str>, setting: Setting<'_>) -> Vec<String> {
    build(tool, field, setting)
        .filter(|lines| names_exactly(&lines.join("\n"), tool, field, setting))
        .unwrap_or_default()
}

fn build(tool: &str, field: Option<&str>, setting: Setting<'_>) -> Option<Vec<String>> {
    let header = match field {
        Some(f) => format!("[tool.{}.fields.{}]", key(tool)?, key(f)?),
        None => format!("[tool.{}]", key(tool)?),
    };
    let value = match setting {
        Setting::ModelOwned(f) => format!("[{}]", basic(f)?),
        Setting::MaxQuestions(n) => n.to_string(),
        Setting::Remember(d) => basic(d)?,
    };
    Some(vec![header, format!("{} = {value}", setting.key())])
}

/// Whether `text` parses to exactly `[tool.TOOL]` (or
/// `[tool.TOOL.fields.FIELD]`) holding `setting` and nothing else.
pub fn names_exactly(text: &str, tool: &str, field: Option<&str>, setting: Setting<'_>) -> bool {
    fn only<'t>(t: &'t Table, name: &str) -> Option<&'t Value> {
        (t.len() == 1).then(|| t.get(name)).flatten()
    }
    let Ok(doc) = text.parse::<Table>() else {
        return false;
    };
    let mut at = only(&doc, "tool").and_then(Value::as_table);
    at = at.and_then(|t| only(t, tool)).and_then(Value::as_table);
    if let Some(f) = field {
        at = at.and_then(|t| only(t, "fields")).and_then(Value::as_table);
        at = at.and_then(|t| only(t, f)).and_then(Value::as_table);
    }
    let Some(value) = at.and_then(|t| only(t, setting.key())) else {
        return false;
    };
    match setting {
        Setting::ModelOwned(f) => {
            value.as_array().map(Vec::as_slice) == Some(&[Value::String(f.to_owned())][..])
        }
        Setting::MaxQuestions(n) => i64::try_from(n).is_ok_and(|n| value.as_integer() == Some(n)),
        Setting::Remember(d) => value.as_str() == Some(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_keys_that_open_no_table() {
        assert_eq!(
            lines("files.read", None, Setting::MaxQuestions(0)),
            ["[tool.\"files.read\"]", "max_questions = 0"]
        );
        assert_eq!(
            lines("book", Some("currency"), Setting::Remember("30d")),
            ["[tool.book.fields.currency]", "remember = \"30d\""]
        );
        // The finding's field: one quoted key, its newlines escaped.
        let hostile = "room\"]\n[defaults]\nmode = \"replay\"\n#";
        assert_eq!(
            lines("book", Some(hostile), Setting::Remember("30d")),
            [
                r#"[tool.book.fields."room\"]\n[defaults]\nmode = \"replay\"\n#"]"#,
                "remember = \"30d\""
            ]
        );
        assert_eq!(
            lines("book", None, Setting::ModelOwned(hostile)),
            [
                "[tool.book]",
                r#"model_owned = ["room\"]\n[defaults]\nmode = \"replay\"\n#"]"#
            ]
        );
        // Bidi beside a quote (the serializer would write a literal string,
        // which has no escapes): a basic string with the override spelled out.
        assert_eq!(
            lines("a\"\u{202e}b", None, Setting::MaxQuestions(2)),
            [r#"[tool."a\"\u202Eb"]"#, "max_questions = 2"]
        );
        assert_eq!(
            lines("a\\b", None, Setting::MaxQuestions(2)),
            [r"[tool.'a\b']", "max_questions = 2"]
        );
    }

    #[test]
    fn the_check_refuses_lines_that_name_anything_else() {
        // What the report used to write: a nested table, not the tool.
        assert!(!names_exactly(
            "[tool.files.read]\nmax_questions = 0",
            "files.read",
            None,
            Setting::MaxQuestions(0)
        ));
        // And the injected `[defaults]` table.
        let hostile = "room\"]\n[defaults]\nmode = \"replay\"\n#";
        let old = format!("[tool.book.fields.{hostile}]\nremember = \"30d\"");
        assert!(!names_exactly(
            &old,
            "book",
            Some(hostile),
            Setting::Remember("30d")
        ));
        assert!(names_exactly(
            "[tool.\"files.read\"]\nmax_questions = 0",
            "files.read",
            None,
            Setting::MaxQuestions(0)
        ));
        assert!(!names_exactly(
            "[tool.\"files.read\"]\nmax_questions = 1",
            "files.read",
            None,
            Setting::MaxQuestions(0)
        ));
    }
}
