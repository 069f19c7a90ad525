//! Reading a config file: TOML into [`Config`], then the checks serde
//! cannot express, each reported with the file, line and column it
//! concerns, all of them at once rather than the first only.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{Config, ConfigError, ConfigErrors, MAX_EVENT_LOOPS, compat};

impl Config {
    /// Reads and checks a config file; every problem found is reported.
    pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigErrors(vec![ConfigError {
                file: file.clone(),
                line: 0,
                column: 0,
                message: format!("cannot read: {e}"),
            }])
        })?;
        // Absolute, so a relative program path means the same thing in the
        // child's working directory as here.
        let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let base_dir = absolute
            .parent()
            .map(Path::to_path_buf)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        Config::parse(&text, &file, base_dir)
    }

    pub fn parse(text: &str, file: &str, base_dir: PathBuf) -> Result<Config, ConfigErrors> {
        Config::parse_with(text, file, base_dir, compat::CONFIG_RENAMES)
    }

    /// [`Config::parse`] with the given renamed keys (tests name their own).
    pub fn parse_with(
        text: &str,
        file: &str,
        base_dir: PathBuf,
        renames: &[compat::Renamed],
    ) -> Result<Config, ConfigErrors> {
        let locate = |span: Option<std::ops::Range<usize>>, message: String| {
            let (line, column) = span.map_or((0, 0), |s| line_col(text, s.start));
            ConfigError {
                file: file.to_owned(),
                line,
                column,
                message,
            }
        };
        let toml_error = |e: toml::de::Error| {
            ConfigErrors(vec![locate(e.span(), e.message().trim().to_owned())])
        };
        // Old names of renamed keys are moved before serde sees the file,
        // so every check below reads the new ones.
        let mut doc = toml::de::DeTable::parse(text).map_err(toml_error)?;
        let (moved, wrong) = compat::apply(doc.get_mut(), renames);
        if !wrong.is_empty() {
            return Err(ConfigErrors(
                wrong
                    .into_iter()
                    .map(|m| locate(Some(m.span), m.message))
                    .collect(),
            ));
        }
        let mut config =
            Config::deserialize(toml::de::Deserializer::from(doc)).map_err(toml_error)?;
        config.base_dir = base_dir;
        config.deprecations = moved
            .into_iter()
            .map(|m| locate(Some(m.span), m.message))
            .collect();
        let mut problems: Vec<ConfigError> = config
            .problems()
            .into_iter()
            .map(|(span, message)| locate(Some(span), message))
            .collect();
        for tls in [&config.server.tls, &config.server.admin_tls]
            .into_iter()
            .flatten()
        {
            for message in tls.get_ref().unreadable(&config.base_dir) {
                problems.push(locate(Some(tls.span()), message));
            }
        }
        // Policy files are read and compiled by the composition step (`app`),
        // once, with their own file and line; here only that each exists.
        for route in &config.routes {
            if let Some(policy) = &route.get_ref().policy {
                let path = config.base_dir.join(policy.get_ref());
                if let Err(e) = std::fs::metadata(&path) {
                    problems.push(locate(
                        Some(policy.span()),
                        format!("policy file {}: {e}", path.display()),
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigErrors(problems))
        }
    }

    /// Semantic checks serde cannot express, each with the span it concerns.
    fn problems(&self) -> Vec<(std::ops::Range<usize>, String)> {
        let mut out = Vec::new();
        for addr in std::iter::once(&self.server.listen).chain(self.server.admin.as_ref()) {
            if addr.get_ref().parse::<SocketAddr>().is_err() {
                out.push((
                    addr.span(),
                    format!("`{}` is not an address like 127.0.0.1:8080", addr.get_ref()),
                ));
            }
        }
        if self.server.max_body_bytes == 0 {
            out.push((
                self.server.listen.span(),
                "max_body_bytes must be positive".into(),
            ));
        }
        if self.server.max_connections == 0
            || self.server.header_read_timeout.is_zero()
            || self.server.body_read_timeout.is_zero()
            || self.server.send_timeout.is_zero()
        {
            out.push((
                self.server.listen.span(),
                "max_connections, header_read_timeout, body_read_timeout and send_timeout must be positive".into(),
            ));
        }
        if self.server.event_loops > MAX_EVENT_LOOPS {
            out.push((
                self.server.listen.span(),
                format!("event_loops must be at most {MAX_EVENT_LOOPS} (one thread each)"),
            ));
        }
        if let Some(tls) = &self.server.tls
            && tls.get_ref().client_principal.is_some()
            && tls.get_ref().client_ca.is_none()
        {
            out.push((
                tls.span(),
                "client_principal needs client_ca: without it no client presents a certificate"
                    .into(),
            ));
        }
        if let Some(tls) = &self.server.admin_tls
            && tls.get_ref().client_principal.is_some()
        {
            out.push((
                tls.span(),
                "client_principal is for [server.tls]: the admin listener has no principals".into(),
            ));
        }
        if let Some(auth) = &self.auth {
            for key in &auth.api_key {
                let k = key.get_ref();
                if k.sha256.len() != 64 || hex::decode(&k.sha256).is_err() {
                    out.push((
                        key.span(),
                        format!(
                            "api_key for `{}`: sha256 must be 64 hex digits",
                            k.principal
                        ),
                    ));
                }
                if k.principal.trim().is_empty() {
                    out.push((key.span(), "api_key: principal must not be empty".into()));
                }
            }
        }
        out.extend(self.oauth_problems());
        out.extend(self.state_problems());
        out.extend(self.cluster_problems());
        if let Some(audit) = &self.audit
            && let Err(why) = audit.get_ref().validate()
        {
            out.push((audit.span(), format!("[audit]: {why}")));
        }
        if self.mrtr.max_rounds == 0
            || self.mrtr.max_pending_per_principal == 0
            || self.mrtr.ttl.is_zero()
        {
            out.push((
                self.server.listen.span(),
                "[mrtr] ttl, max_rounds and max_pending_per_principal must be positive".into(),
            ));
        }
        if self.routes.is_empty() {
            out.push((self.server.listen.span(), "no [[route]] configured".into()));
        }
        out.extend(self.route_problems());
        out
    }

    /// Each route: unique path and name, exactly one upstream transport, positive limits.
    fn route_problems(&self) -> Vec<(std::ops::Range<usize>, String)> {
        let mut out = Vec::new();
        let mut seen_paths = std::collections::HashSet::new();
        let mut seen_names = std::collections::HashSet::new();
        for route in &self.routes {
            let r = route.get_ref();
            if !r.path.starts_with('/') {
                out.push((
                    route.span(),
                    format!("route `{}`: path must start with `/`", r.name),
                ));
            }
            if !seen_paths.insert(r.path.clone()) {
                out.push((
                    route.span(),
                    format!("route `{}`: path `{}` is used twice", r.name, r.path),
                ));
            }
            if r.name.is_empty() || !seen_names.insert(r.name.clone()) {
                out.push((
                    route.span(),
                    format!("route name `{}` is empty or used twice", r.name),
                ));
            }
            let up = r.upstream.get_ref();
            match (&up.command, &up.url) {
                (Some(_), Some(_)) => out.push((
                    r.upstream.span(),
                    format!(
                        "route `{}`: upstream has both `command` and `url`; choose one",
                        r.name
                    ),
                )),
                (None, None) => out.push((
                    r.upstream.span(),
                    format!(
                        "route `{}`: upstream needs `command` (stdio) or `url` (Streamable HTTP)",
                        r.name
                    ),
                )),
                (Some(cmd), None) if cmd.is_empty() => out.push((
                    r.upstream.span(),
                    format!("route `{}`: upstream `command` is empty", r.name),
                )),
                (None, Some(url))
                    if !(url.starts_with("http://") || url.starts_with("https://")) =>
                {
                    out.push((
                        r.upstream.span(),
                        format!(
                            "route `{}`: upstream url must be http:// or https://",
                            r.name
                        ),
                    ));
                }
                _ => {}
            }
            if r.pool.max_sessions == 0
                || r.pool.max_sessions_per_principal == 0
                || r.pool.max_operations_per_session == 0
            {
                out.push((
                    route.span(),
                    format!("route `{}`: pool limits must be positive", r.name),
                ));
            }
        }
        out
    }
}

/// 1-based line and column of a byte offset in `text`.
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |nl| before.len() - nl - 1)
        + 1;
    (line, column)
}
