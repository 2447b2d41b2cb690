#!/usr/bin/env bash
# Tests the hubd Debian package under a real systemd: PID 1 of a
# systemd-nspawn container booted from a Debian 12 root.
#
#   scripts/systemd-test.sh [--prepare] BUILD_DIR
#
# --prepare does steps 1 and 2 only, so that scripts/test.sh can make a
# cold root (minutes of downloads and dpkg) while the first test pass runs;
# the full run after it waits on the cache's lock, then finds the root.
#
# 1. cpack -G DEB in BUILD_DIR, and a copy of that package with a higher
#    version (for the upgrade test).
# 2. A Debian root from debootstrap (minbase, systemd, python3, curl, ... and
#    the package's Depends), cached in /var/cache/hubd-systemd-test/ under a
#    hash of the suite and the package list. Each run boots a fresh copy.
# 3. systemd-nspawn --boot with a loopback-only network; commands run inside
#    through nsenter into the container's init.
# 4. tests/systemd/scenario.sh inside: an admin's day with the package. It
#    prints ok:/FAIL: lines. This script exits non-zero if any check failed,
#    or if the container could not be built or booted: it never skips.
#
# Needs root, debootstrap and systemd-container. The mirror is the one this
# host's apt uses (or $HUBD_TEST_MIRROR). Ctrl-C or SIGTERM stops the
# container and removes the working copy.
set -euo pipefail

SUITE=bookworm
CACHE_DIR=/var/cache/hubd-systemd-test
# Bump when the way the root is made changes: a new cache key.
RECIPE=1
# Beside the package's Depends: an init, the tools the scenario uses.
BASE_PKGS=(systemd dbus init-system-helpers python3 adduser passwd curl util-linux procps coreutils)
BOOT_TIMEOUT=120
SCENARIO_TIMEOUT=1500
STOP_TIMEOUT=30
WORK_BASE=/var/tmp/hubd-systemd-test

src=$(cd "$(dirname "$0")/.." && pwd)
work="" building="" child="" nspawn_pid="" init_pid="" scenario_pid="" boot_state=""
machine="hubd-test-$$"

say() { echo "== $*"; }
die() {
    echo "FAIL: systemd-test: $*" >&2
    exit 1
}
now() { date +%s; }

# ---- processes ----------------------------------------------------------------

# Runs a command in a session of its own, its output in a log file, and
# waits for it. Its own session, so that cleanup can end it and every
# process it started (debootstrap runs dpkg in a chroot) by its process group
# id. The log is redirected here, not around the call: a trap that fires
# during the wait runs with the caller's redirections, and cleanup's messages
# must reach the terminal. The lock's fd 9 stays here.
run_group() {
    local log=$1 rc=0
    shift
    setsid -w "$@" </dev/null >"$log" 2>&1 9>&- &
    child=$!
    wait "$child" || rc=$?
    child=""
    return "$rc"
}

kill_group() {
    local pgid=$1 i
    kill -TERM -- "-$pgid" 2>/dev/null || return 0
    for ((i = 0; i < 50; i++)); do
        kill -0 -- "-$pgid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL -- "-$pgid" 2>/dev/null || true
    wait "$pgid" 2>/dev/null || true
}

# Waits up to $2 seconds for pid $1 to be gone.
gone_within() {
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    return 1
}

# ---- trees ----------------------------------------------------------------------

# Unmounts whatever is mounted below a directory (a killed debootstrap leaves
# proc and sys mounted in its target), deepest first.
unmount_under() {
    awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
        while read -r m; do umount -l "$m" || true; done
}

# Removes a tree without ever crossing into a mounted file system.
remove_tree() {
    [ -e "$1" ] || return 0
    unmount_under "$1"
    rm -rf --one-file-system "$1"
}

# ---- the container --------------------------------------------------------------

# Commands inside the container get a clean environment, not this host's.
CT_ENV=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 TERM=dumb)
in_ct() { nsenter --target "$init_pid" --all "${CT_ENV[@]}" "$@" 8>&-; }

# The scenario, in the background so that a signal to this script is handled
# at once. nsenter itself is the background job (not a subshell around it),
# so that cleanup can end it by pid; and it is killed if this script is.
run_scenario() {
    local rc=0
    setpriv --pdeathsig KILL nsenter --target "$init_pid" --all "${CT_ENV[@]}" \
        timeout -k 10 "$SCENARIO_TIMEOUT" bash /root/hubd-test/scenario.sh "$@" 8>&- &
    scenario_pid=$!
    wait "$scenario_pid" || rc=$?
    scenario_pid=""
    return "$rc"
}

