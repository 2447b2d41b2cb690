#!/usr/bin/env bash
# Benchmark (not a test) of the Hub's files through hubd: a Hugging Face repo of one big file and
# 20 small ones, gated, on a CDN that caps each connection, fetched by
# several local users with tokens of their own. It compares
#   hubctl          `hubctl hf download` into the user's HF cache
#   js-direct       @huggingface/hub's snapshotDownload straight from the Hub
#   js-front        the same with HF_ENDPOINT at hubd's /hf front
# each for one user (fresh caches everywhere), then for USERS users at once
# (uids 2001.., one token each, each with an HF cache of their own), on
#   wall   seconds until every user has the whole repo
#   cdn    bytes the CDN sent, as a multiple of the LFS files' size (the
#          small files come from the Hub itself)
#   disk   allocated blocks (du) of hubd's blobs and every HF cache, as a
#          multiple of the repo's size (hubd's SQLite files left out: the
#          metadata)
# and, after the hubctl rows, how many requests for file contents a user's
# @huggingface/hub downloadFileToCacheDir of every file still sends (the
# goal is none: it finds them in the cache).
#
#   bench/hf.sh [BIG_MIB (default 1024)] [USERS (default 8)]
#
# Environment: BUILD_DIR (default build), BENCH_TMPDIR (default $TMPDIR or
# /tmp), BENCH_CAPPED_RATE (default 16m per connection, nginx limit_rate:
# about what the Hub's CDN gives one connection), BENCH_HF_ROWS (default
# "hubctl js-direct js-front": the rows to run). Runs as root (the users
# are made with setpriv). The stand-in Hub is tests/hubstub.py with its CDN
# in nginx (scripts/nginx-origin.sh); the JavaScript client is
# tests/js/hubclient.mjs (scripts/install-deps.sh installs it).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$REPO/build}
[[ $BUILD_DIR == /* ]] || BUILD_DIR=$REPO/$BUILD_DIR
HUBD=$BUILD_DIR/daemon/hubd
HUBCTL=$BUILD_DIR/client/hubctl
NGINX_ORIGIN=$REPO/scripts/nginx-origin.sh
JS=$REPO/tests/js/hubclient.mjs
BIG_MIB=${1:-1024}
USERS=${2:-8}
RATE=${BENCH_CAPPED_RATE:-16m}

die() {
    echo "bench/hf: $*" >&2
    exit 1
}
[[ $BIG_MIB =~ ^[1-9][0-9]*$ ]] || die "BIG_MIB must be a positive number, not '$BIG_MIB'"
[[ $USERS =~ ^[1-9][0-9]?$ ]] || die "USERS must be 1 to 99, not '$USERS'"
[[ $(id -u) -eq 0 ]] || die "run as root: the users are made with setpriv"
[[ -x $HUBD && -x $HUBCTL ]] || die "build first: $HUBD, $HUBCTL"
[[ -d $REPO/tests/js/node_modules/@huggingface/hub ]] || die "run scripts/install-deps.sh first"

work=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/hubd-hf-bench.XXXXXX")
chmod 755 "$work"
hubd_pid="" stub_pid=""
stop_pid() {
    kill "$1" 2>/dev/null || return 0
    local i
    for ((i = 0; i < 100; i++)); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -9 "$1" 2>/dev/null || true
}
cleanup() {
    [[ -n $hubd_pid ]] && stop_pid "$hubd_pid"
    [[ -n $stub_pid ]] && stop_pid "$stub_pid"
    "$NGINX_ORIGIN" stop "$work/nginx" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# ---- the repo, the CDN (nginx, capped) and the Hub (hubstub) ----------------
mkdir -p "$work/cdn" "$work/nginx"
python3 - "$work/repos.json" "$BIG_MIB" "$USERS" <<'EOF'
import json, sys
path, big, users = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
files = {"model.safetensors": {"lfs": {"size": big << 20, "seed": 1}}}
for i in range(12):  # configs, tokenizers: small git files
    files["config-%02d.json" % i] = {"text": ("{\"n\": %d}\n" % i) * (100 * (i + 1))}
for i in range(8):  # small LFS files (a tokenizer model, an adapter)
    files["extra/part-%02d.bin" % i] = {"lfs": {"size": 512 << 10, "seed": 100 + i}}
names = ["u%d" % i for i in range(1, users + 1)]
json.dump({"tokens": {"hf_tok_" + n: n for n in names},
           "repos": [{"id": "bench/model", "gated": names, "files": files}]}, open(path, "w"))
EOF
ngx_port=$("$NGINX_ORIGIN" freeport)
NGINX_LIMIT_RATE=$RATE "$NGINX_ORIGIN" start "$work/nginx" "$work/cdn" "$ngx_port" >/dev/null
python3 "$REPO/tests/hubstub.py" --repos "$work/repos.json" --port-file "$work/stub.port" \
    --cdn-dir "$work/cdn" --cdn-base "http://127.0.0.1:$ngx_port/capped" 2>"$work/hubstub.log" &
stub_pid=$!
for ((i = 0; i < 600; i++)); do
    [[ -s $work/stub.port ]] && break
    kill -0 "$stub_pid" 2>/dev/null || die "hubstub exited"
    sleep 0.1
done
hub_port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hub"])' "$work/stub.port")
HUB=http://127.0.0.1:$hub_port
repo_bytes=$(python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))["repos"][0]["files"]
print(sum(f["lfs"]["size"] if "lfs" in f else len(f["text"].encode()) for f in d.values()),
      sum(f["lfs"]["size"] for f in d.values() if "lfs" in f))' "$work/repos.json")
read -r repo_bytes lfs_bytes <<<"$repo_bytes"

# ---- hubd, with its front, its socket open to the users ---------------------
front_port=$("$NGINX_ORIGIN" freeport)
printf '[hubd]\nsocket_mode = 0666\nhttp_listen = 127.0.0.1:%s\nhf_upstream = %s\n' \
    "$front_port" "$HUB" >"$work/hubd.conf"
export HUBD_SOCKET=$work/hubd.sock
start_hubd() { # fresh cache each time
    [[ -n $hubd_pid ]] && stop_pid "$hubd_pid"
    rm -rf "$work/hubd-cache"
    "$HUBD" --config "$work/hubd.conf" --socket "$HUBD_SOCKET" --cache-dir "$work/hubd-cache" \
        2>>"$work/hubd.log" &
    hubd_pid=$!
    for ((i = 0; i < 100; i++)); do
        "$HUBCTL" stats >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "hubd did not start: $(tail -n 3 "$work/hubd.log")"
}

# A user's home: uid 2000+N, its own HF cache, its token in $HF_HOME/token.
home_of() { echo "$work/home/u$1"; }
fresh_homes() {
    rm -rf "$work/home"
    local n h
    for ((n = 1; n <= USERS; n++)); do
        h=$(home_of "$n")
        mkdir -p "$h/.cache/huggingface"
        printf 'hf_tok_u%d' "$n" >"$h/.cache/huggingface/token"
        chown -R $((2000 + n)):$((2000 + n)) "$h"
    done
    chmod 755 "$work/home"
}
as_user() { # N CMD...: runs CMD as user N with its home
    local n=$1 h
    shift
    h=$(home_of "$n")
    setpriv --reuid=$((2000 + n)) --regid=$((2000 + n)) --clear-groups \
        env -i PATH="$PATH" HOME="$h" HUBD_SOCKET="$HUBD_SOCKET" "$@"
}
user_run() { # TOOL N: one user's download of the whole repo
    local tool=$1 n=$2 h
    h=$(home_of "$n")
    case $tool in
    hubctl) as_user "$n" "$HUBCTL" hf download --quiet bench/model ;;
    js-direct | js-front)
        local url=$HUB
        [[ $tool == js-front ]] && url=http://127.0.0.1:$front_port/hf
        as_user "$n" node "$JS" snapshot --hub-url "$url" --repo bench/model \
            --token "hf_tok_u$n" --dir "$h/.cache/huggingface/hub" | tail -n 1 |
            python3 -c 'import json,sys; r = json.load(sys.stdin); sys.exit(0 if r["ok"] else 1)'
        ;;
    esac >>"$work/run.log" 2>&1
}

cdn_sent() { "$NGINX_ORIGIN" sent "$work/nginx" "$1" | cut -d' ' -f1; }
cdn_total() {
    awk -F"\t" '$2 ~ /^\/capped\// { b += $4 } END { printf "%.0f\n", b }' "$work/nginx/access.log"
}
disk_kib() {
    du -sk "$work/hubd-cache/blobs" "$work/home" 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'
}

printf '%-14s %6s %9s %8s %8s %s\n' row users wall_s cdn_x disk_x note
row() { # TOOL USERS
    local tool=$1 users=$2 t0 t1 cdn0 rc=0 n pids=()
    start_hubd
    fresh_homes
    cdn0=$(cdn_total)
    t0=$(date +%s.%N)
    for ((n = 1; n <= users; n++)); do
        user_run "$tool" "$n" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    t1=$(date +%s.%N)
    local cdn=$(($(cdn_total) - cdn0)) disk note=""
    disk=$(($(disk_kib) * 1024))
    [[ $rc -eq 0 ]] || note="FAILED (see $work/run.log)"
    if [[ $tool == hubctl && $rc -eq 0 ]]; then
        # After hubctl: does the Hub's own client find everything?
        curl -s "$HUB/reset" >/dev/null
        local c0 after
        c0=$(cdn_total)
        as_user 1 node "$JS" snapshot --hub-url "$HUB" --repo bench/model --token hf_tok_u1 \
            --dir "$(home_of 1)/.cache/huggingface/hub" >"$work/after.json" 2>&1 || true
        after=$(python3 -c 'import json,sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print(sum(1 for m, u, rng, st, fin in r.get("requests", []) if "/resolve/" in u and rng != "bytes=0-0"))' \
            "$work/after.json")
        note="after: js snapshot sent $after content request(s), CDN $(($(cdn_total) - c0)) B"
    fi
    awk -v r="$tool" -v u="$users" -v a="$t0" -v b="$t1" -v c="$cdn" -v d="$disk" \
        -v s="$repo_bytes" -v l="$lfs_bytes" -v n="$note" \
        'BEGIN { printf "%-14s %6d %9.2f %8.3f %8.3f %s\n", r, u, b - a, c / l, d / s, n }'
}
for tool in ${BENCH_HF_ROWS:-hubctl js-direct js-front}; do
    row "$tool" 1
    row "$tool" "$USERS"
done
echo "repo: $repo_bytes bytes (one ${BIG_MIB} MiB file, 20 small ones), CDN capped at $RATE per connection"
