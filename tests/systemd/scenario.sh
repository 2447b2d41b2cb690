#!/usr/bin/env bash
# An admin's day with the hubd package, inside a booted container (run by
# scripts/systemd-test.sh through nsenter, as root, systemd as PID 1):
#
#   scenario.sh HUBD_DEB UPGRADE_DEB UPGRADE_VERSION
#
# Install, socket activation, users in and out of group hubd, the HTTP front,
# reload and restart with a bad hubd.conf, stop, upgrade, remove, purge.
# Prints an ok: or FAIL: line per check (command output indented under it),
# keeps going after a failure, and exits 1 if any check failed.
#
# Checks hand code to eval in single quotes on purpose: it runs at check time.
# shellcheck disable=SC2016
set -uo pipefail

DEB=$1 UP_DEB=$2 UP_VERSION=$3
PORT=8000
URL="http://127.0.0.1:$PORT/f.bin"
FRONT="http://127.0.0.1:8399"
CONF=/etc/hubd/hubd.conf
CLIENT_CONF=/etc/hubd/client.conf
T=/root/hubd-test/tmp
BOUND=60 # seconds a client may take to give up on a broken service
HINT_RE='systemctl status hubd|journalctl -u hubd'

failures=()
ok() { echo "ok: $*"; }
fail() {
    echo "FAIL: $*"
    failures+=("$*")
}
info() { echo "   . $*"; }
indent() { sed 's/^/      | /'; }
# check DESCRIPTION COMMAND...: ok if the command succeeds.
check() {
    local d=$1
    shift
    if "$@"; then ok "$d"; else fail "$d"; fi
}
# What the last run printed, indented under the check.
shown() { cat "$T/out" "$T/err" | indent; }

# run USER COMMAND...: as USER (runuser; root runs it as is), at most $limit
# seconds (exit 124 then). Sets rc and secs; stdout in $T/out, stderr in $T/err.
limit=120
run() {
    local user=$1 t0
    shift
    t0=$(date +%s.%N)
    if [ "$user" = root ]; then
        timeout -k 5 "$limit" "$@" >"$T/out" 2>"$T/err" </dev/null
    else
        timeout -k 5 "$limit" runuser -u "$user" -- "$@" >"$T/out" 2>"$T/err" </dev/null
    fi
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}
fetch() { run "$1" hubctl fetch "$URL"; }
pyfetch() { run "$@" python3 -c "import hubd; print(hubd.fetch('$URL', progress=False))"; }
out() { cat "$T/out"; }
said() { cat "$T/out" "$T/err" | grep -Eqi -- "$1"; }

state() { systemctl show -p "$2" --value "$1"; }
active() { [ "$(systemctl is-active "$1")" = "$2" ]; }
units() { # the two units' states, for the record
    local u
    for u in hubd.service hubd.socket; do
        info "$u: $(systemctl show -p ActiveState,SubState,Result,NRestarts --value "$u" | paste -sd' ')"
    done
}
origin_requests() { grep -cE '"[A-Z]+ /f\.bin ' /var/log/hubd-test-origin.log; }
home_of() { getent passwd "$1" | cut -d: -f6; }
# No per-user hubd of USER: nothing in ~/.cache/hubd, no hubd process.
no_user_daemon() { [ ! -e "$(home_of "$1")/.cache/hubd" ] && ! pgrep -u "$1" -x hubd >/dev/null; }
# Ends a per-user hubd of USER the way a user would, and forgets its cache.
drop_user_daemon() {
    runuser -u "$1" -- hubctl stop >/dev/null 2>&1
    rm -rf "$(home_of "$1")/.cache/hubd" "/tmp/hubd-$(id -u "$1")"
}

# ---- setup -------------------------------------------------------------------

origin_pid=""
stop_origin() { [ -z "$origin_pid" ] || kill "$origin_pid" 2>/dev/null; }
trap stop_origin EXIT

