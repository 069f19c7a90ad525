//! `[cluster]`: how replicas reach each other. A hold-mode retry that lands
//! on another replica is forwarded to its owner's internal endpoint
//! (`listen`), at the address the owner sealed into the state (`advertise`),
//! signed with the secret every replica shares (`secret_env`). `drain` bounds
//! how long a stopping replica keeps serving its waiting operations.

use std::net::SocketAddr;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::Config;

/// Ten minutes: long enough for a person to answer a question that was on
/// screen when the rolling restart began.
pub fn drain() -> Duration {
    Duration::from_secs(600)
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The internal endpoint: retries forwarded from other replicas.
    #[schemars(with = "String")]
    pub listen: Spanned<String>,
    /// How the other replicas reach this one (default `http://<listen>`,
    /// with the bound port when `listen` asks for port 0).
    #[serde(default)]
    pub advertise: Option<String>,
    /// Environment variable holding the base64url secret shared by all replicas.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// The secret itself; prefer `secret_env` so it stays out of files.
    #[serde(default)]
    pub secret: Option<String>,
    /// After SIGTERM, how long waiting hold-mode operations are still served.
    #[serde(default = "drain", with = "humantime_serde")]
    #[schemars(with = "super::schema::HumanDuration")]
    pub drain: Duration,
}

impl ClusterConfig {
    pub fn listen_addr(&self) -> Option<SocketAddr> {
        self.listen.get_ref().parse().ok()
    }
}

impl Config {
    pub(super) fn cluster_problems(&self) -> Vec<(std::ops::Range<usize>, String)> {
        let mut out = Vec::new();
        if let Some(c) = &self.cluster {
            if c.listen_addr().is_none() {
                out.push((
                    c.listen.span(),
                    format!(
                        "[cluster] listen `{}` is not an address (host:port)",
                        c.listen.get_ref()
                    ),
                ));
            }
            if let Some(a) = &c.advertise
                && !(a.starts_with("http://") && url::Url::parse(a).is_ok())
            {
                out.push((
                    c.listen.span(),
                    format!("[cluster] advertise `{a}` must be an http:// URL"),
                ));
            }
            match (&c.secret_env, &c.secret) {
                (Some(_), Some(_)) | (None, None) => out.push((
                    c.listen.span(),
                    "[cluster]: set exactly one of `secret_env` and `secret`".into(),
                )),
                (None, Some(secret)) if super::decode_secret(secret).is_none() => out.push((
                    c.listen.span(),
                    "[cluster] secret must be base64url of at least 16 bytes (see `redmark keygen`)"
                        .into(),
                )),
                (Some(var), None) if var.trim().is_empty() => out.push((
                    c.listen.span(),
                    "[cluster] secret_env must name an environment variable".into(),
                )),
                _ => {}
            }
            if self.state.keys.is_empty() {
                out.push((
                    c.listen.span(),
                    "[cluster] needs [[state.keys]] shared by all replicas: a random key cannot be verified by the others".into(),
                ));
            }
        }
        if let Some(store) = &self.state.store
            && !(store.get_ref().starts_with("redis://")
                || store.get_ref().starts_with("rediss://"))
        {
            out.push((
                store.span(),
                format!(
                    "[state] store `{}` must be a redis:// or rediss:// URL",
                    store.get_ref()
                ),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::config::{Config, ConfigErrors};

    const ROUTE: &str =
        "[[route]]\nname = \"r\"\npath = \"/mcp\"\n[route.upstream]\ncommand = [\"true\"]\n";
    const KEY: &str =
        "[[state.keys]]\nid = \"k1\"\nsecret = \"AAAAAAAAAAAAAAAAAAAAAA\"\nsign = true\n";

    fn parse(tables: &str) -> Result<Config, ConfigErrors> {
        let text = format!("[server]\nlisten = \"127.0.0.1:8080\"\n{tables}\n{ROUTE}");
        Config::parse(&text, "redmark.toml", PathBuf::from("/etc/redmark"))
    }

    #[test]
    fn the_issue_shape_parses_with_a_ten_minute_drain() {
        let c = parse(&format!(
            "[cluster]\nlisten = \"0.0.0.0:9465\"\nadvertise = \"http://10.0.0.5:9465\"\nsecret_env = \"REDMARK_CLUSTER_KEY\"\n\n[state]\nstore = \"redis://127.0.0.1:6379/0\"\n{KEY}"
        ))
        .unwrap();
        let cluster = c.cluster.unwrap();
        assert_eq!(cluster.drain, std::time::Duration::from_secs(600));
        assert_eq!(cluster.advertise.as_deref(), Some("http://10.0.0.5:9465"));
        assert_eq!(c.state.store.unwrap().get_ref(), "redis://127.0.0.1:6379/0");
    }

    #[test]
    fn each_mistake_is_named() {
        for (tables, says) in [
            (
                format!("[cluster]\nlisten = \"nowhere\"\nsecret_env = \"K\"\n{KEY}"),
                "is not an address",
            ),
            (
                format!("[cluster]\nlisten = \"127.0.0.1:0\"\n{KEY}"),
                "exactly one of `secret_env` and `secret`",
            ),
            (
                format!("[cluster]\nlisten = \"127.0.0.1:0\"\nsecret = \"short\"\n{KEY}"),
                "base64url of at least 16 bytes",
            ),
            (
                format!(
                    "[cluster]\nlisten = \"127.0.0.1:0\"\nsecret_env = \"K\"\nadvertise = \"10.0.0.5:9465\"\n{KEY}"
                ),
                "must be an http:// URL",
            ),
            (
                "[cluster]\nlisten = \"127.0.0.1:0\"\nsecret_env = \"K\"\n".to_owned(),
                "needs [[state.keys]]",
            ),
            (
                "[state]\nstore = \"memcached://x\"\n".to_owned(),
                "must be a redis://",
            ),
        ] {
            let err = parse(&tables).unwrap_err().to_string();
            assert!(err.contains(says), "{says:?} not in {err}");
            assert!(err.starts_with("redmark.toml:"), "{err}");
        }
    }
}
