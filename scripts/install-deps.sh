#!/bin/sh
# Installs every package hubd needs to build, test, demo and benchmark, from
# Debian 12's archive. Safe to run again: apt-get skips what is present.
set -eu
PKGS="build-essential cmake pkg-config libuv1-dev libmbedtls-dev libsqlite3-dev check
      node-llhttp libinih-dev nginx-light curl python3 openssl ca-certificates clang-format
      libsystemd-dev systemd dpkg-dev file groff-base man-db mandoc
      clang libclang-rt-14-dev valgrind faketime"
# libsystemd-dev: sd_notify/sd_listen_fds. systemd: systemd-analyze verify of
# the units. dpkg-dev (dpkg-shlibdeps) and file: cpack -G DEB computing the
# package's Depends. groff-base, man-db, mandoc: checking the man pages.
# clang, libclang-rt-14-dev (libFuzzer and the sanitizer runtimes for clang
# 14): scripts/fuzz.sh. valgrind: scripts/valgrind.sh. faketime (libfaketime):
# a test steps hubd's wall clock back, as an admin or NTP may.
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing:$missing" >&2
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
