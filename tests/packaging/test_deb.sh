#!/bin/sh
# Checks the install rules and the Debian package.
#
#   test_deb.sh BUILD_DIR SOURCE_DIR
#
# 1. DESTDIR=TMP cmake --install BUILD --prefix /usr: the exact file list
#    and modes; the man pages lint clean (groff -ww, mandoc -Tlint).
# 2. cpack -G DEB -B TMP in BUILD: the package's name, file list, control
#    fields, maintainer scripts and conffiles.
# 3. The maintainer scripts run against stub commands (adduser, systemctl,
#    deb-systemd-helper, rm, ...) that only record their arguments, so
#    nothing on this machine changes.
# Needs dpkg-dev (dpkg-shlibdeps) and file, from scripts/install-deps.sh.
set -eu

. "$(dirname "$0")/lib.sh"
pkg_setup deb "$@"

for c in cpack dpkg-deb dpkg-shlibdeps file groff; do
    command -v "$c" >/dev/null || fail "$c not found (scripts/install-deps.sh installs it)"
done
[ -f "$build/CPackConfig.cmake" ] || fail "$build/CPackConfig.cmake missing: configure the build first"

# The Python package as it stands in the source: every file but byte code
# is installed.
[ -f "$src/client/python/hubd/__init__.py" ] || fail "client/python/hubd/__init__.py missing in $src"
py_files=$(cd "$src/client/python" && find hubd -type f -not -path '*/__pycache__/*' -not -name '*.pyc' | sort)

# Every file the install puts under the root, and its mode.
expected="$tmp/expected"
{
    echo "644 etc/hubd/hubd.conf"
    echo "644 lib/systemd/system/hubd.service"
    echo "644 lib/systemd/system/hubd.socket"
    echo "755 usr/bin/hubctl"
    for f in $py_files; do echo "644 usr/lib/python3/dist-packages/$f"; done
    echo "644 usr/lib/sysusers.d/hubd.conf"
    echo "755 usr/sbin/hubd"
    echo "644 usr/share/bash-completion/completions/hubctl"
    echo "644 usr/share/doc/hubd/changelog.gz"
    echo "644 usr/share/doc/hubd/copyright"
    echo "644 usr/share/man/man1/hubctl.1.gz"
    echo "644 usr/share/man/man5/hubd.conf.5.gz"
    echo "644 usr/share/man/man8/hubd.8.gz"
} | sort -k2 >"$expected"

# ---- 1. cmake --install ----------------------------------------------------
root="$tmp/root"
DESTDIR="$root" cmake --install "$build" --prefix /usr >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "DESTDIR=TMP cmake --install --prefix /usr"; }
(cd "$root" && find . -type f -printf '%m %P\n' | sort -k2) >"$tmp/installed"
if ! cmp -s "$expected" "$tmp/installed"; then
    diff -u "$expected" "$tmp/installed" >&2 || true
    fail "cmake --install: file list or modes differ (- expected, + installed)"
fi
cmp -s "$root/etc/hubd/hubd.conf" "$src/etc/hubd.conf" || fail "installed hubd.conf is not etc/hubd.conf"
for p in man1/hubctl.1 man5/hubd.conf.5 man8/hubd.8; do
    gzip -dc "$root/usr/share/man/$p.gz" | cmp -s - "$src/docs/man/${p#*/}" ||
        fail "usr/share/man/$p.gz is not docs/man/${p#*/}"
done
# The man pages format without a single warning.
for p in hubd.8 hubd.conf.5 hubctl.1; do
    groff -man -Tutf8 -ww -z "$src/docs/man/$p" >"$tmp/groff.out" 2>&1 || true
    [ ! -s "$tmp/groff.out" ] || { cat "$tmp/groff.out" >&2; fail "groff -man -ww: warnings for $p"; }
    if command -v mandoc >/dev/null; then
        mandoc -Tlint -Wwarning "$src/docs/man/$p" >"$tmp/mandoc.out" 2>&1 || true
        [ ! -s "$tmp/mandoc.out" ] || { cat "$tmp/mandoc.out" >&2; fail "mandoc -Tlint: $p"; }
    fi
