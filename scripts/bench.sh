#!/usr/bin/env bash
# Runs the relay benchmark (benches/relay.rs): direct vs nginx vs redmark, side by side.
#
#   scripts/bench.sh                          # 16 workers, 2 s warm-up + 10 s per path
#   BENCH_SECONDS=5 BENCH_CONCURRENCY=8 scripts/bench.sh
#
# Installs what it needs: the npm/Python test peers (scripts/setup-test-deps.sh,
# under .cache/) and nginx (Debian package, with apt-get) if it is not on PATH.
# The table goes to stdout and target/bench/relay.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[bench] %s\n' "$*" >&2; }

"$ROOT/scripts/setup-test-deps.sh" >/dev/null

if ! command -v nginx >/dev/null 2>&1; then
    log "installing nginx with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y --no-install-recommends nginx >&2
fi

log "building redmark (release)"
cargo build --release --bin redmark

log "running: BENCH_SECONDS=${BENCH_SECONDS:-10} BENCH_CONCURRENCY=${BENCH_CONCURRENCY:-16}"
cargo bench --bench relay
