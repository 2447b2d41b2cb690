#!/usr/bin/env bash
# Writes a throw-away PKI for hubd's HTTPS tests and benchmark into DIR.
#
#   tests/tls/make-certs.sh DIR
#
# Files (all EC P-256, ecdsa-with-SHA256, PEM; keys are unencrypted PKCS#8):
#   ca.crt ca.key                the test CA (CA:TRUE, keyCertSign)
#   server.crt server.key        localhost, 127.0.0.1, ::1; signed by ca;
#                                valid from yesterday for 30 days; serverAuth
#   expired.crt expired.key      the same names, signed by ca, valid only
#                                from 2020-01-01 to 2021-01-01
#   wrongname.crt wrongname.key  wrong.example only (no IP names), by ca
#   other-ca.crt other-ca.key    a second CA that hubd is not told about
#   untrusted.crt untrusted.key  localhost, 127.0.0.1, ::1; signed by other-ca
#   selfsigned.crt selfsigned.key  localhost, 127.0.0.1, ::1; its own issuer (no CA)
#
# Uses the openssl command only. Overwrites whatever is there, prints nothing
# on success, exits non-zero on any failure. The system's openssl.cnf is not
# read: every setting comes from the config written below.
set -euo pipefail

die() {
    echo "make-certs: $*" >&2
    exit 1
}

[[ $# -eq 1 ]] || {
    echo "usage: tests/tls/make-certs.sh DIR" >&2
    exit 2
}
command -v openssl >/dev/null || die "openssl not found"
mkdir -p "$1" || die "cannot create $1"
out=$(cd "$1" && pwd -P)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/make-certs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# One config for every step: the request sections give the subject, the
# extension sections what each certificate may be used for, and the ca
# section is the minimal state that 'openssl ca' needs (it alone can set a
# start date in OpenSSL 3.0; 'openssl x509 -req' always starts now).
cat >"$tmp/openssl.cnf" <<'EOF'
[req]
distinguished_name = req_dn
prompt = no
[req_dn]
CN = placeholder

[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash

[localhost_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1

[wrongname_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:wrong.example

[ca]
default_ca = test_ca
[test_ca]
dir = $ENV::CA_STATE
database = $dir/index.txt
new_certs_dir = $dir
serial = $dir/serial
default_md = sha256
policy = any_policy
unique_subject = no
email_in_dn = no
copy_extensions = none
[any_policy]
commonName = supplied
EOF
export OPENSSL_CONF=$tmp/openssl.cnf
export CA_STATE=$tmp # every openssl run reads the whole config: it must be set
conf=(-config "$tmp/openssl.cnf")

# new_ca NAME CN: a self-signed CA, valid from yesterday for ten years.
new_ca() {
    local name=$1 cn=$2
    openssl req "${conf[@]}" -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
        -nodes -keyout "$tmp/$name.key" -out "$tmp/$name.crt" -subj "/CN=$cn" \
        -days 3650 -sha256 -extensions ca_ext 2>"$tmp/err" ||
        die "CA $name: $(cat "$tmp/err")"
    # State for 'openssl ca': its own index and a random first serial.
    mkdir -p "$tmp/state-$name"
    : >"$tmp/state-$name/index.txt"
    openssl rand -hex 16 >"$tmp/state-$name/serial"
}

# new_self NAME CN: a self-signed leaf for localhost (no CA issued it),
# valid from now for thirty days.
new_self() {
    local name=$1 cn=$2
    openssl req "${conf[@]}" -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
        -nodes -keyout "$tmp/$name.key" -out "$tmp/$name.crt" -subj "/CN=$cn" \
        -days 30 -sha256 -extensions localhost_ext 2>"$tmp/err" ||
        die "self-signed $name: $(cat "$tmp/err")"
}

# new_leaf NAME CA CN EXT START END: a key, a request, and the certificate
# signed by CA with extension section EXT, valid from START to END
# (YYYYMMDDHHMMSSZ, UTC).
new_leaf() {
    local name=$1 ca=$2 cn=$3 ext=$4 start=$5 end=$6
    openssl req "${conf[@]}" -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$tmp/$name.key" -out "$tmp/$name.csr" -subj "/CN=$cn" 2>"$tmp/err" ||
        die "request $name: $(cat "$tmp/err")"
    CA_STATE=$tmp/state-$ca openssl ca "${conf[@]}" -batch -notext \
        -cert "$tmp/$ca.crt" -keyfile "$tmp/$ca.key" -in "$tmp/$name.csr" \
        -out "$tmp/$name.crt" -extensions "$ext" -startdate "$start" -enddate "$end" \
        >/dev/null 2>"$tmp/err" ||
        die "sign $name with $ca: $(cat "$tmp/err")"
}

now=$(date -u +%s)
yesterday=$(date -u -d "@$((now - 86400))" +%Y%m%d%H%M%SZ)
in30days=$(date -u -d "@$((now - 86400 + 30 * 86400))" +%Y%m%d%H%M%SZ)

new_ca ca "hubd test CA"
new_ca other-ca "hubd other test CA"
new_leaf server ca localhost localhost_ext "$yesterday" "$in30days"
new_leaf expired ca localhost localhost_ext 20200101000000Z 20210101000000Z
new_leaf wrongname ca wrong.example wrongname_ext "$yesterday" "$in30days"
new_leaf untrusted other-ca localhost localhost_ext "$yesterday" "$in30days"
new_self selfsigned localhost

# Into DIR, each file replaced whole (rename within DIR after a copy).
for name in ca other-ca server expired wrongname untrusted selfsigned; do
    for ext in crt key; do
        mode=644
        [[ $ext == key ]] && mode=600
        install -m "$mode" "$tmp/$name.$ext" "$out/.$name.$ext.new" ||
            die "cannot write $out/$name.$ext"
        mv -f "$out/.$name.$ext.new" "$out/$name.$ext" || die "cannot write $out/$name.$ext"
    done
done
