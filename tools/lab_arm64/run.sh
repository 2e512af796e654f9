#!/bin/sh
# usage: [QPAIRS=8] [SMP=5] [QEMU_EXTRA="-numa ..."] run.sh IMAGE DTB LOG  -- boot one arm64 guest under TCG (5 vCPUs, one NVMe
# controller with 8 I/O queue pairs and 9 MSI-X entries), serial console to LOG.
set -e
INITRD=${INITRD:-initramfs.cpio.gz}   # made from init.c, see README.md
img=$1; dtb=$2; log=$3
dtbarg=""
[ "$dtb" != "none" ] && dtbarg="-dtb $dtb"
start=$(date +%s)
timeout 900 nice -n 19 qemu-system-aarch64 \
  -machine virt,gic-version=3 -cpu cortex-a57 -accel tcg,thread=multi -smp ${SMP:-5} -m 512M ${QEMU_EXTRA} \
  -nodefaults -no-user-config -display none -nic none -no-reboot -monitor none \
  -chardev file,id=con,path="$log" -serial chardev:con \
  -kernel "$img" -initrd "$INITRD" $dtbarg \
  -append "console=ttyAMA0 panic=-1" \
  -blockdev driver=null-co,node-name=nvme0,size=1073741824,read-zeroes=on \
  -device nvme,drive=nvme0,serial=lab0,max_ioqpairs=${QPAIRS:-8},msix_qsize=$((${QPAIRS:-8}+1))
end=$(date +%s)
echo "qemu exit, $((end-start)) s"