# Every descendant of a pid (its children, theirs, ...), by /proc.
descendants() {
    local c
    for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        echo "$c"
        descendants "$c"
    done
}

# What the scenario still runs must go before the poweroff, killed by pid:
# nsenter stays outside the container, the parent of what it started inside,
# and systemd-shutdown's SIGSTOP/SIGCONT round stops it for good (nsenter
# mirrors its child's stop onto itself, and nothing inside sends it SIGCONT);
# its child then stays an unreaped zombie that systemd-shutdown waits 90 s for.
end_scenario() {
    [ -n "$scenario_pid" ] || return 0
    local p
    for p in $(descendants "$scenario_pid") "$scenario_pid"; do
        kill -KILL "$p" 2>/dev/null || true
    done
    wait "$scenario_pid" 2>/dev/null || true
    scenario_pid=""
}

# The container's init: the child of nspawn that runs systemd in a pid
# namespace other than ours (before that, nspawn's own child sets things up).
find_init() {
    local i c ours
    ours=$(readlink /proc/self/ns/pid)
    for ((i = 0; i < 300; i++)); do
        kill -0 "$nspawn_pid" 2>/dev/null || return 1
        for c in $(cat /proc/"$nspawn_pid"/task/*/children 2>/dev/null); do
            if [ "$(readlink /proc/"$c"/ns/pid 2>/dev/null)" != "$ours" ] &&
                [ "$(cat /proc/"$c"/comm 2>/dev/null)" = systemd ]; then
                init_pid=$c
                return 0
            fi
        done
        sleep 0.1
    done
    return 1
}

# Waits until systemd inside says the boot is over.
wait_running() {
    local state="" deadline=$((SECONDS + BOOT_TIMEOUT))
    while ((SECONDS < deadline)); do
        kill -0 "$nspawn_pid" 2>/dev/null || return 1
        state=$(in_ct systemctl is-system-running 2>/dev/null) || true
        case $state in running | degraded)
            boot_state=$state
            return 0
            ;;
        esac
        sleep 0.5
    done
    echo "systemctl is-system-running still says '$state' after $BOOT_TIMEOUT s" >&2
    return 1
}

boot() {
    # Not run_group: nspawn gets its own session too (Ctrl-C must not reach
    # it), but it stays running while we work, and is stopped by stop_container.
    # Should this script be killed outright, nspawn gets SIGTERM (pdeathsig),
    # on which it powers the container off.
    # --register=no --keep-unit: there is no D-Bus (no machined) on the host.
    setsid setpriv --pdeathsig TERM \
        systemd-nspawn --boot --private-network --console=pipe --register=no --keep-unit \
        -D "$work/root" --machine="$machine" </dev/null >"$work/console.log" 2>&1 &
    nspawn_pid=$!
    if ! find_init || ! wait_running; then
        tail -n 40 "$work/console.log" >&2
        [ -z "$init_pid" ] || in_ct systemctl list-jobs --no-pager >&2 || true
        die "the container did not boot (systemd-nspawn --boot; console above): this machine cannot run the test"
    fi
}

# Poweroff from inside (SIGRTMIN+3 to systemd), then SIGTERM to nspawn, then
# SIGKILL to both by pid. Killing the init ends every process in the
# container's pid namespace, those started through nsenter included.
stop_container() {
    [ -n "$nspawn_pid" ] || return 0
    if kill -0 "$nspawn_pid" 2>/dev/null; then
        [ -z "$init_pid" ] || kill -s RTMIN+3 "$init_pid" 2>/dev/null || true
        if ! gone_within "$nspawn_pid" "$STOP_TIMEOUT"; then
            echo "systemd-test: the container did not power off in $STOP_TIMEOUT s; SIGTERM to nspawn" >&2
            kill -TERM "$nspawn_pid" 2>/dev/null || true
            if ! gone_within "$nspawn_pid" 10; then
                [ -z "$init_pid" ] || kill -KILL "$init_pid" 2>/dev/null || true
                kill -KILL "$nspawn_pid" 2>/dev/null || true
            fi
        fi
    fi
    wait "$nspawn_pid" 2>/dev/null || true
    nspawn_pid="" init_pid=""
    # nspawn's mount propagation folder: on a host whose /run is not a tmpfs
    # nspawn refuses to remove it itself.
    rmdir "/run/systemd/nspawn/propagate/$machine" 2>/dev/null || true
}

cleanup() {
    local rc=$?
    set +e
    trap '' INT TERM HUP # a second Ctrl-C must not cut the cleanup short
    [ "$rc" -lt 129 ] || echo "FAIL: systemd-test: interrupted (exit $rc); stopping and removing what it made" >&2
    [ -z "$child" ] || kill_group "$child"
    end_scenario
    stop_container
    [ -z "$building" ] || remove_tree "$building"
    [ -z "$work" ] || remove_tree "$work"
    exit "$rc"
}

# Working copies of runs killed outright (SIGKILL: no trap ran). A run holds
# the lock in its folder as long as it or its container lives.
remove_stale_work() {
    local w
    for w in "$WORK_BASE".*; do
        [ -f "$w/.lock" ] || continue # (none yet: a run that is just starting)
        if flock -n "$w/.lock" true; then
            echo "systemd-test: removing $w (left by a killed run)" >&2
            remove_tree "$w"
        fi
    done
}

# ---- the packages ---------------------------------------------------------------

# cpack's .deb, and the same package as a higher version for the upgrade.
make_debs() {
    local out="$work/cpack" n
    mkdir "$out"
    (cd "$build" && cpack -G DEB -B "$out") >"$work/cpack.log" 2>&1 ||
        { cat "$work/cpack.log" >&2; die "cpack -G DEB in $build failed"; }
    n=$(find "$out" -maxdepth 1 -name '*.deb' | wc -l)
    [ "$n" -eq 1 ] || die "cpack made $n .deb files"
    deb=$(find "$out" -maxdepth 1 -name '*.deb')
    version=$(dpkg-deb -f "$deb" Version)
    up_version="$version+systemdtest1"
    dpkg --compare-versions "$up_version" gt "$version" || die "$up_version is not above $version"
    dpkg-deb -R "$deb" "$work/up"
    sed -i "s/^Version: .*/Version: $up_version/" "$work/up/DEBIAN/control"
    dpkg-deb -b "$work/up" "$work/hubd-up.deb" >/dev/null
    rm -rf "$work/up"
}

# The package's Depends as package names: the first of alternatives, no versions.
deb_depends() {
    dpkg-deb -f "$1" Depends | tr ',' '\n' |
        sed 's/|.*//; s/(.*)//; s/:any//; s/[[:space:]]//g' | grep -v '^$' || true
}

# ---- the root -------------------------------------------------------------------

# The mirror this host's apt uses for $SUITE: deb822 .sources first, then
# sources.list. Read at run time so that no host is written in the repository.
host_mirror() {
    local m="" f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        m=$(awk -v suite="$SUITE" '
            function flush() { if (deb && hit && uri != "" && out == "") out = uri; deb = hit = 0; uri = "" }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
            tolower($1) == "uris:"  { uri = $2 }
            tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == suite) hit = 1 }
            END { flush(); print out }' "$f")
        [ -z "$m" ] || break
    done
    if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
        m=$(awk -v suite="$SUITE" '$1 == "deb" {
                i = 2; if ($2 ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
                if ($(i + 1) == suite) { print $i; exit } }' /etc/apt/sources.list)
    fi
    echo "$m"
}

# What the cached root gets beyond debootstrap's work.
customize_root() {
    local r=$1
    # The host's archive may be a dated snapshot, past its Release files'
    # Valid-Until: apt inside would need the same setting as the host's.
    echo 'Acquire::Check-Valid-Until "false";' >"$r/etc/apt/apt.conf.d/99hubd-systemd-test"
    echo hubd-test >"$r/etc/hostname"
    rm -f "$r"/var/cache/apt/archives/*.deb
    printf '%s\n' "$SUITE" "${pkgs[@]}" >"$r/etc/hubd-systemd-test.packages"
}

# Builds the root under a temporary name and renames it into place
# (rename(2) is atomic): a cache entry is either complete or absent.
build_root() {
    local final=$1 mirror list
    mirror=${HUBD_TEST_MIRROR:-$(host_mirror)}
    [ -n "$mirror" ] || die "no Debian mirror for $SUITE in this host's apt sources (set HUBD_TEST_MIRROR)"
    building="$CACHE_DIR/.build-${final##*/}.$$"
    mkdir "$building"
    list=$(IFS=,; echo "${pkgs[*]}")
    say "debootstrap --variant=minbase $SUITE with ${#pkgs[@]} packages (once per package list; minutes)"
    if ! run_group "$building/debootstrap.log" \
        debootstrap --variant=minbase --include="$list" "$SUITE" "$building/root" "$mirror"; then
        tail -n 30 "$building/debootstrap.log" >&2
        die "debootstrap failed (log tail above): cannot make the container's root"
    fi
    unmount_under "$building/root"
    customize_root "$building/root"
    mv -T "$building/root" "$final"
    remove_tree "$building"
    building=""
}

