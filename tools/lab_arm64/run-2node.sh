#!/bin/sh
# usage: run-2node.sh IMAGE DTB LOG -- 10 vCPUs, 2 NUMA nodes (CPUs 0-4, 5-9), NVMe with 16 I/O queue pairs
export SMP=10 QPAIRS=16
export QEMU_EXTRA="-object memory-backend-ram,id=m0,size=256M -object memory-backend-ram,id=m1,size=256M -numa node,nodeid=0,cpus=0-4,memdev=m0 -numa node,nodeid=1,cpus=5-9,memdev=m1"
exec "$(dirname "$0")/run.sh" "$@"
