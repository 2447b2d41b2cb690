#!/bin/sh
# Calls go down (docs/ARCHITECTURE.md), checked from the compiled objects
# with nm, so every call the linker resolves counts, through whatever header
# (or none: a prototype written by hand gets around check_layers.sh):
# - no two .c files of the daemon call each other: a pair is two object
#   files each of which uses a function (or object) the other defines.
#   Prints the pairs per folder and fails when a folder has more than it
#   may: none, in any folder; nor two of hubctl's (its dispatcher and the
#   commands share their helpers through modules below them);
# - a folder uses only what its own files and the layers below it define
#   (the same order as tests/layout/check_layers.sh): the two ways in,
#   session/ and http/, never call each other; what comes back up is a
#   pointer main.c or the caller set.
#   check_calls.sh BUILD_DIR [--list]
# --list prints every pair with the symbols each side takes from the other.
set -eu
build=${1:?usage: check_calls.sh BUILD_DIR [--list]}
list=${2:-}
command -v nm >/dev/null || { echo "check_calls: nm not found (binutils)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hubd-calls.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# One line per object: "folder file defined|used symbol".
# (.cpp.o: fleet's libtorrent shim, the one C++ file; its C functions have C
# names, and what it uses of libtorrent no file of the daemon defines.)
objs=$(find "$build/daemon" -path '*/CMakeFiles/*.dir/*' \( -name '*.c.o' -o -name '*.cpp.o' \) | sort)
[ -n "$objs" ] || { echo "check_calls: no objects under $build/daemon (build it first)" >&2; exit 2; }
# A folder gone from the sources (moved) leaves its objects in an old build
# dir: they are not the daemon's any more.
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
for o in $objs; do
    # .../daemon/fetch/CMakeFiles/hubd_fetch.dir/job.c.o -> daemon/fetch job.c
    rel=${o#"$build"/}
    folder=${rel%%/CMakeFiles/*}
    [ -z "$src" ] || [ -e "$src/$folder/CMakeLists.txt" ] || continue
    file=$(basename "$o" .o)
    nm "$o" | awk -v f="$folder" -v n="$file" '
        $2 ~ /^[TDBR]$/ { print f, n, "def", $3 }
        $1 == "U"       { print f, n, "use", $2 }'
done >"$tmp/syms"

# Pairs in a symbols file: A uses what B defines and B uses what A
# defines (A before B), sorted.
pairs() {
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
    }' "$1" | sort
}
pairs "$tmp/syms" >"$tmp/pairs"

bad=0
count() { # count FOLDER_PATTERN [PAIRS]: pairs whose two files are both in it
    awk -v p="$1" '{ a = $1; b = $2; sub("/[^/]*$", "", a); sub("/[^/]*$", "", b)
                     if ((p == "daemon" || a == p) && (p == "daemon" || b == p)) n++ }
                   END { print n + 0 }' "${2:-$tmp/pairs}"
}
check() { # check FOLDER MAX [PAIRS]
    n=$(count "$1" "${3:-}")
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
for f in daemon/base daemon/net daemon/cache daemon/fetch daemon/access daemon/hub daemon/fleet \
    daemon/session daemon/http; do
    check "$f" 0
done
check daemon "${MAX_DAEMON:-0}"

# Folders: who may use what another folder defines (lowest first; the
# daemon's own main.c and service.c may use every layer).
below() {
    case $1 in
    daemon/base) echo "" ;;
    daemon/net | daemon/cache) echo "daemon/base" ;;
    daemon/fetch) echo "daemon/base daemon/net daemon/cache" ;;
    daemon/access) echo "daemon/base" ;;
    daemon/hub | daemon/fleet) echo "daemon/base daemon/net daemon/cache daemon/fetch" ;;
    daemon/session | daemon/http)
        echo "daemon/base daemon/net daemon/cache daemon/fetch daemon/access daemon/hub daemon/fleet" ;;
    daemon) echo "daemon/base daemon/net daemon/cache daemon/fetch daemon/access daemon/hub daemon/fleet daemon/session daemon/http" ;;
    *) echo "?" ;;
    esac
}
awk '
    $3 == "def" { owner[$4] = $1 }
    $3 == "use" { uses[NR] = $1 " " $4 }
    END {
        for (i in uses) {
            split(uses[i], u, " ")
            d = owner[u[2]]
            if (d != "" && d != u[1] && !((u[1] " " d) in seen)) {
                seen[u[1] " " d] = 1
                print u[1], d, u[2]
            }
        }
    }' "$tmp/syms" | sort >"$tmp/folders"
up=0
while read -r from to sym; do
    case " $(below "$from") " in
    *" $to "*) ;;
    *)
        echo "FAIL: $from uses $sym of $to, not a layer below it"
        up=$((up + 1))
        ;;
    esac
done <"$tmp/folders"
if [ "$up" -eq 0 ]; then
    echo "ok: folders: $(wc -l <"$tmp/folders") uses between folders, each of a layer below"
else
    bad=1
fi

# hubctl: the same pair rule over its own objects (a world of its own: it
# and the daemon each define main and their own helpers).
for o in $(find "$build/client" -path '*/CMakeFiles/hubctl.dir/*' -name '*.c.o' | sort); do
    nm "$o" | awk -v n="$(basename "$o" .o)" '
        $2 ~ /^[TDBR]$/ { print "client/hubctl", n, "def", $3 }
        $1 == "U"       { print "client/hubctl", n, "use", $2 }'
done >"$tmp/csyms"
if [ -s "$tmp/csyms" ]; then
    pairs "$tmp/csyms" >"$tmp/cpairs"
    awk '{ print "  " $1 " <-> " $2 }' "$tmp/cpairs"
    check client/hubctl 0 "$tmp/cpairs"
fi
exit $bad