# The cached root for this package list, made if missing, copied to
# $work/root. Under a lock, so that two runs do not build it twice; anything
# left by a run that died half-way (.build-*) is removed then, older keys too.
ensure_root() {
    local key final e
    key=$(printf '%s\n' "$SUITE" minbase "$RECIPE" "${pkgs[@]}" | sha256sum | cut -c1-16)
    final="$CACHE_DIR/$SUITE-$key"
    mkdir -p "$CACHE_DIR"
    exec 9>"$CACHE_DIR/.lock"
    flock -w 1800 9 || die "another run holds $CACHE_DIR/.lock"
    for e in "$CACHE_DIR"/.build-* "$CACHE_DIR/$SUITE"-*; do
        if [ ! -e "$e" ] || [ "$e" = "$final" ]; then continue; fi
        echo "systemd-test: removing $e (stale)" >&2
        remove_tree "$e"
    done
    root_kind=cached
    if [ ! -d "$final" ]; then
        root_kind=cold
        build_root "$final"
    fi
    t_root=$(now)
    # Copied under the lock: another run may prune this key once it is free.
    [ "$prepare" -eq 1 ] || cp -a --reflink=auto "$final" "$work/root"
    exec 9>&-
}

# ---- main -----------------------------------------------------------------------

prepare=0
if [ "${1:-}" = --prepare ]; then
    prepare=1
    shift
