#!/usr/bin/env bash
# scripts/valgrind.sh: integration tests with every hubd under valgrind's
# memcheck. Uses the plain RelWithDebInfo build in build/ (scripts/test.sh
# builds it first; here it is configured if missing and brought up to date).
# tests/integration/harness.py reads HUBD_WRAPPER, prepends it to each hubd
# command line, and fails a test whose hubd exits non-zero (memcheck exits 99
# on an error) or whose log shows a memcheck error or a definitely or
# indirectly lost block. Test modules run as many at once as there are CPUs;
# one line per module, then the total. Exits non-zero on any failure.
#
# Tests that cannot work under valgrind are skipped here, by name, with the
# reason (SKIP below), rather than weakened.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

# The modules whose code paths are the daemon's riskiest (downloads,
# resume, TLS, hostile clients, the front), longest first so the last ones
# to start are short. The ASan+UBSan build
# runs every module, these and the rest (resilience, front, security, ops,
# cache_dir, python_client, limits, config_policy, segments, proxy, fleet,
# ...), with leak checks too. resilience, front, security and ops left this
# list to keep the whole suite under 25 minutes: kills and restarts, the
# HTTP front's routes, access lists and reloads, which ASan covers; so did
# cache, dedup, protocol and origin_faults when the suite grew again (the
# cache's I/O is still in fetch's paths). What stays is hostile input, TLS
# and downloads, where valgrind finds what ASan cannot (a read of bytes
# never written): about 3 minutes on 2 cores.
# HUBD_VALGRIND_MODULES ("fetch cache ...") chooses others.
modules=${HUBD_VALGRIND_MODULES:-"hostile tls fetch"}
jobs=$(nproc 2>/dev/null || echo 2)
t0=$(date +%s)

echo "== build (build/, RelWithDebInfo)"
if [ ! -f build/CMakeCache.txt ]; then
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build build -j"$jobs" --target hubd hubctl >/dev/null

supp=()
[ -f tests/valgrind.supp ] && supp=(--suppressions="$PWD/tests/valgrind.supp")
export HUBD_BIN="$PWD/build/daemon/hubd" HUBCTL_BIN="$PWD/build/client/hubctl"
export PYTHONDONTWRITEBYTECODE=1
export HUBD_WRAPPER="valgrind --tool=memcheck --leak-check=full \
--errors-for-leak-kinds=definite,indirect --error-exitcode=99 --track-fds=no \
--num-callers=30 ${supp[*]}"

out="$PWD/build/valgrind"
rm -rf "$out"
mkdir -p "$out"

# The runner: one test module, with the SKIP list applied.
cat >"$out/run.py" <<'EOF'
import importlib, os, sys, unittest

sys.path.insert(0, os.getcwd())  # tests/integration: harness and the test modules

# "module.Class.method": why it cannot run under valgrind.
SKIP = {
    "test_tls.TLSTest.test_backlog_is_bounded_and_drains":
        "it bounds hubd's peak RSS, which under valgrind is mostly valgrind's own",
    "test_hostile.HostileTest.test_a_list_flood_that_is_never_read_holds_little_memory":
        "it bounds hubd's peak RSS and another client's latency",
    "test_hostile.HostileTest.test_a_status_flood_that_is_never_read_holds_little_memory":
        "it bounds hubd's peak RSS and another client's latency",
    "test_hostile.HostileTest.test_clients_that_never_read_pin_few_descriptors":
        "hubd at 1,024 descriptors: valgrind keeps some of them for itself",
    "test_hostile.HostileTest.test_an_unprivileged_hubd_keeps_few_descriptors_in_flight":
        "hubd at 1,024 descriptors: valgrind keeps some of them for itself",
    "test_front.GenericFormTest.test_a_download_is_streamed_while_it_lands":
        "it bounds the time to the first byte, which valgrind's slowdown stretches",
    "test_front.GenericFormTest.test_head_of_a_cold_file_answers_from_the_announced_length":
        "it bounds the time to the answer, which valgrind's slowdown stretches",
    "test_hostile.HostileTest.test_setting_the_clock_back_does_not_invert_eviction":
        "libfaketime is preloaded into hubd, which under valgrind is valgrind",
    "test_tls.BadCertTest.test_the_loop_answers_while_a_reload_reads_the_ca_bundle":
        "it bounds the loop's answers while a pool thread parses, and valgrind runs "
        "one thread at a time: its scheduling decides them (1.0 s of a 1.3 s reload, once)",
}

name = "test_" + sys.argv[1]
mod = importlib.import_module(name)
for tid, why in SKIP.items():
    m, cls, meth = tid.split(".")
    if m == name:
        c = getattr(mod, cls)
        setattr(c, meth, unittest.skip("under valgrind: " + why)(getattr(c, meth)))
suite = unittest.defaultTestLoader.loadTestsFromModule(mod)
result = unittest.TextTestRunner(verbosity=2).run(suite)
sys.exit(0 if result.wasSuccessful() else 1)
EOF

# One module in tests/integration (as CTest runs them): its log, exit status
# and wall time in files.
run_module() {
    local m=$1 start rc=0
    start=$(date +%s)
    (cd tests/integration && python3 "$out/run.py" "$m" >"$out/$m.log" 2>&1) || rc=$?
    echo "$rc" >"$out/$m.rc"
    echo "$(($(date +%s) - start))" >"$out/$m.secs"
}

echo "== integration tests under valgrind memcheck: $modules ($jobs at a time)"
# shellcheck disable=SC2086  # $modules is a word list
run_parallel "$jobs" run_module $modules

failed=""
for m in $modules; do
    summary=$(grep -E '^(Ran [0-9]+ tests?|OK|FAILED)' "$out/$m.log" | tr '\n' ' ' || true)
    echo "valgrind test_$m: ${summary:-no result} in $(cat "$out/$m.secs") s"
    if [ "$(cat "$out/$m.rc")" != 0 ]; then
        failed="$failed test_$m"
        echo "---- test_$m failed; its log ($out/$m.log), last lines:" >&2
        tail -n 80 "$out/$m.log" >&2
    fi
done
echo "valgrind: $(($(date +%s) - t0)) s in all"
if [ -n "$failed" ]; then
    echo "valgrind: FAILED:$failed" >&2
    exit 1
fi
