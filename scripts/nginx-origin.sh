#!/usr/bin/env bash
# Runs Debian's nginx as a throw-away origin server on loopback, for the demo
# and the benchmark: a real, fast HTTP server that hubd, curl and Python can
# all download the same file from.
#
#   scripts/nginx-origin.sh start DIR ROOTDIR PORT [CERT KEY]   serve ROOTDIR
#                     at http://127.0.0.1:PORT/files/, or https:// with CERT
#                     and KEY (PEM); print nginx's (master) pid. The same
#                     files under /capped/ go at most NGINX_LIMIT_RATE
#                     (default 16m) per connection, as a CDN caps them
#                     (every byte: a short request gets no burst);
#                     NGINX_CONNECTIONS (default 1024) connections at most;
#                     NGINX_BIND (default 127.0.0.1) the address it listens on
#   scripts/nginx-origin.sh stop DIR                 stop it, wait for the exit
#   scripts/nginx-origin.sh count DIR URI            print how many GET URI
#                     requests answered 200 or 206 are in the access log
#   scripts/nginx-origin.sh sent DIR URI             print "BYTES REQUESTS
#                     CONNECTIONS": the body bytes those requests sent, their
#                     count, and over how many connections they came
#   scripts/nginx-origin.sh inflight DIR URI [STEP]  print "T N" lines, STEP
#                     seconds apart (default 0.5): N requests for URI answered
#                     200 or 206 were in flight T seconds after the first began
#   scripts/nginx-origin.sh freeport                 print a free loopback port
#
# With CERT and KEY: TLS 1.2 and 1.3, nginx's default cipher list with the
# client's preference order, a shared session cache and session tickets on.
# Everything nginx writes (config, pid file, temp dirs, logs) stays in DIR.
# It runs as the current user: root or not, no system file is touched.
# Access log lines are tab-separated (nginx escapes tabs inside values):
#   method  uri(without query)  status  body_bytes_sent  request_time(s)
#   tls_protocol  tls_cipher  tls_session_reused("r" or ".")  connection  msec
# (the three TLS columns are "-" without TLS; connection is nginx's serial
# number of the client connection, so requests on one keep-alive connection
# share it; msec is when the request ended, in seconds since the epoch with
# milliseconds, so it began at msec - request_time).
set -euo pipefail

NGINX=${NGINX:-/usr/sbin/nginx}

die() {
    echo "nginx-origin: $*" >&2
    exit 1
}

