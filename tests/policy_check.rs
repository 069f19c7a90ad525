//! `redmark check --config FILE` reports policy problems with the policy
//! file's own name and line, and exits non-zero (issue 4).

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use std::path::Path;
use std::process::Command;

/// Writes a config whose route uses `policy.toml` (next to it, with `policy`
/// as its text), runs `redmark check`, and returns (success, stdout + stderr).
fn check(dir: &Path, policy: &str) -> (bool, String) {
    let policy_path = dir.join("policy.toml");
    std::fs::write(&policy_path, policy).unwrap();
    let config = dir.join("redmark.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[route]]\nname = \"main\"\npath = \"/mcp\"\npolicy = \"policy.toml\"\n[route.upstream]\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_redmark"))
        .args(["check", "--config"])
        .arg(&config)
        .env("RUST_LOG", "off")
        .output()
        .expect("run redmark check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The `file:line:` prefix of a problem in the policy file.
fn at(dir: &Path, line: usize) -> String {
    format!("{}:{line}:", dir.join("policy.toml").display())
}

/// Asserts `check` failed with a problem at `line` of the policy file whose
/// text contains every word of `words`.
/// `policy` checks clean.
fn passes(policy: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (ok, text) = check(dir.path(), policy);
    assert!(ok, "{policy}\n{text}");
}

fn fails_at(policy: &str, line: usize, words: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (ok, text) = check(dir.path(), policy);
    assert!(!ok, "check passed:\n{policy}\n{text}");
    let problem = text
        .lines()
        .find(|l| l.starts_with(&at(dir.path(), line)))
        .unwrap_or_else(|| panic!("no problem at line {line}:\n{policy}\n---\n{text}"));
    for w in words {
        assert!(problem.contains(w), "{w:?} not in {problem:?}");
    }
    assert!(
        !text.contains("redmark.toml:"),
        "policy problems are the policy file's own: {text}"
    );
}

#[test]
fn a_good_policy_checks_clean() {
    let rooms =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/policies/rooms.toml"))
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ok, text) = check(dir.path(), &rooms);
    assert!(ok, "{text}");
    assert!(text.contains("ok (1 route(s))"), "{text}");
}

#[test]
fn unknown_keys_are_reported_where_they_are() {
    fails_at(
        "[defaults]\nmax_reasks = 2\n\n[tool.t.fields.amount]\nminimum = 0\nmaximun = 10\n",
        6,
        &["maximun"],
    );
    fails_at("[defaults]\nmax_reask = 2\n", 2, &["max_reask"]);
    fails_at(
        "[tool.t]\nkeys = [\"a\"]\nmodel_owns = [\"x\"]\n",
        3,
        &["model_owns"],
    );
    fails_at("[tools.t]\nkeys = [\"a\"]\n", 1, &["tools"]);
}

#[test]
fn a_bad_mode_is_reported_where_it_is() {
    fails_at(
        "[defaults]\nmax_reasks = 2\nmode = \"replay-ish\"\n",
        3,
        &["replay-ish", "replay_when_annotated"],
    );
    // `replay_when_annotated` is a route default, not a tool's mode.
    fails_at(
        "[tool.t]\nkeys = [\"a\"]\nmode = \"replay_when_annotated\"\n",
        3,
        &["replay_when_annotated"],
    );
}

#[test]
fn rules_of_the_wrong_type_are_reported() {
    fails_at(
        "[tool.t.fields.a]\nminimum = \"ten\"\n",
        2,
        &["invalid type", "\"ten\""],
    );
    fails_at(
        "[tool.t.fields.a]\nrequired = \"yes\"\n",
        2,
        &["invalid type"],
    );
    fails_at(
        "[tool.t.fields.a]\nmax_length = -1\n",
        2,
        &["invalid value"],
    );
    fails_at(
        "\n[defaults]\non_invalid = \"retry\"\n",
        3,
        &["retry", "reask"],
    );
    fails_at(
        "[defaults]\nurl_hosts = \"example.com\"\n",
        2,
        &["invalid type"],
    );
    fails_at(
        "[tool.t.fields.a]\nformat = \"phone\"\n",
        2,
        &["phone", "date-time"],
    );
    // Rules that cannot apply to one value.
    fails_at(
        "[tool.t.fields.a]\nminimum = 1\npattern = '^a$'\n",
        1,
        &["cannot apply to the same field"],
    );
    fails_at(
        "[tool.t.fields.a]\nmaximum = 3\nenum = [\"a\", \"b\"]\n",
        1,
        &["enum values"],
    );
    fails_at(
        "[tool.t.fields.a]\nenum = [\"a\", 1]\n",
        1,
        &["enum values must all be"],
    );
}

