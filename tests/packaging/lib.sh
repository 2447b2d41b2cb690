# Shared by the packaging tests (sourced): their two arguments, a temporary
# folder removed on exit, and how they report.
#
#   . "$(dirname "$0")/lib.sh"; pkg_setup NAME "$@"   sets build, src, tmp

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

ok() {
    echo "ok: $*"
}

pkg_setup() {
    name=$1
    shift
    if [ $# -ne 2 ]; then
        echo "usage: $0 BUILD_DIR SOURCE_DIR" >&2
        exit 2
    fi
    build=$(cd "$1" && pwd)
    src=$(cd "$2" && pwd)
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/hubd-$name.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    trap 'exit 1' HUP INT PIPE TERM
}