usage() {
    sed -n '6,23p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# Prints the pid in DIR's pid file if that process is alive and is nginx;
# prints nothing otherwise (stale pid file, or the pid was reused).
live_pid() {
    local pidfile=$1/nginx.pid pid
    [[ -s $pidfile ]] || return 0
    pid=$(<"$pidfile")
    [[ $pid =~ ^[0-9]+$ ]] || return 0
    if kill -0 "$pid" 2>/dev/null && grep -q nginx "/proc/$pid/cmdline" 2>/dev/null; then
        echo "$pid"
    fi
}

cmd_start() {
    [[ $# -eq 3 || $# -eq 5 ]] || usage
    local dir=$1 root=$2 port=$3 cert=${4:-} key=${5:-} user_line="" listen tls_lines=""
    local limit_rate=${NGINX_LIMIT_RATE:-16m} connections=${NGINX_CONNECTIONS:-1024}
    local bind=${NGINX_BIND:-127.0.0.1}
    [[ $bind =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "NGINX_BIND must be an IPv4 address, not '$bind'"
    [[ $limit_rate =~ ^[1-9][0-9]*[km]?$ ]] || die "NGINX_LIMIT_RATE must be like 16m, not '$limit_rate'"
    # nginx paces a response by waiting sent/rate after each write, and a
    # write may be a whole socket buffer or sendfile_max_chunk (2m): a
    # request for 1 or 2 MiB went out at once, uncapped. Writes of a
    # sixteenth of a second's worth keep every byte of every request at
    # the rate (within 2%: nginx rounds each wait down to a millisecond).
    local send_chunk=${limit_rate%[km]}
    case $limit_rate in
    *k) send_chunk=$((send_chunk * 1024)) ;;
    *m) send_chunk=$((send_chunk * 1048576)) ;;
    esac
    send_chunk=$((send_chunk / 16 > 4096 ? send_chunk / 16 : 4096))
    [[ $connections =~ ^[1-9][0-9]{0,5}$ ]] || die "NGINX_CONNECTIONS must be a number, not '$connections'"
    [[ -x $NGINX ]] || die "$NGINX not found: install nginx-light (scripts/install-deps.sh)"
    [[ -d $root ]] || die "ROOTDIR $root is not a directory"
    [[ $port =~ ^[0-9]+$ ]] || die "PORT must be a number, not '$port'"
    mkdir -p "$dir"
    # nginx resolves relative paths against its prefix, not our cwd.
    dir=$(cd "$dir" && pwd -P)
    root=$(cd "$root" && pwd -P)
    [[ -z $(live_pid "$dir") ]] || die "an nginx already runs from $dir (pid $(live_pid "$dir"))"
    listen="$bind:$port"
    if [[ -n $cert ]]; then
        [[ -r $cert ]] || die "CERT $cert is not a readable file"
        [[ -r $key ]] || die "KEY $key is not a readable file"
        cert=$(cd "$(dirname "$cert")" && pwd -P)/$(basename "$cert")
        key=$(cd "$(dirname "$key")" && pwd -P)/$(basename "$key")
        listen="$listen ssl"
        # Session resumption both ways: the shared cache (session ids) and
        # tickets (the ticket key is made at start, so it lasts one run).
        tls_lines="
        ssl_certificate $cert;
        ssl_certificate_key $key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_prefer_server_ciphers off;
        ssl_session_cache shared:origin_tls:1m;
        ssl_session_timeout 1h;
        ssl_session_tickets on;"
    fi
    mkdir -p "$dir/temp"/{client,proxy,fastcgi,uwsgi,scgi}
    rm -f "$dir/nginx.pid"

    # As root, nginx would switch its workers to 'nobody', who may not be
    # able to read ROOTDIR; name root's own user instead. As anyone else the
    # directive only earns a warning, so leave it out.
    if [[ $(id -u) -eq 0 ]]; then
        user_line="user $(id -un) $(id -gn);"
    fi

    cat >"$dir/nginx.conf" <<EOF
# Written by scripts/nginx-origin.sh; every path is inside $dir.
$user_line
# One worker: the benchmark runs one download at a time on a 2-core machine,
# so the other core stays free for the client being measured.
worker_processes 1;
pid $dir/nginx.pid;
worker_rlimit_nofile $((connections * 2 + 64));
error_log $dir/error.log warn;

events {
    worker_connections $connections;
}

http {
    default_type application/octet-stream;
    client_body_temp_path $dir/temp/client;
    proxy_temp_path $dir/temp/proxy;
    fastcgi_temp_path $dir/temp/fastcgi;
    uwsgi_temp_path $dir/temp/uwsgi;
    scgi_temp_path $dir/temp/scgi;

    log_format origin "\$request_method\t\$uri\t\$status\t\$body_bytes_sent\t\$request_time\t\$ssl_protocol\t\$ssl_cipher\t\$ssl_session_reused\t\$connection\t\$msec";
    access_log $dir/access.log origin;

    # With TLS nginx cannot use sendfile (no kernel TLS here): it reads and
    # encrypts in user space; the setting is harmless then.
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 75s;
    keepalive_requests 10000;

    server {
        listen $listen;
        server_name localhost;$tls_lines

        location /files/ {
            alias $root/;
        }
        location /capped/ {
            alias $root/;
            limit_rate $limit_rate;
            sendfile_max_chunk $send_chunk;
        }
        location / {
            return 404;
        }
    }
}
EOF

    # -e: the error log before the config is read (default is under /var/log).
    # nginx forks into the background; the parent returns once it listens.
    # NGINX in nginx's environment names sockets it inherits (binary
    # upgrade): an exported NGINX=PATH must not reach it.
    if ! env -u NGINX "$NGINX" -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" \
        </dev/null >/dev/null 2>>"$dir/nginx.stderr"; then
        tail -n 5 "$dir/nginx.stderr" "$dir/error.log" >&2 2>/dev/null || true
        die "nginx failed to start (config $dir/nginx.conf)"
    fi
    # The daemonised child writes the pid file a moment after the parent exits.
    local i pid=""
    for ((i = 0; i < 100; i++)); do
        pid=$(live_pid "$dir")
        [[ -n $pid ]] && break
        sleep 0.05
    done
    [[ -n $pid ]] || die "nginx started but wrote no pid file in $dir"
    echo "$pid"
}

cmd_stop() {
    [[ $# -eq 1 ]] || usage
    local dir=$1 pid i
    pid=$(live_pid "$dir")
    [[ -n $pid ]] || return 0 # not running: nothing to do
    kill -TERM "$pid"         # fast shutdown of master and workers
    # nginx is not our child (it daemonised), so poll instead of wait.
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    echo "nginx-origin: pid $pid ignored SIGTERM for 10 s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
}

cmd_count() {
    [[ $# -eq 2 ]] || usage
    local log=$1/access.log
    [[ -f $log ]] || die "no access log at $log"
    awk -F'\t' -v uri="$2" \
        '$1 == "GET" && $2 == uri && ($3 == "200" || $3 == "206") { n++ } END { print n + 0 }' "$log"
}

cmd_sent() {
    [[ $# -eq 2 ]] || usage
    local log=$1/access.log
    [[ -f $log ]] || die "no access log at $log"
    awk -F'\t' -v uri="$2" '
        $1 == "GET" && $2 == uri && ($3 == "200" || $3 == "206") {
            bytes += $4; n++
            if (!($9 in conns)) { conns[$9] = 1; c++ }
        }
        # %.0f: mawk (Debian'"'"'s awk) prints %d of 2 GiB or more as 2147483647.
        END { printf "%.0f %d %d\n", bytes, n, c }' "$log"
}

cmd_inflight() {
    [[ $# -eq 2 || $# -eq 3 ]] || usage
    local log=$1/access.log step=${3:-0.5}
    [[ -f $log ]] || die "no access log at $log"
    [[ $step =~ ^[0-9]*\.?[0-9]+$ ]] || die "STEP must be a number of seconds, not '$step'"
    awk -F'\t' -v uri="$2" -v step="$step" '
        $1 == "GET" && $2 == uri && ($3 == "200" || $3 == "206") && NF >= 10 {
            n++; end[n] = $10; begin[n] = $10 - $5
            if (n == 1 || begin[n] < t0) t0 = begin[n]
            if (n == 1 || end[n] > t1) t1 = end[n]
        }
        END {
            if (step <= 0 || !n) exit
            for (t = t0; t <= t1 + step / 2; t += step) {
                c = 0
                for (i = 1; i <= n; i++) if (begin[i] <= t && t < end[i]) c++
                printf "%.2f %d\n", t - t0, c
            }
        }' "$log"
}

cmd_freeport() {
    [[ $# -eq 0 ]] || usage
    # The kernel picks a free port; it is closed again before nginx binds it,
    # which is racy in principle but fine on a machine of our own.
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

[[ $# -ge 1 ]] || usage
sub=$1
shift
case $sub in
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
count) cmd_count "$@" ;;
sent) cmd_sent "$@" ;;
inflight) cmd_inflight "$@" ;;
freeport) cmd_freeport "$@" ;;
*) usage ;;
esac
