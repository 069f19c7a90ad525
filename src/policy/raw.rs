//! The keys of a policy file as written: the serde types a policy file is
//! read into (strictly: unknown keys are errors). Their doc comments are the
//! descriptions in the policy schema (`redmark config-schema --policy`) and
//! in the policy reference page; `file.rs` compiles them into a [`Policy`].
//!
//! [`Policy`]: super::Policy

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::{
    DefaultMode, Defaults, Format, KeyNames, Mode, OnInvalid, OnRefused, TaskMode, ToolsDefault,
};

/// A redmark policy file: which questions a route's server may ask, what the
/// answers must satisfy before the server sees them, and which tools a
/// principal may call.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "redmark policy file")]
pub struct PolicyFile {
    /// `[defaults]`: settings for every tool of the route, unless its own
    /// `[tool.NAME]` section says otherwise.
    #[serde(default)]
    pub(super) defaults: RawDefaults,
    /// `[tool.NAME]`: one section per tool, keyed by the tool's name.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, RawTool>")]
    pub(super) tool: BTreeMap<String, Spanned<RawTool>>,
}

/// `[defaults]`: settings for every tool of the route.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDefaults {
    /// May tools without a `[tool.NAME]` section be called? `allow`, or
    /// `deny`: only the tools this file names are callable (and listed).
    #[schemars(extend("default" = Defaults::default().tools))]
    pub(super) tools: Option<ToolsDefault>,
    /// What happens to an answer that breaks a rule: `reask` (the same
    /// question again, with a red mark naming the field and the rule) or
    /// `error` (the call fails with `policy_invalid_answer`).
    #[schemars(extend("default" = Defaults::default().on_invalid))]
    pub(super) on_invalid: Option<OnInvalid>,
    /// Re-asks with a red mark before the call fails with `policy_invalid_answer`.
    #[schemars(extend("default" = Defaults::default().max_reasks))]
    pub(super) max_reasks: Option<u32>,
    /// Questions one operation may ask in all; one more fails the call with
    /// `policy_too_many_questions` (the server hears `cancel`).
    #[schemars(extend("default" = Defaults::default().max_questions))]
    pub(super) max_questions: Option<usize>,
    /// `deny`: a form asking for something secret-like (password, API key,
    /// token, card number, `format: password`) is refused with
    /// `policy_secret_request` (the spec says servers MUST NOT ask for
    /// secrets in forms: use URL mode). `allow` lets them through.
    #[schemars(extend("default" = "deny"))]
    pub(super) secret_fields: Option<SecretFields>,
    /// What the server hears when one of its questions is refused by policy:
    /// `error` (a JSON-RPC error) or `decline` (the user declined).
    #[schemars(extend("default" = Defaults::default().on_refused))]
    pub(super) on_refused: Option<OnRefused>,
    /// Hosts URL-mode elicitation may send people to (`https` only, or
    /// `http` to loopback); unset: any https host.
    pub(super) url_hosts: Option<Vec<String>>,
    /// How operations of tools without their own `mode` wait for answers:
    /// `hold`, `replay`, or `replay_when_annotated` (replay for tools the
    /// server annotates `readOnlyHint` or `idempotentHint`, hold for others).
    #[schemars(extend("default" = Defaults::default().mode))]
    pub(super) mode: Option<DefaultMode>,
    /// `optional` or `required`: whether calls of tools without their own
    /// `task` become tasks (the tasks extension; only on a route with
    /// `[route.tasks]`). Unset: no tool becomes a task.
    pub(super) task: Option<TaskMode>,
    /// Narrow each form a client receives by the field rules (numeric
    /// bounds, lengths, `enum` choices, `format`, `required`), so people see
    /// the rules before answering; `false` sends the server's form as it is.
    /// The red mark judges answers either way.
    #[schemars(extend("default" = true))]
    pub(super) shape_questions: Option<bool>,
}

/// `[defaults] secret_fields`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum SecretFields {
    /// Refuse forms that ask for secrets (`policy_secret_request`).
    Deny,
    /// Let them through to the client.
    Allow,
}

/// `keys`: a list (names in the order questions arrive) or a table of
/// lists by kind; anything else is refused with what was expected.
#[derive(Debug, Default)]
pub(super) struct RawKeys(pub(super) KeyNames);

/// `keys = { elicitation = [...], sampling = [...], roots = [...] }`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKeysByKind {
    /// Names of the tool's form and URL questions, in the order they arrive.
    #[serde(default)]
    elicitation: Vec<String>,
    /// Names of its sampling requests, in order.
    #[serde(default)]
    sampling: Vec<String>,
    /// Names of its roots requests, in order.
    #[serde(default)]
    roots: Vec<String>,
}

impl JsonSchema for RawKeys {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Keys".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let by_kind = generator.subschema_for::<RawKeysByKind>();
        schemars::json_schema!({
            "anyOf": [
                {
                    "type": "array",
                    "items": { "type": "string" },
                    "description": "The n-th question, of any kind, takes the n-th name: right for a server that asks one thing at a time."
                },
                by_kind,
            ]
        })
    }
}

