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
# compared with its direct row. BENCH_FRONT=1 to add the HTTP front's rows
# (a second hubd with http_listen on a free loopback port):
#   nginx           curl -o FILE of the file straight from the plain nginx
#   hubd-front      the same curl through the front, the file already in that
#                   hubd's cache (warmed before the rounds; X-Hubd-Source: hit)
#   front-cold      one curl through the front of a hubd with a fresh cache
#   front-cold-x8   8 concurrent curls the same way: wall until all are done,
#                   and the bytes nginx sent for the file (its access log)
#   nginx-x8        8 concurrent curls straight from nginx (what the machine
#                   does for 8 clients with a server that has it all in memory)
#   front-capped    front-cold of a file of BENCH_CAPPED_MIB (default 128)
#                   from an origin that sends at most BENCH_CAPPED_RATE per
#                   connection (nginx limit_rate, default 16m: about what
#                   the Hub's CDN gives one connection), so that the network,
#                   not this machine's 2 cores, is the bound
#   front-capped-x8 8 concurrent curls the same way
# BENCH_SEGMENTS=1 adds rows against an origin that caps each connection:
# a file of BENCH_SEG_MIB (default 512) from nginx's /capped/
# location (limit_rate BENCH_CAPPED_RATE per connection):
#   hubd-capped     hubctl fetch, a fresh cache (several connections)
#   aria2c-capped   aria2c -x16 -s16 -k1M --checksum=sha-256=... (16 connections)
#   curl-capped     curl -o FILE && sha256sum FILE (one connection)
#   hubd-base-capped  hubd-capped with BENCH_BASE_BUILD's hubd (with it set)
# each with the bytes nginx sent for it (its access log).
# BENCH_CROWD=1 adds, after the table, hubd's memory with BENCH_CROWD_N
# (default 1000) downloads in flight at once: 64 KiB each from a
# third nginx that sends each connection 8 KiB/s, fetched over the Unix
# socket by tests/integration/crowd.py; hubd's peak RSS (VmHWM) once per
# round, and hubd-base's beside it with BENCH_BASE_BUILD.
# BENCH_WORKER_THREADS="1 2 4" adds a row hubd-wN-https for each N: hubd-https
# with worker_threads = N (the threads that decrypt; by default the cores + 2,
# at least 4).
# The front rows time curl alone (-D HEADERS -o FILE); the digests are checked after
# the timing. The cold rows' outputs go to tmpfs (BENCH_FRONT_OUT, default
# /dev/shm) so that 8 GiB of client writes do not measure the disk.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$REPO/build}
NGINX_ORIGIN=$REPO/scripts/nginx-origin.sh
HUBD=$BUILD_DIR/daemon/hubd
HUBCTL=$BUILD_DIR/client/hubctl
PY_LOOP=$REPO/bench/py_loop.py
MAKE_CERTS=$REPO/tests/tls/make-certs.sh
SQUID_PY=$REPO/tests/integration/squid.py
CROWD_PY=$REPO/tests/integration/crowd.py
CROWD_N=${BENCH_CROWD_N:-1000}
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
if [[ ${BENCH_FRONT:-0} == 1 ]]; then
    # The HTTP front against nginx: warm (a hit, served by sendfile from the
    # blob) and cold (a fresh cache, one client and eight).
    TOOLS+=(nginx hubd-front front-cold front-cold-x8 nginx-x8 front-capped front-capped-x8)
fi
FRONT_CLIENTS=8
CAPPED_MIB=${BENCH_CAPPED_MIB:-128}
CAPPED_RATE=${BENCH_CAPPED_RATE:-16m}
SEG_MIB=${BENCH_SEG_MIB:-512}
if [[ ${BENCH_SEGMENTS:-0} == 1 ]]; then
    command -v aria2c >/dev/null || { echo "bench: aria2c missing: run scripts/install-deps.sh" >&2; exit 2; }
    TOOLS+=(hubd-capped aria2c-capped curl-capped)
    [[ -n ${BENCH_BASE_BUILD:-} ]] && TOOLS+=(hubd-base-capped)
fi

for n in ${BENCH_WORKER_THREADS:-}; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "bench: BENCH_WORKER_THREADS: '$n' is not a count" >&2; exit 2; }
    TOOLS+=("hubd-w$n-https")
