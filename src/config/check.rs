//! What `redmark check` adds to the config file's own checks, about the
//! upstreams: a stdio command that is not found or not executable, an HTTP
//! URL that does not parse. Only `check` runs these: `serve` starts with such
//! a route and reports it unready (`/readyz`), so a server installed later
//! is picked up without a restart.

use std::path::{Path, PathBuf};

use super::{Config, ConfigError, UpstreamTarget};

/// Every upstream problem of `config`, located in `text` (the file `file`).
pub fn upstreams(config: &Config, text: &str, file: &str) -> Vec<ConfigError> {
    let mut out = Vec::new();
    for route in &config.routes {
        let r = route.get_ref();
        let span = Some(r.upstream.span());
        let problem = match r.target(&config.base_dir) {
            UpstreamTarget::Stdio { program, env, .. } => {
                let path = env
                    .get("PATH")
                    .cloned()
                    .or_else(|| std::env::var("PATH").ok())
                    .unwrap_or_default();
                command_problem(&program, &path)
            }
            UpstreamTarget::Http { url, .. } => url_problem(&url),
        };
        if let Some(why) = problem {
            out.push(ConfigError::at(
                file,
                text,
                span,
                &format!("route `{}`: {why}", r.name),
            ));
        }
    }
    out
}

/// Why `program` cannot be started, searching `path` (`$PATH`) for a bare name.
pub fn command_problem(program: &Path, path: &str) -> Option<String> {
    let shown = program.display();
    if program.components().count() > 1 || program.is_absolute() {
        return match std::fs::metadata(program) {
            Err(_) => Some(format!("upstream command `{shown}` not found")),
            Ok(m) if !m.is_file() => Some(format!("upstream command `{shown}` is not a file")),
            Ok(m) if !executable(&m) => Some(format!(
                "upstream command `{shown}` is not executable (chmod +x)"
            )),
            Ok(_) => None,
        };
    }
    let candidates: Vec<PathBuf> = std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .filter(|p| p.is_file())
        .collect();
    if candidates.is_empty() {
        return Some(format!("upstream command `{shown}` not found on PATH"));
    }
    let runnable = candidates
        .iter()
        .any(|p| std::fs::metadata(p).is_ok_and(|m| executable(&m)));
    (!runnable).then(|| {
        format!(
            "upstream command `{shown}` ({}) is not executable",
            candidates[0].display()
        )
    })
}

#[cfg(unix)]
fn executable(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    m.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn executable(_: &std::fs::Metadata) -> bool {
    true
}

/// Why `url` cannot be an upstream's URL.
pub fn url_problem(url: &str) -> Option<String> {
    match url::Url::parse(url) {
        Err(e) => Some(format!("upstream url `{url}` does not parse: {e}")),
        Ok(u) if u.host_str().is_none_or(str::is_empty) => {
            Some(format!("upstream url `{url}` has no host"))
        }
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_found_on_the_path_or_by_their_path() {
        assert_eq!(command_problem(Path::new("sh"), "/usr/bin:/bin"), None);
        let missing = command_problem(Path::new("no-such-server-xyz"), "/usr/bin:/bin").unwrap();
        assert!(missing.contains("not found on PATH"), "{missing}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("server.py");
        std::fs::write(&file, "print()").unwrap();
        let not_exec = command_problem(&file, "").unwrap();
        assert!(not_exec.contains("not executable"), "{not_exec}");
        let gone = command_problem(&dir.path().join("gone"), "").unwrap();
        assert!(gone.contains("not found"), "{gone}");
        assert!(
            command_problem(dir.path(), "")
                .unwrap()
                .contains("not a file")
        );
    }

    #[test]
    fn urls_must_parse_and_name_a_host() {
        assert_eq!(url_problem("http://127.0.0.1:9000/mcp"), None);
        assert!(
            url_problem("http://exa mple.com/mcp")
                .unwrap()
                .contains("does not parse")
        );
        assert!(
            url_problem("http://[::1/mcp")
                .unwrap()
                .contains("does not parse")
        );
        assert!(url_problem("file:///mcp").unwrap().contains("no host"));
    }
}
