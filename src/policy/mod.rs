//! Policy files (`policies/*.toml`), one per route: which questions a server
//! may ask ([`guard`]), what answers must satisfy before the server sees them
//! ([`answer`]), and per-tool settings such as input request key names.
//!
//! ```toml
//! [defaults]
//! on_invalid = "reask"      # or "error"
//! max_reasks = 2
//! max_questions = 5         # per operation
//! secret_fields = "deny"
//!
//! [tool.book_room]
//! keys = ["room", "alternative"]
//!
//! [tool.book_room.fields.room_id]
//! enum = ["atrium", "studio-b", "nook"]
//! authz = 'value != "atrium" || "facilities" in principal.groups'
//! authz_message = "only the facilities group may book the Atrium"
//! ```

pub mod answer;
pub mod call;
mod file;
pub mod guard;
pub mod lint;
pub mod reload;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

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

/// What happens to an answer that breaks a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnInvalid {
    /// Ask the same question again, with a red mark naming the field and the rule.
    Reask,
    /// Fail the call with `policy_invalid_answer`.
    Error,
}

/// What the server hears when one of its questions is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnRefused {
    Error,
    Decline,
}

/// String formats an answer can be held to (the formats of the 2026-07-28 elicitation schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    Email,
    Uri,
    Date,
    DateTime,
}

#[derive(Debug, Clone)]
pub struct Defaults {
    pub on_invalid: OnInvalid,
    pub max_reasks: u32,
    pub max_questions: usize,
    pub deny_secrets: bool,
    pub on_refused: OnRefused,
    pub url_hosts: Option<Vec<String>>,
}

impl Default for Defaults {
    fn default() -> Self {
        Self {
            on_invalid: OnInvalid::Reask,
            max_reasks: 2,
            max_questions: 10,
            deny_secrets: true,
            on_refused: OnRefused::Error,
            url_hosts: None,
        }
    }
}

/// Rules for one field of an elicited form.
#[derive(Debug, Clone, Default)]
pub struct FieldRules {
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub pattern: Option<regex::Regex>,
    pub format: Option<Format>,
    pub allowed: Option<Vec<serde_json::Value>>,
    pub required: bool,
    pub authz: Option<Arc<cel::Program>>,
    pub authz_source: Option<String>,
    pub authz_message: Option<String>,
    pub sensitive: bool,
    /// Values of this field may appear in logs and traces.
    pub log_value: bool,
}

#[derive(Debug, Clone)]
pub struct ToolRules {
    pub keys: Vec<String>,
    pub mode: Mode,
    /// Fields the model owns: asking a person for them is refused in favour of a precise tool error.
    pub model_owned: HashSet<String>,
    pub on_invalid: OnInvalid,
    pub max_reasks: u32,
    pub max_questions: usize,
    pub fields: HashMap<String, FieldRules>,
}

/// A loaded policy. Cheap to share; a reload swaps in a new one.
#[derive(Clone)]
pub struct Policy {
    pub defaults: Defaults,
    pub tools: HashMap<String, ToolRules>,
    env: Arc<cel::Env>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("defaults", &self.defaults)
            .field("tools", &self.tools.keys())
            .finish_non_exhaustive()
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            defaults: Defaults::default(),
            tools: HashMap::new(),
            env: Arc::new(cel::Env::stdlib()),
        }
    }
}

impl Policy {
    pub fn load(path: &Path) -> Result<Policy, ConfigErrors> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigErrors(vec![ConfigError::at(
                &file,
                "",
                None,
                &format!("cannot read: {e}"),
            )])
        })?;
        Policy::parse(&text, &file)
    }

    pub fn parse(text: &str, file: &str) -> Result<Policy, ConfigErrors> {
        file::parse(text, file)
    }

    pub fn tool(&self, name: &str) -> Option<&ToolRules> {
        self.tools.get(name)
    }

    /// The key names for a tool's questions, in order.
    pub fn keys(&self, tool: &str) -> Vec<String> {
        self.tool(tool).map(|t| t.keys.clone()).unwrap_or_default()
    }

    pub fn max_questions(&self, tool: &str) -> usize {
        self.tool(tool)
            .map_or(self.defaults.max_questions, |t| t.max_questions)
    }

    pub fn on_invalid(&self, tool: &str) -> (OnInvalid, u32) {
        self.tool(tool)
            .map_or((self.defaults.on_invalid, self.defaults.max_reasks), |t| {
                (t.on_invalid, t.max_reasks)
            })
    }

    pub(crate) fn cel_env(&self) -> &Arc<cel::Env> {
        &self.env
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
