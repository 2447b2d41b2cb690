#!/usr/bin/env bash
# Benchmark (not a test): how fast one file comes down from a local nginx, and
# at what CPU cost, with hubd against the tools people use instead.
#
#   bench/bench.sh [SIZE_MIB (default 1024)] [ROUNDS (default 3)]
#
# Each round runs these one after the other, in an order that rotates from
# round to round, each against the same nginx and the same random file:
#   hubd            hubctl fetch into a FRESH cache (hubd is restarted with an
#                   empty cache dir first), so a cache miss including hubd's
#                   SHA-256, fsync, rename and SQLite commit
#   python-128k     bench/py_loop.py: torch.hub's loop, 128 KiB reads
#   python-8k       the same with 8 KiB reads (torch.hub before PR 116536)
#   curl+sha256sum  curl -s -o FILE URL && sha256sum FILE
# Wall time is that of the client command; CPU is user+system time of every
# process involved (for hubd: hubctl's plus the daemon's own, read from
# /proc/PID/stat before and after). Every digest is checked against the
# source's. See bench/README.md for what the table means.
#
# Environment (optional): BUILD_DIR (default build), BENCH_TMPDIR (where the
# work dir goes; default $TMPDIR or /tmp), BENCH_DROP_CACHES=1 to drop the
# page cache before every download (root only), PYTHON (default: python3's real
# interpreter).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$REPO/build}
NGINX_ORIGIN=$REPO/scripts/nginx-origin.sh
HUBD=$BUILD_DIR/daemon/hubd
HUBCTL=$BUILD_DIR/client/hubctl
PY_LOOP=$REPO/bench/py_loop.py
TOOLS=(hubd python-128k python-8k curl+sha256sum)

