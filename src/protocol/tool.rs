//! A tool as its server lists it, with what every call to it needs from
//! its definition worked out once, when the list is read: which arguments
//! are mirrored into `Mcp-Param-*` headers (spec 2026-07-28
//! streamable-http.mdx "Custom Headers from Tool Parameters").

use serde_json::Value;

/// One listed tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The definition as the server listed it.
    pub definition: Value,
    /// Its `inputSchema`'s mirrored parameters.
    pub mirrored: Vec<Mirrored>,
}

impl Tool {
    pub fn new(definition: Value) -> Self {
        let mirrored = definition
            .get("inputSchema")
            .map(mirrored)
            .unwrap_or_default();
        Tool {
            definition,
            mirrored,
        }
    }
}

/// A tool parameter mirrored into a header: its header name and property path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirrored {
    pub header: String,
    pub path: Vec<String>,
}

/// The `x-mcp-header` annotations of a tool's `inputSchema`, following only
/// chains of `properties` (the "statically reachable" properties).
pub fn mirrored(input_schema: &Value) -> Vec<Mirrored> {
    // The path is borrowed while walking: it is copied only for a property
    // that has a header, which most tools (and calls) have none of.
    fn walk<'s>(schema: &'s Value, path: &mut Vec<&'s str>, out: &mut Vec<Mirrored>) {
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (name, sub) in props {
            path.push(name);
            if let Some(h) = sub.get("x-mcp-header").and_then(Value::as_str) {
                out.push(Mirrored {
                    header: h.to_owned(),
                    path: path.iter().map(|p| (*p).to_owned()).collect(),
                });
            }
            walk(sub, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(input_schema, &mut Vec::new(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_knows_its_mirrored_parameters_from_its_listing() {
        let tool = Tool::new(
            json!({"name": "t", "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "opts": {"type": "object", "properties": {"tier": {"type": "string", "x-mcp-header": "Tier"}}},
            }}}),
        );
        assert_eq!(
            tool.mirrored,
            vec![
                Mirrored {
                    header: "Region".into(),
                    path: vec!["region".into()]
                },
                Mirrored {
                    header: "Tier".into(),
                    path: vec!["opts".into(), "tier".into()]
                },
            ]
        );
        assert!(Tool::new(json!({"name": "bare"})).mirrored.is_empty());
    }
}