done
ok "man pages: groff -man -ww$(command -v mandoc >/dev/null && echo ' and mandoc -Tlint') silent for hubd.8, hubd.conf.5, hubctl.1"
ok "cmake --install --prefix /usr: $(wc -l <"$tmp/installed") files, modes as expected:"
sed 's/^/      /' "$tmp/installed"

# ---- 2. cpack -G DEB -------------------------------------------------------
out="$tmp/out"
mkdir "$out"
(cd "$build" && cpack -G DEB -B "$out") >"$tmp/cpack.log" 2>&1 ||
    {
        cat "$tmp/cpack.log" "$out"/_CPack_Packages/*/*/PreinstallOutput.log >&2 2>/dev/null
        fail "cpack -G DEB -B TMP"
    }
set -- "$out"/*.deb
[ $# -eq 1 ] && [ -f "$1" ] || fail "cpack made $# .deb files in TMP: $*"
deb=$1
version=$(dpkg-deb -f "$deb" Version)
arch=$(dpkg --print-architecture)
[ "$(basename "$deb")" = "hubd_${version}_${arch}.deb" ] ||
    fail "package file is $(basename "$deb"), expected hubd_${version}_${arch}.deb"
ok "cpack -G DEB: $(basename "$deb") ($(stat -c %s "$deb") bytes)"
# Debian's own checks: no error and no warning (copyright, changelog, man
# pages, permissions...).
command -v lintian >/dev/null || fail "lintian not found (scripts/install-deps.sh installs it)"
lintian --fail-on error,warning "$deb" >"$tmp/lintian.out" 2>&1 ||
    { cat "$tmp/lintian.out" >&2; fail "lintian found errors or warnings in $(basename "$deb")"; }
ok "lintian: no error or warning"
# Built with Debian's hardening flags (dpkg-buildflags, CMakeLists.txt):
# lintian's pedantic run has no hardening-* tag (bindnow, fortify, relro,
# PIE). A Debug or sanitizer build is not hardened, and says so.
if grep -qx 'HUBD_HARDENED:INTERNAL=ON' "$build/CMakeCache.txt"; then
    lintian --pedantic --display-info "$deb" >"$tmp/lintian-pedantic.out" 2>&1 || true
    if grep -q 'hardening-' "$tmp/lintian-pedantic.out"; then
        grep 'hardening-' "$tmp/lintian-pedantic.out" >&2
        fail "lintian --pedantic: hardening tags (the build lacks dpkg-buildflags' flags)"
    fi
    ok "lintian --pedantic: no hardening tag (bindnow, fortify, relro, PIE)"
else
    echo "note: hardening not checked: $build is a Debug or sanitizer build (HUBD_HARDENED off)"
fi

# Files: the same list and modes as the install, owned by root.
dpkg-deb -c "$deb" >"$tmp/contents"
awk '$1 !~ /^d/ && $2 != "root/root" {print; bad=1} END {exit bad}' "$tmp/contents" >&2 ||
    fail "files in the package not owned by root/root"
awk '$1 ~ /^-/ {
        m = 0; p = substr($1, 2)
        for (i = 0; i < 9; i++) if (substr(p, i + 1, 1) != "-") m += 2 ^ (8 - i)
        f = $6; sub(/^\.\//, "", f); printf "%o %s\n", m, f
     }' "$tmp/contents" | sort -k2 >"$tmp/packaged"
if ! cmp -s "$expected" "$tmp/packaged"; then
    diff -u "$expected" "$tmp/packaged" >&2 || true
    fail "dpkg-deb -c: file list or modes differ (- expected, + packaged)"
fi
ok "dpkg-deb -c: usr/sbin/hubd, usr/bin/hubctl, lib/systemd/system/hubd.{service,socket}, etc/hubd/hubd.conf, the three man pages, the Python package ($(echo "$py_files" | wc -l) files), sysusers.d; all root/root"

# Control fields.
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = hubd ] || fail "Package: $(field Package)"
[ "$(field Architecture)" = "$arch" ] || fail "Architecture: $(field Architecture)"
[ -n "$(field Maintainer)" ] || fail "no Maintainer"
[ -n "$(field Description)" ] || fail "no Description"
depends=$(field Depends)
for d in adduser python3 libc6 libuv1 libmbedtls14 libmbedx509-1 libmbedcrypto7 libsqlite3-0 \
    libinih1 libsystemd0 libacl1 libyajl2; do
    echo "$depends" | tr ',' '\n' | sed 's/^ *//; s/[ (].*//' | grep -qx "$d" ||
        fail "Depends lacks $d: $depends"
done
[ "$(field Recommends)" = ca-certificates ] || fail "Recommends: $(field Recommends) (ca-certificates wanted)"
ok "control: Package hubd, Version $version, Architecture $arch, Maintainer $(field Maintainer)"
ok "Depends: $depends"

# Control members.
dpkg-deb -I "$deb" >"$tmp/info"
for m in postinst prerm postrm conffiles md5sums; do
    grep -Eq "^ +[0-9]+ bytes, +[0-9]+ lines +(\* +)?$m( |\$)" "$tmp/info" || fail "dpkg-deb -I: no $m"
done
for m in postinst prerm postrm; do
    grep -Eq "^ +[0-9]+ bytes, +[0-9]+ lines +\* +$m " "$tmp/info" || fail "$m is not executable"
done
ctl="$tmp/control"
dpkg-deb -e "$deb" "$ctl"
[ "$(cat "$ctl/conffiles")" = /etc/hubd/hubd.conf ] || fail "conffiles: $(cat "$ctl/conffiles")"
for m in postinst prerm postrm; do
    cmp -s "$ctl/$m" "$src/systemd/deb/$m" || fail "$m in the package is not systemd/deb/$m"
    sh -n "$ctl/$m" || fail "$m: syntax error"
done
ok "dpkg-deb -I: postinst, prerm, postrm (executable, valid sh), conffiles = /etc/hubd/hubd.conf"

# ---- 3. Maintainer scripts against recording stubs -------------------------
stubs="$tmp/stubs"
mkdir "$stubs"
log="$tmp/calls"
for c in adduser addgroup deb-systemd-helper deb-systemd-invoke systemctl py3compile py3clean rm rmdir; do
    printf '#!/bin/sh\necho "%s $*" >>"%s"\n' "$c" "$log" >"$stubs/$c"
    chmod +x "$stubs/$c"
done
run() { # script, arguments...
    : >"$log"
    s=$1
    shift
    PATH="$stubs:$PATH" DPKG_ROOT="" sh -e "$ctl/$s" "$@" || fail "$s $* exited with $?"
}
called() { # fixed line expected in the log
    grep -qxF "$1" "$log" || { cat "$log" >&2; fail "expected call: $1"; }
}

run postinst configure
called "adduser --quiet --system --group --home /var/lib/hubd --no-create-home --gecos hubd download cache hubd"
called "addgroup --quiet --system hubd-admin"
called "deb-systemd-helper enable hubd.socket"
called "py3compile -p hubd"
grep -q "enable hubd.service" "$log" && fail "postinst enables hubd.service (only the socket should be)"
ok "postinst configure: adduser --system --group hubd, addgroup --system hubd-admin, enables hubd.socket, py3compile"

run postinst configure "$version"
called "adduser --quiet --system --group --home /var/lib/hubd --no-create-home --gecos hubd download cache hubd"
ok "postinst configure OLD-VERSION (upgrade): same calls, exit 0"

run prerm remove
called "py3clean -p hubd"
ok "prerm remove: py3clean"

run postrm remove
grep -Eq "^(rm|rmdir|deluser|delgroup) " "$log" && { cat "$log" >&2; fail "postrm remove deletes something"; }
ok "postrm remove: deletes nothing"

run postrm purge
called "rm -rf /var/cache/hubd /var/lib/hubd"
grep -Eq "^(deluser|delgroup) " "$log" && fail "postrm purge removes users"
ok "postrm purge: removes /var/cache/hubd and /var/lib/hubd, keeps the users hubd and hubd-admin"

echo "PASS: test_deb.sh"
