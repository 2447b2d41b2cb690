#!/usr/bin/env bash
# Benchmark (not a test): how long `hubctl gc` takes to empty a cache of N
# blobs (default 10,000), with the build before a change beside it in the
# same run (BENCH_BASE_BUILD), RUNS times each (default 3).
#
#   bench/gc.sh [N]
#
# bench/gc.py says how it is measured. Environment (optional): BUILD_DIR
# (default build, built when needed), BENCH_BASE_BUILD (a second, already
# built build dir), RUNS, BLOB_SIZE (bytes a blob; default a few),
# BENCH_TMPDIR (where the caches are made).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" --target hubd hubctl >/dev/null

args=(--build "hubd=$BUILD_DIR")
if [[ -n ${BENCH_BASE_BUILD:-} ]]; then
    args+=(--build "hubd-base=$BENCH_BASE_BUILD")
fi
echo "== gc: $(nproc) CPUs, $(date -u +%Y-%m-%d)"
exec python3 bench/gc.py "${args[@]}" --blobs "${1:-10000}" --runs "${RUNS:-3}" \
    --blob-size "${BLOB_SIZE:-0}" \
    ${BENCH_TMPDIR:+--tmp "$BENCH_TMPDIR"}
