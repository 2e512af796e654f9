#!/bin/sh
# usage: build.sh SRC_TREE BUILD_DIR   (ARCH=arm64, cross, nice 19, -j2)
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
src=$1; out=$2
export ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-
cd "$src"
if [ ! -f "$out/.config" ]; then
  mkdir -p "$out"
  nice -n 19 make -s O="$out" tinyconfig
  nice -n 19 scripts/kconfig/merge_config.sh -m -O "$out" "$out/.config" "$HERE/arm64-lab.config" >/dev/null
  nice -n 19 make -s O="$out" olddefconfig
fi
grep -v '^#' "$HERE/arm64-lab.config" | grep CONFIG_ | while read l; do grep -qx "$l" "$out/.config" || { echo "MISSING: $l"; exit 1; }; done
start=$(date +%s)
nice -n 19 make O="$out" -j2 Image
end=$(date +%s)
echo "BUILD_SECONDS $((end-start))"
