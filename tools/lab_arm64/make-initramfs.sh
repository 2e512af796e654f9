#!/bin/sh
# usage: make-initramfs.sh [OUT]   -- static arm64 /init from init.c, plus /dev/console, as a gzip'd newc cpio
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
out=${1:-initramfs.cpio.gz}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root/dev" "$work/root/proc" "$work/root/sys"
aarch64-linux-gnu-gcc -static -O2 -o "$work/root/init" "$HERE/init.c"
mknod "$work/root/dev/console" c 5 1
(cd "$work/root" && find . | cpio -o -H newc --quiet) | gzip -9 > "$out"
echo "$out"
