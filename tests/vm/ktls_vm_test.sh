#!/bin/sh
# Kernel TLS, end to end, in a VM: hubd hands an AES-GCM connection's
# records to the kernel's tls module and downloads verified files through
# it; ChaCha20 stays with mbedTLS without a warning; a record changed on
# the way fails the transfer ("failed its integrity check") and nothing is
# committed; ktls = off leaves it all to mbedTLS. The machines hubd runs on
# may have no tls module (this one need not), so the test boots Debian's
# own kernel under qemu (TCG: no KVM needed) with a busybox initramfs that
# holds nginx, hubd, hubctl, the modules and ktls_vm_init.sh as /init.
#
#   ktls_vm_test.sh BUILD_DIR SOURCE_DIR
#
# The kernel: Debian's linux-image-amd64 and the versioned package it
# depends on, fetched with apt-get download once into the cache
# ($HUBD_KTLS_CACHE, else /var/cache/hubd-ktls-test where writable, else
# BUILD_DIR/ktls-vm-cache) and unpacked there (dpkg-deb, never installed):
# only vmlinuz and the modules the test loads are kept.
# Exits 77 (skipped, said why) without qemu-system-x86_64, a static
# busybox or nginx, or when the kernel cannot be fetched. Results come
# back on the serial console (KTLSVM: lines).
set -eu
build=${1:?usage: ktls_vm_test.sh BUILD_DIR SOURCE_DIR}
src=${2:?usage: ktls_vm_test.sh BUILD_DIR SOURCE_DIR}
here="$src/tests/vm"
skip() {
    echo "vm_ktls skipped: $*"
    exit 77
}
fail() {
    echo "vm_ktls: FAIL: $*" >&2
    exit 1
}
start=$(date +%s)

command -v qemu-system-x86_64 >/dev/null || skip "no qemu-system-x86_64 (apt-get install qemu-system-x86; scripts/install-deps.sh)"
busybox=$(command -v busybox || true)
[ -n "$busybox" ] && ! ldd "$busybox" >/dev/null 2>&1 ||
    skip "no static busybox (apt-get install busybox-static; scripts/install-deps.sh)"
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || skip "no nginx"
command -v openssl >/dev/null || skip "no openssl"
for t in apt-get dpkg-deb cc strip flock; do
    command -v $t >/dev/null || skip "no $t"
done
for b in "$build/daemon/hubd" "$build/client/hubctl"; do
    [ -x "$b" ] || fail "$b not built"
done

# ---- the kernel, once -------------------------------------------------------
cache=${HUBD_KTLS_CACHE:-}
if [ -z "$cache" ]; then
    cache=/var/cache/hubd-ktls-test
    mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ] || cache="$build/ktls-vm-cache"
