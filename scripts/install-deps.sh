#!/bin/sh
# Installs every package hubd needs to build, test, demo and benchmark, from
# Debian 12's archive, then the real JavaScript Hub client the tests drive
# (@huggingface/hub from npm, pinned by tests/js/package-lock.json). Safe to
# run again: apt-get skips what is present, npm ci runs only when the lock
# file changed since the last install.
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
PKGS="build-essential cmake pkg-config libuv1-dev libmbedtls-dev libsqlite3-dev check
      node-llhttp libinih-dev nginx-light curl python3 openssl ca-certificates clang-format
      libsystemd-dev systemd dpkg-dev file groff-base man-db mandoc
      clang libclang-rt-14-dev valgrind faketime squid wget util-linux libyajl-dev aria2
      lintian debootstrap systemd-container libacl1-dev xfsprogs btrfs-progs bindfs
      python3-tqdm prometheus iproute2 opentracker python3-libtorrent
      libtorrent-rasterbar-dev qemu-system-x86 busybox-static"
# libsystemd-dev: sd_notify/sd_listen_fds. systemd: systemd-analyze verify of
# the units. dpkg-dev (dpkg-shlibdeps) and file: cpack -G DEB computing the
# package's Depends. groff-base, man-db, mandoc: checking the man pages.
# clang, libclang-rt-14-dev (libFuzzer and the sanitizer runtimes for clang
# 14): scripts/fuzz.sh. valgrind: scripts/valgrind.sh. faketime (libfaketime):
# a test steps hubd's wall clock back, as an admin or NTP may. squid: the
# forward proxy the proxy tests run in the foreground on a port of their own.
# wget: a real client of the HTTP front's tests; util-linux: setpriv, to run
# a client as a second local user. libyajl-dev: the streaming JSON parser
# and writer hubd reads the Hub's answers with, never as a tree (HFREPO's
# listing; the /hf/api routes' filter of xetHash, xetEnabled).
# aria2: the multi-connection downloader the segmented rows of the benchmark
# compare hubd with. lintian: the package test checks the .deb with it.
# debootstrap, systemd-container (systemd-nspawn): scripts/systemd-test.sh
# boots a Debian 12 root with the package installed, systemd as its PID 1.
# libacl1-dev (libacl): hubd grants a user read access to a private blob
# linked into that user's HF cache (HOLD) by a POSIX ACL entry, so that the
# link needs no second copy of the bytes. xfsprogs, btrfs-progs (mkfs.xfs,
# mkfs.btrfs): tests/integration/test_hf_filesystems.py makes an XFS and a
# btrfs file system on a loop device (ext4's mkfs is in e2fsprogs, already
# there) to measure one copy on disk where reflinks exist and where not.
# bindfs: a FUSE file system whose server a test stops, so that a look at a
# hold's link in it hangs, as a user's hostile FUSE mount would.
# iproute2 (ip, tc), opentracker, python3-libtorrent: bench/fleet's cluster
# of network namespaces and its reference BitTorrent swarm (a tracker and
# Debian's libtorrent for the peers); test_fleet_harness runs it small.
# libtorrent-rasterbar-dev (libtorrent 2.0, C++, with Boost's headers):
# the cluster swarm's peers, through daemon/fleet's shim (lt_shim.h); the
# shim's test makes its throwaway CA with the openssl command.
# opentracker's postinst enables its system service; as with the others,
# the policy-rc.d below keeps it from starting, and fleet.py runs its own.
# python3-tqdm: the Python client's HF functions draw their bars with tqdm
# when it imports, as huggingface_hub does; a test checks them on a pty.
# prometheus (promtool and the server): test_metrics checks the metrics
# endpoint's page with promtool and has a real Prometheus scrape it (on a
# port of its own). Its postinst starts its service, and fails the install
# when a SysV start fails (a container without systemd, port 9090 taken):
# the policy-rc.d below keeps it from starting; under systemd a failed
# start does not fail the install.
# qemu-system-x86, busybox-static: tests/vm/ktls_vm_test.sh boots Debian's
# kernel (its package fetched by the test, unpacked, never installed) under
# qemu with a busybox initramfs, to test kernel TLS where the machine's own
# kernel may not have the tls module.
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# The tests' JavaScript client runs on the machine's Node.js and npm; where
# there are none, Debian's.
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ -n "$missing" ]; then
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
    [ "$rc" -eq 0 ] || exit "$rc"
fi

# @huggingface/hub and its own dependencies, exactly as the lock file says,
# into tests/js/node_modules (not in git). The stamp inside node_modules is
# the lock file's hash and the Node version: npm ci runs again when either
# changes or node_modules is gone. The package needs Node >= 18.
JS="$REPO/tests/js"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' || {
    echo "install-deps: Node.js $(node --version) is too old for @huggingface/hub (>= 18)" >&2
    exit 1
}
stamp="$JS/node_modules/.hubd-stamp"
want="$(sha256sum "$JS/package-lock.json" | cut -d' ' -f1) $(node --version)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    echo "install-deps: npm ci in tests/js" >&2
    if ! npm ci --prefix "$JS" --ignore-scripts --no-audit --no-fund --loglevel=error \
            --fetch-timeout=60000 >&2; then
        echo "install-deps: npm ci failed in tests/js (is the npm registry reachable?)" >&2
        exit 1
    fi
    printf '%s\n' "$want" >"$stamp"
fi
