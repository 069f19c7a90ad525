#!/usr/bin/env bash
# The lint phase of scripts/test.sh (and so of CI), and `make lint`:
#
#   1. cargo fmt --check
#   2. cargo clippy --all-targets -- -D warnings
#   3. cargo deny --locked check bans licenses sources   (deny.toml)
#
# cargo-deny 0.20.2 is installed once under .cache/tools by
# scripts/install-tools.sh. Advisories are not checked: the RustSec database is
# a git repository on GitHub, which CI cannot reach (see deny.toml).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --check

step "cargo clippy --all-targets -- -D warnings"
# Not --quiet: on a fresh clone this is the first build, minutes long, and
# cargo's progress tells it from a hang.
cargo clippy --all-targets -- -D warnings

step "cargo deny check bans licenses sources (advisories: not checked, see deny.toml)"
deny="$(bash scripts/install-tools.sh)"
"$deny" --locked check bans licenses sources