fi
mkdir -p "$cache"
kdir="$cache/kernel"
# Only the modules the test loads: the tls module and what gcm(aes) is built
# from (AES itself is built in).
want_modules="tls gcm ctr ghash-generic"
fetch_kernel() {
    dl="$cache/download.$$"
    rm -rf "$dl" "$kdir.new"
    mkdir -p "$dl" "$kdir.new/modules"
    (cd "$dl" && apt-get download linux-image-amd64) >"$dl/log" 2>&1 ||
        { cat "$dl/log"; rm -rf "$dl"; return 1; }
    # The metapackage names the versioned image: linux-image-6.1.0-NN-amd64.
    pkg=$(dpkg-deb -f "$dl"/linux-image-amd64_*.deb Depends | tr ',|' '\n\n' |
        sed -n 's/^ *\(linux-image-[0-9][^ ]*\).*/\1/p' | head -n 1)
    [ -n "$pkg" ] || { echo "linux-image-amd64 names no image"; rm -rf "$dl"; return 1; }
    (cd "$dl" && apt-get download "$pkg") >>"$dl/log" 2>&1 ||
        { cat "$dl/log"; rm -rf "$dl"; return 1; }
    deb=$(ls "$dl"/"$pkg"_*.deb)
    mkdir "$dl/root"
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dl/root" --wildcards \
        './boot/vmlinuz-*' './lib/modules/*/kernel/crypto/*' './lib/modules/*/kernel/net/tls/*'
    cp "$dl"/root/boot/vmlinuz-* "$kdir.new/vmlinuz"
    mods=$(echo "$dl"/root/lib/modules/*/kernel)
    # Each wanted module after what it depends on (its .modinfo says).
    : >"$kdir.new/modules.order"
    add() {
        local f d name
        grep -qx "$1" "$kdir.new/modules.order" && return 0
        f=$(find "$mods" -name "$1.ko" -o -name "$(echo "$1" | tr _ -).ko" | head -n 1)
        [ -n "$f" ] || { echo "no module $1 in $pkg"; return 1; }
        for d in $(tr '\0' '\n' <"$f" | sed -n 's/^depends=//p' | tr ',' ' '); do
            add "$d" || return 1
        done
        name=$(basename "$f" .ko)
        cp "$f" "$kdir.new/modules/$name.ko"
        echo "$name" >>"$kdir.new/modules.order"
    }
    for m in $want_modules; do add "$m" || { rm -rf "$dl"; return 1; }; done
    echo "$pkg $(dpkg-deb -f "$deb" Version)" >"$kdir.new/version"
    rm -rf "$dl" "$kdir"
    mv "$kdir.new" "$kdir"
}
(
    flock 9
    [ -f "$kdir/version" ] || fetch_kernel
) 9>"$cache/lock" || skip "could not fetch Debian's kernel package (apt-get download linux-image-amd64)"
echo "vm_ktls: kernel $(cat "$kdir/version")"

# ---- the initramfs -----------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/hubd-ktls-vm.XXXXXX")
trap 'rm -rf "$work"' EXIT
ir="$work/root"
mkdir -p "$ir/bin" "$ir/ktls/modules" "$ir/etc" "$ir/proc" "$ir/sys" "$ir/dev" "$ir/tmp" \
    "$ir/var/lib/nginx" "$ir/var/log/nginx" "$ir/run"
cp "$busybox" "$ir/bin/busybox"
for a in $("$busybox" --list); do [ "$a" = busybox ] || ln -s busybox "$ir/bin/$a"; done
# A binary, stripped of debugging data, and the libraries it loads.
put() { # file (the loader, named by its path, comes along too)
    strip --strip-debug -o "$ir/bin/$(basename "$1")" "$1"
    ldd "$1" | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p' |
        while read -r lib; do
            [ -e "$ir$lib" ] && continue
            mkdir -p "$ir$(dirname "$lib")"
            cp -L "$lib" "$ir$lib"
        done
}
cc -O1 -Wall -o "$work/tamper_proxy" "$here/tamper_proxy.c"
put "$build/daemon/hubd"
put "$build/client/hubctl"
put "$nginx"
put "$(command -v openssl)"
put "$work/tamper_proxy"
cp "$kdir"/modules/*.ko "$ir/ktls/modules/"
cp "$kdir/modules.order" "$ir/ktls/"
cp "$here/ktls_vm_init.sh" "$ir/init"
chmod 755 "$ir/init"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$ir/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$ir/etc/group"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$ir/etc/hosts"
printf 'passwd: files\ngroup: files\nhosts: files\n' >"$ir/etc/nsswitch.conf"
bash "$src/tests/tls/make-certs.sh" "$ir/ktls/certs"
cat >"$ir/ktls/nginx.conf" <<'EOF'
daemon off;
master_process off;
worker_processes 1;
pid /tmp/nginx/nginx.pid;
error_log /tmp/nginx/error.log;
events { worker_connections 64; }
http {
    access_log off;
    ssl_certificate /ktls/certs/server.crt;
    ssl_certificate_key /ktls/certs/server.key;
    root /tmp/www;
    server { listen 127.0.0.1:8443 ssl; }
    server { listen 127.0.0.1:8446 ssl; ssl_ciphers ECDHE-ECDSA-AES256-GCM-SHA384; }
    server { listen 127.0.0.1:8444 ssl; ssl_ciphers ECDHE-ECDSA-CHACHA20-POLY1305; }
}
EOF
cat >"$ir/ktls/hubd.conf" <<'EOF'
socket = /tmp/hubd.sock
cache_dir = /tmp/cache
ca_file = /ktls/certs/ca.crt
log_level = debug
min_free_space = 0
retries = 0
ktls = auto
EOF
(cd "$ir" && find . | "$busybox" cpio -o -H newc 2>/dev/null) >"$work/initrd"

# ---- the VM ------------------------------------------------------------------
# no_timer_check: under TCG on a busy host the kernel's check of the timer
# interrupt can take minutes, or hang.
serial="$work/serial.log"
echo "vm_ktls: booting ($(du -k "$work/initrd" | cut -f1) KiB initramfs)"
boot=$(date +%s)
rc=0
timeout 900 qemu-system-x86_64 -m 768 -smp 1 -cpu max -nic none -no-reboot \
    -display none -monitor none -serial "file:$serial" \
    -kernel "$kdir/vmlinuz" -initrd "$work/initrd" \
    -append "console=ttyS0 panic=-1 no_timer_check loglevel=4" >"$work/qemu.log" 2>&1 || rc=$?
end=$(date +%s)
cp "$serial" "$build/ktls-vm-serial.log" # for a look afterwards
grep -a 'KTLSVM:' "$serial" || true
echo "vm_ktls: VM ran $((end - boot)) s; the whole test $((end - start)) s"
if [ "$rc" -ne 0 ]; then
    tail -n 40 "$serial"
    cat "$work/qemu.log"
    [ "$rc" -eq 124 ] && fail "the VM did not power off in 900 s"
    grep -q 'KTLSVM:' "$serial" || skip "qemu could not run the VM (exit $rc)"
fi
grep -aq 'KTLSVM: tls module loaded' "$serial" || { tail -n 40 "$serial"; fail "the tls module did not load"; }
for c in ktls_aes128 ktls_aes256 ktls_announced ktls_reused fallback_chacha20 tampered_head \
    tampered_body ktls_close_notify ktls_tunnel ktls_resumed ktls_off sanitizers; do
    grep -aq "KTLSVM: RESULT $c ok" "$serial" || { tail -n 60 "$serial"; fail "case $c"; }
done
grep -aq 'KTLSVM: DONE pass=[0-9]* fail=0' "$serial" || { tail -n 60 "$serial"; fail "a case failed"; }
echo "vm_ktls: ok"
