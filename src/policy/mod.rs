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
//! keys = ["room", "alternative"]   # or { elicitation = [...], sampling = [...], roots = [...] }
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
mod raw;
pub mod reload;
mod schema;
pub mod shape;

pub use raw::PolicyFile;
pub use schema::policy_schema;

use std::collections::HashSet;

use foldhash::{HashMap, HashMapExt};
use std::path::Path;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, ConfigErrors};

/// How an operation waits for its answers (`[tool.NAME] mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The upstream call stays open on this node between round trips.
    #[default]
    Hold,
    /// Nothing is held between round trips: each retry calls the tool again
    /// and answers its questions, in order, from the answers collected so
    /// far (sealed in `requestState`). Only for tools that do their
    /// irreversible work after their questions.
    Replay,
}

/// A route's mode for tools its policy does not name (`[defaults] mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DefaultMode {
    /// Every such tool's upstream call stays open between round trips.
    #[default]
    Hold,
    /// Every such tool is replayed (see [`Mode::Replay`]).
    Replay,
    /// Replay for tools the server annotates `readOnlyHint` or
    /// `idempotentHint` in `tools/list`; hold for every other.
    ReplayWhenAnnotated,
}

/// Whether a call becomes a task (`[tool.NAME] task`, `[defaults] task`):
/// only on a route with `[route.tasks]`, for a client that declared the
/// `io.modelcontextprotocol/tasks` extension on the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskMode {
    /// A task for a client that declared the extension (at once, or after
    /// `[route.tasks] after`); a plain call for any other.
    Optional,
    /// Always a task: a client without the extension is refused with -32021.
    Required,
}

/// What happens to an answer that breaks a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnInvalid {
    /// Ask the same question again, with a red mark naming the field and the rule.
    Reask,
    /// Fail the call with `policy_invalid_answer`.
    Error,
}

/// What the server hears when one of its questions is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnRefused {
    /// The server's request fails with a JSON-RPC error.
    Error,
    /// The server hears that the user declined.
    Decline,
}

/// String formats an answer can be held to (the formats of the 2026-07-28 elicitation schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// An email address.
    Email,
    /// An absolute URI.
    Uri,
    /// A full date, `2026-07-28` (RFC 3339).
    Date,
    /// A date and time, `2026-07-28T09:30:00Z` (RFC 3339).
    DateTime,
}

/// `[defaults] tools`: whether tools the policy does not name may be called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolsDefault {
    /// Every tool the server lists may be called.
    #[default]
    Allow,
    /// Only tools with a `[tool.NAME]` section are callable (and listed).
    Deny,
}

