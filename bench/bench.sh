#!/usr/bin/env bash
# Benchmark (not a test): how fast one file comes down from a local nginx, and
# at what CPU cost, with hubd against the tools people use instead.
#
#   bench/bench.sh [SIZE_MIB (default 1024)] [ROUNDS (default 3)]
#
# Each round runs these one after the other, in an order that rotates from
# round to round, each against the same random file, over plain HTTP from one
# nginx and over HTTPS from a second nginx (certificates made by
# tests/tls/make-certs.sh in the work dir):
#   hubd            hubctl fetch into a FRESH cache (hubd is restarted with an
#                   empty cache dir first), so a cache miss including hubd's
#                   SHA-256, fsync, rename and SQLite commit
#   python-128k     bench/py_loop.py: torch.hub's loop, 128 KiB reads
#   python-8k       the same with 8 KiB reads (torch.hub before PR 116536)
#   curl+sha256sum  curl -s -o FILE URL && sha256sum FILE
#   hubd-https, python-128k-https, curl+sha256sum-https
#                   the same over https (hubd with --ca-file, python and curl
#                   trusting the same CA file); if hubd cannot do https, its
#                   row says why and the rest still runs
# Wall time is that of the client command; CPU is user+system time of every
# process involved (for hubd: hubctl's plus the daemon's own, read from
# /proc/PID/stat before and after). Every digest is checked against the
# source's. See bench/README.md for what the table means.
#
# Environment (optional): BUILD_DIR (default build), BENCH_BASE_BUILD (a
# second, already built build dir, e.g. of an older commit: adds the rows
# hubd-base and hubd-base-https, run in the same rounds, so a change is
# compared side by side on one noisy machine), BENCH_TMPDIR (where the
# work dir goes; default $TMPDIR or /tmp), BENCH_DROP_CACHES=1 to drop the
# page cache before every download (root only), PYTHON (default: python3's real
# interpreter), BENCH_PROXY=1 to add rows through a Squid forward proxy
# (config derived from etc/fleet/squid.conf, caching off): hubd-squid and
# curl+sha256sum-squid over http (absolute form) and https (CONNECT), each
# compared with its direct row.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$REPO/build}
NGINX_ORIGIN=$REPO/scripts/nginx-origin.sh
HUBD=$BUILD_DIR/daemon/hubd
HUBCTL=$BUILD_DIR/client/hubctl
PY_LOOP=$REPO/bench/py_loop.py
MAKE_CERTS=$REPO/tests/tls/make-certs.sh
SQUID_PY=$REPO/tests/integration/squid.py
SQUID=${SQUID:-/usr/sbin/squid}
# Everything here talks to loopback: a proxy from the caller's environment
# (which hubd and curl follow, as curl does, loopback included) would only
# be in the way. The proxy rows of the bench set theirs explicitly.
unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
TOOLS=(hubd python-128k python-8k curl+sha256sum hubd-https python-128k-https curl+sha256sum-https)
HUBD_MAIN=$HUBD HUBCTL_MAIN=$HUBCTL
if [[ -n ${BENCH_BASE_BUILD:-} ]]; then
    BENCH_BASE_BUILD=$(cd "$BENCH_BASE_BUILD" && pwd)
    for b in daemon/hubd client/hubctl; do
        [[ -x $BENCH_BASE_BUILD/$b ]] || { echo "bench: $BENCH_BASE_BUILD/$b is not built" >&2; exit 2; }
    done
    TOOLS=(hubd hubd-base python-128k python-8k curl+sha256sum hubd-https hubd-base-https
        python-128k-https curl+sha256sum-https)
fi

if [[ ${BENCH_PROXY:-0} == 1 ]]; then
    # Through Squid: the direct rows stay, so each proxied row has its twin.
    TOOLS+=(hubd-squid curl+sha256sum-squid hubd-squid-https curl+sha256sum-squid-https)
fi

