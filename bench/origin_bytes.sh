#!/usr/bin/env bash
# Benchmark (not a test): what one segmented download costs the origin
# ("the origin pays once"), with the build before a change beside
# it in the same run (BENCH_BASE_BUILD).
#
#   bench/origin_bytes.sh [SIZE_MIB (default 1024)] [ROUNDS (default 2)]
#
# Each round fetches one random file with `hubctl fetch --sha256` from a local
# nginx (scripts/nginx-origin.sh), once per build, each into a fresh cache
# that is deleted after its fetch (one cache on disk at a time), with the
# default segment settings; the builds' order alternates from round to round.
# One line per fetch:
#   ratio    body bytes nginx sent for the file (its access log) / its size
#   reqs     the requests for it, and conns: over how many connections
#            (distinct connection serials in the log)
#   lanes    the most connections `hubctl status` showed at once (sampled
#            about every 0.2 s; the goal is conns <= 2 x lanes)
#   wall     of hubctl fetch (stopped, and the row FAIL, when its bytes done
#            stand still for BENCH_STALL seconds, default 120)
#   load     the 1-minute load average as it ended (the fetch itself and
#            nginx count for about 2; others sharing the machine show here)
#   splits, slow, stalls, failed   hubd's log at debug level: tail splits,
#            re-requests of a far slower connection, of a silent one, and
#            ranges that failed and went again (the first few such lines
#            follow the row)
#
# Environment (optional): BUILD_DIR (default build, built when needed),
# BENCH_BASE_BUILD (a second, already built build dir: its hubd runs beside),
# BENCH_TMPDIR (where the work dir goes: the file, nginx, the caches; it
# needs the file's size twice over, plus 10 GiB kept free),
# BENCH_FILE (serve this existing file instead of making one, e.g. a 16 GiB
# file made once for several runs) with BENCH_FILE_SHA256 (else computed),
# BENCH_CAPPED_RATE (fetch from /capped/ at that rate per connection, e.g.
# 16m; default /files/, uncapped), BENCH_LOAD=1 (during each fetch, two busy
# shell loops and a `dd ... conv=fdatasync` loop writing 512 MiB at a time
# in the work dir: the machine itself is busy).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
NGINX_ORIGIN=$REPO/scripts/nginx-origin.sh
unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

