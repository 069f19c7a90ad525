//! `[[state.keys]]`: the keys that seal `requestState`, read from the config
//! or the environment, and their checks.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::Config;

/// A fresh random secret, base64url: what `redmark keygen` prints.
pub fn generate_secret() -> String {
    B64.encode(rand::random::<[u8; 32]>())
}

/// Reads a secret as written in the config or its environment variable:
/// base64url of at least 16 bytes.
pub fn decode_secret(text: &str) -> Option<Vec<u8>> {
    let bytes = B64.decode(text.trim().trim_end_matches('=')).ok()?;
    (bytes.len() >= 16).then_some(bytes)
}

/// Keys that seal `requestState`, its size bound, and where round ids are marked used.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// `[[state.keys]]`: the sealing keys; unset: one random key per
    /// process (states die with it, and other replicas cannot open them).
    #[serde(default)]
    #[schemars(with = "Vec<StateKeyConfig>")]
    pub keys: Vec<Spanned<StateKeyConfig>>,
    /// Longest `requestState` sealed or accepted, in bytes. Replay mode's
    /// collected answers ride in the state: an operation whose state would
    /// grow past it ends with `state_too_large`.
    #[serde(default = "default_max_bytes")]
    #[schemars(with = "usize")]
    pub max_bytes: Spanned<usize>,
    /// `redis://host:port/db`: each round's state single-use across replicas.
    /// Unset: single-use holds per node.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub store: Option<Spanned<String>>,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            keys: Vec::new(),
            max_bytes: Spanned::new(0..0, default_max_bytes_value()),
            store: None,
        }
    }
}

/// Smallest `[state] max_bytes`: room for a hold-mode state with a trace context.
pub const MIN_STATE_BYTES: usize = 1024;
/// Largest `[state] max_bytes`: a state rides in every retry's body.
pub const MAX_STATE_BYTES: usize = 1024 * 1024;

fn default_max_bytes_value() -> usize {
    crate::config::defaults::max_state_bytes()
}

fn default_max_bytes() -> Spanned<usize> {
    Spanned::new(0..0, default_max_bytes_value())
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateKeyConfig {
    /// The key's name, sealed into every state it seals (so a state names
    /// the key that opens it); unique, no `.`.
    pub id: String,
    /// Environment variable holding the base64url secret (`redmark keygen` makes one).
    #[serde(default)]
    pub secret_env: Option<String>,
    /// The secret itself; prefer `secret_env` so it stays out of files.
    #[serde(default)]
    pub secret: Option<String>,
    /// The one key new states are sealed with; the others only verify (rotation).
    #[serde(default)]
    pub sign: bool,
}

impl Config {
    pub(super) fn state_problems(&self) -> Vec<(std::ops::Range<usize>, String)> {
        let mut out = Vec::new();
        let max = &self.state.max_bytes;
        if !(MIN_STATE_BYTES..=MAX_STATE_BYTES).contains(max.get_ref()) {
            out.push((
                max.span(),
                format!(
                    "[state] max_bytes must be between {MIN_STATE_BYTES} and {MAX_STATE_BYTES} (default {})",
                    default_max_bytes_value()
                ),
            ));
        }
        let keys = &self.state.keys;
        if !keys.is_empty() && keys.iter().filter(|k| k.get_ref().sign).count() != 1 {
            out.push((
                keys[0].span(),
                "[[state.keys]]: exactly one key must have `sign = true`".into(),
            ));
        }
        let mut ids = std::collections::HashSet::new();
        for key in keys {
            let k = key.get_ref();
            if k.id.is_empty() || k.id.contains('.') || !ids.insert(k.id.clone()) {
                out.push((
                    key.span(),
                    format!(
                        "state key id `{}` must be non-empty, unique and contain no `.`",
                        k.id
                    ),
                ));
            }
            match (&k.secret_env, &k.secret) {
                (Some(_), Some(_)) | (None, None) => out.push((
                    key.span(),
                    format!(
                        "state key `{}`: set exactly one of `secret_env` and `secret`",
                        k.id
                    ),
                )),
                (None, Some(secret)) if decode_secret(secret).is_none() => {
                    out.push((key.span(), format!("state key `{}`: secret must be base64url of at least 16 bytes (see `redmark keygen`)", k.id)));
                }
                _ => {}
            }
        }
        out
    }
}
