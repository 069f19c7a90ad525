//! Narrowing a form by the policy: bounds, lengths, choices and formats
//! intersected, never widened; an empty intersection is an error.

use serde_json::{Value, json};

use super::*;
use crate::policy::Policy;

fn rules(fields: &str) -> foldhash::HashMap<String, FieldRules> {
    let text = format!("[tool.t]\n{fields}");
    Policy::parse(&text, "p.toml")
        .unwrap()
        .tool("t")
        .unwrap()
        .fields
        .clone()
}

fn form(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

fn narrowed(fields: &str, props: Value) -> (Value, Vec<String>) {
    let mut schema = form(props);
    let changed = narrow(&rules(fields), &mut schema).unwrap();
    (schema, changed)
}

#[test]
fn numeric_bounds_are_intersected_and_never_widened() {
    let (s, changed) = narrowed(
        "[tool.t.fields.amount]\nminimum = 0\nmaximum = 100000\n[tool.t.fields.n]\nminimum = -5\nmaximum = 50\n",
        json!({
            "amount": {"type": "number"},
            "n": {"type": "integer", "minimum": 1, "maximum": 1000},
            "other": {"type": "integer", "maximum": 3},
        }),
    );
    assert_eq!(
        s["properties"]["amount"],
        json!({"type": "number", "minimum": 0, "maximum": 100000})
    );
    // The server's own tighter minimum stays; only the maximum narrows.
    assert_eq!(
        s["properties"]["n"],
        json!({"type": "integer", "minimum": 1, "maximum": 50})
    );
    assert_eq!(
        s["properties"]["other"],
        json!({"type": "integer", "maximum": 3})
    );
    assert_eq!(changed, vec!["amount", "n"]);
}

#[test]
fn an_integer_field_takes_whole_bounds() {
    let (s, _) = narrowed(
        "[tool.t.fields.n]\nminimum = 0.5\nmaximum = 9.5\n",
        json!({"n": {"type": "integer"}}),
    );
    assert_eq!(
        s["properties"]["n"],
        json!({"type": "integer", "minimum": 1, "maximum": 9})
    );
    let (s, _) = narrowed(
        "[tool.t.fields.x]\nmaximum = 9.5\n",
        json!({"x": {"type": "number"}}),
    );
    assert_eq!(s["properties"]["x"]["maximum"], json!(9.5));
}

#[test]
fn string_lengths_are_intersected() {
    let (s, changed) = narrowed(
        "[tool.t.fields.name]\nmin_length = 2\nmax_length = 40\n",
        json!({"name": {"type": "string", "minLength": 5, "maxLength": 100}}),
    );
    assert_eq!(
        s["properties"]["name"],
        json!({"type": "string", "minLength": 5, "maxLength": 40})
    );
    assert_eq!(changed, vec!["name"]);
}

#[test]
fn a_policy_enum_on_free_text_becomes_a_choice() {
    let (s, changed) = narrowed(
        "[tool.t.fields.room]\nenum = [\"atrium\", \"studio-b\", \"nook\"]\n",
        json!({"room": {"type": "string", "title": "Room", "maxLength": 6}}),
    );
    // `studio-b` is longer than the server allows.
    assert_eq!(
        s["properties"]["room"],
        json!({"type": "string", "title": "Room", "enum": ["atrium", "nook"]})
    );
    assert_eq!(changed, vec!["room"]);
}

#[test]
fn enums_intersect_with_enum_names_and_one_of_titles_aligned() {
    let (s, _) = narrowed(
        "[tool.t.fields.size]\nenum = [\"s\", \"l\"]\n[tool.t.fields.tier]\nenum = [\"gold\"]\n",
        json!({
            "size": {"type": "string", "enum": ["s", "m", "l"], "enumNames": ["Small", "Medium", "Large"]},
            "tier": {"type": "string", "oneOf": [
                {"const": "gold", "title": "Gold"},
                {"const": "silver", "title": "Silver"}
            ]},
        }),
    );
    assert_eq!(s["properties"]["size"]["enum"], json!(["s", "l"]));
    assert_eq!(
        s["properties"]["size"]["enumNames"],
        json!(["Small", "Large"])
    );
    assert_eq!(
        s["properties"]["tier"]["oneOf"],
        json!([{"const": "gold", "title": "Gold"}])
    );
}

#[test]
fn server_choices_are_held_to_pattern_and_lengths_too() {
    let (s, _) = narrowed(
        "[tool.t.fields.code]\npattern = '^[a-z]+$'\n",
        json!({"code": {"type": "string", "enum": ["abc", "AB1", "xyz"]}}),
    );
    assert_eq!(s["properties"]["code"]["enum"], json!(["abc", "xyz"]));
}

#[test]
fn format_is_added_where_the_server_gave_none_and_pattern_stays_in_the_red_mark() {
    let (s, changed) = narrowed(
        "[tool.t.fields.email]\nformat = \"email\"\n[tool.t.fields.when]\nformat = \"date-time\"\n[tool.t.fields.tag]\npattern = '^x'\n",
        json!({
            "email": {"type": "string"},
            "when": {"type": "string", "format": "date"},
            "tag": {"type": "string"},
        }),
    );
    assert_eq!(s["properties"]["email"]["format"], "email");
    // The server's own format is kept: a schema holds one.
    assert_eq!(s["properties"]["when"]["format"], "date");
    // The flat schema has no `pattern`.
    assert_eq!(s["properties"]["tag"], json!({"type": "string"}));
    assert_eq!(changed, vec!["email"]);
}

#[test]
fn required_is_added_and_a_refused_default_removed() {
    let (s, changed) = narrowed(
        "[tool.t.fields.amount]\nrequired = true\nmaximum = 10\n[tool.t.fields.ok]\nminimum = 0\n",
        json!({
            "amount": {"type": "integer", "default": 50},
            "ok": {"type": "integer", "default": 3},
        }),
    );
    assert_eq!(s["required"], json!(["amount"]));
    assert!(s["properties"]["amount"].get("default").is_none());
    assert_eq!(s["properties"]["ok"]["default"], 3);
    assert_eq!(changed, vec!["amount", "ok"]);
}

#[test]
fn every_narrowed_schema_accepts_only_what_the_server_and_policy_do() {
    // Never widened: each sample the narrowed property accepts, the server's
    // property and the policy accept too.
    let fields = "[tool.t.fields.n]\nminimum = 2\nmaximum = 50\n[tool.t.fields.s]\nmax_length = 3\nenum = [\"a\", \"abcd\", \"b\"]\n";
    let server =
        json!({"n": {"type": "integer", "minimum": 0, "maximum": 10}, "s": {"type": "string"}});
    let (s, _) = narrowed(fields, server.clone());
    let r = rules(fields);
    let samples = [
        json!(-1),
        json!(0),
        json!(2),
        json!(10),
        json!(11),
        json!(60),
        json!("a"),
        json!("abcd"),
        json!("b"),
        json!("z"),
    ];
    for field in ["n", "s"] {
        for v in &samples {
            if property_accepts(&s["properties"][field], v) {
                assert!(property_accepts(&server[field], v), "{field}={v} widened");
                assert!(
                    against_rules(field, &r[field], v, true).is_none(),
                    "{field}={v} past the policy"
                );
            }
        }
    }
}

#[test]
fn an_empty_intersection_is_an_error_naming_the_field() {
    let r = rules("[tool.t.fields.n]\nminimum = 100\n");
    let mut s = form(json!({"n": {"type": "integer", "maximum": 10}}));
    let e = narrow(&r, &mut s).unwrap_err();
    assert_eq!(e.field, "n");
    assert!(e.to_string().contains("at least 100 and at most 10"), "{e}");

    let r = rules("[tool.t.fields.c]\nenum = [\"x\"]\n");
    let mut s = form(json!({"c": {"type": "string", "enum": ["a", "b"]}}));
    assert_eq!(narrow(&r, &mut s).unwrap_err().field, "c");

    let r = rules("[tool.t.fields.c]\nmin_length = 5\n");
    let mut s = form(json!({"c": {"type": "string", "maxLength": 4}}));
    assert!(narrow(&r, &mut s).is_err());

    let r = rules("[tool.t.fields.c]\nmaximum = 5\n");
    let mut s = form(json!({"c": {"type": "string"}}));
    assert!(narrow(&r, &mut s).is_err(), "a number rule on text");

    // Between 1.5 and 1.9 there is no whole number.
    let r = rules("[tool.t.fields.n]\nminimum = 1.5\nmaximum = 1.9\n");
    let mut s = form(json!({"n": {"type": "integer"}}));
    assert!(narrow(&r, &mut s).is_err());
}
