#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what is
# missing, builds with warnings as errors, runs every test under CTest, runs
# the README's demo as it is (the main job must never silently break) and the
# package under a real systemd (scripts/systemd-test.sh), then builds again
# with AddressSanitizer + UndefinedBehaviorSanitizer and runs the suite once
# more. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

jobs=$(nproc 2>/dev/null || echo 2)

run_suite() {
    local dir=$1; shift
    cmake -S . -B "$dir" -DHUBD_WERROR=ON "$@" >/dev/null
    cmake --build "$dir" -j"$jobs"
    # --output-on-failure shows a failing test's own report; the summary line
    # ("N% tests passed, F tests failed out of T") is CTest's own.
    (cd "$dir" && ctest --output-on-failure --timeout 600 -j"$jobs")
}

echo "== build and test (RelWithDebInfo)"
run_suite build -DCMAKE_BUILD_TYPE=RelWithDebInfo

# The README's main command, unchanged: it reuses build/.
echo "== the demo (./scripts/demo.sh)"
./scripts/demo.sh

# The .deb of build/ in a Debian 12 booted with systemd as PID 1.
echo "== the package under systemd (scripts/systemd-test.sh)"
./scripts/systemd-test.sh build

echo "== build and test under ASan + UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DHUBD_SANITIZE=ON

# libFuzzer targets (tests/fuzz) for 30 s each, then the main
# integration tests with hubd under valgrind memcheck (reuses build/).
echo "== fuzz targets"
./scripts/fuzz.sh 30
echo "== integration tests under valgrind"
./scripts/valgrind.sh
