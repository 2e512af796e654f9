"""The QEMU command line for a lab guest: a pure function of the machine,
the devices and a few paths.

* CPUs: ``-smp cpus=N,sockets=S,dies=D,cores=C,threads=T``; ``-accel
  tcg,thread=single -cpu max`` by default (multi-threaded TCG oopsed now
  and then during kernel text patching; single-threaded never did), or
  ``-accel kvm -cpu host``.
* NUMA: one ``-object memory-backend-ram`` per node with memory, ``-numa
  node,nodeid=N[,memdev=mN][,cpus=A-B...]`` (no ``cpus``: a CPU-less node;
  no ``memdev``: a memory-less one), and ``-numa dist`` for every pair when
  a matrix is given.
* NVMe on a node: a PCI expander bridge per node that holds devices
  (``-device pxb,bus_nr=B,id=pxbN,numa_node=N``; the guest reads the node
  from its ACPI ``_PXM``) and on it ``-device nvme,...,max_ioqpairs=Q,
  msix_qsize=Q+1,bus=pxbN,addr=A`` backed by a ``null-co`` block device
  (reads return zeros; nothing is stored).
* Two serial ports: ``ttyS0`` the console, ``ttyS1`` the dump channel, both
  written to files. No network (``-nic none``), no display, no reboot (a
  panic ends QEMU).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cpumask import format_cpulist
from .spec import LabMachine, NvmeSpec, UnexpressibleTopology

__all__ = ["qemu_command", "nvme_layout", "NvmeDevice", "KERNEL_APPEND", "PXB_BUS_BASE"]

KERNEL_APPEND = ("console=ttyS0 panic=-1 oops=panic loglevel=4 rdinit=/init "
                 "trace_buf_size=64K")
PXB_BUS_BASE = 0x10        # first expander's bus number; each node's gets 0x10 more
NVME_DISK_BYTES = 1 << 30


@dataclass(frozen=True)
class NvmeDevice:
    """One NVMe controller: its QEMU id, node, queues, expander and slot,
    and the PCI address the guest will see (``0000:BB:SS.0``, :attr:`address`)."""

    id: str
    node: int
    queues: int
    pxb: str
    bus: int
    slot: int

    @property
    def address(self) -> str:
        """The address the guest gives it: SeaBIOS numbers the expander's
        root bus ``bus_nr`` and the bus its slots sit on ``bus_nr + 1``
        (seen with QEMU 7.2; the dump records the real one)."""
        return f"0000:{self.bus + 1:02x}:{self.slot:02x}.0"


def nvme_layout(devices: list[NvmeSpec] | tuple[NvmeSpec, ...]) -> list[NvmeDevice]:
    """Place every NVMe controller: one PCI expander per node in order of
    first use, bus ``PXB_BUS_BASE * (k + 1)``, slots from 1.

    >>> [d.address for d in nvme_layout([NvmeSpec(2, 1, 4), NvmeSpec(1, 0, 8)])]
    ['0000:11:01.0', '0000:11:02.0', '0000:21:01.0']
    """
    pxbs: dict[int, int] = {}
    used: dict[int, int] = {}
    out = []
    for spec in devices:
        k = pxbs.setdefault(spec.node, len(pxbs))
        for _ in range(spec.count):
            used[spec.node] = used.get(spec.node, 0) + 1
            if used[spec.node] > 31:
                raise UnexpressibleTopology(f"node {spec.node}: more than 31 NVMe devices on "
                                            "one expander bridge")
            out.append(NvmeDevice(id=f"nvme{len(out)}", node=spec.node, queues=spec.queues,
                                  pxb=f"pxb{spec.node}", bus=PXB_BUS_BASE * (k + 1),
                                  slot=used[spec.node]))
    return out


def qemu_command(machine: LabMachine, devices, kernel: str, initrd: str, console: str,
                 dump: str, accel: str = "tcg", qemu: str = "qemu-system-x86_64",
                 append: str = KERNEL_APPEND) -> list[str]:
    """The argument vector that boots ``kernel`` + ``initrd`` on ``machine``.

    Inputs: the machine, the ``NvmeSpec`` list, paths of the kernel, the
    initramfs, the console log and the dump channel file, ``accel``
    (``"tcg"`` or ``"kvm"``). Output: ``[qemu, arg, ...]``. Raises
    UnexpressibleTopology for a device placement QEMU cannot build.

    >>> from numalab.lab.spec import machine_from_text
    >>> cmd = qemu_command(machine_from_text("numa:2 core:2 pu:1"), [NvmeSpec(1, 1, 2)],
    ...                    "K", "I", "c.log", "d.txt")
    >>> cmd[cmd.index("-smp") + 1]
    'cpus=4,sockets=1,dies=1,cores=4,threads=1'
    >>> [a for a in cmd if a.startswith(("node,", "pxb", "nvme,"))]
    ['node,nodeid=0,memdev=m0,cpus=0-1', 'node,nodeid=1,memdev=m1,cpus=2-3', 'pxb,bus_nr=16,id=pxb1,numa_node=1,bus=pci.0', 'nvme,drive=nvme0,serial=lab0,max_ioqpairs=2,msix_qsize=3,bus=pxb1,addr=0x1']
    """
    if accel == "tcg":
        acc = ["-accel", "tcg,thread=single", "-cpu", "max"]
    elif accel == "kvm":
        acc = ["-accel", "kvm", "-cpu", "host"]
    else:
        raise ValueError(f"accel {accel!r} is not tcg or kvm")
    m = machine
    total_mib = sum(m.memory_mib)
    cmd = [qemu, "-machine", "pc", *acc, "-m", f"{total_mib}M",
           "-smp", f"cpus={m.ncpus},sockets={m.sockets},dies={m.dies},cores={m.cores},"
                   f"threads={m.threads}"]
    for n in range(m.nnodes):
        node = [f"nodeid={n}"]
        if m.memory_mib[n]:
            cmd += ["-object", f"memory-backend-ram,id=m{n},size={m.memory_mib[n]}M"]
            node.append(f"memdev=m{n}")
        mask = m.node_cpus(n)
        if mask:
            node += [f"cpus={r}" for r in format_cpulist(mask).split(",")]
        cmd += ["-numa", "node," + ",".join(node)]
    if m.distances:
        for i in range(m.nnodes):
            for j in range(m.nnodes):
                if i != j:
                    cmd += ["-numa", f"dist,src={i},dst={j},val={m.distances[i][j]}"]
    layout = nvme_layout(devices)
    for node in dict.fromkeys(d.node for d in layout):
        if node >= m.nnodes:
            raise UnexpressibleTopology(f"NVMe on node {node}: the machine has {m.nnodes} "
                                        "node(s)")
        bus = next(d.bus for d in layout if d.node == node)
        cmd += ["-device", f"pxb,bus_nr={bus},id=pxb{node},numa_node={node},bus=pci.0"]
    for d in layout:
        cmd += ["-blockdev", f"driver=null-co,node-name={d.id},size={NVME_DISK_BYTES},"
                             "read-zeroes=on",
                "-device", f"nvme,drive={d.id},serial=lab{d.id[4:]},max_ioqpairs={d.queues},"
                           f"msix_qsize={d.queues + 1},bus={d.pxb},addr={d.slot:#x}"]
    cmd += ["-nodefaults", "-no-user-config", "-display", "none", "-vga", "none",
            "-nic", "none", "-no-reboot", "-monitor", "none",
            "-chardev", f"file,id=con,path={console}", "-serial", "chardev:con",
            "-chardev", f"file,id=dump,path={dump}", "-serial", "chardev:dump",
            "-kernel", kernel, "-initrd", initrd, "-append", append]
    return cmd
