//! `redmark --version` names the commit it was built from: from git in a
//! checkout, from `.cargo_vcs_info.json` in a crates.io tarball, and nothing
//! (but still the release) when neither is there.

// A test may panic (that is how it fails).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../build/commit.rs"]
mod commit;

mod common;

use std::process::Command;

fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn version_prints_the_release_and_the_commit_of_this_checkout() {
    let out = Command::new(env!("CARGO_BIN_EXE_redmark"))
        .arg("--version")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let release = env!("CARGO_PKG_VERSION");
    assert!(text.starts_with(&format!("redmark {release}")), "{text}");
    // A checkout names its HEAD; a copy without git history (an exported
    // tree) names none, and still its release.
    let head = Command::new("git")
        .arg("-C")
        .arg(common::repo())
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    match head {
        Some(head) => assert_eq!(text.trim(), format!("redmark {release} (commit {head})")),
        None => assert_eq!(text.trim(), format!("redmark {release}")),
    }
}

#[test]
fn a_tarball_names_the_commit_cargo_package_recorded() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".cargo_vcs_info.json"),
        "{\n  \"git\": {\n    \"sha1\": \"0123456789abcdef0123456789abcdef01234567\"\n  },\n  \"path_in_vcs\": \"\"\n}\n",
    )
    .unwrap();
    let (hash, watch) = commit::commit(dir.path());
    assert_eq!(hash.as_deref(), Some("0123456789ab"));
    assert_eq!(watch, [dir.path().join(".cargo_vcs_info.json")]);
}

#[test]
fn outside_git_and_without_vcs_info_there_is_no_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (hash, watch) = commit::commit(dir.path());
    assert_eq!(hash, None);
    assert!(watch.is_empty(), "{watch:?}");
}

#[test]
fn a_copy_inside_another_repository_does_not_take_its_commit() {
    let outer = tempfile::tempdir().unwrap();
    git(outer.path(), &["init", "-q"]);
    git(
        outer.path(),
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "outer",
        ],
    );
    // The repository's own root: its commit.
    let (hash, watch) = commit::commit(outer.path());
    assert_eq!(
        hash,
        Some(git(outer.path(), &["rev-parse", "--short=12", "HEAD"]))
    );
    assert!(watch.iter().any(|p| p.ends_with("HEAD")), "{watch:?}");
    // A vendored crate below it: not the outer repository's commit.
    let vendored = outer.path().join("vendor/redmark");
    std::fs::create_dir_all(&vendored).unwrap();
    assert_eq!(commit::commit(&vendored).0, None);
}