done

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
front_pid=""  # BENCH_FRONT: the warm hubd with the HTTP front, our child
front_out=""  # BENCH_FRONT: the cold rows' output dir (tmpfs)
nginx_pid=""  # the plain nginx's master (nginx-origin.sh prints it)

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
    [[ -n $front_pid ]] && stop_pid "$front_pid"
    [[ -n $front_out ]] && rm -rf "$front_out"
    if [[ -n $work ]]; then
        "$NGINX_ORIGIN" stop "$work/nginx" || true
        "$NGINX_ORIGIN" stop "$work/nginx-tls" || true
        "$NGINX_ORIGIN" stop "$work/nginx-crowd" || true
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

# BENCH_FRONT: writes a hubd config with http_listen on a free loopback port
# to FILE and prints the port.
front_conf() {
    local port
    port=$("$NGINX_ORIGIN" freeport)
    printf '[hubd]\nhttp_listen = 127.0.0.1:%s\n' "$port" >"$1"
    echo "$port"
}

# wait_port PORT PID: until something listens on 127.0.0.1:PORT (10 s), as
# long as PID lives.
wait_port() {
    local i
    for ((i = 0; i < 100; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# BENCH_FRONT: the warm hubd, on a socket and cache of its own (the hubd rows
# restart theirs), with the front on a free port; fetches the file once
# through the front so that every hubd-front row is a hit. Sets front_url.
start_front() {
    local port i
    port=$(front_conf "$work/front.conf")
    rm -rf "$work/cache-front"
    "$HUBD" --socket "$work/front.sock" --cache-dir "$work/cache-front" \
        --config "$work/front.conf" 2>"$work/hubd-front.log" &
    front_pid=$!
    for ((i = 0; i < 100; i++)); do # 10 s at most
        HUBD_SOCKET=$work/front.sock "$HUBCTL" status >/dev/null 2>&1 && break
        kill -0 "$front_pid" 2>/dev/null || die "the front's hubd exited: $(tail -n 3 "$work/hubd-front.log")"
        sleep 0.1
    done
    wait_port "$port" "$front_pid" || die "hubd does not listen on http_listen 127.0.0.1:$port"
    front_url=http://127.0.0.1:$port/$url
    curl -sS -D "$work/front-warm.head" -o /dev/null "$front_url" ||
        die "warming the front's cache failed: $(tail -n 3 "$work/hubd-front.log")"
    grep -qi '^X-Hubd-Source: download' "$work/front-warm.head" ||
        die "the warming fetch was not a download: $(tr '\r\n' '  ' <"$work/front-warm.head")"
    # A download is streamed as it lands, so only the stored file's answer
    # names its digest: ask once more, a hit.
    curl -sS -I -o /dev/null -D "$work/front-warm.head" "$front_url" ||
        die "asking the front for the warmed file failed"
    [[ $(head_field "$work/front-warm.head" X-Hubd-Sha256) == "$src_sha" ]] ||
        die "the front's warmed file has the wrong X-Hubd-Sha256"
}

# head_field FILE NAME: the value of header NAME in a curl -D file.
head_field() {
    awk -v n="$2" -F': *' \
        'tolower($1) == tolower(n) { v = $2; sub(/\r$/, "", v) } END { print v }' "$1"
}

# The CPU ticks of the plain nginx's worker(s) (one, see nginx-origin.sh).
nginx_ticks() {
    local w t=0
    for w in $(pgrep -P "$nginx_pid"); do
        t=$((t + $(proc_cpu_ticks "$w")))
    done
    echo "$t"
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

# curl_clients N URL: N curls at once, each -D HEAD.k -o OUT.k into
# $front_out; fails if any fails.
curl_clients() {
    local n=$1 u=$2 k rc=0
    local -a pids=()
    for ((k = 1; k <= n; k++)); do
        curl -sS -D "$front_out/head.$k" -o "$front_out/out.$k" "$u" &
        pids+=($!)
    done
    for k in "${pids[@]}"; do
        wait "$k" || rc=$?
    done
    return "$rc"
}

# check_clients N SHA: every output's digest against SHA (after the timing;
# two at a time); prints "ok" or what is wrong.
check_clients() {
    local n=$1 want=$2 k bad=""
    # shellcheck disable=SC2016 # sh -c's own $1 and $2
    for ((k = 1; k <= n; k++)); do echo "$k"; done |
        xargs -P 2 -I{} sh -c 'openssl dgst -sha256 -r "$1/out.$2" | cut -d" " -f1 >"$1/sum.$2"' _ "$front_out" {}
    for ((k = 1; k <= n; k++)); do
        [[ $(<"$front_out/sum.$k") == "$want" ]] || bad+=" $k"
    done
    if [[ -n $bad ]]; then
        echo "WRONG sha256 of client(s)$bad"
    else
        echo ok
    fi
}

# Prints what the plain nginx sent for URI since its log had LOG0 lines:
# the bytes against SIZE, the requests, and the requests in flight every
# 0.5 s (scripts/nginx-origin.sh inflight over those lines alone): how a
# download's connections grew.
origin_note() {
    local log0=$1 uri=$2 size=$3
    mkdir -p "$work/notelog"
    tail -n "+$((log0 + 1))" "$work/nginx/access.log" >"$work/notelog/access.log"
    awk -F'\t' -v uri="$uri" -v size="$size" '$2 == uri { b += $4; r++ }
        END { printf "origin %.3fx in %d request(s)", b / size, r }' "$work/notelog/access.log"
    printf '; in flight every 0.5 s: %s' "$("$NGINX_ORIGIN" inflight "$work/notelog" "$uri" 0.5 |
        awk '{ printf "%s%s", (NR > 1 ? " " : ""), $2 }')"
}

# Prints "protocol cipher" of the last GET in the TLS nginx's access log:
# the download just measured (nothing else talks to that nginx).
tls_of_last_get() {
    awk -F'\t' '$1 == "GET" { p = $6 " " $7 } END { print (p == "") ? "-" : p }' \
        "$work/nginx-tls/access.log"
}

# row_mib NAME: the MiB a row downloads.
row_mib() {
    case $1 in
    front-capped*) echo "$CAPPED_MIB" ;;
    *-capped) echo "$SEG_MIB" ;;
    *) echo "$SIZE_MIB" ;;
    esac
}

