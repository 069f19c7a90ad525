#!/usr/bin/env bash
# Soak: redmark (release) under a steady mixed load against the fast upstream
# (examples/bench_upstream.rs), then at rest, checked for errors and leaks
# (examples/soak/main.rs says exactly what). Exit status 1 on any unexpected error,
# on pending operations or leased sessions left, on live heap objects more than
# 10 % + 1 MiB over start, on RSS more than SOAK_RSS_SLACK_PERCENT (10) over
# start, or on more open descriptors or tokio tasks than at start.
#
#   scripts/soak.sh                          60 s: 1,000 echo/s + 10,000 questions, ttl 10 s
#   SOAK_SECONDS=10 SOAK_QUESTIONS=2000 scripts/soak.sh   the CI smoke run
# Environment (defaults in examples/soak/main.rs):
#   SOAK_SECONDS=60  SOAK_RATE=1000  SOAK_QUESTIONS=10000  SOAK_TTL_SECONDS=secs/6 (3..30)
#   SOAK_SEED=1  SOAK_WORKERS=32  SOAK_SETTLE_SECONDS=150  SOAK_RSS_SLACK_PERCENT=10  RUST_LOG=warn
# The report goes to stdout and target/soak/soak.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[soak] %s\n' "$*" >&2; }

# Thousands of questions waiting at once hold as many upstream sockets.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
log "building redmark, the fast upstream and the soak (release)"
cargo build --release --quiet --bin redmark --example bench_upstream --example soak

mkdir -p "$ROOT/target/soak"
log "running: SOAK_SECONDS=${SOAK_SECONDS:-60} SOAK_RATE=${SOAK_RATE:-1000} SOAK_QUESTIONS=${SOAK_QUESTIONS:-10000}"
set +e
"$TARGET/release/examples/soak" \
    --redmark "$TARGET/release/redmark" \
    --upstream "$TARGET/release/examples/bench_upstream" | tee "$ROOT/target/soak/soak.md"
status="${PIPESTATUS[0]}"
set -e
exit "$status"