SIZE_MIB=${1:-1024}
ROUNDS=${2:-3}
if ! [[ $SIZE_MIB =~ ^[1-9][0-9]*$ && $ROUNDS =~ ^[1-9][0-9]*$ && $# -le 2 ]]; then
    echo "usage: bench/bench.sh [SIZE_MIB (default 1024)] [ROUNDS (default 3)]" >&2
    exit 2
fi

work=""       # the one temp dir: source file, outputs, caches, certs, logs
hubd_pid=""   # the current hubd, our child
hubd_cache="" # its cache dir, removed when it stops
squid_pid=""  # BENCH_PROXY: Squid (squid -N: the pid is Squid's own)
squid_dir=""  # its files; a dir of its own, owned by the user Squid runs as

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
    [[ -n $squid_pid ]] && stop_pid "$squid_pid"
    [[ -n $squid_dir ]] && rm -rf "$squid_dir"
    if [[ -n $work ]]; then
        "$NGINX_ORIGIN" stop "$work/nginx" || true
        "$NGINX_ORIGIN" stop "$work/nginx-tls" || true
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
    cmake --build "$BUILD_DIR" -j2 --target hubd hubctl sha256_speed tls_cipher_speed >>"$log" 2>&1 ||
        {
            tail -n 20 "$log" >&2
            die "build failed"
        }
}

# start_hubd CACHE [ARG...]: starts a hubd with an empty cache in CACHE and
# waits until it answers. On failure it stops that hubd, leaves the reason in
# $HUBD_FAILURE and returns 1.
start_hubd() {
    local cache=$1 i log
    shift
    rm -rf "$cache"
    log=$work/hubd-$(basename "$cache").log
    "$HUBD" --socket "$HUBD_SOCKET" --cache-dir "$cache" "$@" 2>"$log" &
    hubd_pid=$!
    hubd_cache=$cache
    for ((i = 0; i < 100; i++)); do # 10 s at most
        "$HUBCTL" status >/dev/null 2>&1 && return 0
        kill -0 "$hubd_pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$hubd_pid" 2>/dev/null; then
        HUBD_FAILURE="hubd did not answer 'hubctl status' within 10 s"
    else
        HUBD_FAILURE="hubd $* exited at start"
    fi
    HUBD_FAILURE+=": $(tail -n 3 "$log" | tr '\n' ' ')"
    stop_hubd
    return 1
}

stop_hubd() {
    [[ -n $hubd_pid ]] || return 0
    stop_pid "$hubd_pid"
    hubd_pid=""
    rm -rf "$hubd_cache" # one cache on disk at a time: the space check counts on it
    hubd_cache=""
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

# BENCH_PROXY: a Squid on a free loopback port, its config derived from
# etc/fleet/squid.conf by tests/integration/squid.py (the tests' own
# derivation) with `cache deny all`: the rows measure the proxy path, not
# Squid's disk. Run as root, Squid becomes user proxy, which must own its
# dir. Sets squid_url and writes the hubd config that names it.
start_squid() {
    local port i
    [[ -x $SQUID ]] || die "BENCH_PROXY=1 needs squid ($SQUID; scripts/install-deps.sh)"
    squid_dir=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/hubd-bench-squid.XXXXXX")
    port=$("$NGINX_ORIGIN" freeport)
    "$PYTHON" "$SQUID_PY" --no-cache "$port" "$squid_dir" >"$squid_dir/squid.conf" ||
        die "cannot derive the Squid config from etc/fleet/squid.conf"
    : >"$squid_dir/access.log"
    if [[ $(id -u) -eq 0 ]]; then chown -R proxy:proxy "$squid_dir"; fi
    "$SQUID" -N -f "$squid_dir/squid.conf" >"$squid_dir/stderr.log" 2>&1 &
    squid_pid=$!
    for ((i = 0; i < 100; i++)); do # 10 s at most
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        kill -0 "$squid_pid" 2>/dev/null || die "squid exited: $(tail -n 5 "$squid_dir/cache.log")"
        sleep 0.1
    done
    ((i < 100)) || die "squid did not listen on 127.0.0.1:$port within 10 s"
    squid_url=http://127.0.0.1:$port
    printf '[hubd]\nproxy = %s\n' "$squid_url" >"$work/proxy.conf"
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

# curl_and_sum URL [CURL-ARG...]
curl_and_sum() {
    local u=$1
    shift
    curl -sS "$@" -o "$work/out/curl.bin" "$u" && sha256sum "$work/out/curl.bin"
}

# Prints "protocol cipher" of the last GET in the TLS nginx's access log:
# the download just measured (nothing else talks to that nginx).
tls_of_last_get() {
    awk -F'\t' '$1 == "GET" { p = $6 " " $7 } END { print (p == "") ? "-" : p }' \
        "$work/nginx-tls/access.log"
}

# run_tool NAME ROUND: one measured download; appends a row to results.tsv.
run_tool() {
    local tool=$1 round=$2 digest="" cpu ticks0 ticks1 u=$url tls="-"
    local -a hubd_args=() curl_args=() py_args=()
    rm -rf "$work/out"
    mkdir -p "$work/out"
    if [[ $tool == *-https ]]; then
        u=$url_https
        hubd_args=(--ca-file "$work/certs/ca.crt")
        curl_args=(--cacert "$work/certs/ca.crt")
        py_args=("$work/certs/ca.crt")
    fi
    if [[ $tool == *-squid* ]]; then
        hubd_args+=(--config "$work/proxy.conf")
        curl_args+=(-x "$squid_url")
    fi
    T_RC=0 T_WALL=0 T_CPU=0
    : >"$work/cmd.err"
    HUBD=$HUBD_MAIN HUBCTL=$HUBCTL_MAIN
    if [[ $tool == hubd-base* ]]; then
        HUBD=$BENCH_BASE_BUILD/daemon/hubd HUBCTL=$BENCH_BASE_BUILD/client/hubctl
    fi
    case $tool in
    hubd | hubd-https | hubd-base | hubd-base-https | hubd-squid | hubd-squid-https)
        stop_hubd
        if ! start_hubd "$work/cache-$tool" "${hubd_args[@]}"; then
            T_RC=125
            echo "$HUBD_FAILURE" >"$work/cmd.err"
        else
            settle
            ticks0=$(proc_cpu_ticks "$hubd_pid")
            timed "$HUBCTL" fetch -q "$u"
            ticks1=$(proc_cpu_ticks "$hubd_pid")
            cpu=$(awk -v c="$T_CPU" -v a="$ticks0" -v b="$ticks1" -v hz="$CLK_TCK" \
                'BEGIN { printf "%.3f", c + (b - a) / hz }')
            T_CPU=$cpu
            [[ $T_RC -eq 0 ]] && digest=$(sha256sum "$(head -n 1 "$work/cmd.out")" | cut -d' ' -f1)
        fi
        ;;
    python-128k | python-8k | python-128k-https)
        local chunk=131072
        [[ $tool == python-8k ]] && chunk=8192
        settle
        timed "$PYTHON" "$PY_LOOP" "$u" "$work/out/py.bin" "$chunk" "${py_args[@]}"
        [[ $T_RC -eq 0 ]] && digest=$(head -n 1 "$work/cmd.out")
        ;;
    curl+sha256sum | curl+sha256sum-https | curl+sha256sum-squid | curl+sha256sum-squid-https)
        settle
        timed curl_and_sum "$u" "${curl_args[@]}"
        [[ $T_RC -eq 0 ]] && digest=$(cut -d' ' -f1 "$work/cmd.out")
        ;;
    esac
    [[ $tool == *-https && $T_RC -eq 0 ]] && tls=$(tls_of_last_get)
    local ok=ok
    if [[ $T_RC -ne 0 ]]; then
        ok="FAILED (exit $T_RC: $(head -c 300 "$work/cmd.err" | tr '\n\t' '  '))"
    elif [[ $digest != "$src_sha" ]]; then
        ok="WRONG sha256 $digest"
    fi
    if [[ $T_RC -ne 0 ]]; then # no numbers: they would measure the failure
        printf '  round %d/%d  %-20s %s\n' "$round" "$ROUNDS" "$tool" "$ok"
    else
        printf '  round %d/%d  %-20s %8.3f s  %8.1f MiB/s  cpu %7.3f s  sha256 %s%s\n' \
            "$round" "$ROUNDS" "$tool" "$T_WALL" \
            "$(awk -v s="$SIZE_MIB" -v w="$T_WALL" 'BEGIN { printf "%.1f", (w > 0) ? s / w : 0 }')" \
            "$T_CPU" "$ok" "$([[ $tls == - ]] || echo "  ($tls)")"
    fi
    printf '%s\t%d\t%s\t%s\t%s\t%s\n' "$tool" "$round" "$T_WALL" "$T_CPU" "$ok" "$tls" >>"$work/results.tsv"
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

# HTTPS: a second nginx serving the same file. The URL names localhost, which
# the certificate has as a dNSName: every TLS client checks that, not every
# one checks an address against iPAddress names.
"$MAKE_CERTS" "$work/certs" || die "tests/tls/make-certs.sh failed"
tls_port=$("$NGINX_ORIGIN" freeport)
while [[ $tls_port == "$port" ]]; do tls_port=$("$NGINX_ORIGIN" freeport); done
"$NGINX_ORIGIN" start "$work/nginx-tls" "$work/origin" "$tls_port" \
    "$work/certs/server.crt" "$work/certs/server.key" >/dev/null
url_https=https://localhost:$tls_port/files/file.bin

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
echo "  https       a second nginx: TLS 1.2 and 1.3, the client's cipher order, an EC P-256"
echo "              certificate (tests/tls/make-certs.sh); curl $(curl -V | grep -o 'OpenSSL/[^ ]*'), python $("$PYTHON" -c 'import ssl; print(ssl.OPENSSL_VERSION)')"
if [[ ${BENCH_PROXY:-0} == 1 ]]; then
    start_squid
    echo "  proxy       Squid $("$SQUID" -v | awk 'NR == 1 { print $4 }') at $squid_url, etc/fleet/squid.conf with 'cache deny all';"
    echo "              the *-squid rows go through it (http: absolute form, https: CONNECT)"
fi
echo "  source      sha256 $src_sha"
echo

: >"$work/results.tsv"
for ((r = 1; r <= ROUNDS; r++)); do
    # Rotate the order each round so no tool always runs first or last.
    for ((k = 0; k < ${#TOOLS[@]}; k++)); do
        run_tool "${TOOLS[(k + r - 1) % ${#TOOLS[@]}]}" "$r"
    done
    stop_hubd
done
if [[ -n $squid_pid ]]; then
    # Proof that the proxied rows went through Squid (and the direct ones not;
    # a tunnel is logged when it closes: every client has exited by now).
    echo "  squid's access log: $(awk '$6 == "GET" { g++ } $6 == "CONNECT" { c++ }
        END { printf "%d GET (absolute form), %d CONNECT", g, c }' "$squid_dir/access.log")"
fi
echo

# The table: medians over the rounds, one section per protocol; ratios are
# against hubd's median wall time over the same protocol.
"$PYTHON" - "$work/results.tsv" "$SIZE_MIB" "${TOOLS[@]}" <<'EOF'
import collections
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


def short(t):
    return t[: -len("-https")] if t.endswith("-https") else t


fmt = "  %-20s %5s %11s %9s %11s  %s"
print(fmt % ("tool", "runs", "median wall", "MiB/s", "CPU s/GiB", "vs hubd over the same protocol"))
for proto, https in (("http", False), ("https", True)):
    section = [t for t in tools if t.endswith("-https") == https]
    if not section:
        continue
    print(proto)
    hubd = "hubd-https" if https else "hubd"
    base = med[hubd][0] if hubd in med else 0
    for t in section:
        if t not in med:
            print(fmt % (short(t), 0, "-", "-", "-", "every run failed"))
            continue
        wall, cpu, n = med[t]
        if "-squid" in t:  # a proxied row: against its direct twin
            d = t.replace("-squid", "")
            vs = "%.2fx the time of %s direct" % (wall / med[d][0], short(d)) if d in med and med[d][0] > 0 else "-"
        elif t == hubd:
            vs = "baseline"
            if https and "hubd" in med and med["hubd"][0] > 0:
                vs += " (%.2fx hubd's http time)" % (wall / med["hubd"][0])
        elif base <= 0 or wall <= 0:
            vs = "-"
        elif wall >= base:
            vs = "%.2fx slower than hubd" % (wall / base)
        else:
            vs = "%.2fx faster than hubd" % (base / wall)
        mibs = size_mib / wall if wall > 0 else float("inf")
        print(fmt % (short(t), n, "%.3f s" % wall, "%.1f" % mibs, "%.2f" % (cpu / gib), vs))

# What each https client negotiated with nginx (from nginx's access log).
tls = collections.defaultdict(collections.Counter)
for r in rows:
    if len(r) > 5 and r[5] != "-":
        tls[r[0]][r[5]] += 1
if tls:
    print("\nhttps as negotiated with nginx:")
    for t in tools:
        if t in tls:
            seen = tls[t].most_common()
            print("  %-20s %s" % (short(t), seen[0][0] if len(seen) == 1 else
                                  ", ".join("%s (%d runs)" % kv for kv in seen)))
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

echo
echo "mbedTLS's TLS 1.2 record ciphers, hubd's side of the https rows (bench/tls_cipher_speed.c):"
"$BUILD_DIR/bench/tls_cipher_speed"
