#!/bin/sh
# Makes the cluster swarm's certificates (docs/FLEET.md, "3. The swarm").
#
#   scripts/fleet-certs.sh ca DIR          the cluster CA: DIR/ca.pem and
#                                          DIR/ca.key (0600), unless DIR
#                                          has them already (then kept)
#   scripts/fleet-certs.sh node DIR NAME   DIR/NAME.pem and DIR/NAME.key
#                                          (0600): a node's certificate,
#                                          signed by DIR's CA; prints how
#                                          to install them on the node
#
# Keys are EC P-256, unencrypted (hubd reads fleet_key at start). A node
# certificate has CN=* and no subjectAltName: libtorrent accepts a peer whose
# CN (or SAN) names the torrent, and * names them all, so one certificate
# serves every file; and libtorrent 2.0.8 leaks memory decoding a SAN at each
# handshake. It may be used by a TLS server and by a client (the metadata
# exchange and the peer connections are mutual TLS), is valid for 825 days
# and has a random serial. The CA is valid 10 years and signs node
# certificates only (pathlen 0). Keep DIR, and ca.key above all, off the
# nodes: whoever has ca.key can make members of the swarm.
#
# Uses the openssl command only, with a configuration of its own (the
# system's openssl.cnf is not read). A file is written under a temporary
# name and renamed when complete; an existing node certificate is never
# replaced (remove NAME.pem and NAME.key to make a new one).
set -eu

prog=fleet-certs.sh

die() {
    echo "$prog: $*" >&2
    exit 1
}

usage() {
    echo "usage: $prog ca DIR           make the cluster CA in DIR (kept if there)
       $prog node DIR NAME     make NAME.pem and NAME.key, signed by DIR's CA"
}

case ${1-} in
-h | --help)
    usage
    exit 0
    ;;
ca) [ $# -eq 2 ] || { usage >&2; exit 2; } ;;
node) [ $# -eq 3 ] || { usage >&2; exit 2; } ;;
*)
    usage >&2
    exit 2
    ;;
esac
cmd=$1
dir=$2

command -v openssl >/dev/null 2>&1 || die "openssl not found (Debian package openssl)"

# Keys are never readable by others, not even for a moment.
umask 077

if [ "$cmd" = node ]; then
    name=$3
    # The name becomes two file names and a subject attribute: keep it plain.
    case $name in
    '' | [.-]* | *[!A-Za-z0-9._-]*)
        die "bad node name '$name': letters, digits, '.', '_' and '-' only, not first '.' or '-'"
        ;;
    ca) die "bad node name 'ca': that is the CA's own file name" ;;
    esac
    if [ ! -f "$dir/ca.pem" ] || [ ! -f "$dir/ca.key" ]; then
        die "no CA in $dir (ca.pem and ca.key): make it first with '$prog ca $dir'"
    fi
    [ -r "$dir/ca.key" ] || die "cannot read $dir/ca.key (run as its owner)"
    for f in "$dir/$name.pem" "$dir/$name.key"; do
        [ ! -e "$f" ] || die "$f exists: kept (remove $name.pem and $name.key to make new ones)"
    done
else
    if [ -e "$dir/ca.pem" ] && [ -e "$dir/ca.key" ]; then
        echo "$prog: $dir already has a CA: kept ($dir/ca.pem, $dir/ca.key)"
        exit 0
    fi
    for f in ca.pem ca.key; do
        [ ! -e "$dir/$f" ] || die "$dir/$f exists without its pair: move it away, or restore the other"
    done
    mkdir -p "$dir" || die "cannot create $dir"
fi

# Work files beside the results, so that the last step is a rename.
tmp=$(mktemp -d "$dir/.fleet-certs.XXXXXX") || die "cannot write in $dir"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

cat >"$tmp/openssl.cnf" <<'EOF'
[req]
distinguished_name = req_dn
prompt = no
[req_dn]
CN = placeholder

[ca_ext]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash

# No subjectAltName (see above). Both usages: every node is a TLS server to
# some peers and a client of others.
[node_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
export OPENSSL_CONF="$tmp/openssl.cnf"

# openssl's own words go to a log, shown only when a step fails.
run() { # what, command...
    what=$1
    shift
    "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; die "$what failed (openssl's output above)"; }
}

newkey() { # path
    run "making an EC P-256 key" openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"
}

serial() { # a random positive 128-bit serial, as openssl's -set_serial takes it
    echo "0x$(openssl rand -hex 16)"
}

if [ "$cmd" = ca ]; then
    newkey "$tmp/ca.key"
    run "making the CA certificate" openssl req -new -x509 -config "$tmp/openssl.cnf" \
        -key "$tmp/ca.key" -subj "/O=hubd fleet/CN=hubd fleet CA" -days 3650 -sha256 \
        -extensions ca_ext -set_serial "$(serial)" -out "$tmp/ca.pem"
    chmod 0600 "$tmp/ca.key"
    chmod 0644 "$tmp/ca.pem"
    mv "$tmp/ca.key" "$dir/ca.key"
    mv "$tmp/ca.pem" "$dir/ca.pem"
    echo "made the cluster CA: $dir/ca.pem (give it to every node) and $dir/ca.key (0600: keep it here)"
    echo "next, for each node: $prog node $dir NAME"
    exit 0
fi

newkey "$tmp/$name.key"
run "making the request" openssl req -new -config "$tmp/openssl.cnf" -key "$tmp/$name.key" \
    -subj "/O=hubd fleet/OU=$name/CN=*" -out "$tmp/$name.csr"
run "signing the certificate" openssl x509 -req -in "$tmp/$name.csr" -CA "$dir/ca.pem" \
    -CAkey "$dir/ca.key" -set_serial "$(serial)" -days 825 -sha256 \
    -extfile "$tmp/openssl.cnf" -extensions node_ext -out "$tmp/$name.pem"
run "checking the certificate against $dir/ca.pem" openssl verify -CAfile "$dir/ca.pem" "$tmp/$name.pem"
chmod 0600 "$tmp/$name.key"
chmod 0644 "$tmp/$name.pem"
until=$(openssl x509 -in "$tmp/$name.pem" -noout -enddate | sed 's/^notAfter=//')
mv "$tmp/$name.key" "$dir/$name.key"
mv "$tmp/$name.pem" "$dir/$name.pem"

cat <<EOF
made $dir/$name.pem and $dir/$name.key (EC P-256, CN=*, valid until $until)
Copy ca.pem, $name.pem and $name.key (never ca.key) to the node $name; there, as root:
  install -d -m 0750 -o root -g hubd /etc/hubd/fleet
  install -m 0644 -o root -g root ca.pem /etc/hubd/fleet/ca.pem
  install -m 0644 -o root -g root $name.pem /etc/hubd/fleet/node.pem
  install -m 0640 -o root -g hubd $name.key /etc/hubd/fleet/node.key
and in its /etc/hubd/hubd.conf:
  fleet_ca = /etc/hubd/fleet/ca.pem
  fleet_cert = /etc/hubd/fleet/node.pem
  fleet_key = /etc/hubd/fleet/node.key
then remove the copy of $name.key that was sent.
EOF