SIZE_MIB=${1:-1024}
ROUNDS=${2:-3}
if ! [[ $SIZE_MIB =~ ^[1-9][0-9]*$ && $ROUNDS =~ ^[1-9][0-9]*$ && $# -le 2 ]]; then
    echo "usage: bench/bench.sh [SIZE_MIB (default 1024)] [ROUNDS (default 3)]" >&2
    exit 2
fi

work=""     # the one temp dir: source file, outputs, caches, logs
hubd_pid="" # the current hubd, our child

die() {
    echo "bench: $*" >&2
    exit 1
}

# shellcheck source=scripts/lib.sh
. "$REPO/scripts/lib.sh"

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [[ -n $hubd_pid ]] && stop_pid "$hubd_pid"
    if [[ -n $work ]]; then
        "$NGINX_ORIGIN" stop "$work/nginx" || true
        rm -rf "$work"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# -- set-up ---------------------------------------------------------------

# Configure only when the build dir is new or not a Release build; after that
# 'cmake --build' re-runs cmake by itself whenever a CMakeLists.txt changes.
build() {
    local log=$work/build.log
    if ! grep -qx 'CMAKE_BUILD_TYPE:STRING=Release' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
        echo "bench: configuring a Release build in $BUILD_DIR" >&2
        cmake -S "$REPO" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >"$log" 2>&1 ||
            {
                tail -n 20 "$log" >&2
                die "cmake configure failed"
            }
    fi
    cmake --build "$BUILD_DIR" -j2 --target hubd hubctl sha256_speed >>"$log" 2>&1 ||
        {
            tail -n 20 "$log" >&2
            die "build failed"
        }
}

# Starts a hubd with an empty cache in a new dir and waits until it answers.
start_hubd() {
    local cache=$1 i
    rm -rf "$cache"
    "$HUBD" --socket "$HUBD_SOCKET" --cache-dir "$cache" 2>>"$work/hubd.log" &
    hubd_pid=$!
    for ((i = 0; i < 100; i++)); do # 10 s at most
        "$HUBCTL" status >/dev/null 2>&1 && return 0
        kill -0 "$hubd_pid" 2>/dev/null || break
        sleep 0.1
    done
    tail -n 20 "$work/hubd.log" >&2
    die "hubd did not answer 'hubctl status' within 10 s"
}

stop_hubd() {
    [[ -n $hubd_pid ]] || return 0
    stop_pid "$hubd_pid"
    hubd_pid=""
}

# Prints utime+stime of a live process in clock ticks. The fields are counted
# after the ')' that closes the command name, which may itself hold spaces.
proc_cpu_ticks() {
    local stat rest
    stat=$(<"/proc/$1/stat")
    rest=${stat##*) }
    # shellcheck disable=SC2086 # split into fields on purpose
    set -- $rest
    # $1 is field 3 (state), so utime (field 14) is $12 and stime is $13.
    echo $((${12} + ${13}))
}

drop_caches_ok=""
# Writes back dirty pages (so one tool's output is not flushed during the
# next tool's run) and, when allowed, empties the page cache so that nginx
# reads the source from disk for every tool alike.
settle() {
    sync
    if [[ -n $drop_caches_ok ]]; then
        echo 1 >/proc/sys/vm/drop_caches
    fi
}

# -- measurement -----------------------------------------------------------

# timed CMD...: runs CMD with its stdout to $work/cmd.out and stderr to
# $work/cmd.err, and sets T_RC, T_WALL and T_CPU (seconds). Bash's 'time'
# counts the CPU of every child the command waited for, so 'curl && sha256sum'
# and python are measured whole, with no extra package.
timed() {
    local TIMEFORMAT='%3R %3U %3S' t
    T_RC=0
    { time "$@" >"$work/cmd.out" 2>"$work/cmd.err"; } 2>"$work/time.txt" || T_RC=$?
    read -r T_WALL t T_CPU <"$work/time.txt"
    T_CPU=$(awk -v u="$t" -v s="$T_CPU" 'BEGIN { printf "%.3f", u + s }')
}

curl_and_sum() {
    curl -sS -o "$work/out/curl.bin" "$url" && sha256sum "$work/out/curl.bin"
}

# run_tool NAME ROUND: one measured download; appends a row to results.tsv.
run_tool() {
    local tool=$1 round=$2 digest="" cpu ticks0 ticks1
    rm -rf "$work/out"
    mkdir -p "$work/out"
    case $tool in
    hubd)
        stop_hubd
        start_hubd "$work/cache-$round"
        settle
        ticks0=$(proc_cpu_ticks "$hubd_pid")
        timed "$HUBCTL" fetch -q "$url"
        ticks1=$(proc_cpu_ticks "$hubd_pid")
        cpu=$(awk -v c="$T_CPU" -v a="$ticks0" -v b="$ticks1" -v hz="$CLK_TCK" \
            'BEGIN { printf "%.3f", c + (b - a) / hz }')
        T_CPU=$cpu
        [[ $T_RC -eq 0 ]] && digest=$(sha256sum "$(head -n 1 "$work/cmd.out")" | cut -d' ' -f1)
        ;;
    python-128k | python-8k)
        local chunk=131072
        [[ $tool == python-8k ]] && chunk=8192
        settle
        timed "$PYTHON" "$PY_LOOP" "$url" "$work/out/py.bin" "$chunk"
        [[ $T_RC -eq 0 ]] && digest=$(head -n 1 "$work/cmd.out")
        ;;
    curl+sha256sum)
        settle
        timed curl_and_sum
        [[ $T_RC -eq 0 ]] && digest=$(cut -d' ' -f1 "$work/cmd.out")
        ;;
    esac
    local ok=ok
    if [[ $T_RC -ne 0 ]]; then
        ok="FAILED (exit $T_RC: $(head -c 200 "$work/cmd.err" | tr '\n' ' '))"
    elif [[ $digest != "$src_sha" ]]; then
        ok="WRONG sha256 $digest"
    fi
    printf '  round %d/%d  %-15s %8.3f s  %8.1f MiB/s  cpu %7.3f s  sha256 %s\n' \
        "$round" "$ROUNDS" "$tool" "$T_WALL" \
        "$(awk -v s="$SIZE_MIB" -v w="$T_WALL" 'BEGIN { printf "%.1f", (w > 0) ? s / w : 0 }')" \
        "$T_CPU" "$ok"
    printf '%s\t%d\t%s\t%s\t%s\n' "$tool" "$round" "$T_WALL" "$T_CPU" "$ok" >>"$work/results.tsv"
    rm -rf "$work/out"
}

# -- main --------------------------------------------------------------------

work=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/hubd-bench.XXXXXX")
build
PYTHON=${PYTHON:-$(python3 -c 'import sys; print(sys.executable)')} # not a pyenv shim
CLK_TCK=$(getconf CLK_TCK)
export HUBD_SOCKET=$work/hubd.sock

