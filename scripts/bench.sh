#!/usr/bin/env bash
# The gateway's cost against a fast upstream (benches/relay.rs, examples/bench_upstream.rs):
# passthrough direct / nginx / a bare hyper relay / redmark, hold-mode elicitation operations per second, and
# gateway memory per waiting question, side by side in one run, each path repeated
# (BENCH_RUNS, default 3) with the median reported.
#
#   scripts/bench.sh                                   # 32 workers, 1 s warm-up + 5 s per path, 3 runs
#   BENCH_SECONDS=10 BENCH_CONCURRENCY=16 BENCH_WAITING=2000 scripts/bench.sh
#
# Installs what it needs: nginx (Debian package, with apt-get, its service neither
# started nor enabled: scripts/apt-without-services.sh) if it is not on PATH; the
# load generator is the bench itself (Rust, exact percentiles over every sample).
# The table goes to stdout and target/bench/relay.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[bench] %s\n' "$*" >&2; }

if ! command -v nginx >/dev/null 2>&1; then
    log "installing nginx with apt-get (service neither started nor enabled)"
    source "$ROOT/scripts/apt-without-services.sh"
    apt_install_without_services nginx
fi

# Ten thousand waiting questions hold about as many sockets in the gateway and the upstream.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

log "building redmark and the fast upstream (release)"
cargo build --release --bin redmark --example bench_upstream --example bench_floor

log "running: BENCH_SECONDS=${BENCH_SECONDS:-5} BENCH_CONCURRENCY=${BENCH_CONCURRENCY:-32} BENCH_RUNS=${BENCH_RUNS:-3} BENCH_WAITING=${BENCH_WAITING:-10000}"
cargo bench --bench relay
