"""The lab's machine and devices, as the user describes them, checked
against what QEMU 7.2 can build for an x86 guest.

A :class:`LabMachine` is a CPU topology (sockets, dies, cores, threads: the
``-smp`` of QEMU), the NUMA node of every CPU, each node's memory, and the
distance matrix. It comes from the book's synthetic syntax
(:func:`machine_from_text`, e.g. ``"pack:2 numa:1 core:24 pu:2"``) or a
``.toml`` description, optionally with uneven nodes (``node_cpus``: one
cpulist per node, an empty one for a CPU-less node) and memory-less nodes
(``node_memory_mib`` with a 0).

What QEMU cannot express is refused with :class:`UnexpressibleTopology`,
naming the part: a ``cluster`` level (QEMU 7.2 has clusters only on ARM;
an x86 guest's cluster is its L2, which QEMU gives each core), an L1/L2
cache shared by more than one core, an L3 not spanning exactly a die (or
package), ``smt-apart`` numbering (Linux numbers a QEMU guest's CPUs in
APIC order: threads of a core adjacent), more than 128 vCPUs (x2APIC,
which guests past 255 APIC ids need, is not emulated by this QEMU under
TCG), a core split over two nodes.

:class:`NvmeSpec` is one ``--nvme N@NODE:QUEUES`` option.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..cpumask import CpumaskSyntaxError, cpus, format_cpulist, parse_cpulist
from ..topology.synthetic import parse_levels
from . import LabError
from .schema import check_distances

__all__ = ["LabMachine", "NvmeSpec", "UnexpressibleTopology", "machine_from_text",
           "parse_nvme", "parse_node_cpus", "MAX_VCPUS", "DEFAULT_NODE_MIB"]

MAX_VCPUS = 128
DEFAULT_NODE_MIB = 384
MAX_QUEUES = 128


class UnexpressibleTopology(LabError):
    """A topology (or device placement) that QEMU cannot build; the
    message names the part."""


@dataclass(frozen=True)
class LabMachine:
    """A guest machine. CPU ``i`` is QEMU's CPU index ``i`` and the guest's
    CPU ``i`` (Linux numbers CPUs in the ACPI MADT order, which is QEMU's
    index order); ``node_of[i]`` is its node."""

    sockets: int
    dies: int                      # per socket
    cores: int                     # per die
    threads: int                   # per core
    node_of: tuple[int, ...]       # per CPU
    memory_mib: tuple[int, ...]    # per node; 0 = memory-less node
    distances: tuple[tuple[int, ...], ...] | None = None
    description: str = ""

    @property
    def ncpus(self) -> int:
        return self.sockets * self.dies * self.cores * self.threads

    @property
    def nnodes(self) -> int:
        return len(self.memory_mib)

    def node_cpus(self, node: int) -> int:
        """Mask of the CPUs on ``node``."""
        return sum(1 << c for c, n in enumerate(self.node_of) if n == node)

    def as_dict(self) -> dict:
        """JSON-able summary (for the dump's manifest)."""
        return {"description": self.description, "sockets": self.sockets, "dies": self.dies,
                "cores_per_die": self.cores, "threads_per_core": self.threads,
                "cpus": self.ncpus,
                "nodes": [{"node": n, "cpus": format_cpulist(self.node_cpus(n)),
                           "memory_mib": self.memory_mib[n]} for n in range(self.nnodes)],
                "distances": [list(r) for r in self.distances] if self.distances else None}


@dataclass(frozen=True)
class NvmeSpec:
    """``count`` NVMe controllers on ``node``, each with ``queues`` I/O
    queue pairs (QEMU's ``max_ioqpairs``)."""

    count: int
    node: int
    queues: int


def _bits_for(n: int) -> int:
    return (n - 1).bit_length() if n > 1 else 0


def max_apic_id(sockets: int, dies: int, cores: int, threads: int) -> int:
    """The largest APIC id QEMU gives (``x86_apicid_from_topo_ids()``: each
    level's id in a field of ``ceil(log2(count))`` bits).

    >>> max_apic_id(2, 1, 24, 2)   # socket 1, core 23, thread 1: 1<<6 | 23<<1 | 1
    111
    """
    tb, cb, db = _bits_for(threads), _bits_for(cores), _bits_for(dies)
    return (((sockets - 1) << (tb + cb + db)) | ((dies - 1) << (tb + cb))
            | ((cores - 1) << tb) | (threads - 1))


def parse_node_cpus(text: str) -> list[int]:
    """Node CPU lists separated by ``;`` (an empty one: a CPU-less node).

    >>> [format_cpulist(m) for m in parse_node_cpus("0-5;6-9;;10-11")]
    ['0-5', '6-9', '', '10-11']
    """
    out = []
    for part in text.split(";"):
        try:
            out.append(parse_cpulist(part.strip()))
        except CpumaskSyntaxError as e:
            raise LabError(f"node CPUs {part.strip()!r}: {e}") from None
    return out


def _parse_mib(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([MG]i?B?)?\s*", text, re.I)
    if not m:
        raise LabError(f"memory {text!r}: expected a size such as 512M or 1G")
    n = int(m.group(1))
    return n * 1024 if (m.group(2) or "M").upper().startswith("G") else n


def _as_list(value, key: str) -> list:
    if not isinstance(value, (list, tuple)) or len(value) > 4096:
        raise LabError(f"{key}: expected a list with one entry per node, not {value!r:.40}")
    return list(value)


def _node_mask(value) -> int:
    """One node's CPUs from a description: a cpulist string or a mask int."""
    if isinstance(value, str):
        try:
            return parse_cpulist(value.strip())
        except CpumaskSyntaxError as e:
            raise LabError(f"node CPUs {value.strip()!r:.40}: {e}") from None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << MAX_VCPUS:
        raise LabError(f"node CPUs {value!r:.40}: expected a CPU list such as \"0-5\"")
    return value


def _node_mib(value) -> int:
    """One node's memory from a description: MiB as an int, or a size text."""
    if isinstance(value, str):
        return _parse_mib(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LabError(f"node memory {value!r:.40}: expected MiB as an integer >= 0")
    return value


def _read_toml(path: Path) -> dict:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise LabError(f"{path}: cannot read: {e.strerror or e}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise LabError(f"{path}: not a valid TOML description: {e}") from None
    if not isinstance(data.get("synthetic"), str):
        raise LabError(f"{path}: missing key 'synthetic' (for example "
                       "synthetic = \"pack:2 numa:1 core:8 pu:2\")")
    return data


def machine_from_text(text: str, distances=None, node_cpus: str | list[int] | None = None,
                      node_memory: str | list[int] | None = None) -> LabMachine:
    """Build a :class:`LabMachine` from a synthetic string or a ``.toml``.

    Inputs: ``text`` -- ``"pack:2 numa:2 core:4 pu:2"`` or a path to a
    ``.toml`` (keys ``synthetic``, ``distances``, ``numbering``,
    ``node_cpus``, ``node_memory_mib``; others such as ``name`` or
    ``source`` are ignored); ``distances`` -- a matrix (rows, or text rows
    separated by ``;``), overriding the file's; ``node_cpus`` -- uneven
    nodes, one cpulist per node (``"0-5;6-9;10-11"``), only when the
    string has no ``numa`` level; ``node_memory`` -- MiB per node
    (``"384,384,0"``; 0 makes a memory-less node), default
    :data:`DEFAULT_NODE_MIB` each. Output: the machine. Raises
    :class:`UnexpressibleTopology` naming the part QEMU cannot build, and
    LabError / TopologyError for malformed input.

    >>> m = machine_from_text("pack:2 numa:1 core:24 pu:2")
    >>> m.ncpus, m.sockets, m.cores, m.threads, format_cpulist(m.node_cpus(1))
    (96, 2, 24, 2, '48-95')
    >>> machine_from_text("pack:1 cluster:2 core:2")
    Traceback (most recent call last):
    numalab.lab.spec.UnexpressibleTopology: cluster level: QEMU 7.2 has no clusters on x86 (an x86 guest's cluster is its L2, one per core)
    """
    source = text.strip()
    numbering = "linear"
    if source.endswith(".toml") or Path(source).is_file():
        data = _read_toml(Path(source))
        synthetic = data["synthetic"]
        numbering = data.get("numbering", "linear")
        distances = distances if distances is not None else data.get("distances")
        node_cpus = node_cpus if node_cpus is not None else data.get("node_cpus")
        if node_memory is None and data.get("node_memory_mib") is not None:
            node_memory = data["node_memory_mib"]
        if data.get("possible_extra"):
            raise UnexpressibleTopology("possible_extra: CPUs possible but not present are "
                                        "not modelled by the lab")
    else:
        synthetic = source.split("synthetic:", 1)[-1]
    if numbering != "linear":
        raise UnexpressibleTopology(f"numbering {numbering!r}: Linux numbers a QEMU guest's "
                                    "CPUs in APIC order (threads of a core adjacent), so only "
                                    "'linear' can be built")
    levels = parse_levels(synthetic, source)
    names = [n for n, _ in levels]
    counts = [c for _, c in levels]
    total = math.prod(counts)
    if total > MAX_VCPUS:
        raise UnexpressibleTopology(f"{total} vCPUs: guests above {MAX_VCPUS} vCPUs are "
                                    "refused (beyond 255 APIC ids a guest needs x2APIC, which "
                                    "this QEMU does not emulate under TCG); reproduce the shape "
                                    "scaled down")
    below = {n: math.prod(counts[i + 1:]) for i, (n, _) in enumerate(levels)}
    if "cluster" in names:
        raise UnexpressibleTopology("cluster level: QEMU 7.2 has no clusters on x86 (an x86 "
                                    "guest's cluster is its L2, one per core)")
    threads = counts[-1]
    per_core = threads if "core" in names else 1
    if "core" not in names and threads > 1:
        raise UnexpressibleTopology("pu level without a core level: say how many cores "
                                    "hold the threads (core:N pu:T)")
    per_package = below.get("package", total)
    per_die = below.get("die", per_package)
    sockets = total // per_package
    dies = per_package // per_die
    cores = per_die // per_core
    for name in names:
        if name.startswith("l") and name[1:2].isdigit():
            span = below[name]
            if name[1] in "12" and span != per_core:
                raise UnexpressibleTopology(f"{name} level: QEMU gives each core its own "
                                            f"L1 and L2 ({per_core} PU), not {span} PUs")
            if name[1] == "3" and span != per_die:
                raise UnexpressibleTopology(f"{name} level: QEMU's L3 spans a "
                                            f"{'die' if 'die' in names else 'package'} "
                                            f"({per_die} PUs), not {span}")
            if name[1] in "45":
                raise UnexpressibleTopology(f"{name} level: QEMU has no such cache")
    apic = max_apic_id(sockets, dies, cores, threads)
    if apic > 254:
        raise UnexpressibleTopology(f"-smp sockets={sockets},dies={dies},cores={cores},"
                                    f"threads={threads}: APIC ids up to {apic} need x2APIC, "
                                    "which this QEMU does not emulate under TCG")

    if node_cpus is not None:
        if "numa" in names:
            raise LabError("give the nodes either as a numa level or as node CPU lists, "
                           "not both")
        masks = parse_node_cpus(node_cpus) if isinstance(node_cpus, str) else [
            _node_mask(m) for m in _as_list(node_cpus, "node_cpus")]
        node_of = [-1] * total
        for n, mask in enumerate(masks):
            for c in cpus(mask):
                if c >= total:
                    raise LabError(f"node {n} names CPU {c}; the machine has {total} CPUs")
                if node_of[c] != -1:
                    raise LabError(f"CPU {c} is in node {node_of[c]} and node {n}")
                node_of[c] = n
        missing = [c for c, n in enumerate(node_of) if n == -1]
        if missing:
            raise LabError(f"CPUs {format_cpulist(sum(1 << c for c in missing))} are in no node")
        nnodes = len(masks)
    else:
        per_node = below.get("numa", total)
        node_of = [c // per_node for c in range(total)]
        nnodes = total // per_node
    for core in range(total // per_core):
        ns = {node_of[core * per_core + t] for t in range(per_core)}
        if len(ns) > 1:
            raise UnexpressibleTopology(f"core {core} (CPUs {core * per_core}-"
                                        f"{core * per_core + per_core - 1}) is split over "
                                        f"nodes {sorted(ns)}")
    if node_memory is None:
        mem = [DEFAULT_NODE_MIB] * nnodes
    elif isinstance(node_memory, str):
        mem = [_parse_mib(x) for x in node_memory.split(",")]
    else:
        mem = [_node_mib(x) for x in _as_list(node_memory, "node_memory_mib")]
    if len(mem) != nnodes:
        raise LabError(f"node memory gives {len(mem)} values for {nnodes} nodes")
    if sum(mem) < 256:
        raise LabError(f"{sum(mem)} MiB of guest memory in all; the lab needs at least 256")
    for n in range(nnodes):
        if mem[n] == 0 and not any(x == n for x in node_of):
            raise UnexpressibleTopology(f"node {n} has neither CPUs nor memory")
    dist = None
    if distances is not None:
        dist = tuple(tuple(r) for r in check_distances(distances, nnodes))
    desc = " ".join(synthetic.split())
    return LabMachine(sockets=sockets, dies=dies, cores=cores, threads=threads,
                      node_of=tuple(node_of), memory_mib=tuple(mem), distances=dist,
                      description=desc)


_NVME = re.compile(r"^\s*(\d+)\s*@\s*(?:node)?(\d+)\s*:\s*(\d+)\s*$")


def parse_nvme(text: str, nnodes: int | None = None) -> NvmeSpec:
    """Parse one ``--nvme N@NODE:QUEUES`` (``NODE`` may be ``nodeK``).

    >>> parse_nvme("3@0:62")
    NvmeSpec(count=3, node=0, queues=62)
    >>> parse_nvme("1@node1:4", nnodes=2)
    NvmeSpec(count=1, node=1, queues=4)
    """
    m = _NVME.match(text)
    if not m:
        raise LabError(f"--nvme {text!r}: expected N@NODE:QUEUES, for example 3@0:62")
    count, node, queues = (int(g) for g in m.groups())
    if not 1 <= count <= 31:
        raise LabError(f"--nvme {text!r}: 1 to 31 devices per option")
    if not 1 <= queues <= MAX_QUEUES:
        raise LabError(f"--nvme {text!r}: 1 to {MAX_QUEUES} I/O queues")
    if nnodes is not None and node >= nnodes:
        raise UnexpressibleTopology(f"--nvme {text!r}: node {node} does not exist "
                                    f"(the machine has {nnodes})")
    return NvmeSpec(count, node, queues)
