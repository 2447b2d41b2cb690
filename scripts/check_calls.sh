#!/bin/sh
# Calls go down (docs/ARCHITECTURE.md): no two .c files of the daemon call
# each other. A pair is two object files each of which uses a function (or
# object) the other defines, read from the compiled objects with nm, so
# every call the linker resolves counts, through whatever header. Prints
# the pairs per folder and fails when a folder has more than it may:
#   none, in any folder of the daemon (issue 23 allowed 2 in daemon/front and
#   4 in all; issue 25 took the last away).
#   check_calls.sh BUILD_DIR [--list]
# --list prints every pair with the symbols each side takes from the other.
set -eu
build=${1:?usage: check_calls.sh BUILD_DIR [--list]}
list=${2:-}
command -v nm >/dev/null || { echo "check_calls: nm not found (binutils)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hubd-calls.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# One line per object: "folder file defined|used symbol".
objs=$(find "$build/daemon" -path '*/CMakeFiles/*.dir/*' -name '*.c.o' | sort)
[ -n "$objs" ] || { echo "check_calls: no objects under $build/daemon (build it first)" >&2; exit 2; }
for o in $objs; do
    # .../daemon/fetch/CMakeFiles/hubd_fetch.dir/job.c.o -> daemon/fetch job.c
    rel=${o#"$build"/}
    folder=${rel%%/CMakeFiles/*}
    file=$(basename "$o" .o)
    nm "$o" | awk -v f="$folder" -v n="$file" '
        $2 ~ /^[TDBR]$/ { print f, n, "def", $3 }
        $1 == "U"       { print f, n, "use", $2 }'
done >"$tmp/syms"

# Pairs: A uses what B defines and B uses what A defines (A before B).
awk '
    $3 == "def" { owner[$4] = $1 "/" $2 }
    $3 == "use" { uses[NR] = $1 "/" $2 " " $4 }
    END {
        for (i in uses) {
            split(uses[i], u, " ")
            d = owner[u[2]]
            if (d != "" && d != u[1]) { edge[u[1] " " d] = edge[u[1] " " d] " " u[2] }
        }
        for (e in edge) {
            split(e, ab, " ")
            back = ab[2] " " ab[1]
            if ((back in edge) && ab[1] < ab[2])
                print ab[1], ab[2], "|" edge[e] " |" edge[back]
        }
    }' "$tmp/syms" | sort >"$tmp/pairs"

bad=0
count() { # count FOLDER_PATTERN: pairs whose two files are both in it
    awk -v p="$1" '{ a = $1; b = $2; sub("/[^/]*$", "", a); sub("/[^/]*$", "", b)
                     if ((p == "daemon" || a == p) && (p == "daemon" || b == p)) n++ }
                   END { print n + 0 }' "$tmp/pairs"
}
check() { # check FOLDER MAX
    n=$(count "$1")
    if [ "$n" -gt "$2" ]; then
        echo "FAIL: $1: $n pair(s) of files call each other, at most $2"
        bad=1
    else
        echo "ok: $1: $n pair(s) of files call each other (at most $2)"
    fi
}
if [ "$list" = --list ] || [ -n "${VERBOSE:-}" ]; then
    sed 's/^/  /' "$tmp/pairs"
else
    awk '{ print "  " $1 " <-> " $2 }' "$tmp/pairs"
fi
check daemon/fetch "${MAX_FETCH:-0}"
check daemon/front "${MAX_FRONT:-0}"
check daemon "${MAX_DAEMON:-0}"
exit $bad
