//! scripts/image.sh builds the container image from scratch (the binary,
//! the libraries it links, CA roots, a non-root user) and redmark answers
//! `/healthz` from what it packed: from the root filesystem under chroot as
//! uid 65532, and from the image itself where this machine can run a
//! container (buildah run; with chroot isolation inside another container).
//! Needs root (chroot, and apt-get for buildah when it is missing); skipped
//! with a note otherwise.

// A test may panic (that is how it fails).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

#[test]
fn the_image_builds_from_scratch_and_answers_healthz() {
    if !is_root() {
        eprintln!("not root: scripts/image.sh --smoke needs chroot and buildah; skipped");
        return;
    }
    // buildah and crun (scripts/setup-test-deps.sh).
    common::ensure_deps();
    let tag = format!("redmark-test:{}", std::process::id());
    let out = Command::new("bash")
        .arg(common::repo().join("scripts/image.sh"))
        .args([
            "--binary",
            env!("CARGO_BIN_EXE_redmark"),
            "--tag",
            &tag,
            "--smoke",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The image is removed whatever happened (vfs storage keeps full copies).
    let _ = Command::new("buildah")
        .args(["rmi", "--force", &tag])
        .env("STORAGE_DRIVER", "vfs")
        .output();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // The packed root filesystem runs redmark with nothing from the host.
    assert!(stdout.contains("smoke: rootfs ok"), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("packed /lib64/ld-linux-x86-64.so.2") || !cfg!(target_arch = "x86_64"),
        "{stderr}"
    );
    assert!(
        stdout.contains(&format!("image: built {tag}")),
        "{stdout}\n{stderr}"
    );
    // Whether the image itself ran is said, not guessed: this machine runs
    // it (at least with chroot isolation) or says why not.
    assert!(
        stdout.contains("smoke: image ok") || stdout.contains("smoke: image skipped"),
        "{stdout}\n{stderr}"
    );
    eprintln!("{}", stdout.trim());
}
