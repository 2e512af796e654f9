#!/bin/sh
# check_group_cpus.sh - compile a kernel's lib/sort.c and lib/group_cpus.c in
# user space and run them on numalab's reference machines.
#
# usage: tools/kernel_c/check_group_cpus.sh TREE [--rotate-patch FILE] [--out FILE]
#                                             [--compare N] [--dumps] [--keep]
#
#   TREE               an unpacked kernel source tree, e.g. the linux-source-7.2
#                      folder of Debian's linux-source-7.2 package (see fetch_sources.sh);
#                      only lib/sort.c, lib/group_cpus.c, include/linux/group_cpus.h
#                      and Makefile (for the version) are read
#   --rotate-patch F   also build the tree with the seed patch F applied
#                      ("lib/group_cpus: rotate extra groups to avoid IRQ stacking";
#                      only for trees with the cluster path, which it patches)
#   --out FILE         write the results of every case in
#                      data/kernel_c/cases.json to FILE
#                      (default data/kernel_c/VERSION/results.json.gz)
#   --compare N        instead, compare the port call for call with the C on N
#                      seeded random machines (--dumps: also the hwloc collection)
#   --keep             keep the build folder (printed)
#
# The C is compiled with the shim in tools/kernel_c/shim (cpumasks over
# unsigned long bitmaps, kcalloc over calloc, WARN_ON counting, the machine
# as tables) and tools/kernel_c/driver.c, which #includes the group_cpus.c
# under test. Nothing from the tree is copied into the repository.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PYTHON=${PYTHON:-"$ROOT/.venv/bin/python"}
CC=${CC:-gcc}

die() { echo "check_group_cpus.sh: $*" >&2; exit 2; }

[ $# -ge 1 ] || die "usage: check_group_cpus.sh TREE [--rotate-patch FILE] [--out FILE] [--compare N] [--dumps] [--keep]"
TREE=$1; shift
PATCH=; OUT=; COMPARE=; DUMPS=; KEEP=
while [ $# -gt 0 ]; do
    case $1 in
        --rotate-patch) PATCH=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --compare) COMPARE=$2; shift 2 ;;
        --dumps) DUMPS=--dumps; shift ;;
        --keep) KEEP=1; shift ;;
        *) die "unknown option $1" ;;
    esac
done
for f in lib/sort.c lib/group_cpus.c include/linux/group_cpus.h Makefile; do
    [ -f "$TREE/$f" ] || die "$TREE/$f: no such file (TREE must be an unpacked kernel source tree)"
done
[ -z "$PATCH" ] || [ -f "$PATCH" ] || die "$PATCH: no such file"

V=$(awk '/^VERSION =/ {v=$3} /^PATCHLEVEL =/ {p=$3} /^SUBLEVEL =/ {s=$3} END {print v "." p "." s}' "$TREE/Makefile")
KV=${V%.*}
OUT=${OUT:-"$ROOT/data/kernel_c/$KV/results.json.gz"}

BUILD=$(mktemp -d "${TMPDIR:-/tmp}/kernel_c.XXXXXX")
[ -n "$KEEP" ] || trap 'rm -rf "$BUILD"' EXIT
mkdir -p "$BUILD/main/lib" "$BUILD/main/include/linux"
cp "$TREE/lib/sort.c" "$BUILD/main/lib/"
cp "$TREE/lib/group_cpus.c" "$BUILD/main/lib/"
cp "$TREE/include/linux/group_cpus.h" "$BUILD/main/include/linux/"

DEFS=
if grep -q 'unsigned int \*nummasks' "$TREE/include/linux/group_cpus.h"; then
    DEFS="-DNUMALAB_NUMMASKS"
fi
CLUSTER=no
grep -q '__try_group_cluster_cpus' "$TREE/lib/group_cpus.c" && CLUSTER=yes

build() {  # build DIR BINARY EXTRA_DEFS
    "$CC" -O2 -std=gnu11 -w -I"$1/include" -I"$HERE/shim" -include "$HERE/shim/kshim.h" \
        $DEFS $3 -DGROUP_CPUS_C="\"$1/lib/group_cpus.c\"" \
        "$HERE/driver.c" "$1/lib/sort.c" -o "$2"
}
build "$BUILD/main" "$BUILD/gc-mainline" ""
BINS="--mainline $BUILD/gc-mainline"

ROT=
if [ -n "$PATCH" ]; then
    if [ "$CLUSTER" = yes ]; then
        cp -r "$BUILD/main" "$BUILD/rotate"
        echo "applying $(basename "$PATCH"):"
        patch -p1 --no-backup-if-mismatch -d "$BUILD/rotate" < "$PATCH" | sed 's/^/  /'
        build "$BUILD/rotate" "$BUILD/gc-rotate" "-DNUMALAB_ROTATE"
        BINS="$BINS --rotate $BUILD/gc-rotate"
        ROT=$(sha256sum "$PATCH" | cut -d' ' -f1)
    else
        echo "$V has no cluster path: the rotate patch does not apply, mainline only"
    fi
fi

sum() { sha256sum "$1" | cut -d' ' -f1; }
echo "Linux $V (cluster path: $CLUSTER, nummasks: $([ -n "$DEFS" ] && echo yes || echo no))"
echo "  lib/sort.c        $(sum "$TREE/lib/sort.c")"
echo "  lib/group_cpus.c  $(sum "$TREE/lib/group_cpus.c")"
[ -z "$KEEP" ] || echo "  build folder      $BUILD"

if [ -n "$COMPARE" ]; then
    "$PYTHON" "$HERE/run_cases.py" compare --kernel "$KV" $BINS --machines "$COMPARE" $DUMPS
else
    SHA=$(printf '{"lib/sort.c":"%s","lib/group_cpus.c":"%s","include/linux/group_cpus.h":"%s"%s}' \
        "$(sum "$TREE/lib/sort.c")" "$(sum "$TREE/lib/group_cpus.c")" \
        "$(sum "$TREE/include/linux/group_cpus.h")" "${ROT:+,\"rotate patch\":\"$ROT\"}")
    "$PYTHON" "$HERE/run_cases.py" results --kernel "$KV" $BINS \
        --cases "$ROOT/data/kernel_c/cases.json" --out "$OUT" \
        --source "Linux $V, ${SOURCE_NAME:-$(basename "$(cd "$TREE" && pwd)")}" --sha256 "$SHA"
fi