#[test]
fn semantic_problems_are_all_listed_with_their_lines() {
    let policy = "[defaults]\nmax_reasks = 1\n\n\
                  [tool.transfer.fields.amount]\nminimum = 100000\nmaximum = 0\n\n\
                  [tool.book_room.fields.room_id]\nauthz = 'value != \"atrium\" ||'\n\n\
                  [tool.t.fields.code]\npattern = '(['\n\n\
                  [tool.t.fields.note]\nmin_length = 5\nmax_length = 1\n\n\
                  [tool.t.fields.other]\nauthz_message = \"no\"\n";
    let dir = tempfile::tempdir().unwrap();
    let (ok, text) = check(dir.path(), policy);
    assert!(!ok, "{text}");
    for (line, words) in [
        (
            4,
            &["amount", "minimum 100000 is greater than maximum 0"][..],
        ),
        (8, &["room_id", "authz is not valid CEL"]),
        (11, &["code", "pattern does not compile"]),
        (14, &["note", "min_length 5 is greater than max_length 1"]),
        (18, &["other", "authz_message without authz"]),
    ] {
        let prefix = at(dir.path(), line);
        let problem = text
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("nothing at line {line}:\n{text}"));
        for w in words {
            assert!(problem.contains(w), "{w:?} not in {problem:?}");
        }
    }
}

#[test]
fn a_missing_policy_file_is_reported_at_the_route() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("redmark.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[route]]\nname = \"main\"\npath = \"/mcp\"\npolicy = \"nowhere.toml\"\n[route.upstream]\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_redmark"))
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .expect("run redmark check");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:7:", config.display())) && err.contains("nowhere.toml"),
        "{err}"
    );
}

/// A rule naming a field that does not exist compiles and then denies every
/// answer at run time: `check` names it, where it is, with the right name.
#[test]
fn an_authz_rule_naming_what_does_not_exist_is_an_error() {
    fails_at(
        "[tool.book_room.fields.room_id]\nenum = [\"atrium\", \"nook\"]\n\n[tool.book_room.fields.choice]\nauthz = 'value != \"atrium\" || \"facilities\" in principal.grups'\n",
        4,
        &[
            "principal.grups",
            "does not exist",
            "did you mean `principal.groups`",
        ],
    );
    fails_at(
        "[tool.t.fields.a]\nauthz = 'princpal.name == \"alice\"'\n",
        1,
        &["princpal", "did you mean `principal`"],
    );
    // Comprehension variables and the variables a rule is given are known.
    passes(
        "[tool.t.fields.a]\nauthz = 'principal.groups.exists(g, g == \"x\") || tool.arguments.room == value || content.b == field'\n",
    );
}

/// A call's `allow` rule is checked the same way, against what it is given
/// (`principal`, `tool`: no answer), and a correct rule on the token's
/// issuer, subject and scopes is not flagged.
#[test]
fn an_allow_rule_naming_what_does_not_exist_is_an_error() {
    fails_at(
        "[defaults]\ntools = \"deny\"\n\n[tool.transfer]\nallow = '\"payments\" in principal.grups'\n",
        5,
        &[
            "tool `transfer`: allow",
            "principal.grups",
            "did you mean `principal.groups`",
            "every call is refused",
        ],
    );
    fails_at(
        "[tool.transfer]\nallow = 'value == \"x\"'\n",
        2,
        &["tool `transfer`: allow reads `value`"],
    );
    passes(
        "[tool.t]\nallow = 'principal.issuer == \"https://idp\" && principal.subject == \"ann\" && \"x\" in principal.scopes && tool.arguments.size() >= 0'\n",
    );
}

/// A rule that fails on every sample answer (a string, a number, a boolean)
/// is a warning: exit code 2, and the file still checks.
#[test]
fn a_rule_that_fails_on_sample_answers_is_a_warning_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("policy.toml"),
        "[tool.t.fields.a]\nauthz = 'value.size() > principal.groups'\n",
    )
    .unwrap();
    let config = dir.path().join("redmark.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[route]]\nname = \"main\"\npath = \"/mcp\"\npolicy = \"policy.toml\"\n[route.upstream]\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_redmark"))
        .args(["check", "--config"])
        .arg(&config)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}warning:",
            at(dir.path(), 1).replace(":1:", ":1:1: ")
        )),
        "{err}"
    );
    assert!(err.contains("fails on a sample"), "{err}");
}
