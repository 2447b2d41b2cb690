#!/usr/bin/env bash
# Benchmark (not a test): what hubd's operations cost as its cache grows,
# for N = 1k, 10k, 100k and 1M cache entries, with the build
# before a change beside it in the same run (BENCH_BASE_BUILD).
#
#   bench/scale.sh [SIZES (default 1000,10000,100000,1000000)]
#
# Rows (bench/scale.py says how each is measured): the first start on a
# cache to rebuild, a restart until STATS answers, STATS against an ERR's
# round trip, hits (from Python and from a C client, bench/hitload, with
# hubd's CPU per hit), eviction, small-file misses, and the RSS of 1,000
# idle sessions and 512 idle kept-alive HTTP front connections, and what
# they leave once closed.
#
# Environment (optional): BUILD_DIR (default build, built when needed),
# BENCH_BASE_BUILD (a second, already built build dir: its column is run
# beside, row by row), BENCH_TMPDIR (where the caches are made; 1M entries
# take about 4 GiB of inodes and blocks there). Run as root for the front
# row's 512 connections (the front admits 64 per uid: the clients are
# spread over uids 1-8); as another user it measures 64.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

BUILD_DIR=${BUILD_DIR:-build}
if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" --target hubd hubctl hitload hitfloor commitfloor >/dev/null

args=(--build "hubd=$BUILD_DIR")
if [[ -n ${BENCH_BASE_BUILD:-} ]]; then
    args+=(--build "hubd-base=$BENCH_BASE_BUILD")
fi
echo "== scale: $(nproc) CPUs, $(date -u +%Y-%m-%d)"
exec python3 bench/scale.py "${args[@]}" --hitload "$BUILD_DIR/bench/hitload" \
    --sizes "${1:-1000,10000,100000,1000000}" \
    ${BENCH_TMPDIR:+--tmp "$BENCH_TMPDIR"}
