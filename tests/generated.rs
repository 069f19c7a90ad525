//! The files generated from the code stay in step with it, and what they
//! promise holds: the committed JSON Schemas (`schemas/`), the configuration
//! reference pages and the man page are what the binary prints now; every
//! config and policy the repository ships validates against its schema; a
//! misspelt key fails validation with the key named, as `redmark check`
//! fails it; the shell completions complete.

// A test may panic (that is how it fails).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::repo;
use serde_json::Value;

fn redmark(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_redmark"))
        .args(args)
        .output()
        .expect("run redmark");
    assert!(
        out.status.success(),
        "redmark {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

#[test]
fn committed_generated_files_are_what_the_binary_prints() {
    let mut stale = Vec::new();
    for (args, file) in [
        (&["config-schema"][..], "schemas/redmark.schema.json"),
        (
            &["config-schema", "--policy"][..],
            "schemas/policy.schema.json",
        ),
        (
            &["config-schema", "--markdown"][..],
            "docs/src/reference/config.md",
        ),
        (
            &["config-schema", "--policy", "--markdown"][..],
            "docs/src/reference/policy.md",
        ),
        (&["man"][..], "docs/man/redmark.1"),
    ] {
        let committed = std::fs::read_to_string(repo().join(file)).unwrap_or_default();
        if committed != redmark(args) {
            stale.push(format!("{file} (redmark {})", args.join(" ")));
        }
    }
    assert!(
        stale.is_empty(),
        "out of date: {stale:?}\nregenerate them with: scripts/generate.sh"
    );
}

fn schema(file: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(repo().join("schemas").join(file)).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// A TOML document as the JSON instance a schema validates.
fn json_of(toml_text: &str) -> Value {
    toml::from_str::<Value>(toml_text).unwrap()
}

/// Every problem the schema finds, as text.
fn problems(validator: &jsonschema::Validator, toml_text: &str) -> Vec<String> {
    validator
        .iter_errors(&json_of(toml_text))
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(toml_files(&path));
        } else if path.extension().is_some_and(|e| e == "toml") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The ConfigMap's `redmark.toml: |` block, unindented (as
/// scripts/check-deploy.sh extracts it).
fn configmap_config() -> String {
    let text =
        std::fs::read_to_string(repo().join("examples/deploy/kubernetes/configmap.yaml")).unwrap();
    let (_, block) = text.split_once("  redmark.toml: |\n").unwrap();
    block
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_config_and_policy_in_the_repository_validates() {
    let config = schema("redmark.schema.json");
    let policy = schema("policy.schema.json");
    let mut configs: Vec<(PathBuf, String)> = toml_files(&repo().join("examples"))
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect();
    configs.push((
        repo().join("examples/deploy/kubernetes/redmark.toml"),
        configmap_config(),
    ));
    let mut policies = toml_files(&repo().join("policies"));
    policies.extend(toml_files(&repo().join("fuzz/policies")));
    assert!(
        configs.len() >= 4 && policies.len() >= 3,
        "{configs:?} {policies:?}"
    );
    for (path, text) in &configs {
        assert_eq!(
            problems(&config, text),
            Vec::<String>::new(),
            "{}",
            path.display()
        );
        // What the schema accepts, the loader accepts too.
        let base = path.parent().unwrap().to_path_buf();
        if let Err(e) = redmark::config::Config::parse(text, &path.display().to_string(), base) {
            panic!("{e}");
        }
    }
    for path in &policies {
        let text = std::fs::read_to_string(path).unwrap();
        assert_eq!(
            problems(&policy, &text),
            Vec::<String>::new(),
            "{}",
            path.display()
        );
        if let Err(e) = redmark::policy::Policy::load(path) {
            panic!("{e}");
        }
    }
}

const CONFIG: &str = r#"
[server]
listen = "127.0.0.1:8080"
shutdown_grace = "20s"

[[route]]
name = "rooms"
path = "/mcp/rooms"
[route.upstream]
url = "http://127.0.0.1:9000/mcp"
"#;

#[test]
fn a_misspelt_key_fails_validation_with_the_key_named() {
    let config = schema("redmark.schema.json");
    assert_eq!(problems(&config, CONFIG), Vec::<String>::new());
    for (typo, key) in [
        (
            CONFIG.replace("shutdown_grace", "shutdown_grce"),
            "shutdown_grce",
        ),
        (CONFIG.replace("url =", "ulr ="), "ulr"),
        (
            format!("{CONFIG}\n[mrtr]\nttl_seconds = 5\n"),
            "ttl_seconds",
        ),
        (format!("{CONFIG}\n[telemetri]\n"), "telemetri"),
    ] {
        let found = problems(&config, &typo);
        assert!(
            found.iter().any(|p| p.contains(&format!("'{key}'"))),
            "{key} not named: {found:?}"
        );
        // `redmark check` refuses the same file, naming the same key.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("redmark.toml");
        std::fs::write(&file, &typo).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_redmark"))
            .args(["check", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{key}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(key),
            "{key}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Values are checked too: a duration without a unit, an unknown enum value.
    let bad = CONFIG.replace("\"20s\"", "\"20\"");
    assert!(
        problems(&config, &bad)
            .iter()
            .any(|p| p.starts_with("/server/shutdown_grace")),
        "{:?}",
        problems(&config, &bad)
    );

    let policy = schema("policy.schema.json");
    let text = "[tool.book_room.fields.room]\nminimun = 1\n";
    let found = problems(&policy, text);
    assert!(
        found
            .iter()
            .any(|p| p.contains("'minimun'") && p.starts_with("/tool/book_room/fields/room")),
        "{found:?}"
    );
    let found = problems(&policy, "[defaults]\non_invalid = \"retry\"\n");
    assert!(
        found.iter().any(|p| p.starts_with("/defaults/on_invalid")),
        "{found:?}"
    );
}

/// bash's own completion machinery, driven as a shell does on TAB.
fn bash_complete(words: &str) -> Vec<String> {
    let script = redmark(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("redmark.bash");
    std::fs::write(&file, script).unwrap();
    let driver = format!(
        "source {}\nCOMP_WORDS=({words})\nCOMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\nCOMP_LINE=\"${{COMP_WORDS[*]}}\"\nCOMP_POINT=${{#COMP_LINE}}\n_redmark redmark \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        file.display()
    );
    let out = Command::new("bash")
        .args(["--norc", "-c", &driver])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_subcommands_options_and_values() {
    assert_eq!(bash_complete("redmark con"), ["config-schema"]);
    let serve = bash_complete("redmark serve --");
    assert!(serve.contains(&"--config".to_owned()), "{serve:?}");
    assert!(serve.contains(&"--listen".to_owned()), "{serve:?}");
    let shells = bash_complete("redmark completions ''");
    for shell in ["bash", "zsh", "fish"] {
        assert!(shells.contains(&shell.to_owned()), "{shells:?}");
    }
}

#[test]
fn zsh_and_fish_scripts_name_every_subcommand() {
    let zsh = redmark(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef redmark"), "{zsh}");
    let fish = redmark(&["completions", "fish"]);
    for sub in ["serve", "check", "config-schema", "completions", "man"] {
        assert!(zsh.contains(&format!("'{sub}:")), "zsh lacks {sub}");
        assert!(
            fish.contains(&format!("-a \"{sub}\"")),
            "fish lacks {sub}:\n{fish}"
        );
    }
    // Where the shells are installed, the scripts parse.
    for (shell, script) in [("zsh", &zsh), ("fish", &fish)] {
        if Command::new(shell).arg("--version").output().is_ok() {
            let status = Command::new(shell)
                .args(["-n", "-c", script])
                .status()
                .unwrap();
            assert!(status.success(), "{shell} -n rejects its script");
        }
    }
}

#[test]
fn the_man_page_documents_every_subcommand_and_option() {
    let page = redmark(&["man"]);
    assert!(page.starts_with(".ie"), "not roff");
    assert!(page.contains(".TH redmark 1"), "no title");
    for section in ["REDMARK SERVE", "REDMARK CHECK", "REDMARK CONFIG-SCHEMA"] {
        assert!(page.contains(section), "{section} missing");
    }
    // A subcommand's own options are on the page, not only its name.
    assert!(page.contains("\\-\\-probe"), "check --probe missing");
    assert!(
        page.contains("\\-\\-markdown"),
        "config-schema --markdown missing"
    );
    // `man` itself renders it, where man is installed.
    if Command::new("man").arg("--version").output().is_ok() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("redmark.1");
        std::fs::write(&file, &page).unwrap();
        let out = Command::new("man")
            .arg("-l")
            .arg(&file)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        // Without a terminal, man may still embolden by overstriking
        // (`R\bR`): keep what follows each backspace.
        let raw = String::from_utf8_lossy(&out.stdout);
        let mut text = String::new();
        for c in raw.chars() {
            if c == '\u{8}' {
                text.pop();
            } else {
                text.push(c);
            }
        }
        assert!(text.contains("REDMARK SERVE"), "{text}");
    }
}
