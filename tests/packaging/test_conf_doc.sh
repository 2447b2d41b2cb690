#!/bin/sh
# Checks that every configuration key of hubd is documented, in
# docs/man/hubd.conf.5 and in etc/hubd.conf, and that neither names a key
# hubd does not know.
#
#   test_conf_doc.sh BUILD_DIR SOURCE_DIR
#
# hubd's keys: the "key = value" lines of
# "BUILD_DIR/daemon/hubd --check-config --config /dev/null" (comment lines
# skipped), and the keys named in etc/hubd.conf or the man page that hubd
# accepts (a few, such as ca_file, proxy and mirror, are printed only when
# set). A name is a key when a file that sets it ("name =") is not refused
# with "unknown key 'name'".
# The man page documents a key with a tagged paragraph in its KEYS section:
# ".TP" (or ".TQ", for a second key sharing the paragraph) followed by
# ".B key ...", ".BI "key = " ..." or ".BR "key = ..." ...". etc/hubd.conf
# names it as "key =" or "#key =" ("# key =" too) at the start of a line.
set -eu

. "$(dirname "$0")/lib.sh"
pkg_setup conf-doc "$@"

hubd="$build/daemon/hubd"
man="$src/docs/man/hubd.conf.5"
conf="$src/etc/hubd.conf"
[ -x "$hubd" ] || fail "$hubd not built (cmake --build BUILD_DIR --target hubd)"
[ -f "$man" ] || fail "$man missing"
[ -f "$conf" ] || fail "$conf missing"
# The proxy variables are checked too: the caller's must not decide.
unset http_proxy https_proxy HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

# 1. The keys hubd prints.
"$hubd" --check-config --config /dev/null >"$tmp/printed.out" 2>"$tmp/printed.err" ||
    { cat "$tmp/printed.err" >&2; fail "hubd --check-config --config /dev/null failed"; }
sed -n 's/^\([a-z][a-z0-9_]*\) =.*/\1/p' "$tmp/printed.out" | sort -u >"$tmp/printed"
n=$(wc -l <"$tmp/printed")
[ "$n" -ge 20 ] || { cat "$tmp/printed.out" >&2; fail "hubd --check-config printed only $n keys"; }

# 2. The keys the man page documents: tags of .TP/.TQ paragraphs in KEYS.
awk -v bad="$tmp/man.bad" '
    /^\.SH/ { sec = ($0 ~ /^\.SH +"?KEYS"? *$/); if (sec) seen = 1; prev = ""; next }
    sec && (prev == ".TP" || prev == ".TQ") {
        line = $0
        if (sub(/^\.B[IR]?[ \t]+"?/, "", line) && match(line, /^[a-z][a-z0-9_]*/) &&
            substr(line, RLENGTH + 1) ~ /^([ \t"]|$)/)
            print substr(line, RSTART, RLENGTH)
        else
            print NR ": " $0 >bad
    }
    { prev = $0 }
    END { if (!seen) print "no .SH KEYS section" >bad }
' "$man" | sort -u >"$tmp/man"
if [ -s "$tmp/man.bad" ]; then
    sed 's/^/      /' "$tmp/man.bad" >&2
    fail "docs/man/hubd.conf.5: KEYS entries not in the form .TP/.TQ + .B key (lines above)"
fi

# 3. The keys etc/hubd.conf names, commented out or not.
sed -En 's/^(# ?)?([a-z][a-z0-9_]*) =.*/\2/p' "$conf" | sort -u >"$tmp/conf"

# 4. Every name that is not printed: a key hubd accepts, or unknown.
: >"$tmp/accepted"
: >"$tmp/unknown"
for k in $(sort -u "$tmp/man" "$tmp/conf" | comm -23 - "$tmp/printed"); do
    printf '%s =\n' "$k" >"$tmp/probe.conf"
    "$hubd" --check-config --quiet --config "$tmp/probe.conf" >/dev/null 2>"$tmp/probe.err" || true
    if grep -qF "unknown key '$k'" "$tmp/probe.err"; then
        echo "$k" >>"$tmp/unknown"
    else
        echo "$k" >>"$tmp/accepted"
    fi
done
sort -u "$tmp/printed" "$tmp/accepted" >"$tmp/keys"

# 5. Each key in both documents; no unknown key in either.
missing() { # list of names -> one line, or nothing
    tr '\n' ' ' <"$1" | sed 's/ $//'
}
comm -23 "$tmp/keys" "$tmp/man" >"$tmp/man.missing"
: >"$tmp/conf.missing"
while read -r k; do
    grep -Eq "^(# ?)?$k =" "$conf" || echo "$k" >>"$tmp/conf.missing"
done <"$tmp/keys"
comm -12 "$tmp/unknown" "$tmp/man" >"$tmp/man.unknown"
comm -12 "$tmp/unknown" "$tmp/conf" >"$tmp/conf.unknown"
status=0
report() { # report FILE WHAT: a FAIL line naming the keys in FILE, if any
    [ -s "$1" ] || return 0
    echo "FAIL: $2: $(missing "$1")" >&2
    status=1
}
report "$tmp/man.missing" "docs/man/hubd.conf.5 has no KEYS entry for"
report "$tmp/conf.missing" "etc/hubd.conf does not name (as 'key =' or '#key =')"
report "$tmp/man.unknown" "docs/man/hubd.conf.5 documents keys hubd does not know"
report "$tmp/conf.unknown" "etc/hubd.conf names keys hubd does not know"
[ "$status" -eq 0 ] || exit 1
ok "$(wc -l <"$tmp/keys") keys ($(wc -l <"$tmp/printed") printed by --check-config, $(missing "$tmp/accepted") only when set): each has a KEYS entry in docs/man/hubd.conf.5 and a line in etc/hubd.conf"
ok "docs/man/hubd.conf.5 documents $(wc -l <"$tmp/man") keys, etc/hubd.conf names $(wc -l <"$tmp/conf"): all known to hubd"
echo "PASS: test_conf_doc.sh"
