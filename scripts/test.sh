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

# The number of tests the tree registers, from a configure of its own: a
# build dir that another command configured first (the demo's Release
# build has BUILD_TESTING off, and CMake keeps a cached value) must not run
# fewer.
expected_tests() {
    local dir
    dir=$(mktemp -d)
    cmake -S . -B "$dir" -DBUILD_TESTING=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    (cd "$dir" && ctest -N | awk '/^Total Tests:/ {print $3}')
    rm -rf "$dir"
}

# Configures and builds a dir with the tests asked for explicitly, whatever
# configured it before, and checks it registers every test the tree has.
build_suite() {
    local dir=$1; shift
    cmake -S . -B "$dir" -DHUBD_WERROR=ON -DBUILD_TESTING=ON "$@" >/dev/null
    cmake --build "$dir" -j"$jobs"
    local have
    have=$(cd "$dir" && ctest -N | awk '/^Total Tests:/ {print $3}')
    if [ "$have" != "$want_tests" ]; then
        echo "test.sh: $dir registers $have tests, the tree $want_tests" >&2
        exit 1
    fi
}

# --output-on-failure shows a failing test's own report; the summary line
# ("N% tests passed, F tests failed out of T") is CTest's own.
# --no-tests=error: a build dir without tests fails, never passes empty.
# $skip: a regex of tests this build leaves to the first one.
test_suite() {
    (cd "$1" && ctest --output-on-failure --no-tests=error --timeout 600 -j"$jobs" \
        ${skip:+-E "$skip"})
}

# The container's Debian root for the package test: on a fresh machine,
# minutes of downloads and dpkg that need little CPU. They run beside the
# first test pass (niced), and the package test after it waits for them.
prep_pid=""
stop_prep() {
    [ -z "$prep_pid" ] || kill -TERM "$prep_pid" 2>/dev/null || true
}
trap stop_prep EXIT

want_tests=$(expected_tests)
skip=""
echo "== build and test (RelWithDebInfo): $want_tests tests"
build_suite build -DCMAKE_BUILD_TYPE=RelWithDebInfo
nice -n 10 ./scripts/systemd-test.sh --prepare build >build/systemd-prepare.log 2>&1 &
prep_pid=$!
test_suite build

# The README's main command, unchanged: it reuses build/. .ci/run ran it
# just before (HUBD_DEMO_RAN): once is the check.
if [[ -z ${HUBD_DEMO_RAN:-} ]]; then
    echo "== the demo (./scripts/demo.sh)"
    ./scripts/demo.sh
fi

# The .deb of build/ in a Debian 12 booted with systemd as PID 1.
echo "== the package under systemd (scripts/systemd-test.sh)"
if ! wait "$prep_pid"; then
    prep_pid=""
    cat build/systemd-prepare.log >&2
    echo "test.sh: scripts/systemd-test.sh --prepare failed (its log above)" >&2
    exit 1
fi
prep_pid=""
cat build/systemd-prepare.log
./scripts/systemd-test.sh build

# The packaging, layout and docs checks read files, not memory: the first
# build ran them, and the sanitizers would find nothing in them.
echo "== build and test under ASan + UBSan"
# The fleet harness (a benchmark's cluster of namespaces, its hubd the
# swarm's, which integ_swarm* run here) and the certificate script hold
# nothing the sanitizers would see. So the suite stays near its time, the
# longest tests of behaviour over time (retries, segments, proxies, scale,
# the terminal's output, the admin's day) run in the first build only,
# and tls and hostile under valgrind (below): 40 to 100 s each here. The
# swarm's hostile peers are libtorrent's to bound (integ_swarm runs the
# daemon's side of the swarm here).
skip='^(packaging_|layout_|docs_|integ_fleet_harness$|integ_fleet_certs$'
skip+='|integ_(resilience|segments|proxy|scale|ux|ops|tls|hostile|swarm_hostile)$)'
build_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DHUBD_SANITIZE=ON
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    test_suite build-asan

# libFuzzer targets (tests/fuzz) for 15 s each, then the main
# integration tests with hubd under valgrind memcheck (reuses build/).
echo "== fuzz targets"
./scripts/fuzz.sh 15
echo "== integration tests under valgrind"
./scripts/valgrind.sh