/// `[tool.NAME] allow`: a CEL rule over `principal` and `tool` deciding
/// whether a call is made at all.
#[derive(Debug, Clone)]
pub struct CallRule {
    pub program: Arc<cel::Program>,
    pub source: String,
    /// `file:line` of the rule, for the log of a rule that fails at run time.
    pub at: String,
    pub deny_message: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Defaults {
    pub tools: ToolsDefault,
    pub on_invalid: OnInvalid,
    pub max_reasks: u32,
    pub max_questions: usize,
    pub deny_secrets: bool,
    pub on_refused: OnRefused,
    pub url_hosts: Option<Vec<String>>,
    pub mode: DefaultMode,
    /// `None`: calls of tools without their own `task` never become tasks.
    pub task: Option<TaskMode>,
    /// Forms are narrowed by the field rules before a client sees them ([`shape`]).
    pub shape_questions: bool,
}

impl Default for Defaults {
    fn default() -> Self {
        Self {
            tools: ToolsDefault::Allow,
            on_invalid: OnInvalid::Reask,
            max_reasks: 2,
            max_questions: 10,
            deny_secrets: true,
            on_refused: OnRefused::Error,
            url_hosts: None,
            mode: DefaultMode::Hold,
            task: None,
            shape_questions: true,
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
    /// Where the rule is written (`file:line`), for the ERROR log of a rule
    /// that fails at run time.
    pub authz_at: Option<String>,
    pub authz_message: Option<String>,
    pub sensitive: bool,
    /// Values of this field may appear in logs and traces.
    pub log_value: bool,
    /// Keep each person's last accepted value this long and offer it as
    /// the question's default ([`crate::mrtr::remember`]).
    pub remember: Option<std::time::Duration>,
}

/// The longest a field rule may `remember` an answer.
pub const MAX_REMEMBER: std::time::Duration = std::time::Duration::from_secs(400 * 24 * 3600);

/// Names for a tool's input requests (`[tool.NAME] keys`). A legacy
/// server's pushes have no names of their own; clients and audit records
/// see these instead of `elicitation-1`, `sampling-1`, ...
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyNames {
    /// `keys = ["room", "alternative"]`: the n-th question, of any kind,
    /// takes the n-th name. Right for a server that asks one thing at a time.
    InOrder(Vec<String>),
    /// `keys = { elicitation = ["name"], sampling = ["greeting"] }`: the n-th
    /// question of each kind takes the n-th name of that kind. Questions of
    /// different kinds a server pushes together (`asyncio.gather`,
    /// `Promise.all`) arrive in any order; this names them the same every time.
    ByKind {
        elicitation: Vec<String>,
        sampling: Vec<String>,
        roots: Vec<String>,
    },
}

/// No names: every question is numbered per kind.
impl Default for KeyNames {
    fn default() -> Self {
        Self::InOrder(Vec::new())
    }
}

impl KeyNames {
    /// Every name, for checks that they are unique.
    pub fn all(&self) -> Vec<&String> {
        match self {
            Self::InOrder(names) => names.iter().collect(),
            Self::ByKind {
                elicitation,
                sampling,
                roots,
            } => elicitation.iter().chain(sampling).chain(roots).collect(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ToolRules {
    pub keys: KeyNames,
    /// `None`: the route's `[defaults] mode` decides.
    pub mode: Option<Mode>,
    /// The tool's `task`, else `[defaults] task`; `None`: never a task.
    pub task: Option<TaskMode>,
    /// Fields the model owns: asking a person for them is refused in favour of a precise tool error.
    pub model_owned: HashSet<String>,
    pub on_invalid: OnInvalid,
    pub max_reasks: u32,
    pub max_questions: usize,
    pub fields: HashMap<String, FieldRules>,
    /// The tool's `shape_questions`, else `[defaults] shape_questions`.
    pub shape_questions: bool,
    /// `rate`: calls of this tool per principal (retries with `requestState` not counted).
    pub rate: Option<crate::config::Rate>,
    /// `allow`: whether this principal may make this call (with these arguments).
    pub allow: Option<CallRule>,
    /// Scopes a caller's credential must grant to call this tool (403
    /// `insufficient_scope` otherwise), beside the route's own `[auth.oauth] scopes`.
    pub scopes: Vec<String>,
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

    /// The scopes `[tool.NAME] scopes` requires (none for a tool the policy does not name).
    pub fn tool_scopes(&self, name: &str) -> &[String] {
        self.tools.get(name).map_or(&[], |t| &t.scopes)
    }

    /// The names for a tool's questions.
    pub fn keys(&self, tool: &str) -> KeyNames {
        self.tool(tool).map(|t| t.keys.clone()).unwrap_or_default()
    }

    /// How an operation of `tool` waits: the tool's own `mode`, else the
    /// route's default. `definition` is the tool as the server lists it
    /// (`tools/list`), when known; only its annotations are read.
    pub fn mode(&self, tool: &str, definition: Option<&serde_json::Value>) -> Mode {
        if let Some(mode) = self.tool(tool).and_then(|t| t.mode) {
            return mode;
        }
        match self.defaults.mode {
            DefaultMode::Hold => Mode::Hold,
            DefaultMode::Replay => Mode::Replay,
            DefaultMode::ReplayWhenAnnotated => {
                let hint = |name: &str| {
                    definition
                        .and_then(|d| d.get("annotations"))
                        .and_then(|a| a.get(name))
                        .and_then(serde_json::Value::as_bool)
                        == Some(true)
                };
                if hint("readOnlyHint") || hint("idempotentHint") {
                    Mode::Replay
                } else {
                    Mode::Hold
                }
            }
        }
    }

    /// Whether calls of `tool` become tasks (on a route with `[route.tasks]`).
    pub fn task(&self, tool: &str) -> Option<TaskMode> {
        self.tool(tool).map_or(self.defaults.task, |t| t.task)
    }

    /// Whether any tool (or the defaults) asks for tasks.
    pub fn uses_tasks(&self) -> bool {
        self.defaults.task.is_some() || self.tools.values().any(|t| t.task.is_some())
    }

    /// The field rules that narrow the forms of `tool` ([`shape`]): none
    /// for a tool without rules or with `shape_questions = false`.
    pub fn shaping(&self, tool: &str) -> Option<&HashMap<String, FieldRules>> {
        self.tool(tool)
            .filter(|t| t.shape_questions && !t.fields.is_empty())
            .map(|t| &t.fields)
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
#[path = "tests/mod.rs"]
mod tests;
