#!/usr/bin/env bash
# Installs the pinned Rust tools the lint phase needs, from crates.io, into
# <repo>/.cache/tools (git-ignored). Idempotent: skipped when the binary there
# already reports the pinned version.
#
#   .cache/tools/bin/cargo-deny   cargo-deny $CARGO_DENY_VERSION (checks deny.toml)
#
# Usage: scripts/install-tools.sh          install what is missing, print the path
#        scripts/install-tools.sh --force  reinstall
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.cache/tools"

# 0.20.2 needs rustc >= 1.88. `--locked` builds it with its own Cargo.lock.
CARGO_DENY_VERSION="0.20.2"

FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

log() { printf '[install-tools] %s\n' "$*" >&2; }

DENY="$TOOLS/bin/cargo-deny"
if [[ $FORCE -eq 0 && -x "$DENY" ]] \
    && [[ "$("$DENY" --version 2>/dev/null)" == "cargo-deny $CARGO_DENY_VERSION" ]]; then
    log "cargo-deny $CARGO_DENY_VERSION up to date in $TOOLS"
else
    log "installing cargo-deny $CARGO_DENY_VERSION into $TOOLS (a few minutes, once)"
    mkdir -p "$TOOLS"
    cargo install cargo-deny --version "=$CARGO_DENY_VERSION" --locked --force \
        --root "$TOOLS" --quiet
    got="$("$DENY" --version)"
    [[ "$got" == "cargo-deny $CARGO_DENY_VERSION" ]] || { log "expected cargo-deny $CARGO_DENY_VERSION, got: $got"; exit 1; }
fi
echo "$DENY"
