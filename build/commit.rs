//! Which commit a build is made from, for `redmark --version`: git when the
//! crate is its own checkout, else the `.cargo_vcs_info.json` that `cargo
//! package` writes into a crates.io tarball, else none. Used by build.rs and
//! tested by tests/version.rs.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Digits of the commit hash printed.
pub const SHORT: usize = 12;

/// The commit of the crate at `dir`, and the files whose change means it
/// may have moved (for `cargo::rerun-if-changed`).
pub fn commit(dir: &Path) -> (Option<String>, Vec<PathBuf>) {
    match from_git(dir) {
        Some(found) => found,
        None => {
            let info = dir.join(".cargo_vcs_info.json");
            // A path that does not exist would rerun the build script every time.
            let watch = if info.exists() {
                vec![info]
            } else {
                Vec::new()
            };
            (from_vcs_info(dir), watch)
        }
    }
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

/// Only when `dir` is the top of its own work tree: a tarball unpacked
/// inside some other repository (a vendored copy) must not take that
/// repository's commit.
fn from_git(dir: &Path) -> Option<(Option<String>, Vec<PathBuf>)> {
    let top = PathBuf::from(git(dir, &["rev-parse", "--show-toplevel"])?);
    if top.canonicalize().ok()? != dir.canonicalize().ok()? {
        return None;
    }
    let hash = git(dir, &["rev-parse", &format!("--short={SHORT}"), "HEAD"])?;
    let absolute = |p: String| {
        let p = PathBuf::from(p);
        if p.is_absolute() { p } else { dir.join(p) }
    };
    let git_dir = absolute(git(dir, &["rev-parse", "--git-dir"])?);
    let common = absolute(git(dir, &["rev-parse", "--git-common-dir"])?);
    let mut watch = vec![git_dir.join("HEAD"), common.join("packed-refs")];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watch.push(common.join(branch));
    }
    watch.retain(|p| p.exists());
    Some((Some(hash), watch))
}

/// `{"git": {"sha1": "<40 hex>", ...}, ...}`: read without a JSON parser
/// (a build script's dependencies are built before anything else).
fn from_vcs_info(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(".cargo_vcs_info.json")).ok()?;
    let after = &text[text.find("\"sha1\"")? + "\"sha1\"".len()..];
    let hash = after
        .trim_start()
        .strip_prefix(':')?
        .trim_start()
        .strip_prefix('"')?;
    let hash: String = hash.chars().take_while(char::is_ascii_hexdigit).collect();
    (hash.len() >= SHORT).then(|| hash[..SHORT].to_owned())
}
