#!/bin/sh
# fetch_sources.sh - download Debian's linux-source-VERSION packages and unpack
# the few files the kernel-C cross-check reads.
#
# usage: tools/kernel_c/fetch_sources.sh [VERSION...]      (default: 6.1 6.12 7.2)
#
# Uses a private apt configuration under $CACHE/apt (bookworm, bookworm-updates,
# bookworm-security and sid): the host's apt sources and package lists are not
# touched and nothing is installed. Each package is fetched with
# 'apt-get download', its sha256 recorded in $CACHE/SHA256SUMS, and
# lib/sort.c, lib/group_cpus.c, include/linux/group_cpus.h, kernel/irq/affinity.c,
# block/blk-mq-cpumap.c and the top Makefile are extracted to
# $CACHE/linux-source-VERSION/. CACHE defaults to ~/.cache/numalab/src.
# Then: tools/kernel_c/check_group_cpus.sh $CACHE/linux-source-VERSION ...
set -eu

CACHE=${CACHE:-"$HOME/.cache/numalab/src"}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${SECURITY:-http://deb.debian.org/debian-security}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[ $# -gt 0 ] || set -- 6.1 6.12 7.2

A="$CACHE/apt"
mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/etc" "$CACHE"
cat > "$A/etc/sources.list" <<EOF
deb [signed-by=$KEYRING] $MIRROR bookworm main
deb [signed-by=$KEYRING] $MIRROR bookworm-updates main
deb [signed-by=$KEYRING] $SECURITY bookworm-security main
deb [signed-by=$KEYRING] $MIRROR sid main
EOF
apt_private() {
    apt-get -q -o Dir::Etc::sourcelist="$A/etc/sources.list" -o Dir::Etc::sourceparts=/nonexistent \
        -o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache" \
        -o Dir::State::status=/var/lib/dpkg/status -o APT::Get::List-Cleanup=0 "$@"
}
echo "updating the private package lists in $A"
apt_private update > "$A/update.log" 2>&1 || { tail -5 "$A/update.log" >&2; exit 2; }

cd "$CACHE"
for v in "$@"; do
    pkg=linux-source-$v
    echo "fetching $pkg"
    apt_private download "$pkg" 2>&1 | grep -v "unsandboxed" || true
    deb=$(ls -t "${pkg}"_*_all.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || { echo "fetch_sources.sh: $pkg could not be downloaded" >&2; exit 2; }
    sha256sum "$deb" >> SHA256SUMS
    tmp=$(mktemp -d "$CACHE/unpack.XXXXXX")
    dpkg-deb -x "$deb" "$tmp"
    tar xf "$tmp/usr/src/$pkg.tar.xz" -C "$CACHE" "$pkg/Makefile" "$pkg/lib/sort.c" \
        "$pkg/lib/group_cpus.c" "$pkg/include/linux/group_cpus.h" \
        "$pkg/kernel/irq/affinity.c" "$pkg/block/blk-mq-cpumap.c"
    rm -rf "$tmp"
    echo "  $deb -> $CACHE/$pkg"
done
sort -u -o SHA256SUMS SHA256SUMS
