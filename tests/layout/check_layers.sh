#!/bin/sh
# The layer rule, checked from the sources: a file may include project
# headers only from its own folder and the folders of the layers below it
# (docs/ARCHITECTURE.md, "Layers"). The build already refuses most breaches
# (a library sees only the include dirs of what it links); this also
# catches a relative path ("../net/http.h") that would get around it.
#   check_layers.sh SOURCE_DIR
set -eu
src=${1:?usage: check_layers.sh SOURCE_DIR}
cd "$src"

# folder: the folders whose headers it may include (besides its own)
allowed() {
    case $1 in
    common) echo "" ;;
    daemon/base) echo "common" ;;
    daemon/net | daemon/cache) echo "common daemon/base" ;;
    daemon/fetch) echo "common daemon/base daemon/net daemon/cache" ;;
    daemon/access) echo "common daemon/base" ;;
    daemon/hub) echo "common daemon/base daemon/net daemon/cache daemon/fetch" ;;
    # The cluster swarm sits beside the Hub: libtorrent behind a C header.
    daemon/fleet) echo "common daemon/base daemon/net daemon/cache daemon/fetch" ;;
    # The two ways in: each reaches the Hub, the swarm and access, never the other.
    daemon/session | daemon/http)
        echo "common daemon/base daemon/net daemon/cache daemon/fetch daemon/access daemon/hub daemon/fleet" ;;
    daemon) echo "common daemon/base daemon/net daemon/cache daemon/fetch daemon/access daemon/hub daemon/fleet daemon/session daemon/http" ;;
    client/hubctl) echo "common" ;;
    *) return 1 ;;
    esac
}

bad=0
checked=0
layers="common daemon/base daemon/net daemon/cache daemon/fetch daemon/access daemon/hub daemon/fleet"
layers="$layers daemon/session daemon/http daemon client/hubctl"
# Every folder of the daemon is a layer named above: a new one is placed.
for d in daemon/*/; do
    d=${d%/}
    case " $layers " in
    *" $d "*) ;;
    *)
        echo "$d: a folder of the daemon that check_layers.sh does not place in a layer" >&2
        exit 1
        ;;
    esac
done
for dir in $layers; do
    ok_dirs="$dir $(allowed "$dir")"
    # .cpp: the one C++ file, fleet's libtorrent shim.
    for f in "$dir"/*.c "$dir"/*.cpp "$dir"/*.h; do
        [ -e "$f" ] || continue
        # Project headers are included with quotes; system ones with <>.
        for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
            checked=$((checked + 1))
            case $h in
            */*)
                echo "$f: includes \"$h\": a path; name the header, the build finds its layer" >&2
                bad=1
                continue
                ;;
            esac
            found=""
            for d in $ok_dirs; do
                [ -e "$d/$h" ] && found=$d && break
            done
            if [ -z "$found" ]; then
                # Not in an allowed layer: say where it is, if anywhere.
                where=$(find common daemon client -name "$h" -not -path '*/python/*' | head -n 1)
                echo "$f: includes \"$h\" (${where:-not in the tree}), not in $dir or a layer below" >&2
                bad=1
            fi
        done
    done
done
[ "$checked" -gt 100 ] || {
    echo "only $checked includes checked: is SOURCE_DIR the tree?" >&2
    exit 1
}
[ "$bad" -eq 0 ] && echo "layers: $checked project includes, each from its own folder or a layer below"
exit "$bad"
