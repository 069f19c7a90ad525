//! `redmark check`: everything that can be known before serving, as errors
//! (exit 1) and warnings (exit 2, when there is no error):
//!
//! - the config file's own checks and every policy file compiled (`check`);
//! - what `serve` refuses before it binds, with the same message: the
//!   requestState keys and the cluster secret (their environment and form),
//!   the state store's URL, upstream tokens' environment, OAuth origins
//!   (`build::refusals`);
//! - upstreams that cannot start: a stdio command not found or not
//!   executable, an HTTP URL that does not parse (`config::check`);
//! - `authz` rules that read names that do not exist, and `remember` rules a
//!   secret form could meet (`policy::lint`);
//! - `[sessions] max_per_principal` set where it cannot apply (no `[auth]`);
//! - with `--probe`, each upstream started once: its tools and prompts listed,
//!   and every policy `[tool.NAME]` section for a name the server does not
//!   have is an error, with the closest name it does have.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::config::{Config, ConfigError};
use crate::policy::lint::{self, Lint, closest};
use crate::protocol::profile::Profile;
use crate::telemetry::metrics::Metrics;
use crate::telemetry::visible::visible;
use crate::upstream::pool::{Connect, RoutePool};

/// What `check` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    pub errors: Vec<ConfigError>,
    pub warnings: Vec<ConfigError>,
}

impl Findings {
    /// 0: nothing found; 1: errors; 2: warnings only.
    pub fn exit_code(&self) -> u8 {
        if !self.errors.is_empty() {
            1
        } else if !self.warnings.is_empty() {
            2
        } else {
            0
        }
    }
}

/// Every check that needs no server: `text` is the config file `file` as read.
pub fn offline(config: &Config, text: &str, file: &str) -> (Findings, Vec<(String, Lint)>) {
    let mut out = Findings::default();
    // Keys under a deprecated name work, and say so (config::compat).
    out.warnings.extend(config.deprecations.iter().cloned());
    if let Err(errors) = super::check(config) {
        out.errors.extend(errors.0);
    }
    // What `serve` refuses before it binds, in the words it refuses it with.
    out.errors
        .extend(super::build::refusals(config).iter().map(|e| ConfigError {
            file: file.to_owned(),
            line: 0,
            column: 0,
            message: e.to_string(),
        }));
    out.errors
        .extend(crate::config::check::upstreams(config, text, file));
    if config.auth.is_none()
        && config.sessions.max_per_principal
            != crate::config::SessionsConfig::default().max_per_principal
    {
        // Every caller is the one anonymous principal: a per-principal bound
        // would let one client lock every other out (front::era2025::session).
        out.warnings.push(ConfigError {
            file: file.to_owned(),
            line: 0,
            column: 0,
            message: "[sessions] max_per_principal does not apply without [auth]: every caller is \
                      the one anonymous principal, so only max_total bounds 2025-era sessions"
                .to_owned(),
        });
    }
    let mut lints = Vec::new();
    for route in &config.routes {
        let r = route.get_ref();
        if let Some(path) = &r.policy {
            let l = lint::lint(&config.base_dir.join(path.get_ref()));
            for f in &l.findings {
                if f.warning {
                    out.warnings.push(f.error.clone());
                } else {
                    out.errors.push(f.error.clone());
                }
            }
            lints.push((r.name.clone(), l));
        }
    }
    (out, lints)
}

/// `--probe`: starts each route's upstream and compares the policy's tool
/// sections with what the server lists.
pub async fn probe(config: &Config, file: &str, lints: &[(String, Lint)], out: &mut Findings) {
    let metrics = Arc::new(Metrics::new());
    for route in &config.routes {
        let r = route.get_ref();
        // A route that cannot be probed is an error of the file, at no line.
        let probe_failed = |out: &mut Findings, why: String| {
            out.errors.push(ConfigError {
                file: file.to_owned(),
                line: 0,
                column: 0,
                message: format!("route `{}`: --probe: {why}", r.name),
            });
        };
        let http = match crate::upstream::client::shared(r.upstream.get_ref().http2, 0) {
            Ok(http) => http,
            Err(why) => {
                probe_failed(out, why);
                continue;
            }
        };
        let pool = RoutePool::new(
            Arc::from(r.name.as_str()),
            Connect::Target(r.target(&config.base_dir)),
            r.upstream.get_ref().clone(),
            r.pool.clone(),
            http,
            metrics.clone(),
        );
        let listed = names(&pool).await;
        pool.shutdown();
        pool.wait_ended(Duration::from_secs(5)).await;
        let names = match listed {
            Ok(n) => n,
            Err(why) => {
                probe_failed(out, why);
                continue;
            }
        };
        println!(
            "route `{}`: {} tool(s) and prompt(s): {}",
            r.name,
            names.len(),
            // Names the server chose: escaped, so none writes to the terminal.
            names
                .iter()
                .map(|n| visible(n).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let Some((_, lint)) = lints.iter().find(|(name, _)| *name == r.name) else {
            continue;
        };
        for (section, at) in &lint.tools {
            if names.contains(section) {
                continue;
            }
            let hint = closest(section, names.iter().map(String::as_str))
                .map(|k| format!(" (did you mean {}?)", visible(k)))
                .unwrap_or_default();
            let mut e = at.clone();
            e.message = format!(
                "[tool.{0}]: the server of route `{1}` has no tool or prompt `{0}`{hint}: this section guards nothing",
                visible(section),
                r.name
            );
            out.errors.push(e);
        }
    }
}

/// The names of the tools and prompts the server lists (every page, bounded).
async fn names(pool: &Arc<RoutePool>) -> Result<BTreeSet<String>, String> {
    let lease = pool
        .acquire(&Arc::from("redmark-check"), Profile::default())
        .await
        .map_err(|e| e.to_string())?;
    let session = lease.session();
    let mut out = BTreeSet::new();
    for (method, key, capability) in [
        ("tools/list", "tools", "tools"),
        ("prompts/list", "prompts", "prompts"),
    ] {
        if session.init.capabilities.get(capability).is_none() {
            continue;
        }
        let mut cursor: Option<String> = None;
        for _ in 0..100 {
            let params = cursor.as_ref().map(|c| serde_json::json!({ "cursor": c }));
            let page = session
                .request(method, params, pool.request_timeout())
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("{method}: {}", e.message))?;
            out.extend(
                page.get(key)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t.get("name").and_then(Value::as_str))
                    .map(str::to_owned),
            );
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
    }
    Ok(out)
}
