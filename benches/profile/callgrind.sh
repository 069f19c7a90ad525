#!/usr/bin/env bash
# Instructions per request under callgrind: redmark in front of the fast upstream,
# counters zeroed after a 5 s warm-up, dumped after 15 s of wrk, divided by the
# requests wrk counted. Counts, not time: repeatable on a noisy machine.
#
#   benches/profile/callgrind.sh                 # passthrough (echo.lua), RUST_LOG=warn
#   SCRIPT=ask.lua benches/profile/callgrind.sh  # whole elicitation operations (2 requests each)
#   RUST_LOG=info benches/profile/callgrind.sh   # at the default log level
# Needs valgrind and wrk (Debian packages) and a release build
# (cargo build --release --bin redmark --example bench_upstream).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/benches/profile"
# shellcheck source=gateway.sh
source "$HERE/gateway.sh"
SCRIPT="${SCRIPT:-echo.lua}"
BIN="${BIN:-$ROOT/target/release/redmark}"
OUT="$(mktemp -d)"
UP_PORT="${UP_PORT:-18555}" PORT="${PORT:-18556}"
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
"$ROOT/target/release/examples/bench_upstream" --http "$UP_PORT" > "$OUT/upstream.log" 2>&1 &
bench_config "$OUT/redmark.toml" "$PORT" "$UP_PORT"
RUST_LOG="${RUST_LOG:-warn}" valgrind --tool=callgrind --callgrind-out-file="$OUT/cg" \
    "$BIN" serve --config "$OUT/redmark.toml" > "$OUT/redmark.log" 2>&1 &
VPID=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.5; done
# ask.lua keeps one operation per thread: as many threads as connections.
wrk -t4 -c4 -d5s -s "$HERE/$SCRIPT" "http://127.0.0.1:$PORT/mcp" > /dev/null
callgrind_control -z "$VPID" > /dev/null 2>&1
wrk -t4 -c4 -d15s -s "$HERE/$SCRIPT" "http://127.0.0.1:$PORT/mcp" > "$OUT/wrk.txt"
callgrind_control -d "$VPID" > /dev/null 2>&1
sleep 1
kill "$VPID"; wait "$VPID" 2>/dev/null || true
requests=$(awk '/requests in/ {print $1}' "$OUT/wrk.txt")
total=$(callgrind_annotate "$OUT/cg.1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
per=$((total / requests))
[[ "$SCRIPT" == ask.lua ]] && echo "operations=$((requests / 2)) instructions per operation=$((total * 2 / requests))"
echo "requests=$requests instructions=$total per request=$per  (profile: $OUT/cg.1)"
