#!/usr/bin/env bash
# The README's demo: four clients ask one hubd for the same 256 MiB file at
# the same moment; the origin (a local nginx) sends its bytes once (in range
# requests over several connections), and all four get the same verified
# file.
#
#   ./scripts/demo.sh
#
# Runs on a fresh Debian 12 machine: installs the packages it needs, builds
# hubd into build/ (as scripts/test.sh configures it; a build dir the test suite
# made is reused), and leaves nothing behind: every
# process it starts is stopped by pid and its temp dir removed, on any exit.
#
# Environment (optional): BUILD_DIR (default build), DEMO_SIZE_MIB (256),
# DEMO_CLIENTS (4).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$REPO/build}
SIZE_MIB=${DEMO_SIZE_MIB:-256}
CLIENTS=${DEMO_CLIENTS:-4}
NGINX_ORIGIN=$REPO/scripts/nginx-origin.sh
HUBD=$BUILD_DIR/daemon/hubd
HUBCTL=$BUILD_DIR/client/hubctl
FILE_NAME=model.bin
# Everything here talks to loopback: a proxy from the caller's environment
# (which hubd and curl follow, as curl does, loopback included) would only
# be in the way.
unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

work=""        # the one temp dir holding everything the demo makes
hubd_pid=""    # hubd, our child
client_jobs=() # background pipelines "hubctl | sed" (the pids of the seds)

