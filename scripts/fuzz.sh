#!/usr/bin/env bash
# Fuzzes every parser that sees untrusted bytes (the targets of fuzz/, see
# fuzz/src/lib.rs), each for a bounded time, and fails on any crash, panic,
# timeout or out-of-memory. A separate, required step of CI (.ci/run), and
# `make fuzz`.
#
# Two paths, and the output says which ran:
#   libfuzzer  cargo-fuzz (libFuzzer + AddressSanitizer) on the nightly
#              toolchain, when `cargo +nightly` works. cargo-fuzz is installed
#              once into .cache/tools by scripts/install-tools.sh.
#   stable     no nightly: the very same target functions on stable, over the
#              committed corpus plus mutated and random inputs, for the same
#              time (fuzz/tests/stable.rs; no coverage feedback). Never a skip.
#
# Usage:
#   scripts/fuzz.sh [TARGET...]              every target (or those named), FUZZ_SECONDS each
#   scripts/fuzz.sh --list                   the targets
#   scripts/fuzz.sh --reproduce TARGET FILE  run one input (a crash artifact) through TARGET
# Environment:
#   FUZZ_SECONDS=30      time per target (libFuzzer -max_total_time); raise it to fuzz longer
#   FUZZ_JOBS=2          targets run at once
#   FUZZ_PATH=auto       or `libfuzzer` (fail without nightly) or `stable`
#   FUZZ_ARGS=...        extra libFuzzer flags (e.g. "-jobs=4 -workers=4")
#   FUZZ_FRESH=0|1       1: start from the committed seeds only, forgetting what
#                        earlier runs found (the default under CI=true, so the
#                        step's time stays bounded); 0: keep building on it
#
# Inputs libFuzzer finds go to target/fuzz/corpus/TARGET (git-ignored; the
# committed seeds in fuzz/corpus/ are only read), findings to
# fuzz/artifacts/TARGET/ (git-ignored). Logs: target/fuzz/logs/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SECONDS_EACH="${FUZZ_SECONDS:-30}"
JOBS="${FUZZ_JOBS:-2}"
WANT_PATH="${FUZZ_PATH:-auto}"
FRESH="${FUZZ_FRESH:-$([[ "${CI:-}" == true ]] && echo 1 || echo 0)}"
TARGET_DIR="$ROOT/target/fuzz"
LOGS="$TARGET_DIR/logs"
ALL_TARGETS=(request_state request sse framing guard answer config policy label jwks)

log() { printf '[fuzz] %s\n' "$*"; }
die() { printf '[fuzz] ERROR: %s\n' "$*" >&2; exit 1; }

dict_of() {
    case "$1" in
        sse) echo "$ROOT/fuzz/dict/sse.dict" ;;
        config | policy) echo "$ROOT/fuzz/dict/toml.dict" ;;
        *) echo "$ROOT/fuzz/dict/json.dict" ;;
    esac
}

choose_path() {
    case "$WANT_PATH" in
        stable) echo stable ;;
        libfuzzer | auto)
            if cargo +nightly --version >/dev/null 2>&1; then
                echo libfuzzer
            elif [[ "$WANT_PATH" == libfuzzer ]]; then
                die "FUZZ_PATH=libfuzzer but there is no nightly toolchain (cargo +nightly)"
            else
                echo stable
            fi
            ;;
        *) die "FUZZ_PATH must be auto, libfuzzer or stable (got $WANT_PATH)" ;;
    esac
}

# cargo-fuzz, on nightly, with our target dir.
cargo_fuzz() {
    PATH="$ROOT/.cache/tools/bin:$PATH" cargo +nightly fuzz "$@"
}

# A debug build in the root's target/ (it reuses the dependencies the tests built).
stable_runner() {
    cargo test --quiet --locked --manifest-path fuzz/Cargo.toml --no-default-features \
        --target-dir "$ROOT/target" --test stable -- "$@"
}

if [[ "${1:-}" == "--list" ]]; then
    printf '%s\n' "${ALL_TARGETS[@]}"
    exit 0
fi

PATH_TAKEN="$(choose_path)"

