#!/usr/bin/env bash
# Installs a pinned Rust tool from crates.io into <repo>/.cache/tools
# (git-ignored) and prints its path. Idempotent: skipped when the binary there
# already reports the pinned version.
#
#   .cache/tools/bin/cargo-deny   cargo-deny $CARGO_DENY_VERSION (the lint phase: deny.toml)
#   .cache/tools/bin/cargo-fuzz   cargo-fuzz $CARGO_FUZZ_VERSION (scripts/fuzz.sh, on nightly)
#   .cache/tools/bin/mdbook       mdbook $MDBOOK_VERSION (scripts/docs.sh: the user's manual, docs/)
#
# Usage: scripts/install-tools.sh [TOOL] [--force]
#          TOOL: cargo-deny (default), cargo-fuzz or mdbook; --force reinstalls.
#        Only the path of TOOL is printed on stdout (callers capture it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.cache/tools"

# 0.20.2 needs rustc >= 1.88. `--locked` builds it with its own Cargo.lock.
CARGO_DENY_VERSION="0.20.2"
# cargo-fuzz itself builds on stable; the fuzz targets it builds need nightly.
CARGO_FUZZ_VERSION="0.13.2"
# 0.5.4 needs rustc >= 1.88. Built without `serve` and `watch` (an HTTP server
# and a file watcher CI never uses): about half the crates to compile.
MDBOOK_VERSION="0.5.4"
MDBOOK_FEATURES="search"

TOOL="cargo-deny"
FORCE=0
for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        cargo-deny | cargo-fuzz | mdbook) TOOL="$arg" ;;
        *) printf 'usage: %s [cargo-deny|cargo-fuzz|mdbook] [--force]\n' "$0" >&2; exit 2 ;;
    esac
done

log() { printf '[install-tools] %s\n' "$*" >&2; }

# install CRATE VERSION [CARGO-INSTALL-ARGS...]: `CRATE --version` must print
# "CRATE VERSION" (cargo-fuzz prints "cargo-fuzz VERSION", mdbook "mdbook vVERSION").
install() {
    local crate="$1" version="$2" bin="$TOOLS/bin/$1"
    shift 2
    if [[ $FORCE -eq 0 && -x "$bin" ]] \
        && [[ "$("$bin" --version 2>/dev/null)" =~ ^$crate\ v?$version$ ]]; then
        log "$crate $version up to date in $TOOLS"
    else
        log "installing $crate $version into $TOOLS (a few minutes, once)"
        mkdir -p "$TOOLS"
        cargo install "$crate" --version "=$version" --locked --force \
            --root "$TOOLS" --quiet "$@"
        local got
        got="$("$bin" --version)"
        [[ "$got" =~ ^$crate\ v?$version$ ]] || { log "expected $crate $version, got: $got"; exit 1; }
    fi
    echo "$bin"
}

case "$TOOL" in
    cargo-deny) install cargo-deny "$CARGO_DENY_VERSION" ;;
    cargo-fuzz) install cargo-fuzz "$CARGO_FUZZ_VERSION" ;;
    mdbook) install mdbook "$MDBOOK_VERSION" --no-default-features --features "$MDBOOK_FEATURES" ;;
esac
