#!/usr/bin/env bash
# Two redmark builds side by side under wrk, in one run: the same fast upstream,
# the same load, the two gateways' turns interleaved, medians reported. For a
# before/after on a shared machine whose speed drifts within the hour (compare
# the ratio B/A, never rates across runs). Each turn also reads the gateway's
# CPU time (/proc, user + system) per request: in wrk's closed loop the rate
# is shared with wrk and the upstream on the same cores, and CPU per request
# is the gateway's own cost, which the rate shows only in part.
#
#   BIN_A=/path/to/old/redmark benches/profile/ab.sh            # B: this tree's release build
#   BIN_A=old BIN_B=new SCRIPT=ask.lua RUNS=5 benches/profile/ab.sh
#
# Needs wrk (Debian package) and a release build of the fast upstream
# (cargo build --release --bin redmark --example bench_upstream).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/benches/profile"
# shellcheck source=gateway.sh
source "$HERE/gateway.sh"
BIN_A="${BIN_A:?set BIN_A to the redmark binary to compare against}"
BIN_B="${BIN_B:-$ROOT/target/release/redmark}"
SCRIPT="${SCRIPT:-echo.lua}" RUNS="${RUNS:-3}" SECONDS_PER="${SECONDS_PER:-5}"
THREADS="${THREADS:-2}" CONNECTIONS="${CONNECTIONS:-32}"
UP_PORT="${UP_PORT:-18565}" PORT_A="${PORT_A:-18566}" PORT_B="${PORT_B:-18567}"
OUT="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
# ask.lua keeps one operation per thread: as many threads as connections.
[[ "$SCRIPT" == ask.lua ]] && THREADS="$CONNECTIONS"

"$ROOT/target/release/examples/bench_upstream" --http "$UP_PORT" > "$OUT/upstream.log" 2>&1 &
start_gateway() { # name bin port
    bench_config "$OUT/$1.toml" "$3" "$UP_PORT"
    RUST_LOG=warn "$2" serve --config "$OUT/$1.toml" > "$OUT/$1.log" 2>&1 &
    echo $! > "$OUT/$1.pid"
    for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$3/" && return; sleep 0.1; done
    echo "gateway $1 did not start: $(cat "$OUT/$1.log")" >&2
    exit 1
}
start_gateway a "$BIN_A" "$PORT_A"
start_gateway b "$BIN_B" "$PORT_B"

TICK=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$(cat "$OUT/$1.pid")/stat"; }
run() { # name port -> "req/s p50_ms cpu_us_per_request"
    local t0 t1
    t0=$(cpu_ticks "$1")
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"${SECONDS_PER}s" --latency -s "$HERE/$SCRIPT" \
        "http://127.0.0.1:$2/mcp" > "$OUT/wrk.txt"
    t1=$(cpu_ticks "$1")
    if grep -q "Non-2xx" "$OUT/wrk.txt"; then
        echo "gateway $1 answered non-2xx:" >&2
        cat "$OUT/wrk.txt" >&2
        exit 1
    fi
    local rps p50
    rps=$(awk '/Requests\/sec/ {print $2}' "$OUT/wrk.txt")
    p50=$(awk '$1 == "50%" {v = $2; if (v ~ /us$/) {sub("us", "", v); v /= 1000} else if (v ~ /ms$/) {sub("ms", "", v)} else if (v ~ /s$/) {sub("s", "", v); v *= 1000}; print v}' "$OUT/wrk.txt")
    local requests cpu
    requests=$(awk '/requests in/ {print $1}' "$OUT/wrk.txt")
    cpu=$(echo "scale=2; ($t1 - $t0) * 1000000 / $TICK / $requests" | bc)
    echo "$rps $p50 $cpu"
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# Warm both up (sessions, pools, allocator) before measuring.
SECONDS_PER=2 run a "$PORT_A" > /dev/null
SECONDS_PER=2 run b "$PORT_B" > /dev/null
: > "$OUT/a.txt"; : > "$OUT/b.txt"
for i in $(seq 1 "$RUNS"); do
    # Alternate who goes first, so a drift within a round favours neither.
    if (( i % 2 )); then order="a b"; else order="b a"; fi
    for who in $order; do
        port="$PORT_A"; [[ "$who" == b ]] && port="$PORT_B"
        r=$(run "$who" "$port")
        echo "$r" >> "$OUT/$who.txt"
        echo "[ab] run $i $who: $r (req/s, p50 ms, CPU µs per request)" >&2
    done
done
a_rps=$(cut -d' ' -f1 "$OUT/a.txt" | median); b_rps=$(cut -d' ' -f1 "$OUT/b.txt" | median)
a_p50=$(cut -d' ' -f2 "$OUT/a.txt" | median); b_p50=$(cut -d' ' -f2 "$OUT/b.txt" | median)
a_cpu=$(cut -d' ' -f3 "$OUT/a.txt" | median); b_cpu=$(cut -d' ' -f3 "$OUT/b.txt" | median)
echo "$(nproc) cores, wrk -t$THREADS -c$CONNECTIONS ${SECONDS_PER}s x $RUNS, $SCRIPT; medians"
echo "A $BIN_A: $a_rps req/s, p50 $a_p50 ms, CPU $a_cpu µs per request"
echo "B $BIN_B: $b_rps req/s, p50 $b_p50 ms, CPU $b_cpu µs per request"
echo "B/A: $(echo "scale=3; $b_rps / $a_rps" | bc)x req/s, $(echo "scale=3; $b_p50 / $a_p50" | bc)x p50, $(echo "scale=3; $b_cpu / $a_cpu" | bc)x CPU per request"
