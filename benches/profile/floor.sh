#!/usr/bin/env bash
# The stack's floor beside nginx and redmark, in one run under wrk: direct to
# the fast upstream, nginx, a bare hyper proxy (examples/bench_floor.rs: the
# same server, client, runtime and allocator as redmark, no work of its own;
# on one work-stealing runtime and on per-core event loops), and redmark.
# Turns interleaved, medians reported, ratios to nginx.
#
#   benches/profile/floor.sh              # RUNS=3 SECONDS_PER=5, wrk -t2 -c32
#
# Needs wrk and nginx (Debian packages) and release builds:
#   cargo build --release --bin redmark --example bench_upstream --example bench_floor
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/benches/profile"
# shellcheck source=gateway.sh
source "$HERE/gateway.sh"
RUNS="${RUNS:-3}" SECONDS_PER="${SECONDS_PER:-5}"
THREADS="${THREADS:-2}" CONNECTIONS="${CONNECTIONS:-32}"
UP="${UP_PORT:-18575}" NGINX=18576 FLOOR=18577 LOOPS=18578 REDMARK=18579
REL="$ROOT/target/release"
OUT="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; [[ -f $OUT/nginx.pid ]] && kill "$(cat "$OUT/nginx.pid")" 2>/dev/null || true' EXIT
wait_port() { for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return; sleep 0.1; done; echo "port $1 never answered" >&2; exit 1; }

"$REL/examples/bench_upstream" --http "$UP" > "$OUT/upstream.log" 2>&1 &
wait_port "$UP"
mkdir -p "$OUT/tmp"
cat > "$OUT/nginx.conf" <<CONF
daemon off; master_process on; worker_processes auto; pid $OUT/nginx.pid;
error_log $OUT/nginx-error.log warn; events { worker_connections 1024; }
http { access_log off; client_body_temp_path $OUT/tmp; proxy_temp_path $OUT/tmp;
  fastcgi_temp_path $OUT/tmp; uwsgi_temp_path $OUT/tmp; scgi_temp_path $OUT/tmp;
  upstream fast { server 127.0.0.1:$UP; keepalive 64; }
  server { listen 127.0.0.1:$NGINX; location / { proxy_pass http://fast; proxy_http_version 1.1;
    proxy_set_header Connection ""; proxy_buffering off; proxy_request_buffering off; } } }
CONF
nginx -c "$OUT/nginx.conf" -e "$OUT/nginx-error.log" &
"$REL/examples/bench_floor" "$FLOOR" "http://127.0.0.1:$UP/mcp" > "$OUT/floor.log" 2>&1 &
"$REL/examples/bench_floor" "$LOOPS" "http://127.0.0.1:$UP/mcp" loops > "$OUT/loops.log" 2>&1 &
bench_config "$OUT/redmark.toml" "$REDMARK" "$UP"
RUST_LOG=warn "$REL/redmark" serve --config "$OUT/redmark.toml" > "$OUT/redmark.log" 2>&1 &
for p in "$NGINX" "$FLOOR" "$LOOPS" "$REDMARK"; do wait_port "$p"; done

run() { # port script -> "req/s p50_ms"
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"${SECONDS_PER}s" --latency -s "$HERE/$2" \
        "http://127.0.0.1:$1/mcp" > "$OUT/wrk.txt"
    if grep -q "Non-2xx" "$OUT/wrk.txt"; then echo "port $1 answered non-2xx:" >&2; cat "$OUT/wrk.txt" >&2; exit 1; fi
    awk '/Requests\/sec/ {r = $2} $1 == "50%" {v = $2; if (v ~ /us$/) {sub("us", "", v); v /= 1000} else if (v ~ /ms$/) {sub("ms", "", v)} else if (v ~ /s$/) {sub("s", "", v); v *= 1000}; p = v} END {print r, p}' "$OUT/wrk.txt"
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
declare -A PORT=([direct]=$UP [nginx]=$NGINX [floor]=$FLOOR [floor-loops]=$LOOPS [redmark]=$REDMARK)
declare -A LUA=([direct]=legacy.lua [nginx]=legacy.lua [floor]=legacy.lua [floor-loops]=legacy.lua [redmark]=echo.lua)
NAMES=(direct nginx floor floor-loops redmark)
for n in "${NAMES[@]}"; do SECONDS_PER=2 run "${PORT[$n]}" "${LUA[$n]}" > /dev/null; : > "$OUT/$n.txt"; done
for i in $(seq 1 "$RUNS"); do
    for n in "${NAMES[@]}"; do
        r=$(run "${PORT[$n]}" "${LUA[$n]}"); echo "$r" >> "$OUT/$n.txt"; echo "[floor] run $i $n: $r" >&2
    done
    NAMES=("${NAMES[@]:1}" "${NAMES[0]}") # rotate who goes first
done
ng=$(cut -d' ' -f1 "$OUT/nginx.txt" | median); ng50=$(cut -d' ' -f2 "$OUT/nginx.txt" | median)
d50=$(cut -d' ' -f2 "$OUT/direct.txt" | median)
echo "$(nproc) cores, wrk -t$THREADS -c$CONNECTIONS, ${SECONDS_PER}s x $RUNS, medians"
echo "| path | req/s | p50 ms | req/s vs nginx | added p50 vs nginx's |"
echo "|---|---:|---:|---:|---:|"
for n in direct nginx floor floor-loops redmark; do
    r=$(cut -d' ' -f1 "$OUT/$n.txt" | median); p=$(cut -d' ' -f2 "$OUT/$n.txt" | median)
    added=""; [[ $n != direct ]] && added="$(echo "scale=2; ($p - $d50) / ($ng50 - $d50)" | bc)x"
    echo "| $n | $r | $p | $(echo "scale=2; $r / $ng" | bc)x | $added |"
done
