//! Sets `REDMARK_COMMIT` (the commit `redmark --version` names) when the
//! build knows it; see build/commit.rs. `REDMARK_COMMIT` set in the
//! environment (a packager building from a tarball) wins.

#[path = "build/commit.rs"]
mod commit;

fn main() {
    println!("cargo::rerun-if-changed=build/commit.rs");
    println!("cargo::rerun-if-env-changed=REDMARK_COMMIT");
    if std::env::var("REDMARK_COMMIT").is_ok_and(|c| !c.trim().is_empty()) {
        return;
    }
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let (hash, watch) = commit::commit(&dir);
    for path in watch {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    if let Some(hash) = hash {
        println!("cargo::rustc-env=REDMARK_COMMIT={hash}");
    }
}
