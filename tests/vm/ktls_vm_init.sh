#!/bin/sh
# /init of the kernel TLS test's VM (ktls_vm_test.sh builds the initramfs
# around it): busybox, nginx, hubd and hubctl, the tls module and the
# crypto it takes, all on the VM's loopback. Each case prints one line
#   KTLSVM: RESULT <case> ok|FAIL <what>
# on the serial console, then "KTLSVM: DONE pass=N fail=M", and the VM
# powers off. Whatever goes wrong, PID 1 ends and the VM with it.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
say() { echo "KTLSVM: $*"; }
pass=0
fail=0
result() { # case ok|FAIL what
    say "RESULT $*"
    [ ! -s /tmp/out ] || say "  $(head -c 400 /tmp/out)"
    if [ "$2" = ok ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
}
finish() {
    say "DONE pass=$pass fail=$fail"
    poweroff -f
}

# The tls module and what gcm(aes) is made of, in dependency order.
for m in $(cat /ktls/modules.order); do
    [ -d "/sys/module/$(echo "$m" | tr - _)" ] || insmod "/ktls/modules/$m.ko" || say "insmod $m failed"
done
grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp && say "tls module loaded" || say "no tls ULP"
ip link set lo up

# nginx: 8443 any cipher (the client's order picks AES-128-GCM), 8446
# AES-256-GCM only, 8444 ChaCha20-Poly1305 only (the kernel's path is
# AES-GCM only); 8445 and 8447 are the tampering relay in front of 8443,
# 8448 a forward proxy (CONNECT) to it. openssl s_server on 8449 answers
# HTTP/1.0, its body ended by close_notify.
mkdir -p /tmp/www /tmp/nginx
for f in a b c d e f g; do dd if=/dev/urandom of=/tmp/www/$f.bin bs=64k count=48 2>/dev/null; done
dd if=/dev/urandom of=/tmp/www/h.bin bs=64k count=4 2>/dev/null # s_server writes 16 KiB at a time
nginx -p /tmp/nginx -c /ktls/nginx.conf -e /tmp/nginx/error.log &
tamper_proxy 8445 8443 1 2>/tmp/tamper1.log &
tamper_proxy 8447 8443 4 2>/tmp/tamper4.log &
tamper_proxy 8448 8443 connect 2>/tmp/tunnel.log &
(cd /tmp/www && exec openssl s_server -quiet -WWW -accept 127.0.0.1:8449 -cert /ktls/certs/server.crt \
    -key /ktls/certs/server.key -cipher ECDHE-ECDSA-AES128-GCM-SHA256 -no_tls1_3 >/tmp/s_server.log 2>&1) &
for i in $(seq 50); do nc 127.0.0.1 8443 </dev/null 2>/dev/null && break; sleep 0.2; done

JOURNAL_STREAM=1 hubd --config /ktls/hubd.conf 2>/tmp/hubd.log &
hubd_pid=$!
for i in $(seq 100); do [ -S /tmp/hubd.sock ] && break; sleep 0.2; done
[ -S /tmp/hubd.sock ] || { say "hubd did not start"; cat /tmp/hubd.log; fail=1; finish; }

# One fetch: its JSON line in /tmp/out, the log lines it added in /tmp/lines.
fetch() { # url
    before=$(wc -l </tmp/hubd.log)
    t0=$(date +%s)
    timeout 120 hubctl --socket /tmp/hubd.sock fetch --json "$1" >/tmp/out 2>/tmp/err
    took=$(($(date +%s) - t0))
    sleep 0.3 # the closing lines of the connection
    tail -n +$((before + 1)) /tmp/hubd.log >/tmp/lines
}
has() { grep -q "$1" "$2"; }
same_file() { # www file: the fetched copy is the origin's
    want=$(sha256sum "/tmp/www/$1" | cut -d' ' -f1)
    has "\"sha256\":\"$want\"" /tmp/out
}
no_warnings() { ! grep -q '^<[0-4]>' /tmp/lines; } # journal levels: 4 warning, 3 error
committed() { hubctl --socket /tmp/hubd.sock ls | grep -q "$1"; }
show() { say "--- $1 (the fetch took $took s)"; cat /tmp/out /tmp/err; grep -i 'tls\|kernel' /tmp/lines | head -20; }

# 1, 2. Verified downloads through kernel TLS, AES-128-GCM and AES-256-GCM.
for c in "ktls_aes128 8443 a.bin TLS-ECDHE-ECDSA-WITH-AES-128-GCM-SHA256" \
         "ktls_aes256 8446 b.bin TLS-ECDHE-ECDSA-WITH-AES-256-GCM-SHA384"; do
    set -- $c
    fetch "https://localhost:$2/$3"
    if has '"ok":true' /tmp/out && same_file "$3" && has "$4" /tmp/lines &&
        has 'kernel TLS: the kernel decrypts and encrypts the records' /tmp/lines; then
        result "$1" ok
    else
        result "$1" FAIL "no verified download through kernel TLS"
        show "$1"
    fi
done

# hubd said so at its start, and --check-config (hubd.service's check
# before a start) still prints nothing with --quiet.
: >/tmp/out
out=$(hubd --check-config --quiet --config /ktls/hubd.conf 2>&1)
if has 'kernel TLS: the kernel decrypts the https downloads that use AES-GCM' /tmp/hubd.log &&
    [ -z "$out" ]; then
    result ktls_announced ok
else
    result ktls_announced FAIL "the start-up line, or a quiet --check-config: $out"
fi

# 3. Another file from the first origin: the pooled connection, still in
# the kernel's hands both ways, carries the request and the answer.
fetch "https://localhost:8443/f.bin"
if has '"ok":true' /tmp/out && same_file f.bin && ! has 'handshake' /tmp/lines; then
    result ktls_reused ok
else
    result ktls_reused FAIL "a second request on the kernel TLS connection"
    show ktls_reused
fi

# 4. ChaCha20-Poly1305: mbedTLS decrypts, the download works, no warning.
fetch "https://localhost:8444/c.bin"
if has '"ok":true' /tmp/out && same_file c.bin && no_warnings &&
    has 'mbedTLS decrypts, not the kernel: the cipher suite is not AES-GCM' /tmp/lines &&
    ! has 'kernel TLS: the kernel decrypts' /tmp/lines; then
    result fallback_chacha20 ok
else
    result fallback_chacha20 FAIL "the fallback to mbedTLS"
    show fallback_chacha20
fi

# 5. The first record changed (the response's head): "tls", named, nothing kept.
fetch "https://localhost:8445/d.bin"
if has '"ok":false' /tmp/out && has '"code":"tls"' /tmp/out &&
    has 'failed its integrity check' /tmp/out && has 'kernel TLS: the kernel decrypts' /tmp/lines &&
    has 'changed a byte' /tmp/tamper1.log && ! committed d.bin; then
    result tampered_head ok
else
    result tampered_head FAIL "a changed record"
    show tampered_head
fi

# 6. A record mid-body changed: the response was under way, so "truncated"
# (resumable), with the same reason; nothing committed.
fetch "https://localhost:8447/e.bin"
if has '"ok":false' /tmp/out && has '"code":"truncated"' /tmp/out &&
    has 'failed its integrity check' /tmp/out && has 'changed a byte' /tmp/tamper4.log &&
    ! committed e.bin; then
    result tampered_body ok
else
    result tampered_body FAIL "a changed record mid-body"
    show tampered_body
fi

# 7. A body that only the server's close_notify ends: the alert is the
# record kernel TLS hands over apart (a read fails with EIO, recvmsg gives
# its type), and it ends the body cleanly.
fetch "https://localhost:8449/h.bin"
if has '"ok":true' /tmp/out && same_file h.bin &&
    has 'kernel TLS: the kernel decrypts and encrypts the records' /tmp/lines; then
    result ktls_close_notify ok
else
    result ktls_close_notify FAIL "a body ended by close_notify"
    show ktls_close_notify
    cat /tmp/s_server.log
fi

# hubd again, with other settings (appended to the file's).
stop_hubd() {
    kill "$hubd_pid"
    wait "$hubd_pid" || { say "hubd exited $?"; fail=$((fail + 1)); }
}
restart_hubd() { # line...
    stop_hubd
    cp /ktls/hubd.conf /tmp/hubd-next.conf
    for l in "$@"; do echo "$l" >>/tmp/hubd-next.conf; done
    rm -f /tmp/hubd.sock
    JOURNAL_STREAM=1 hubd --config /tmp/hubd-next.conf 2>>/tmp/hubd.log &
    hubd_pid=$!
    for i in $(seq 100); do [ -S /tmp/hubd.sock ] && break; sleep 0.2; done
}

# 8. Through a forward proxy's tunnel (CONNECT on plain TCP): the socket
# still carries the TLS stream as it is, and the kernel takes it.
restart_hubd "proxy = http://127.0.0.1:8448"
fetch "https://localhost:8443/g.bin"
if has '"ok":true' /tmp/out && same_file g.bin && has 'CONNECT' /tmp/tunnel.log &&
    has 'kernel TLS: the kernel decrypts and encrypts the records' /tmp/lines; then
    result ktls_tunnel ok
else
    result ktls_tunnel FAIL "kernel TLS through a CONNECT tunnel"
    show ktls_tunnel
fi

# 9. A connection that went idle is closed (its close_notify goes out as
# a record the kernel makes, seen by the relay); the next one resumes the
# TLS session, and the keys of a resumed handshake go to the kernel as well.
restart_hubd "keepalive_timeout = 1s" "proxy = http://127.0.0.1:8448"
fetch "https://localhost:8443/f.bin?first"
sleep 2.5
fetch "https://localhost:8443/f.bin?resumed"
if has '"ok":true' /tmp/out && same_file f.bin && has 'resumed handshake' /tmp/lines &&
    has 'kernel TLS: the kernel decrypts and encrypts the records' /tmp/lines &&
    ! has 'close_notify to https://localhost:8443 not sent' /tmp/hubd.log &&
    has 'an alert record from the client' /tmp/tunnel.log; then
    result ktls_resumed ok
else
    result ktls_resumed FAIL "kernel TLS after a resumed handshake"
    show ktls_resumed
    grep close_notify /tmp/hubd.log
    cat /tmp/tunnel.log
fi

# 10. ktls = off: an AES-GCM origin, mbedTLS all the way.
restart_hubd "ktls = off"
fetch "https://localhost:8446/b.bin?again"
if has '"ok":true' /tmp/out && same_file b.bin && has 'AES-256-GCM' /tmp/lines &&
    ! has 'kernel TLS' /tmp/lines; then
    result ktls_off ok
else
    result ktls_off FAIL "ktls = off"
    show ktls_off
fi

# A sanitized build (ASan, UBSan) of hubd: its reports, if any, are failures.
stop_hubd
: >/tmp/out
if grep -q 'Sanitizer\|runtime error' /tmp/hubd.log; then
    result sanitizers FAIL "a sanitizer report"
    grep -A30 'Sanitizer\|runtime error' /tmp/hubd.log | head -60
else
    result sanitizers ok
fi
finish