install() {
    run root dpkg -i "$DEB"
    if [ "$rc" -ne 0 ]; then
        fail "dpkg -i $(basename "$DEB") (exit $rc): nothing else can be tested"
        shown
        exit 1
    fi
    ok "dpkg -i $(basename "$DEB")"
    check "hubd.socket enabled" [ "$(systemctl is-enabled hubd.socket)" = enabled ]
    check "hubd.socket active after install" active hubd.socket active
    check "hubd.service inactive after install (socket activation: started by a client)" \
        active hubd.service inactive
    check "/run/hubd/hubd.sock is hubd:hubd 660" [ "$(stat -c '%U:%G %a' /run/hubd/hubd.sock)" = "hubd:hubd 660" ]
}

users() {
    local u
    for u in alice bob carol; do adduser --quiet --disabled-password --gecos "" "$u"; done
    adduser --quiet alice hubd && adduser --quiet bob hubd
    check "alice and bob in group hubd, carol in no hubd group" \
        bash -c '[[ " $(id -nG alice) " == *" hubd "* && " $(id -nG bob) " == *" hubd "* && " $(id -nG carol) " != *hubd* ]]'
}

# python3 -m http.server on loopback as nobody, serving a 4 MiB file; its
# request log (stderr) counts what the origin served.
origin() {
    mkdir -p /srv/origin
    head -c 4M /dev/urandom >/srv/origin/f.bin
    sha=$(sha256sum /srv/origin/f.bin | cut -d' ' -f1)
    # >>: O_APPEND, so that truncating the log below starts it afresh.
    setpriv --reuid=nobody --regid=nogroup --clear-groups python3 -m http.server \
        --bind 127.0.0.1 --directory /srv/origin "$PORT" >>/var/log/hubd-test-origin.log 2>&1 &
    origin_pid=$!
    local i
    for ((i = 0; i < 50; i++)); do
        curl -fsS -o /dev/null "http://127.0.0.1:$PORT/" 2>/dev/null && break
        sleep 0.2
    done
    check "origin: python3 -m http.server on 127.0.0.1:$PORT serves f.bin (4 MiB)" \
        curl -fsS -o /dev/null "$URL"
    : >/var/log/hubd-test-origin.log
}

# ---- members ---------------------------------------------------------------------