# run_tool NAME ROUND: one measured download; appends a row to results.tsv.
run_tool() {
    local tool=$1 round=$2 digest="" cpu ticks0 ticks1 u=$url tls="-" note="-" ok=ok
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
    if [[ $tool =~ ^hubd-w([0-9]+)-https$ ]]; then # BENCH_WORKER_THREADS
        printf '[hubd]\nworker_threads = %s\n' "${BASH_REMATCH[1]}" >"$work/workers.conf"
        hubd_args+=(--config "$work/workers.conf")
    fi
    T_RC=0 T_WALL=0 T_CPU=0
    : >"$work/cmd.err"
    HUBD=$HUBD_MAIN HUBCTL=$HUBCTL_MAIN
    if [[ $tool == hubd-base* ]]; then
        HUBD=$BENCH_BASE_BUILD/daemon/hubd HUBCTL=$BENCH_BASE_BUILD/client/hubctl
    fi
    case $tool in
    hubd | hubd-https | hubd-base | hubd-base-https | hubd-squid | hubd-squid-https | hubd-w*-https)
        stop_hubd
        if ! start_hubd "$work/cache-$tool" "${hubd_args[@]}"; then
            T_RC=125
            echo "$HUBD_FAILURE" >"$work/cmd.err"
        else
            settle
            log0=$(wc -l <"$work/nginx/access.log")
            ticks0=$(proc_cpu_ticks "$hubd_pid")
            timed "$HUBCTL" fetch -q "$u"
            ticks1=$(proc_cpu_ticks "$hubd_pid")
            # The plain nginx's rows: what the origin sent, over how many
            # connections at once (the TLS nginx keeps its own log).
            [[ $T_RC -eq 0 && $tool != *-https ]] && note=$(origin_note "$log0" /files/file.bin "$src_size")
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
    hubd-capped | hubd-base-capped | aria2c-capped | curl-capped)
        # The capped file: nginx sends each connection at most CAPPED_RATE.
        u=$origin_base/capped/seg.bin
        local log0
        settle
        log0=$(wc -l <"$work/nginx/access.log")
        if [[ $tool == hubd-capped || $tool == hubd-base-capped ]]; then
            stop_hubd
            if ! start_hubd "$work/cache-$tool"; then
                T_RC=125
                echo "$HUBD_FAILURE" >"$work/cmd.err"
            else
                ticks0=$(proc_cpu_ticks "$hubd_pid")
                timed "$HUBCTL" fetch -q --sha256 "$seg_sha" "$u"
                ticks1=$(proc_cpu_ticks "$hubd_pid")
                T_CPU=$(awk -v c="$T_CPU" -v a="$ticks0" -v b="$ticks1" -v hz="$CLK_TCK" \
                    'BEGIN { printf "%.3f", c + (b - a) / hz }')
            fi
        elif [[ $tool == aria2c-capped ]]; then
            timed aria2c -q -x16 -s16 -k1M --checksum="sha-256=$seg_sha" --allow-overwrite=true \
                --auto-file-renaming=false --file-allocation=none -d "$work/out" -o seg.bin "$u"
        else
            timed curl_and_sum "$u"
        fi
        # hubctl and aria2c checked the digest (a mismatch fails them);
        # curl's is compared here.
        if [[ $T_RC -eq 0 ]]; then
            digest=$src_sha
            [[ $tool == curl-capped && $(cut -d' ' -f1 "$work/cmd.out") != "$seg_sha" ]] && digest=wrong
            note=$(origin_note "$log0" /capped/seg.bin "$seg_size")
        fi
        ;;
    nginx | hubd-front)
        # curl alone is timed, the same for both; CPU is curl's plus the
        # server's (nginx's worker, or hubd), read from /proc around it.
        local spid=$front_pid
        [[ $tool == hubd-front ]] && u=$front_url
        settle
        if [[ $tool == nginx ]]; then ticks0=$(nginx_ticks); else ticks0=$(proc_cpu_ticks "$spid"); fi
        timed curl -sS -D "$work/out/head.txt" -o "$work/out/curl.bin" "$u"
        if [[ $tool == nginx ]]; then ticks1=$(nginx_ticks); else ticks1=$(proc_cpu_ticks "$spid"); fi
        T_CPU=$(awk -v c="$T_CPU" -v a="$ticks0" -v b="$ticks1" -v hz="$CLK_TCK" \
            'BEGIN { printf "%.3f", c + (b - a) / hz }')
        if [[ $T_RC -eq 0 ]]; then
            digest=$(openssl dgst -sha256 -r "$work/out/curl.bin" | cut -d' ' -f1)
            if [[ $tool == hubd-front ]]; then
                note=$(head_field "$work/out/head.txt" X-Hubd-Source)
                [[ $note == hit ]] || ok="NOT A HIT (X-Hubd-Source: ${note:-none})"
            fi
        fi
        ;;
    front-cold | front-cold-x8 | nginx-x8 | front-capped | front-capped-x8)
        # A fresh hubd (empty cache, the front on a new free port) for the
        # front rows; clients write to tmpfs; the origin's bytes for the
        # file come from the lines nginx logs during the row.
        local n=1 port log0 src_count uri=/files/cold.bin want=$src_sha size=$src_size
        [[ $tool == *-x8 ]] && n=$FRONT_CLIENTS
        if [[ $tool == front-capped* ]]; then
            uri=/capped/capped.bin want=$capped_sha size=$capped_size
        fi
        rm -f "$front_out"/*
        if [[ $tool == front-* ]]; then
            stop_hubd
            port=$(front_conf "$work/cold.conf")
            HUBD_FAILURE=""
            if ! start_hubd "$work/cache-$tool" --config "$work/cold.conf" ||
                ! wait_port "$port" "$hubd_pid"; then
                T_RC=125
                echo "${HUBD_FAILURE:-hubd does not listen on 127.0.0.1:$port}" >"$work/cmd.err"
            fi
            u=http://127.0.0.1:$port/$origin_base$uri
        fi
        if [[ $T_RC -eq 0 ]]; then
            settle
            log0=$(wc -l <"$work/nginx/access.log")
            if [[ $tool == nginx-x8 ]]; then ticks0=$(nginx_ticks); else ticks0=$(proc_cpu_ticks "$hubd_pid"); fi
            timed curl_clients "$n" "$u"
            if [[ $tool == nginx-x8 ]]; then ticks1=$(nginx_ticks); else ticks1=$(proc_cpu_ticks "$hubd_pid"); fi
            T_CPU=$(awk -v c="$T_CPU" -v a="$ticks0" -v b="$ticks1" -v hz="$CLK_TCK" \
                'BEGIN { printf "%.3f", c + (b - a) / hz }')
        fi
        if [[ $T_RC -eq 0 ]]; then
            ok=$(check_clients "$n" "$want")
            digest=$src_sha # checked against its own file just above
            if [[ $tool == front-* ]]; then
                src_count=$(cat "$front_out"/head.* | awk -F': *' 'tolower($1) == "x-hubd-source" {
                    sub(/\r$/, "", $2); n[$2]++ } END { for (k in n) { printf "%s%d %s", s, n[k], k; s = ", " } }')
                note="$(origin_note "$log0" "$uri" "$size"); $src_count"
            fi
        fi
        rm -f "$front_out"/*
        ;;
    esac
    [[ $tool == *-https && $T_RC -eq 0 ]] && tls=$(tls_of_last_get)
    if [[ $T_RC -ne 0 ]]; then
        ok="FAILED (exit $T_RC: $(head -c 300 "$work/cmd.err" | tr '\n\t' '  '))"
    elif [[ $digest != "$src_sha" ]]; then
        ok="WRONG sha256 $digest"
    fi
    if [[ $T_RC -ne 0 ]]; then # no numbers: they would measure the failure
        printf '  round %d/%d  %-20s %s\n' "$round" "$ROUNDS" "$tool" "$ok"
    else
        printf '  round %d/%d  %-20s %8.3f s  %8.1f MiB/s  cpu %7.3f s  sha256 %s%s%s\n' \
            "$round" "$ROUNDS" "$tool" "$T_WALL" \
            "$(awk -v s="$(row_mib "$tool")" -v w="$T_WALL" 'BEGIN { printf "%.1f", (w > 0) ? s / w : 0 }')" \
            "$T_CPU" "$ok" "$([[ $tls == - ]] || echo "  ($tls)")" "$([[ $note == - ]] || echo "  ($note)")"
    fi
    printf '%s\t%d\t%s\t%s\t%s\t%s\t%s\n' "$tool" "$round" "$T_WALL" "$T_CPU" "$ok" "$tls" "$note" >>"$work/results.tsv"
    rm -rf "$work/out"
}

# -- main --------------------------------------------------------------------

work=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/hubd-bench.XXXXXX")
build
PYTHON=${PYTHON:-$(python3 -c 'import sys; print(sys.executable)')} # not a pyenv shim
CLK_TCK=$(getconf CLK_TCK)
export HUBD_SOCKET=$work/hubd.sock

# The source, the outputs and hubd's cache all live in $work: one filesystem.
# BENCH_FRONT keeps a second cache (the warm front's) for the whole run.
need_mib=$((3 * SIZE_MIB + 100))
[[ ${BENCH_FRONT:-0} == 1 ]] && need_mib=$((4 * SIZE_MIB + 100))
free_mib=$(df -Pm "$work" | awk 'NR == 2 { print $4 }')
((free_mib > need_mib)) || die "$work has $free_mib MiB free; $need_mib MiB are needed"
mkdir -p "$work/origin"
src=$work/origin/file.bin
head -c "$((SIZE_MIB * 1024 * 1024))" /dev/urandom >"$src"
src_sha=$(sha256sum "$src" | cut -d' ' -f1)
src_size=$(stat -c %s "$src")

port=$("$NGINX_ORIGIN" freeport)
nginx_pid=$(NGINX_LIMIT_RATE=$CAPPED_RATE "$NGINX_ORIGIN" start "$work/nginx" "$work/origin" "$port")
origin_base=http://127.0.0.1:$port
url=$origin_base/files/file.bin
# BENCH_FRONT's cold rows fetch the same bytes under a name of their own
# (/files/cold.bin, or /capped/cold.bin at a CDN's rate), so that nginx's log
# lines for it are theirs alone.

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
if [[ ${BENCH_SEGMENTS:-0} == 1 ]]; then
    head -c "$((SEG_MIB * 1024 * 1024))" /dev/urandom >"$work/origin/seg.bin"
    seg_sha=$(sha256sum "$work/origin/seg.bin" | cut -d' ' -f1)
    seg_size=$(stat -c %s "$work/origin/seg.bin")
    echo "  capped      the *-capped rows: ${SEG_MIB} MiB at most $CAPPED_RATE per connection (nginx limit_rate)"
fi
if [[ ${BENCH_FRONT:-0} == 1 ]]; then
    ln "$src" "$work/origin/cold.bin"
    head -c "$((CAPPED_MIB * 1024 * 1024))" "$src" >"$work/origin/capped.bin"
    capped_sha=$(sha256sum "$work/origin/capped.bin" | cut -d' ' -f1)
    capped_size=$(stat -c %s "$work/origin/capped.bin")
    echo "  capped      the front-capped rows: ${CAPPED_MIB} MiB at most $CAPPED_RATE per connection (nginx limit_rate)"
    front_out=$(mktemp -d "${BENCH_FRONT_OUT:-/dev/shm}/hubd-bench-front.XXXXXX")
    free_mib=$(df -Pm "$front_out" | awk 'NR == 2 { print $4 }')
    ((free_mib > FRONT_CLIENTS * SIZE_MIB + 100)) ||
        die "$front_out has $free_mib MiB free; $((FRONT_CLIENTS * SIZE_MIB + 100)) MiB are needed (BENCH_FRONT_OUT)"
    start_front
    echo "  front       hubd's HTTP front at ${front_url%%/http:*}/, its cache warmed with the file;"
    echo "              cold rows: a fresh hubd per row; clients write to $(df -PT "$front_out" | awk 'NR == 2 { print $2 }') at $front_out"
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
"$PYTHON" - "$work/results.tsv" "$SIZE_MIB" "$CAPPED_MIB" "$SEG_MIB" "${TOOLS[@]}" <<'EOF'
import collections
import statistics
import sys

path, size_mib, capped_mib, seg_mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tools = sys.argv[5:]
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


SEG = ("hubd-capped", "hubd-base-capped", "aria2c-capped", "curl-capped")
FRONT = ("nginx", "hubd-front", "front-cold", "front-cold-x8", "nginx-x8", "front-capped",
         "front-capped-x8")
fmt = "  %-20s %5s %11s %9s %11s  %s"
print(fmt % ("tool", "runs", "median wall", "MiB/s", "CPU s/GiB", "vs hubd over the same protocol"))
for proto, https in (("http", False), ("https", True)):
    section = [t for t in tools if t.endswith("-https") == https and t not in FRONT + SEG]
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

def ratio(a, b):
    return med[a][0] / med[b][0] if a in med and b in med and med[b][0] > 0 else None


def section(names, mib_of, vs_of, noted):
    """The rows of names (MiB per row from mib_of, the last column from
    vs_of(row, wall)), then the per-round notes of the rows in noted."""
    for t in names:
        if t not in tools:
            continue
        if t not in med:
            print(fmt % (t, 0, "-", "-", "-", "every run failed"))
            continue
        wall, cpu, n = med[t]
        mib = mib_of(t)
        mibs = mib / wall if wall > 0 else float("inf")
        print(fmt % (t, n, "%.3f s" % wall, "%.1f" % mibs, "%.2f" % (cpu / (mib / 1024)),
                     vs_of(t, wall)))
    for t in noted:
        notes = [r[6] for r in rows if r[0] == t and r[4] == "ok" and len(r) > 6]
        if notes:
            print("  %-20s %s" % (t, " | ".join(notes)))


# BENCH_FRONT: the HTTP front against nginx. MiB/s is per client (each of
# the x8 rows' clients got the whole file within the wall time).
def front_vs(t, wall):
    if t == "nginx":
        return "baseline (warm)"
    if t == "hubd-front" and ratio("nginx", t) is not None:
        return "%.2fx nginx's throughput (goal >= 0.9x)" % ratio("nginx", t)
    if t == "front-cold":
        return "baseline (cold, one client)"
    if t == "front-cold-x8" and ratio(t, "front-cold") is not None:
        return "%.2fx the wall of one client (goal <= 1.2x)" % ratio(t, "front-cold")
    if t == "nginx-x8" and ratio(t, "nginx") is not None:
        return "%.2fx the wall of one nginx client" % ratio(t, "nginx")
    if t == "front-capped":
        return "baseline (cold, one client, origin capped per connection)"
    if t == "front-capped-x8" and ratio(t, "front-capped") is not None:
        return "%.2fx the wall of one client (goal <= 1.2x)" % ratio(t, "front-capped")
    return "-"


if any(t in FRONT for t in tools):
    print("front (curl alone timed; CPU: the clients' plus the serving process's)")
    section(FRONT, lambda t: capped_mib if t.startswith("front-capped") else size_mib, front_vs,
            ("front-cold", "front-cold-x8", "front-capped", "front-capped-x8"))


# BENCH_SEGMENTS: against an origin that caps each connection.
def seg_vs(t, wall):
    if t == "aria2c-capped":
        return "baseline"
    a = ratio("aria2c-capped", t)
    if a is None:
        return "-"
    return "%.2fx faster than aria2c" % a if a >= 1 else "%.2fx slower than aria2c" % (1 / a)


if any(t in SEG for t in tools):
    print("capped origin (%d MiB, each connection capped)" % seg_mib)
    section(SEG, lambda t: seg_mib, seg_vs, SEG)

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

# crowd_run LABEL BUILD: one crowd against a fresh hubd of BUILD; prints its
# line of the crowd section.
crowd_run() {
    local label=$1 build=$2 out
    HUBD=$build/daemon/hubd HUBCTL=$build/client/hubctl
    if ! start_hubd "$work/cache-crowd" --config "$work/crowd.conf"; then
        printf '  %-10s failed: %s\n' "$label" "$HUBD_FAILURE"
        return 0
    fi
    out=$("$PYTHON" "$CROWD_PY" --socket "$HUBD_SOCKET" --pid "$hubd_pid" --url "$crowd_url" \
        --sha256 "$crowd_sha" --count "$CROWD_N" 2>&1) || out="failed: $out"
    stop_hubd
    "$PYTHON" - "$label" "$out" <<'EOF'
import json
import sys

label, out = sys.argv[1], sys.argv[2]
try:
    r = json.loads(out)
except ValueError:
    print("  %-10s %s" % (label, out.strip().splitlines()[-1] if out.strip() else "failed"))
    sys.exit(0)
errors = ", ".join("%s %s" % kv for kv in r["errors"].items()) or "none"
print("  %-10s peak RSS %6.1f MiB (%5.1f KiB a download over the %.1f MiB at start), "
      "%d/%d verified, at most %d at once, %.1f s, errors: %s"
      % (label, r["peak_rss_kib"] / 1024, (r["peak_rss_kib"] - r["start_rss_kib"]) / r["count"],
         r["start_rss_kib"] / 1024, r["ok"], r["count"], r["max_in_flight"], r["wall_s"], errors))
EOF
}

if [[ ${BENCH_CROWD:-0} == 1 ]]; then
    mkdir -p "$work/crowd-origin"
    head -c 65536 /dev/urandom >"$work/crowd-origin/small.bin"
    crowd_sha=$(sha256sum "$work/crowd-origin/small.bin" | cut -d' ' -f1)
    crowd_port=$("$NGINX_ORIGIN" freeport)
    NGINX_LIMIT_RATE=8k NGINX_CONNECTIONS=$((CROWD_N + 64)) \
        "$NGINX_ORIGIN" start "$work/nginx-crowd" "$work/crowd-origin" "$crowd_port" >/dev/null
    crowd_url=http://127.0.0.1:$crowd_port/capped/small.bin
    printf '[hubd]\nmax_downloads = %d\nmax_per_host = %d\nmax_jobs_per_user = %d\n' \
        "$CROWD_N" "$CROWD_N" "$CROWD_N" >"$work/crowd.conf"
    echo
    echo "crowd: $CROWD_N downloads of 64 KiB in flight at once, 8 KiB/s per connection (goal: peak RSS < 64 MiB)"
    for ((r = 1; r <= ROUNDS; r++)); do
        crowd_run "hubd" "$BUILD_DIR"
        [[ -n ${BENCH_BASE_BUILD:-} ]] && crowd_run "hubd-base" "$BENCH_BASE_BUILD"
    done
fi

echo
echo "SHA-256 on this machine (bench/sha256_speed.c: 256 MiB in 256 KiB updates, best of 3):"
"$BUILD_DIR/bench/sha256_speed"

echo
echo "mbedTLS's TLS 1.2 record ciphers, hubd's side of the https rows (bench/tls_cipher_speed.c):"
"$BUILD_DIR/bench/tls_cipher_speed"