if [[ "${1:-}" == "--reproduce" ]]; then
    [[ $# -eq 3 ]] || die "usage: scripts/fuzz.sh --reproduce TARGET FILE"
    if [[ "$PATH_TAKEN" == libfuzzer ]]; then
        bash scripts/install-tools.sh cargo-fuzz >/dev/null
        cargo_fuzz run --target-dir "$TARGET_DIR" "$2" "$3"
    else
        stable_runner --replay "$2" "$3"
    fi
    exit 0
fi

TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=("${ALL_TARGETS[@]}")
for t in "${TARGETS[@]}"; do
    [[ " ${ALL_TARGETS[*]} " == *" $t "* ]] || die "no target \`$t\` (scripts/fuzz.sh --list)"
    [[ -n "$(ls -A "fuzz/corpus/$t" 2>/dev/null)" ]] || die "fuzz/corpus/$t is empty"
done
mkdir -p "$LOGS"

started=$SECONDS
if [[ "$PATH_TAKEN" == libfuzzer ]]; then
    log "path: libfuzzer (cargo-fuzz on $(cargo +nightly --version)), ${SECONDS_EACH}s per target, $JOBS at a time, $([[ "$FRESH" == 1 ]] && echo "from the committed seeds" || echo "building on earlier runs' corpus")"
else
    log "path: stable fallback (no nightly toolchain, or FUZZ_PATH=stable): the same targets on $(cargo --version), over the corpus plus mutated/random inputs, ${SECONDS_EACH}s per target, $JOBS at a time"
fi

# ---- build
build_started=$SECONDS
if [[ "$PATH_TAKEN" == libfuzzer ]]; then
    HOST="$(rustc +nightly -vV | sed -n 's/^host: //p')"
    bash scripts/install-tools.sh cargo-fuzz >/dev/null
    log "building the fuzz targets (release, ASan, coverage instrumentation)"
    cargo_fuzz build --target-dir "$TARGET_DIR" >"$LOGS/build.log" 2>&1 \
        || { tail -40 "$LOGS/build.log"; die "cargo fuzz build failed"; }
else
    log "building the stable runner (fuzz/tests/stable.rs)"
    cargo test --quiet --locked --manifest-path fuzz/Cargo.toml --no-default-features \
        --target-dir "$ROOT/target" --test stable --no-run
fi
log "build took $((SECONDS - build_started))s"
[[ "$PATH_TAKEN" == libfuzzer ]] && grep -h 'Finished' "$LOGS/build.log" | sed 's/^ */[fuzz] cargo: /' || true

# ---- run one target; its log is $LOGS/TARGET.log, its result line $LOGS/TARGET.result
run_one() {
    local t="$1" out="$LOGS/$1.log" status=0 t0=$SECONDS
    if [[ "$PATH_TAKEN" == libfuzzer ]]; then
        [[ "$FRESH" == 1 ]] && rm -rf "${TARGET_DIR:?}/corpus/$t"
        mkdir -p "$TARGET_DIR/corpus/$t" "fuzz/artifacts/$t"
        # The binary cargo-fuzz built (what `cargo fuzz run` runs, without a
        # second build check). The first corpus dir receives new inputs; the
        # committed seeds are only read. The stack is a tokio worker's (2 MiB),
        # where the gateway runs these parsers.
        ulimit -s 2048
        # shellcheck disable=SC2086
        ASAN_OPTIONS="detect_odr_violation=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
            "$TARGET_DIR/$HOST/release/$t" -artifact_prefix="$ROOT/fuzz/artifacts/$t/" \
            -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
            -dict="$(dict_of "$t")" -print_final_stats=1 ${FUZZ_ARGS:-} \
            "$TARGET_DIR/corpus/$t" "fuzz/corpus/$t" >"$out" 2>&1 || status=$?
        local execs cov ft
        # A run that stops on a finding prints no totals: the greps find
        # nothing, and under errexit/pipefail that would end this job before
        # it writes its result line (CI once reported a missing .result file
        # instead of the finding).
        execs="$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$out" | grep -oE '[0-9]+$' | tail -1 || true)"
        cov="$(grep -oE ' cov: [0-9]+' "$out" | tail -1 | grep -oE '[0-9]+' || true)"
        ft="$(grep -oE ' ft: [0-9]+' "$out" | tail -1 | grep -oE '[0-9]+' || true)"
        echo "$t $status $((SECONDS - t0)) ${execs:-?} ${cov:-?} ${ft:-?}" >"$LOGS/$t.result"
    else
        stable_runner --seconds "$SECONDS_EACH" "$t" >"$out" 2>&1 || status=$?
        local execs
        # (No totals line after a finding; see above.)
        execs="$(grep -oE '\+ [0-9]+ mutated' "$out" | grep -oE '[0-9]+' | tail -1 || true)"
        echo "$t $status $((SECONDS - t0)) ${execs:-?} - -" >"$LOGS/$t.result"
    fi
    return 0
}

rm -f "$LOGS"/*.result
touch "$LOGS/start"
running=0
for t in "${TARGETS[@]}"; do
    log "fuzzing $t"
    run_one "$t" &
    running=$((running + 1))
    if [[ $running -ge $JOBS ]]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait

# ---- report
failed=0
printf '\n%-14s %-8s %6s %12s %7s %7s  %s\n' target result time execs cov ft "log"
for t in "${TARGETS[@]}"; do
    # A job that died without a result line failed, whatever killed it.
    [[ -s "$LOGS/$t.result" ]] || echo "$t no-result ? ? ? ?" >"$LOGS/$t.result"
    read -r name status took execs cov ft <"$LOGS/$t.result"
    result=ok
    if [[ "$status" != 0 ]]; then
        result=FAIL
        failed=1
    fi
    printf '%-14s %-8s %5ss %12s %7s %7s  %s\n' "$name" "$result" "$took" "$execs" "$cov" "$ft" "${LOGS#"$ROOT"/}/$t.log"
done
log "path: $PATH_TAKEN; total $((SECONDS - started))s"
if [[ $failed -ne 0 ]]; then
    for t in "${TARGETS[@]}"; do
        read -r _ status _ <"$LOGS/$t.result"
        [[ "$status" == 0 ]] && continue
        printf '\n==> %s failed; the end of its log:\n' "$t"
        tail -40 "$LOGS/$t.log"
        # A CI log is often all that is kept of a run: print each finding of
        # this run small enough to paste back (base64 -d > FILE, then
        # --reproduce), so it can be replayed without the machine.
        find "fuzz/artifacts/$t" -type f -newer "$LOGS/start" -size -16k 2>/dev/null | while read -r f; do
            printf '\n==> %s, %s bytes, base64:\n' "$f" "$(wc -c <"$f")"
            base64 -w0 "$f"
            echo
        done || true
    done
    log "findings are in fuzz/artifacts/TARGET/; reproduce one with: scripts/fuzz.sh --reproduce TARGET FILE"
    exit 1
fi