# Eviction's thread lowers its own priority (bgwork.h): under the unit's
# system call filter and without privileges too.
bg_thread() {
    local pid t nice=
    pid=$(state hubd.service MainPID)
    for t in /proc/"$pid"/task/*; do
        [ "$(cat "$t/comm" 2>/dev/null)" = hubd-bg ] && nice=$(awk '{ print $19 }' "$t/stat")
    done
    check "hubd's background thread hubd-bg runs at nice 10 (found: ${nice:-none})" [ "$nice" = 10 ]
}

first_fetch() {
    fetch alice
    path=$(out)
    if [ "$rc" -eq 0 ] && [[ $path == /var/cache/hubd/* ]]; then
        ok "alice: hubctl fetch (socket activation) -> $path (${secs} s)"
    else
        fail "alice: hubctl fetch exit $rc, expected a path under /var/cache/hubd"
        shown
    fi
    check "alice reads the file and its sha256 is the origin's" \
        [ "$(runuser -u alice -- sha256sum "$path" 2>/dev/null | cut -d' ' -f1)" = "$sha" ]
    check "hubd.service active after the first fetch" active hubd.service active
    bg_thread
    fetch bob
    check "bob: hubctl fetch -> the same path" [ "$rc" -eq 0 -a "$(out)" = "$path" ]
    check "the origin served f.bin once (requests: $(origin_requests))" [ "$(origin_requests)" -eq 1 ]
}

# ---- carol, outside group hubd ----------------------------------------------

carol_refused() { # what hubctl and the Python client print must name the refusal
    said 'refused' && said 'permission denied'
}

carol_no_fallback() { # $1: how the fallback is turned off; $2...: env for the commands
    local how=$1
    shift
    drop_user_daemon carol
    run carol env "$@" hubctl fetch "$URL"
    check "carol, $how: hubctl fetch fails (exit $rc)" [ "$rc" -ne 0 ]
    check "carol, $how: hubctl names the refusal and the 'adduser carol hubd' hint" \
        eval 'carol_refused && said "adduser carol hubd"'
    shown
    check "carol, $how: hubctl started no per-user hubd (no ~/.cache/hubd)" no_user_daemon carol
    pyfetch carol env "$@"
    check "carol, $how: hubd.fetch raises (exit $rc)" eval '[ "$rc" -ne 0 ] && grep -q Error "$T/err"'
    shown
    check "carol, $how: the Python client started no per-user hubd" no_user_daemon carol
}

carol() {
    carol_no_fallback "HUBD_NO_USER_DAEMON=1" HUBD_NO_USER_DAEMON=1
    printf '# written by tests/systemd/scenario.sh\nuser_daemon = no\n' >"$CLIENT_CONF"
    carol_no_fallback "$CLIENT_CONF user_daemon = no"
    rm -f "$CLIENT_CONF"

    # The default: a per-user hubd with its own cache, after saying why.
    drop_user_daemon carol
    fetch carol
    local words
    words=$(grep -m1 'refused' "$T/err" | sed 's/^hubctl: //')
    check "carol: hubctl fetch does not use the system cache (exit $rc: $(out))" \
        eval '[[ "$(out)" != /var/cache/hubd/* ]]'
    check "carol: hubctl says the system hubd refused her (permission denied), with 'adduser carol hubd'" \
        eval 'carol_refused && said "adduser carol hubd"'
    shown
    drop_user_daemon carol
    pyfetch carol
    check "carol: hubd.fetch falls back to a per-user cache (exit $rc: $(out))" \
        eval '[ "$rc" -eq 0 ] && [[ "$(out)" != /var/cache/hubd/* ]]'
    if [ -n "$words" ]; then
        check "carol: the Python client warns on stderr in hubctl's words: '$words'" grep -qF -- "$words" "$T/err"
    else
        check "carol: the Python client warns that the system hubd refused her" carol_refused
    fi
    shown
    drop_user_daemon carol
    check "carol: no per-user hubd left" no_user_daemon carol
}

doctor() {
    info "id carol: $(id carol)"
    run carol hubctl doctor
    check "carol: hubctl doctor exits non-zero ($rc) and says 'adduser carol hubd'" \
        eval '[ "$rc" -ne 0 ] && said "adduser carol hubd"'
    shown
    run alice hubctl doctor
    check "alice: hubctl doctor exits 0 ($rc)" [ "$rc" -eq 0 ]
    shown
}

front() {
    local before
    before=$(origin_requests)
    run alice bash -c "set -o pipefail; curl -fsS '$FRONT/$URL' | sha256sum"
    check "alice: curl $FRONT/$URL returns the file (exit $rc)" [ "$(cut -d' ' -f1 "$T/out")" = "$sha" ]
    run carol curl -sS -o /dev/null -w '%{http_code}' "$FRONT/$URL"
    check "carol: the front answers 403 (got $(out)), no allow_groups set" [ "$(out)" = 403 ]
    check "the front served alice from the cache (origin requests: $before -> $(origin_requests))" \
        [ "$(origin_requests)" -eq "$before" ]
}

# ---- the admin changes hubd.conf ------------------------------------------------

set_key() { # writes hubd.conf as shipped plus one line
    cp /root/hubd-test/hubd.conf.orig "$CONF"
    printf '%s\n' "$1" >>"$CONF"
}

reload() {
    cp -a "$CONF" /root/hubd-test/hubd.conf.orig
    local pid
    pid=$(state hubd.service MainPID)
    set_key "max_downloads = 8"
    run root systemctl reload hubd
    check "reload with max_downloads = 8: systemctl reload hubd exits 0" [ "$rc" -eq 0 ]
    [ "$rc" -eq 0 ] || shown
    set_key "max_downloads = lots"
    run root systemctl reload hubd
    check "reload with max_downloads = lots: systemctl reload hubd exits non-zero ($rc)" [ "$rc" -ne 0 ]
    systemctl status hubd --no-pager -n 10 >>"$T/err" 2>&1
    check "reload with a bad value: systemctl reload or status names max_downloads" said max_downloads
    shown
    check "hubd kept running through the bad reload (MainPID $pid)" \
        eval 'active hubd.service active && [ "$(state hubd.service MainPID)" = "$pid" ]'
    fetch alice
    check "alice: a fetch after the bad reload -> $path" [ "$rc" -eq 0 -a "$(out)" = "$path" ]
    cp /root/hubd-test/hubd.conf.orig "$CONF"
    systemctl reload hubd
}

# Brings hubd.socket back to listening with the config still bad, so that
# each client meets the same state: a socket whose service cannot start.
rearm() {
    systemctl reset-failed hubd.service hubd.socket 2>/dev/null
    systemctl start hubd.socket
}

# A client against the broken service: it must end within $BOUND s, fail,
# and (hubctl, Python) tell where to look.
bounded() { # description, hint wanted (1/0)
    local d=$1
    check "$d ends within ${BOUND} s (took ${secs} s, exit $rc)" eval '[ "$rc" -ne 124 ] && [ "${secs%.*}" -lt "$BOUND" ]'
    check "$d fails" [ "$rc" -ne 0 ]
    [ "$2" = 0 ] || check "$d names 'systemctl status hubd' or 'journalctl -u hubd'" said "$HINT_RE"
    shown
    units
}

restart_bad() {
    set_key "max_downloads = lots"
    run root systemctl restart hubd
    check "restart with max_downloads = lots: systemctl restart hubd fails ($rc)" [ "$rc" -ne 0 ]
    shown
    sleep 12 # longer than RestartSec= times StartLimitBurst=: a loop shows
    local n
    n=$(state hubd.service NRestarts)
    check "no restart loop on a bad config: NRestarts = $n after 12 s" [ "$n" -eq 0 ]
    units

    rearm
    fetch alice
    bounded "alice: hubctl fetch, hubd unable to start," 1
    check "alice: hubctl fetch did not fall back to a per-user cache" no_user_daemon alice
    drop_user_daemon alice
    rearm
    pyfetch alice
    bounded "alice: hubd.fetch, hubd unable to start," 1
    drop_user_daemon alice
    rearm
    limit=150 # curl's -m 120 must be what ends it
    run alice curl -m 120 -sS -o /dev/null -w '%{http_code}' "$FRONT/$URL"
    limit=120
    [ "$rc" -ne 28 ] || rc=124                           # curl's own timeout: a hang
    [ "$rc" -ne 0 ] || [[ "$(out)" != [45]* ]] || rc=22 # an HTTP error, as curl -f says
    bounded "alice: curl through the front (HTTP $(out)), hubd unable to start," 0
    # A user who comes after the others: the socket may be gone by now.
    fetch alice
    bounded "alice: hubctl fetch after the others (socket: $(state hubd.socket SubState))," 1
    check "alice: hubctl fetch did not fall back to a per-user cache" no_user_daemon alice
    drop_user_daemon alice
}

# What an admin runs after fixing the file. systemd 252: the socket is
# failed (service-start-limit-hit) once clients met the broken service, and
# within StartLimitIntervalSec= the service refuses to start until its
# start counter is reset: both units need reset-failed, then the socket a start.
recover() {
    cp /root/hubd-test/hubd.conf.orig "$CONF"
    run root bash -c 'systemctl reset-failed hubd.service hubd.socket; systemctl start hubd.socket'
    check "recovery: systemctl reset-failed hubd.service hubd.socket; systemctl start hubd.socket" [ "$rc" -eq 0 ]
    shown
    check "recovery: hubd.socket active" active hubd.socket active
    fetch alice
    check "recovery: alice fetches again -> $path (${secs} s)" [ "$rc" -eq 0 -a "$(out)" = "$path" ]
    [ "$rc" -eq 0 ] || shown
    check "recovery: hubd.service active" active hubd.service active
    units
}

stop_start() {
    run root systemctl stop hubd
    check "systemctl stop hubd: service inactive, socket still active" \
        eval 'active hubd.service inactive && active hubd.socket active'
    fetch alice
    check "a fetch starts hubd again -> $path" [ "$rc" -eq 0 -a "$(out)" = "$path" ]
    check "hubd.service active again" active hubd.service active
}

security() {
    info "systemd-analyze security hubd.service: $(systemd-analyze security hubd.service 2>&1 | tail -n1)"
}

# ---- package life cycle -----------------------------------------------------------

upgrade() {
    local before pid
    # shellcheck disable=SC2034 # used in an eval below
    before=$(origin_requests)
    pid=$(state hubd.service MainPID)
    run root dpkg -i "$UP_DEB"
    check "upgrade: dpkg -i $(basename "$UP_DEB") exits 0" [ "$rc" -eq 0 ]
    [ "$rc" -eq 0 ] || shown
    check "upgrade: hubd $UP_VERSION installed" [ "$(dpkg-query -W -f '${Version}' hubd)" = "$UP_VERSION" ]
    check "upgrade: hubd.socket active" active hubd.socket active
    check "upgrade: the cached file is still there" [ -f "$path" ]
    info "upgrade: hubd.service $(systemctl is-active hubd.service), MainPID $pid -> $(state hubd.service MainPID)"
    fetch alice
    check "upgrade: a fetch after the upgrade is a hit -> $path" \
        eval '[ "$rc" -eq 0 ] && [ "$(out)" = "$path" ] && [ "$(origin_requests)" -eq "$before" ]'
}

remove() {
    run root dpkg -r hubd
    check "dpkg -r hubd exits 0" [ "$rc" -eq 0 ]
    [ "$rc" -eq 0 ] || shown
    check "remove: unit files gone" [ ! -e /lib/systemd/system/hubd.service -a ! -e /lib/systemd/system/hubd.socket ]
    check "remove: systemd knows no hubd.socket (LoadState $(state hubd.socket LoadState))" \
        [ "$(state hubd.socket LoadState)" = not-found ]
    check "remove: no hubd process, no /run/hubd/hubd.sock" eval '! pgrep -x hubd >/dev/null && [ ! -e /run/hubd/hubd.sock ]'
    check "remove: the cache is kept ($path)" [ -f "$path" ]
    check "remove: the conffile $CONF is kept" [ -f "$CONF" ]
    check "remove: dpkg says config-files" [ "$(dpkg-query -W -f '${Status}' hubd)" = "deinstall ok config-files" ]
}

purge() {
    run root dpkg -P hubd
    check "dpkg -P hubd exits 0" [ "$rc" -eq 0 ]
    [ "$rc" -eq 0 ] || shown
    check "purge: /etc/hubd gone" [ ! -e /etc/hubd ]
    check "purge: /var/cache/hubd and /var/lib/hubd gone" [ ! -e /var/cache/hubd -a ! -e /var/lib/hubd ]
    check "purge: no enablement symlink left" [ ! -e /etc/systemd/system/sockets.target.wants/hubd.socket ]
    check "purge: the users and groups hubd, hubd-admin stay (postrm: Debian practice)" \
        eval 'getent passwd hubd >/dev/null && getent group hubd-admin >/dev/null'
    check "purge: dpkg knows no hubd" \
        eval '! dpkg-query -W -f "\${Status}" hubd 2>/dev/null | grep -Eq "ok (installed|config-files)"'
}

# ---- main ---------------------------------------------------------------------------

mkdir -p "$T"
cd /
install
users
origin
first_fetch
carol
doctor
front
reload
restart_bad
recover
stop_start
security
upgrade
remove
purge
stop_origin

if [ "${#failures[@]}" -gt 0 ]; then
    echo "-- journalctl -u hubd -u hubd.socket (last 60 lines)"
    journalctl -u hubd -u hubd.socket -n 60 --no-pager | indent
    echo "FAIL: ${#failures[@]} check(s) failed:"
    printf '   - %s\n' "${failures[@]}"
    exit 1
fi
echo "ok: every check passed"