SIZE_MIB=${1:-1024}
ROUNDS=${2:-2}
if ! [[ $SIZE_MIB =~ ^[1-9][0-9]*$ && $ROUNDS =~ ^[1-9][0-9]*$ && $# -le 2 ]]; then
    echo "usage: bench/origin_bytes.sh [SIZE_MIB (default 1024)] [ROUNDS (default 2)]" >&2
    exit 2
fi
BUILD_DIR=${BUILD_DIR:-build}
if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" --target hubd hubctl >/dev/null
BUILDS=("hubd=$(cd "$BUILD_DIR" && pwd)")
if [[ -n ${BENCH_BASE_BUILD:-} ]]; then
    for b in daemon/hubd client/hubctl; do
        [[ -x $BENCH_BASE_BUILD/$b ]] || {
            echo "bench: $BENCH_BASE_BUILD/$b is not built" >&2
            exit 2
        }
    done
    BUILDS+=("hubd-base=$(cd "$BENCH_BASE_BUILD" && pwd)")
fi

work=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/origin-bytes.XXXXXX")
hubd_pid="" sampler_pid="" load_pids=()
stop_load() {
    local p
    for p in "${load_pids[@]}"; do stop_pid "$p"; done
    load_pids=()
    rm -f "$work/load.dat"
}
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_load
    [[ -n $sampler_pid ]] && stop_pid "$sampler_pid"
    [[ -n $hubd_pid ]] && stop_pid "$hubd_pid"
    "$NGINX_ORIGIN" stop "$work/nginx" || true
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Free MiB where the work dir is.
free_mib() { df -Pm "$work" | awk 'NR == 2 { print $4 }'; }
need_free() { # need_free MIB: stop before the disk gets within 10 GiB of full
    (($(free_mib) >= $1 + 10240)) || {
        echo "bench: $(free_mib) MiB free, need $1 + 10240" >&2
        exit 1
    }
}

mkdir -p "$work/root"
if [[ -n ${BENCH_FILE:-} ]]; then
    ln "$BENCH_FILE" "$work/root/f.bin" 2>/dev/null ||
        ln -s "$(realpath "$BENCH_FILE")" "$work/root/f.bin"
    size=$(stat -Lc %s "$BENCH_FILE")
    sha=${BENCH_FILE_SHA256:-$(sha256sum <"$BENCH_FILE" | cut -d' ' -f1)}
else
    size=$((SIZE_MIB * 1048576))
    need_free $((SIZE_MIB * 2))
    # AES-CTR of zeros: random enough for the wire, far faster than urandom
    # (openssl ends on the closed pipe).
    sha=$({ openssl enc -aes-128-ctr -pass pass:origin-bytes -nosalt -pbkdf2 </dev/zero \
        2>/dev/null || true; } | head -c "$size" | tee "$work/root/f.bin" | sha256sum | cut -d' ' -f1)
fi
port=$("$NGINX_ORIGIN" freeport)
NGINX_LIMIT_RATE=${BENCH_CAPPED_RATE:-16m} "$NGINX_ORIGIN" start "$work/nginx" "$work/root" "$port" >/dev/null
uri=/files/f.bin
[[ -n ${BENCH_CAPPED_RATE:-} ]] && uri=/capped/f.bin
export HUBD_SOCKET=$work/hubd.sock

start_load() {
    local i
    for i in 1 2; do
        sh -c 'while :; do :; done' &
        load_pids+=($!)
    done
    sh -c 'while :; do dd if=/dev/zero of="$1" bs=1M count=512 conv=fdatasync 2>/dev/null; done' \
        sh "$work/load.dat" &
    load_pids+=($!)
}

# fetch NAME DIR: one download with that build into a fresh cache; one line.
fetch() {
    local name=$1 hubd=$2/daemon/hubd hubctl=$2/client/hubctl cache=$work/cache
    local log=$work/hubd-$1.log n0 t0 t1 rc i load1 fetch_pid
    need_free $((size / 1048576 + 1024))
    sync
    "$hubd" --socket "$HUBD_SOCKET" --cache-dir "$cache" --log-level debug 2>"$log" &
    hubd_pid=$!
    for ((i = 0; i < 100; i++)); do
        "$hubctl" status >/dev/null 2>&1 && break
        sleep 0.1
    done
    echo 0 >"$work/lanes"
    rm -f "$work/stalled"
    [[ ${BENCH_LOAD:-0} == 1 ]] && start_load
    n0=$(wc -l <"$work/nginx/access.log")
    t0=$(date +%s.%N)
    "$hubctl" fetch -q --sha256 "$sha" "http://127.0.0.1:$port$uri" >/dev/null 2>"$work/fetch.err" &
    fetch_pid=$!
    # The most connections the download showed at once; a download whose
    # count of bytes done stands still for BENCH_STALL seconds is stopped.
    (
        most=0 last=-1 since=$SECONDS
        while :; do
            s=$("$hubctl" status --json 2>/dev/null) || true
            c=$(grep -o '"connections": *[0-9]*' <<<"$s" | grep -o '[0-9]*$' | sort -n | tail -n 1) || true
            ((${c:-0} > most)) && most=$c && echo "$most" >"$work/lanes"
            d=$(grep -o '"done": *[0-9]*' <<<"$s" | grep -o '[0-9]*$' | head -n 1) || true
            [[ ${d:-0} != "$last" ]] && last=${d:-0} && since=$SECONDS
            if ((SECONDS - since >= ${BENCH_STALL:-120})); then
                echo "stalled: no byte done for ${BENCH_STALL:-120} s at $last: stopped" >"$work/stalled"
                kill "$fetch_pid" 2>/dev/null
                exit 0
            fi
            sleep 0.2
        done
    ) &
    sampler_pid=$!
    rc=0
    wait "$fetch_pid" || rc=$?
    t1=$(date +%s.%N)
    read -r load1 _ </proc/loadavg
    stop_load
    stop_pid "$sampler_pid"
    sampler_pid=""
    stop_pid "$hubd_pid"
    hubd_pid=""
    rm -rf "$cache" # one cache on disk at a time
    sleep 0.5       # nginx logs a request its client cut once it sees the close
    awk -F'\t' -v n0="$n0" -v uri="$uri" -v size="$size" -v name="$name" -v rc="$rc" \
        -v wall="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" \
        -v lanes="$(<"$work/lanes")" -v load1="$load1" \
        -v splits="$(grep -c ': split [0-9]' "$log" || true)" \
        -v slow="$(grep -c 'asked for again on another connection' "$log" || true)" \
        -v stalls="$(grep -c ': asked for again$' "$log" || true)" \
        -v failed="$(grep -c "a connection's range .* failed" "$log" || true)" \
        'NR > n0 && $1 == "GET" && $2 == uri && ($3 == "200" || $3 == "206") {
             b += $4; r++; if (!($9 in seen)) { seen[$9] = 1; c++ } }
         END { printf "%-10s %s %7.4f %5d %5d %5d %7ss %5s %6d %4d %6d %6d\n", name,
                   rc == 0 ? "ok  " : "FAIL", b / size, r, c, lanes, wall, load1, splits, slow,
                   stalls, failed }' \
        "$work/nginx/access.log"
    [[ $rc -eq 0 ]] || sed 's/^/    /' "$work/fetch.err" "$work/stalled" 2>/dev/null || true
    # What went again, and why (the first few of hubd's lines).
    grep -E ": split [0-9]|asked for again|range .* failed|connection fewer" "$log" |
        head -n 6 | sed 's/^/    /' || true
}

echo "== origin bytes: $((size / 1048576)) MiB, $uri, load ${BENCH_LOAD:-0}," \
    "$(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M')"
echo "build      rc     ratio  reqs conns lanes     wall  load splits slow stalls failed"
for ((r = 0; r < ROUNDS; r++)); do
    for ((k = 0; k < ${#BUILDS[@]}; k++)); do
        b=${BUILDS[(k + r) % ${#BUILDS[@]}]}
        fetch "${b%%=*}" "${b#*=}"
    done
done
