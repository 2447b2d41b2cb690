#!/bin/sh
# Installs every package hubd needs to build, test, demo and benchmark, from
# Debian 12's archive. Safe to run again: apt-get skips what is present.
set -eu
PKGS="build-essential cmake pkg-config libuv1-dev libmbedtls-dev libsqlite3-dev check
      node-llhttp libinih-dev nginx-light curl python3 openssl ca-certificates clang-format
      libsystemd-dev systemd dpkg-dev file groff-base man-db mandoc
      clang libclang-rt-14-dev valgrind faketime squid wget util-linux"
# libsystemd-dev: sd_notify/sd_listen_fds. systemd: systemd-analyze verify of
# the units. dpkg-dev (dpkg-shlibdeps) and file: cpack -G DEB computing the
# package's Depends. groff-base, man-db, mandoc: checking the man pages.
# clang, libclang-rt-14-dev (libFuzzer and the sanitizer runtimes for clang
# 14): scripts/fuzz.sh. valgrind: scripts/valgrind.sh. faketime (libfaketime):
# a test steps hubd's wall clock back, as an admin or NTP may. squid: the
# forward proxy the proxy tests run in the foreground on a port of their own.
# wget: a real client of the HTTP front's tests; util-linux: setpriv, to run
# a client as a second local user.
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing:$missing" >&2
$SUDO apt-get update -q
# Packages such as squid and nginx start their system service on install;
# the tests run their own instances on free ports, so a policy-rc.d (see
# invoke-rc.d(8)) keeps services from starting during this install only.
# One already there is the admin's and is left alone.
policy=/usr/sbin/policy-rc.d
own_policy=""
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    own_policy=1
fi
rc=0
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing || rc=$?
[ -z "$own_policy" ] || $SUDO rm -f "$policy"
exit $rc
