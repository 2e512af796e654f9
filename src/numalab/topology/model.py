"""One model of a machine's CPU and memory topology, shared by every chapter.

Every reader (sysfs snapshot, hwloc XML, lscpu, synthetic) produces a
:class:`Topology`. Masks are ints (bit i = CPU i, see :mod:`numalab.cpumask`).
Node ids and CPU ids are the kernel's (sparse numbering is allowed).

What the kernel calls what:

* ``thread_siblings`` -- ``topology_sibling_cpumask()``: the SMT threads of
  one core (``cpuN/topology/thread_siblings``).
* ``cluster_cpus`` -- ``topology_cluster_cpumask()``: CPUs sharing a cluster.
  Dumps from kernels before 5.16 have no ``cluster_cpus`` file; a reader then
  fills in what a current kernel would report: on x86 the CPUs sharing the L2
  cache (``cpu_l2c_shared_mask``), elsewhere the CPU alone (the generic
  fallback). ``cluster_source`` says which.
* ``die_cpus`` / ``package_cpus`` -- ``topology_die_cpumask()`` /
  ``topology_core_cpumask()``.
* ``llc_cpus`` -- CPUs sharing the last-level cache (``cpu_llc_shared_mask``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..cpumask import cpus as _cpus
from ..cpumask import format_cpulist
from ..errors import TopologyError


@dataclass(frozen=True)
class CPU:
    """One logical CPU (hwloc's PU)."""

    id: int
    node: int = -1                 # NUMA node, -1 when the dump has none
    package: int = 0               # physical_package_id
    die: int = 0                   # die_id (0 where the kernel has no dies)
    core: int = 0                  # core_id (unique only inside a package)
    cluster: int = -1              # cluster_id, -1 when unknown
    thread_siblings: int = 0       # SMT siblings, including itself
    cluster_cpus: int = 0          # topology_cluster_cpumask()
    die_cpus: int = 0
    package_cpus: int = 0
    llc_cpus: int = 0              # CPUs sharing the last-level cache
    l2_cpus: int = 0               # CPUs sharing the L2 cache (0 = unknown)
    cluster_source: str = "sysfs"  # "sysfs" | "l2" | "smt" | "self" | "synthetic" | "xml" | "lscpu"


@dataclass(frozen=True)
class Node:
    """One NUMA node. CPU-less (memory-only) and memory-less nodes are allowed."""

    id: int
    cpus: int = 0                  # mask of the node's CPUs (node/nodeN/cpulist)
    memory_bytes: int | None = None


@dataclass(frozen=True)
class PCIDevice:
    address: str                   # "0000:01:00.0"
    class_code: int = 0            # 24-bit PCI class, e.g. 0x010802 for NVMe
    numa_node: int = -1            # -1: the firmware gave no node
    msi_vectors: int = 0           # entries in msi_irqs/
    vendor: int | None = None
    device: int | None = None
    driver: str | None = None


@dataclass(frozen=True)
class IRQ:
    irq: str                       # "24", or "NMI", "LOC", ... for arch rows
    counts: tuple[int, ...] = ()   # per-CPU counts from /proc/interrupts
    chip: str = ""
    name: str = ""                 # the action names (last column)
    smp_affinity: int | None = None
    effective_affinity: int | None = None


@dataclass
class Topology:
    """A machine.

    ``distances[i][j]`` is the SLIT distance from ``node_ids[i]`` to
    ``node_ids[j]``; use :meth:`distance` with node ids.
    """

    name: str
    source: str = ""
    arch: str = "unknown"          # "x86", "arm64", "ia64", "powerpc", "s390", ...
    possible: int = 0
    present: int = 0
    online: int = 0
    cpus: dict[int, CPU] = field(default_factory=dict)
    nodes: dict[int, Node] = field(default_factory=dict)
    distances: list[list[int]] = field(default_factory=list)
    pci: list[PCIDevice] = field(default_factory=list)
    blk_mq: dict[str, list[int]] = field(default_factory=dict)  # disk -> mask per hctx
    irqs: list[IRQ] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    # -- derived views -------------------------------------------------------
    @property
    def node_ids(self) -> list[int]:
        return sorted(self.nodes)

    @property
    def nr_cpu_ids(self) -> int:
        """One more than the highest possible CPU (the kernel's ``nr_cpu_ids``)."""
        return self.possible.bit_length()

    def distance(self, a: int, b: int) -> int:
        """SLIT distance between node ids a and b (``node_distance()``).

        Without a matrix the kernel's default applies: 10 local, 20 remote.
        """
        ids = self.node_ids
        if not self.distances:
            return 10 if a == b else 20
        return self.distances[ids.index(a)][ids.index(b)]

    def cpumask_of_node(self, node: int) -> int:
        n = self.nodes.get(node)
        return n.cpus if n else 0

    def cpu_to_node(self, cpu: int) -> int:
        c = self.cpus.get(cpu)
        return c.node if c else -1

    def _distinct(self, key) -> set:
        return {key(c) for c in self.cpus.values()}

    def cores(self) -> set[int]:
        """One mask per core (its SMT siblings)."""
        return self._distinct(lambda c: c.thread_siblings or (1 << c.id))

    def clusters(self) -> set[int]:
        return self._distinct(lambda c: c.cluster_cpus or (1 << c.id))

    def packages(self) -> set[int]:
        return self._distinct(lambda c: c.package_cpus or (1 << c.id))

    def dies(self) -> set[int]:
        return self._distinct(lambda c: c.die_cpus or c.package_cpus or (1 << c.id))

    def counts(self) -> dict[str, int]:
        """Objects per level, counted from the CPUs the dump describes."""
        return {
            "pu": len(self.cpus),
            "core": len(self.cores()),
            "cluster": len(self.clusters()),
            "die": len(self.dies()),
            "package": len(self.packages()),
            "numa": len(self.nodes),
        }

    def replace(self, **changes) -> "Topology":
        return dataclasses.replace(self, **changes)

    # -- checks ---------------------------------------------------------------
    def validate(self, allow_asymmetric: bool = False) -> "Topology":
        """Raise TopologyError when the model contradicts itself.

        An asymmetric distance matrix is refused unless ``allow_asymmetric``:
        ACPI allows an asymmetric SLIT and the kernel uses it as given, but in
        a dump or a description it is far more often a typo, and the book's
        models read distances as symmetric. When allowed, the matrix is kept
        and ``meta["notes"]`` says so.
        """
        seen: dict[int, int] = {}
        for n in self.node_ids:
            for c in _cpus(self.nodes[n].cpus):
                if c in seen:
                    raise TopologyError(self.source or self.name,
                                        f"CPU {c} is in node{seen[c]} and node{n}")
                seen[c] = n
        k = len(self.nodes)
        if self.distances:
            if len(self.distances) != k or any(len(r) != k for r in self.distances):
                shape = [len(r) for r in self.distances]
                raise TopologyError(self.source or self.name,
                                    f"distance matrix is not {k}x{k} (rows of {shape})")
            for i in range(k):
                for j in range(k):
                    d = self.distances[i][j]
                    if i != j and d <= 0:
                        raise TopologyError(
                            self.source or self.name,
                            f"distance node{self.node_ids[i]}->node{self.node_ids[j]} is {d}")
            asym = [(i, j) for i in range(k) for j in range(i + 1, k)
                    if self.distances[i][j] != self.distances[j][i]]
            if asym:
                i, j = asym[0]
                a, b = self.node_ids[i], self.node_ids[j]
                what = (f"distance matrix is not symmetric: node{a}->node{b} is "
                        f"{self.distances[i][j]} but node{b}->node{a} is {self.distances[j][i]}")
                if not allow_asymmetric:
                    raise TopologyError(self.source or self.name,
                                        what + " (pass allow_asymmetric=True to keep it)")
                notes = self.meta.setdefault("notes", [])
                note = f"{what} ({len(asym)} pair(s)); kept as given (allow_asymmetric)"
                if note not in notes:
                    notes.append(note)
        if self.present & ~self.possible:
            raise TopologyError(self.source or self.name,
                                "present CPUs are not all possible")
        return self

    # -- output ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form used by ``numalab show --json``, ending with
        the reader's ``notes``."""
        clusters_per_node = {}
        for n in self.node_ids:
            clusters_per_node[n] = len({c.cluster_cpus or (1 << c.id)
                                        for c in self.cpus.values() if c.node == n})
        return {
            "name": self.name,
            "source": self.source,
            "arch": self.arch,
            "cpus": {
                "possible": _cpus(self.possible),
                "present": _cpus(self.present),
                "online": _cpus(self.online),
            },
            "counts": self.counts(),
            "nodes": [
                {
                    "id": n,
                    "cpus": _cpus(self.nodes[n].cpus),
                    "cpulist": format_cpulist(self.nodes[n].cpus),
                    "memory_bytes": self.nodes[n].memory_bytes,
                    "clusters": clusters_per_node[n],
                }
                for n in self.node_ids
            ],
            "distances": [list(r) for r in self.distances],
            "pci": [dataclasses.asdict(p) for p in self.pci],
            "blk_mq": {d: [format_cpulist(m) for m in ms] for d, ms in self.blk_mq.items()},
            "irqs": len(self.irqs),
            # what the reader assumed or settled (``meta["notes"]``): the
            # quirks of a real dump it read instead of refusing
            "notes": list(self.meta.get("notes", [])),
        }
