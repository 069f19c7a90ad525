//! The headers a 2026-07-28 Streamable HTTP request carries besides its body
//! (spec 2026-07-28 basic/transports/streamable-http.mdx "Standard Request
//! Headers": `Mcp-Method` on every request, `Mcp-Name` on `tools/call`,
//! `resources/read` and `prompts/get`; "Custom Headers from Tool
//! Parameters": "conforming clients MUST mirror the values" of the
//! parameters a tool annotates with `x-mcp-header`), with the spec's
//! "Value Encoding".

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value};

/// A header value as the spec's "Value Encoding" writes it: plain visible
/// ASCII as is, anything else (non-ASCII, control characters, leading or
/// trailing whitespace, or text that looks like the sentinel) as
/// `=?base64?…?=`.
pub fn encode(value: &str) -> String {
    let plain = value
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || (0x21..=0x7e).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.to_owned()
    } else {
        format!("=?base64?{}?=", B64.encode(value.as_bytes()))
    }
}

/// `Mcp-Param-{Name}` headers for `arguments`, from the `x-mcp-header`
/// annotations of the tool's `inputSchema` (chains of `properties` only).
/// "Type conversion": strings as is, integers in decimal, booleans in lower
/// case; other values (absent, null, objects) are not mirrored.
pub fn mirrored(input_schema: &Value, arguments: &Map<String, Value>) -> Vec<(String, String)> {
    fn walk(schema: &Value, at: Option<&Value>, out: &mut Vec<(String, String)>) {
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (name, sub) in props {
            let value = at.and_then(|v| v.get(name));
            if let (Some(h), Some(v)) = (sub.get("x-mcp-header").and_then(Value::as_str), value) {
                let text = match v {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    Value::Bool(b) => Some(b.to_string()),
                    _ => None,
                };
                if let Some(text) = text {
                    out.push((format!("mcp-param-{h}"), encode(&text)));
                }
            }
            walk(sub, value, out);
        }
    }
    let mut out = Vec::new();
    let args = Value::Object(arguments.clone());
    walk(input_schema, Some(&args), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_are_encoded_as_the_spec_shows() {
        // The table of spec streamable-http.mdx "Encoding examples".
        assert_eq!(encode("us-west1"), "us-west1");
        assert_eq!(encode("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(encode(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(encode("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            encode("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
    }

    #[test]
    fn annotated_parameters_are_mirrored() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "query": {"type": "string"},
        }});
        let args = json!({"region": "us-west1", "n": 42, "query": "SELECT 1"});
        let mut got = mirrored(&schema, args.as_object().unwrap());
        got.sort();
        assert_eq!(
            got,
            vec![
                ("mcp-param-N".to_owned(), "42".to_owned()),
                ("mcp-param-Region".to_owned(), "us-west1".to_owned())
            ]
        );
    }
}
