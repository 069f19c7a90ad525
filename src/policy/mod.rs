//! Policy files (`policies/*.toml`), referenced per route: what redmark does
//! with the questions a server asks for each tool.
//!
//! ```toml
//! [tool.book_room]
//! keys = ["room", "alternative"]   # names of this tool's inputRequests keys, in order
//! mode = "hold"
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::config::{ConfigError, ConfigErrors};

/// How an operation waits for its answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The upstream call stays open on this node between round trips.
    #[default]
    Hold,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolPolicy {
    /// Names of this tool's `inputRequests` keys, in the order the server asks.
    #[serde(default)]
    pub keys: Vec<String>,
    #[serde(default)]
    pub mode: Mode,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub tool: BTreeMap<String, ToolPolicy>,
}

impl Policy {
    pub fn load(path: &Path) -> Result<Policy, ConfigErrors> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigErrors(vec![ConfigError {
                file: file.clone(),
                line: 0,
                column: 0,
                message: format!("cannot read: {e}"),
            }])
        })?;
        Policy::parse(&text, &file)
    }

    pub fn parse(text: &str, file: &str) -> Result<Policy, ConfigErrors> {
        let policy: Policy = toml::from_str(text).map_err(|e| {
            ConfigErrors(vec![ConfigError::at(
                file,
                text,
                e.span(),
                e.message().trim(),
            )])
        })?;
        let mut problems = Vec::new();
        for (tool, p) in &policy.tool {
            let mut seen = std::collections::HashSet::new();
            for key in &p.keys {
                if key.is_empty() || !seen.insert(key) {
                    problems.push(ConfigError::at(
                        file,
                        text,
                        None,
                        &format!("tool `{tool}`: key names must be non-empty and unique (`{key}`)"),
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(policy)
        } else {
            Err(ConfigErrors(problems))
        }
    }

    /// The key names for a tool's questions, in order.
    pub fn keys(&self, tool: &str) -> Vec<String> {
        self.tool
            .get(tool)
            .map(|t| t.keys.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_keys_per_tool() {
        let p = Policy::parse(
            "[tool.book_room]\nkeys = [\"room\", \"alternative\"]\nmode = \"hold\"\n",
            "p.toml",
        )
        .unwrap();
        assert_eq!(p.keys("book_room"), vec!["room", "alternative"]);
        assert!(p.keys("other").is_empty());
    }

    #[test]
    fn unknown_fields_and_duplicate_keys_are_errors() {
        let e = Policy::parse("[tool.x]\nkeys = [\"a\"]\nmaximum = 5\n", "p.toml").unwrap_err();
        assert_eq!(e.0[0].line, 3, "{e}");
        assert!(Policy::parse("[tool.x]\nkeys = [\"a\", \"a\"]\n", "p.toml").is_err());
        assert!(Policy::parse("[tool.x]\nmode = \"replay\"\n", "p.toml").is_err());
    }
}