step() { printf '\n== %s\n' "$*"; }
info() { printf '   %s\n' "$*"; }
fail() {
    printf '\ndemo: FAILED: %s\n' "$*" >&2
    exit 1
}

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cleanup() {
    local rc=$? f
    trap - EXIT INT TERM
    if [[ -n $work ]]; then
        # hubctl processes still running (only after a failure or ^C).
        for f in "$work"/client*.pid; do
            if [[ -s $f ]]; then kill -TERM "$(<"$f")" 2>/dev/null || true; fi
        done
    fi
    for f in "${client_jobs[@]}"; do stop_pid "$f"; done
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

# Prints seconds since $1 (an $EPOCHREALTIME value) with one decimal.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

show_log_tail() {
    [[ -s $1 ]] || return 0
    printf '   --- last lines of %s\n' "$(basename "$1")" >&2
    tail -n 15 "$1" | sed 's/^/   | /' >&2
}

printf 'hubd demo: %d clients fetch one %d MiB file through one hubd at the same time\n' \
    "$CLIENTS" "$SIZE_MIB"
work=$(mktemp -d "${TMPDIR:-/tmp}/hubd-demo.XXXXXX")

step "Dependencies"
sh "$REPO/scripts/install-deps.sh"
info "Debian packages present"

step "Build in ${BUILD_DIR#"$REPO"/}"
t0=$EPOCHREALTIME
# Configure only when the build dir is new, as scripts/test.sh configures
# build/ (RelWithDebInfo, warnings as errors, tests on): the suite that
# follows on a fresh machine then compiles no object twice. After that
# 'cmake --build' re-runs cmake by itself whenever a CMakeLists.txt changes.
if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
    cmake -S "$REPO" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHUBD_WERROR=ON \
        -DBUILD_TESTING=ON >"$work/build.log" 2>&1 ||
        {
            show_log_tail "$work/build.log"
            fail "cmake configure failed"
        }
fi
# Only the two programs the demo runs; unit tests are not needed here.
cmake --build "$BUILD_DIR" -j2 --target hubd hubctl >>"$work/build.log" 2>&1 ||
    {
        show_log_tail "$work/build.log"
        fail "build failed"
    }
info "hubd and hubctl ready ($(since "$t0") s)"

step "A ${SIZE_MIB} MiB file of random bytes"
mkdir -p "$work/origin"
src=$work/origin/$FILE_NAME
head -c "$((SIZE_MIB * 1024 * 1024))" /dev/urandom >"$src"
src_sha=$(sha256sum "$src" | cut -d' ' -f1)
info "sha256 $src_sha"

step "Origin: nginx"
port=$("$NGINX_ORIGIN" freeport)
nginx_pid=$("$NGINX_ORIGIN" start "$work/nginx" "$work/origin" "$port")
url=http://127.0.0.1:$port/files/$FILE_NAME
info "serving $url (pid $nginx_pid)"

step "Cache daemon: hubd"
export HUBD_SOCKET=$work/hubd.sock
"$HUBD" --socket "$HUBD_SOCKET" --cache-dir "$work/cache" 2>"$work/hubd.log" &
hubd_pid=$!
t0=$EPOCHREALTIME
ready=""
for ((i = 0; i < 100; i++)); do # 100 x 0.1 s: give it 10 s
    if "$HUBCTL" status >/dev/null 2>&1; then
        ready=1
        break
    fi
    kill -0 "$hubd_pid" 2>/dev/null || {
        show_log_tail "$work/hubd.log"
        fail "hubd exited during start-up"
    }
    sleep 0.1
done
[[ -n $ready ]] || {
    show_log_tail "$work/hubd.log"
    fail "hubd did not answer 'hubctl status' within 10 s (socket $HUBD_SOCKET)"
}
info "pid $hubd_pid, socket $HUBD_SOCKET, cache $work/cache"
info "answered 'hubctl status' after $(since "$t0") s"

step "$CLIENTS clients at once: hubctl fetch --progress $url"
t0=$EPOCHREALTIME
for ((n = 1; n <= CLIENTS; n++)); do
    # hubctl's stdout (the path) goes to a file, its stderr (progress) through
    # sed, which tags each line. The pid file lets cleanup stop hubctl itself.
    {
        "$HUBCTL" fetch --progress "$url" 2>&1 >"$work/client$n.out" &
        echo $! >"$work/client$n.pid"
        rc=0
        wait $! || rc=$?
        echo "$rc" >"$work/client$n.rc"
    } | sed -u "s/^/[client $n] /" &
    client_jobs+=($!)
done
# Waiting for the seds also waits for their hubctl: a sed ends on its EOF.
wait "${client_jobs[@]}"
client_jobs=()
elapsed=$(since "$t0")

step "Checks"
problems=0
check() { # check OK|FAIL message
    if [[ $1 == OK ]]; then
        info "ok    $2"
    else
        info "FAIL  $2"
        problems=$((problems + 1))
    fi
}
first_path=""
succeeded=0
for ((n = 1; n <= CLIENTS; n++)); do
    rc=$(cat "$work/client$n.rc" 2>/dev/null || echo "?")
    path=$(cat "$work/client$n.out" 2>/dev/null || true)
    if [[ $rc != 0 ]]; then
        check FAIL "client $n: hubctl exited with status $rc"
        continue
    fi
    succeeded=$((succeeded + 1))
    [[ -z $first_path ]] && first_path=$path
    if [[ $path != "$first_path" ]]; then
        check FAIL "client $n printed '$path', client 1 printed '$first_path'"
    fi
done
if [[ $succeeded -eq $CLIENTS ]]; then
    check OK "all $CLIENTS clients exited 0"
fi
if [[ $succeeded -gt 0 && -n $first_path ]]; then
    check OK "all printed the same path: $first_path"
    got_sha=$(sha256sum "$first_path" | cut -d' ' -f1)
    if [[ $got_sha == "$src_sha" ]]; then
        check OK "its sha256 equals the source's"
    else
        check FAIL "its sha256 is $got_sha, the source's is $src_sha"
    fi
else
    check FAIL "no client printed a path"
fi
# The origin's side, from nginx's access log: a download may come in many
# range requests over several connections (segments), so what counts is the
# bytes sent: the file once, and at most 1% more (a chunk asked again).
size=$((SIZE_MIB * 1024 * 1024))
read -r origin_bytes origin_requests origin_conns < <("$NGINX_ORIGIN" sent "$work/nginx" "/files/$FILE_NAME")
origin_ratio=$(awk -v a="$origin_bytes" -v b="$size" 'BEGIN { printf "%.3f", a / b }')
if ((origin_bytes >= size && origin_bytes * 100 <= size * 101)); then
    check OK "nginx sent the file's bytes once (${origin_ratio}x its size, at most 1.01x allowed)"
else
    check FAIL "nginx sent $origin_bytes bytes of a $size-byte file (${origin_ratio}x; expected 1.00x to 1.01x)"
fi
# One line of the daemon's own counters (hubctl stats --json, named as the
# Prometheus metrics), for the summary. A key this script does not know any
# more fails the demo: the summary must come from today's JSON.
stats=$("$HUBCTL" stats --json 2>"$work/stats.err" | python3 -c '
import json, sys
s = json.load(sys.stdin)
print("%d miss(es), %d attached, %d hit(s), %d segmented; %.1f MiB from the origin, %.1f MiB served" % (
    s["hubd_misses_total"], s["hubd_dedup_attaches_total"], s["hubd_hits_total"],
    s["hubd_segmented_downloads_total"], s["hubd_origin_bytes_total"] / 1048576,
    s["hubd_served_bytes_total"] / 1048576))
' 2>>"$work/stats.err") || stats=""
if [[ -n $stats ]]; then
    check OK "hubctl stats --json read"
else
    show_log_tail "$work/stats.err"
    check FAIL "hubctl stats --json did not give the counters this demo reads"
    stats="unavailable"
fi

step "Summary"
info "file:    $SIZE_MIB MiB, sha256 $src_sha"
info "clients: $succeeded of $CLIENTS succeeded, $elapsed s from start to the last one done"
info "hubd:    $stats"
info "origin:  $((origin_bytes / 1048576)) MiB sent for $CLIENTS clients (${origin_ratio}x the file), in $origin_requests range request(s) over $origin_conns connection(s)"
if [[ $problems -ne 0 ]]; then
    show_log_tail "$work/hubd.log"
    fail "$problems check(s) failed"
fi
printf '\nOK\n'