impl<'de> Deserialize<'de> for RawKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of key names, or a table of lists by kind (elicitation, sampling, roots)")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<RawKeys, A::Error> {
                let names =
                    Vec::<String>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
                Ok(RawKeys(KeyNames::InOrder(names)))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawKeys, A::Error> {
                let by =
                    RawKeysByKind::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(RawKeys(KeyNames::ByKind {
                    elicitation: by.elicitation,
                    sampling: by.sampling,
                    roots: by.roots,
                }))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// `[tool.NAME]`: one tool's settings and rules.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTool {
    /// Names of this tool's input requests, which clients and audit records
    /// see instead of `elicitation-1`, `sampling-1`, ...: a list (the n-th
    /// question takes the n-th name) or a table of lists by kind, for a
    /// server that pushes questions of different kinds at once.
    #[serde(default)]
    pub(super) keys: RawKeys,
    /// How this tool's operations wait for answers: `hold` (the upstream
    /// call stays open on this replica) or `replay` (each retry calls the
    /// tool again and answers its questions from the answers so far: only
    /// for tools that do their irreversible work after their questions).
    /// Default: `[defaults] mode`.
    pub(super) mode: Option<Mode>,
    /// `optional` (a task when the client declared the tasks extension and
    /// the call asks or runs long, per `[route.tasks] after`) or `required`
    /// (always a task; a client without the extension gets -32021).
    /// Default: `[defaults] task`.
    pub(super) task: Option<TaskMode>,
    /// Fields the model already has a value for: a question asking for one
    /// becomes a tool error telling the model what to pass
    /// (`policy_model_owned`), not a dialog.
    #[serde(default)]
    pub(super) model_owned: Vec<String>,
    /// `reask` or `error`, for this tool (default: `[defaults] on_invalid`).
    pub(super) on_invalid: Option<OnInvalid>,
    /// Re-asks for this tool (default: `[defaults] max_reasks`).
    pub(super) max_reasks: Option<u32>,
    /// Questions per operation of this tool (default: `[defaults] max_questions`).
    pub(super) max_questions: Option<usize>,
    /// Calls of this tool per principal, e.g. `"1/s"` (the same form as
    /// `[route.rate_limit]`); beyond it, `rate_limited`.
    pub(super) rate: Option<crate::config::Rate>,
    /// A CEL rule over `principal` and `tool` (`name`, `arguments`), judged
    /// before the server sees the call: may this call be made?
    #[schemars(with = "Option<String>")]
    pub(super) allow: Option<Spanned<String>>,
    /// What a caller the `allow` rule refuses is told.
    pub(super) deny_message: Option<String>,
    /// `[tool.NAME.fields.FIELD]`: rules for one field of the tool's forms.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, RawField>")]
    pub(super) fields: BTreeMap<String, Spanned<RawField>>,
    /// OAuth scopes a token must carry to call this tool (with `[auth.oauth]`).
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub(super) scopes: Option<Spanned<Vec<String>>>,
    /// Narrow this tool's forms by its field rules before a client sees
    /// them (default: `[defaults] shape_questions`).
    pub(super) shape_questions: Option<bool>,
}

/// `[tool.NAME.fields.FIELD]`: rules an answer's field must satisfy before
/// the server sees it. They only tighten the server's own `requestedSchema`,
/// which is always enforced too.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawField {
    /// Smallest number accepted.
    pub(super) minimum: Option<f64>,
    /// Largest number accepted.
    pub(super) maximum: Option<f64>,
    /// Fewest characters in a text answer.
    pub(super) min_length: Option<u64>,
    /// Most characters in a text answer.
    pub(super) max_length: Option<u64>,
    /// A regular expression a text answer must match.
    pub(super) pattern: Option<String>,
    /// A format a text answer must have: `email`, `uri`, `date` or `date-time`.
    pub(super) format: Option<Format>,
    /// The only values accepted.
    #[serde(rename = "enum")]
    #[schemars(with = "Option<Vec<serde_json::Value>>")]
    pub(super) allowed: Option<Vec<toml::Value>>,
    /// The field must be answered (accepting the form without it is invalid).
    #[serde(default)]
    pub(super) required: bool,
    /// A CEL rule over `principal`, `tool`, `field`, `value` and `content`
    /// (all answered fields): an answer it refuses fails the call with
    /// `policy_denied`, never re-asked. At most 4 KiB and 24 levels deep.
    pub(super) authz: Option<String>,
    /// What a person whose answer `authz` refuses is told.
    pub(super) authz_message: Option<String>,
    /// Never echo this field's value (in red marks or anywhere else).
    #[serde(default)]
    pub(super) sensitive: bool,
    /// Record this field's accepted value in logs and traces (off: only its name).
    #[serde(default)]
    pub(super) log_value: bool,
    /// Keep each person's last accepted value this long (`"30d"`, from 1s to
    /// 400d) and offer it to them as the question's default the next time,
    /// so they confirm instead of typing. Per principal, encrypted with the
    /// state key; refused on secret or sensitive fields. Offered only where
    /// the policy in force and the question's schema would accept it as an
    /// answer; never kept nor offered where a question asks for the field as
    /// a secret (`format: password`, a secret-looking title or description).
    #[serde(default)]
    #[schemars(with = "Option<crate::config::schema::HumanDuration>")]
    pub(super) remember: Option<String>,
}