fi
[ $# -eq 1 ] || {
    echo "usage: $0 [--prepare] BUILD_DIR" >&2
    exit 2
}
[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, systemd-nspawn)"
for c in debootstrap systemd-nspawn nsenter setsid setpriv flock cpack dpkg-deb sha256sum; do
    command -v "$c" >/dev/null ||
        die "$c not found: this machine cannot run the test (apt-get install debootstrap systemd-container)"
done
build=$(cd "$1" && pwd)
[ -f "$build/CPackConfig.cmake" ] || die "$build/CPackConfig.cmake missing: configure and build first"

trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

t0=$(now)
remove_stale_work
work=$(mktemp -d "$WORK_BASE.XXXXXX")
# Held while this run (and its nspawn, which inherits it) lives.
exec 8>"$work/.lock"
flock 8
make_debs
t_debs=$(now)
say "packages: $(basename "$deb") and hubd_${up_version} ($((t_debs - t0)) s)"
mapfile -t deps < <(deb_depends "$deb")
mapfile -t pkgs < <(printf '%s\n' "${BASE_PKGS[@]}" "${deps[@]}" | sort -u)

ensure_root
if [ "$prepare" -eq 1 ]; then
    say "root: $root_kind ($((t_root - t_debs)) s), ready for the run"
    exit 0
fi
t_copy=$(now)
say "root: $root_kind ($((t_root - t_debs)) s), copied for this run in $((t_copy - t_root)) s"

mkdir "$work/root/root/hubd-test"
cp "$src/tests/systemd/scenario.sh" "$deb" "$work/root/root/hubd-test/"
cp "$work/hubd-up.deb" "$work/root/root/hubd-test/hubd_${up_version}.deb"

boot
t_boot=$(now)
say "booted: systemd in the container says $boot_state ($((t_boot - t_copy)) s; init pid $init_pid)"
[ "$boot_state" = running ] || in_ct systemctl --failed --no-pager || true

rc=0
run_scenario "/root/hubd-test/$(basename "$deb")" "/root/hubd-test/hubd_${up_version}.deb" "$up_version" || rc=$?
t_scen=$(now)
[ "$rc" -ne 124 ] || echo "FAIL: the scenario did not finish in $SCENARIO_TIMEOUT s"

stop_container
t_end=$(now)
say "times: packages $((t_debs - t0)) s, root $root_kind $((t_root - t_debs)) s, copy $((t_copy - t_root)) s," \
    "boot $((t_boot - t_copy)) s, scenario $((t_scen - t_boot)) s, poweroff $((t_end - t_scen)) s," \
    "total $((t_end - t0)) s"
if [ "$rc" -ne 0 ]; then
    echo "FAIL: systemd-test: the scenario failed (exit $rc)"
    exit 1
fi
echo "PASS: systemd-test"
