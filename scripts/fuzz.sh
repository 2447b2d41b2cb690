#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS]: builds the libFuzzer targets (tests/fuzz) in
# build-fuzz with clang, then runs each for SECONDS (default 30) on a copy of
# its committed corpus (tests/fuzz/corpus/TARGET is never modified), as many
# at once as there are CPUs. Prints one line per target:
#   fuzz TARGET: N execs, M exec/s, T s
# and fails if any target crashes, leaks, hangs or trips a sanitizer; the
# input that did it is kept in build-fuzz/artifacts/ and its log is shown.
# Needs clang and libclang-rt-14-dev (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

secs=${1:-30}
case $secs in
'' | *[!0-9]*)
    echo "usage: $0 [SECONDS]" >&2
    exit 2
    ;;
esac
targets="proto url config http"
jobs=$(nproc 2>/dev/null || echo 2)
dir=build-fuzz

t0=$(date +%s)
echo "== build the fuzz targets ($dir)"
cmake -S . -B "$dir" -DHUBD_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
    -DBUILD_TESTING=OFF >/dev/null
cmake --build "$dir" -j"$jobs" --target $(for t in $targets; do printf 'fuzz_%s ' "$t"; done)
echo "build: $(($(date +%s) - t0)) s"

run="$dir/fuzz-run"
rm -rf "$run"
mkdir -p "$run" "$dir/artifacts"

# One target: a fresh copy of its corpus (new inputs land there, not in the
# repository), its own log, its exit status and wall time in files.
fuzz_one() {
    local t=$1 start end rc=0 dict=()
    cp -r "tests/fuzz/corpus/$t" "$run/corpus-$t"
    [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
    start=$(date +%s)
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$dir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 \
        -timeout=10 "${dict[@]}" \
        -artifact_prefix="$dir/artifacts/$t-" "$run/corpus-$t" >"$run/$t.log" 2>&1 || rc=$?
    end=$(date +%s)
    echo "$rc" >"$run/$t.rc"
    echo "$((end - start))" >"$run/$t.secs"
}

echo "== fuzz each target for $secs s ($jobs at a time)"
# shellcheck disable=SC2086  # $targets is a word list
run_parallel "$jobs" fuzz_one $targets

failed=""
for t in $targets; do
    log="$run/$t.log"
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    echo "fuzz $t: ${execs:-?} execs, ${rate:-?} exec/s, $(cat "$run/$t.secs") s"
    if [ "$(cat "$run/$t.rc")" != 0 ]; then
        failed="$failed $t"
        echo "---- fuzz_$t failed (exit $(cat "$run/$t.rc")); the end of its log:" >&2
        tail -n 60 "$log" >&2
        echo "---- reproduce: $dir/tests/fuzz/fuzz_$t $(ls "$dir/artifacts/$t-"* 2>/dev/null | tail -1)" >&2
    fi
done
echo "fuzz: $(($(date +%s) - t0)) s in all"
if [ -n "$failed" ]; then
    echo "fuzz: FAILED:$failed" >&2
    exit 1
fi
