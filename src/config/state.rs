//! `[[state.keys]]`: the keys that seal `requestState`, read from the config
//! or the environment, and their checks.

use serde::Deserialize;
use toml::Spanned;

use super::Config;

/// Keys that seal `requestState`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    #[serde(default)]
    pub keys: Vec<Spanned<StateKeyConfig>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateKeyConfig {
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
                (None, Some(secret)) if crate::mrtr::state::decode_secret(secret).is_none() => {
                    out.push((key.span(), format!("state key `{}`: secret must be base64url of at least 16 bytes (see `redmark keygen`)", k.id)));
                }
                _ => {}
            }
        }
        out
    }

    /// The keyring for `requestState`, reading secrets from the environment.
    pub fn keyring(&self) -> Result<Option<crate::mrtr::state::Keyring>, String> {
        use crate::mrtr::state::{Key, Keyring, decode_secret};
        if self.state.keys.is_empty() {
            return Ok(None);
        }
        let mut signing = None;
        let mut others = Vec::new();
        for key in &self.state.keys {
            let k = key.get_ref();
            let text = match (&k.secret, &k.secret_env) {
                (Some(s), _) => s.clone(),
                (None, Some(var)) => std::env::var(var).map_err(|_| {
                    format!(
                        "state key `{}`: environment variable {var} is not set",
                        k.id
                    )
                })?,
                (None, None) => return Err(format!("state key `{}` has no secret", k.id)),
            };
            let secret = decode_secret(&text).ok_or_else(|| {
                format!(
                    "state key `{}`: the secret is not base64url of at least 16 bytes",
                    k.id
                )
            })?;
            let key = Key::new(k.id.clone(), secret);
            if k.sign {
                signing = Some(key)
            } else {
                others.push(key)
            }
        }
        let signing = signing.ok_or("no state key has `sign = true`")?;
        Ok(Some(Keyring::new(signing, others)))
    }
}
