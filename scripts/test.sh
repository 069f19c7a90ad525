#!/usr/bin/env bash
# Runs redmark's whole test suite, installing what the tests need first
# (scripts/setup-test-deps.sh): Python venvs, npm packages and Prometheus
# (a Debian package unpacked, not installed) under .cache/; redis-server and
# nginx with apt-get when missing, no service started or enabled.
#
#   scripts/test.sh            lint (scripts/lint.sh: format check, clippy,
#                              cargo-deny), the book (scripts/docs.sh: mdBook
#                              build, every link and anchor, alert runbooks),
#                              then unit + integration tests
#   scripts/test.sh --quick    tests only
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }

step "installing test peers"
bash scripts/setup-test-deps.sh

if [[ "${1:-}" != "--quick" ]]; then
    bash scripts/lint.sh
    step "the book: mdBook build, link check, alert rules and their runbooks (scripts/docs.sh)"
    bash scripts/docs.sh
fi

step "cargo build --bins --examples (the example configs run the built examples)"
# Not --quiet: with --quick this is the first build (minutes on a fresh clone).
cargo build --bins --examples

step "deployment examples (kubernetes-validate, systemd-analyze verify, redmark check)"
bash scripts/check-deploy.sh

step "cargo test (unit, integration, examples build)"
cargo test --all-targets