# The source, the outputs and hubd's cache all live in $work: one filesystem.
free_mib=$(df -Pm "$work" | awk 'NR == 2 { print $4 }')
((free_mib > 3 * SIZE_MIB + 100)) ||
    die "$work has $free_mib MiB free; $((3 * SIZE_MIB + 100)) MiB are needed"
mkdir -p "$work/origin"
src=$work/origin/file.bin
head -c "$((SIZE_MIB * 1024 * 1024))" /dev/urandom >"$src"
src_sha=$(sha256sum "$src" | cut -d' ' -f1)

port=$("$NGINX_ORIGIN" freeport)
"$NGINX_ORIGIN" start "$work/nginx" "$work/origin" "$port" >/dev/null
url=http://127.0.0.1:$port/files/file.bin

cache_note="not dropped (needs root and a writable /proc/sys/vm/drop_caches)"
if [[ ${BENCH_DROP_CACHES:-0} == 0 ]]; then
    cache_note="kept: nginx serves from memory, as a fast network would (BENCH_DROP_CACHES=1 drops it)"
elif [[ $(id -u) -eq 0 && -w /proc/sys/vm/drop_caches ]] &&
    sync && (echo 1 >/proc/sys/vm/drop_caches) 2>/dev/null; then
    drop_caches_ok=1
    cache_note="dropped before every download: nginx reads the source from disk"
fi

cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
echo "hubd benchmark: $SIZE_MIB MiB file, $ROUNDS round(s), loopback nginx"
echo "  machine     $(nproc) cores, ${cpu_model:-unknown CPU}, Linux $(uname -r)"
echo "  filesystem  $(df -PT "$work" | awk 'NR == 2 { print $2 }') at $work"
echo "  page cache  $cache_note"
echo "  python      $("$PYTHON" -V 2>&1) ($PYTHON)"
echo "  curl        $(curl -V | awk 'NR == 1 { print $2 }'), $(nginx -v 2>&1 | sed 's/^nginx version: //')"
echo "  source      sha256 $src_sha"
echo

: >"$work/results.tsv"
for ((r = 1; r <= ROUNDS; r++)); do
    # Rotate the order each round so no tool always runs first or last.
    for ((k = 0; k < ${#TOOLS[@]}; k++)); do
        run_tool "${TOOLS[(k + r - 1) % ${#TOOLS[@]}]}" "$r"
    done
    stop_hubd
    rm -rf "$work/cache-$r"
done
echo

# The table: medians over the rounds, ratios against hubd's median wall time.
"$PYTHON" - "$work/results.tsv" "$SIZE_MIB" "${TOOLS[@]}" <<'EOF'
import statistics
import sys

path, size_mib, tools = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = [line.rstrip("\n").split("\t") for line in open(path)]
failed = [r for r in rows if r[4] != "ok"]
med = {}
for t in tools:
    mine = [r for r in rows if r[0] == t and r[4] == "ok"]
    if mine:
        med[t] = (statistics.median(float(r[2]) for r in mine),
                  statistics.median(float(r[3]) for r in mine), len(mine))
gib = size_mib / 1024
print("%-15s %5s %11s %9s %11s  %s" % ("tool", "runs", "median wall", "MiB/s", "CPU s/GiB", "vs hubd"))
for t in tools:
    if t not in med:
        print("%-15s %5d %11s %9s %11s  %s" % (t, 0, "-", "-", "-", "every run failed"))
        continue
    wall, cpu, n = med[t]
    if t == "hubd":
        vs = "baseline"
    elif "hubd" not in med or wall <= 0 or med["hubd"][0] <= 0:
        vs = "-"
    elif wall >= med["hubd"][0]:
        vs = "%.2fx slower than hubd" % (wall / med["hubd"][0])
    else:
        vs = "%.2fx faster than hubd" % (med["hubd"][0] / wall)
    mibs = size_mib / wall if wall > 0 else float("inf")
    print("%-15s %5d %9.3f s %9.1f %11.2f  %s" % (t, n, wall, mibs, cpu / gib, vs))
if failed:
    print("\n%d run(s) failed or gave a wrong digest:" % len(failed))
    for r in failed:
        print("  round %s %s: %s" % (r[1], r[0], r[4]))
    sys.exit(1)
print("\nAll %d downloads matched the source's sha256." % len(rows))
EOF

echo
echo "SHA-256 on this machine (bench/sha256_speed.c: 256 MiB in 256 KiB updates, best of 3):"
"$BUILD_DIR/bench/sha256_speed"
