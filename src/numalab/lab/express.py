"""Which machines the lab can build exactly: a topology -> the lab's QEMU
machine, or the precise reasons why not.

:func:`express` maps a :class:`~numalab.topology.Topology` (a dump, an XML,
a description, a synthetic string, as :func:`numalab.datasets.load_cached`
reads it) to the arguments of ``numalab lab run`` (``--topology``,
``--node-cpus``, ``--node-memory``, ``--distances``) and the
:class:`~numalab.lab.spec.LabMachine` they build, when the guest Linux will
see *the same machine* in everything the book's kernel ports read:

* the same CPU ids, all possible, present and online (the lab's guests have
  no hot-pluggable CPUs);
* the same SMT siblings, packages and dies: QEMU's ``-smp`` gives every
  package the same dies, every die the same cores, every core the same
  threads, numbered in APIC order (threads of a core adjacent, then cores,
  dies, packages), so the machine's own numbering must be that one;
* the same clusters: QEMU 7.2 has no cluster level on x86 and gives each
  core its own L2, so an x86 guest's cluster (``cpu_l2c_shared_mask``) is its
  core; a machine whose clusters hold more than one core cannot be built;
* the same nodes: ids 0..N-1 (QEMU refuses gaps), the same CPU lists (any
  set of whole cores), CPU-less and memory-less nodes where the machine has
  them;
* the same SLIT distances (symmetric, 10 on the diagonal, 11-254 elsewhere:
  ACPI's and QEMU's rules); no matrix is the kernel's default 10/20.

What the lab does not reproduce and the ports do not read is listed as
notes, not reasons: memory sizes (every node with memory gets
:data:`~numalab.lab.spec.DEFAULT_NODE_MIB`), caches beyond L2 (QEMU's L3
spans a die), the architecture (the guest is x86-64), PCI devices.

:func:`guest_topology` is the topology the guest will report for a
:class:`LabMachine`; :func:`shape_differences` compares two topologies on the
points above, and is used twice: by :func:`express` as a guard on its own
answer, and on real sweep dumps, whose booted topology must equal the
machine they express (``tests/test_lab_sweep_oracle.py``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..cpumask import cpus as _cpus
from ..cpumask import format_cpulist
from ..topology.model import CPU, Node, Topology
from . import LabError
from .schema import MAX_DISTANCE, MAX_NODES
from .spec import DEFAULT_NODE_MIB, MAX_VCPUS, LabMachine, machine_from_text

__all__ = ["Expression", "express", "guest_topology", "shape_differences", "express_table",
           "lab_run_arguments"]


@dataclass(frozen=True)
class Expression:
    """The answer of :func:`express` for one machine.

    ``args``: the ``numalab lab run`` options that build it (``topology``,
    ``node_cpus``, ``node_memory``, ``distances``; None where not needed),
    empty when not expressible; ``machine``: the LabMachine (None when not
    expressible); ``reasons``: why not, one precise sentence each (empty
    when expressible); ``notes``: what differs but no port reads."""

    name: str
    arch: str
    cpus: int
    nodes: int
    args: dict = field(default_factory=dict)
    machine: LabMachine | None = None
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def exact(self) -> bool:
        return self.machine is not None and not self.reasons


def lab_run_arguments(args: dict) -> list[str]:
    """The ``numalab lab run`` options of an :class:`Expression`'s ``args``.

    >>> lab_run_arguments({"topology": "pack:1 core:2 pu:1", "node_cpus": None,
    ...                    "node_memory": "384M", "distances": None})
    ['--topology', 'pack:1 core:2 pu:1', '--node-memory', '384M']
    """
    out = []
    for key in ("topology", "node_cpus", "node_memory", "distances"):
        if args.get(key) is not None:
            out += ["--" + key.replace("_", "-"), args[key]]
    return out


def _mask(cpu_ids) -> int:
    m = 0
    for c in cpu_ids:
        m |= 1 << c
    return m


def _block(cpu: int, size: int) -> int:
    """The ``size`` CPUs of the aligned block holding ``cpu``."""
    first = cpu - cpu % size
    return ((1 << size) - 1) << first


def _groups(topo: Topology, key) -> list[int]:
    """Distinct masks ``key(cpu)`` over the CPUs, lowest CPU first."""
    return sorted({key(c) for c in topo.cpus.values()}, key=lambda m: m & -m)


def _memory_less(topo: Topology) -> set[int]:
    return {n.id for n in topo.nodes.values() if n.memory_bytes == 0}


def _distances(topo: Topology) -> list[list[int]]:
    """The matrix, or the kernel's default (10 local, 20 remote) without one."""
    ids = topo.node_ids
    if topo.distances:
        return [list(r) for r in topo.distances]
    return [[10 if a == b else 20 for b in ids] for a in ids]


def _cluster(c: CPU) -> int:
    """``topology_cluster_cpumask()`` as the ports read it (the CPU alone when unknown)."""
    return (c.cluster_cpus or (1 << c.id)) | (1 << c.id)


def shape_differences(want: Topology, got: Topology, limit: int = 3) -> list[str]:
    """Where ``got`` differs from ``want`` in what the lab promises to keep
    (see the module doc): CPU ids, possible/present/online, SMT siblings,
    clusters, dies, packages, node ids and CPU lists, memory-less nodes,
    distances. Output: one sentence per kind of difference (at most
    ``limit`` examples each); empty when they are the same machine."""
    out: list[str] = []
    for what in ("possible", "present", "online"):
        a, b = getattr(want, what), getattr(got, what)
        if a != b:
            out.append(f"{what} CPUs {format_cpulist(a)} vs {format_cpulist(b)}")
    if set(want.cpus) != set(got.cpus):
        out.append(f"CPUs {format_cpulist(_mask(want.cpus))} vs {format_cpulist(_mask(got.cpus))}")
        return out
    for what, key in (("SMT siblings", lambda c: (c.thread_siblings or 1 << c.id) | 1 << c.id),
                      ("cluster", _cluster),
                      ("die", lambda c: c.die_cpus or c.package_cpus or 1 << c.id),
                      ("package", lambda c: c.package_cpus or 1 << c.id)):
        bad = [c for c in sorted(want.cpus) if key(want.cpus[c]) != key(got.cpus[c])]
        if bad:
            ex = ", ".join(f"CPU {c}: {format_cpulist(key(want.cpus[c]))} vs "
                           f"{format_cpulist(key(got.cpus[c]))}" for c in bad[:limit])
            out.append(f"{what} masks differ on {len(bad)} CPU(s) ({ex})")
    if want.node_ids != got.node_ids:
        out.append(f"node ids {want.node_ids} vs {got.node_ids}")
        return out
    for n in want.node_ids:
        if want.nodes[n].cpus != got.nodes[n].cpus:
            out.append(f"node {n} CPUs {format_cpulist(want.nodes[n].cpus)} vs "
                       f"{format_cpulist(got.nodes[n].cpus)}")
    if _memory_less(want) != _memory_less(got):
        out.append(f"memory-less nodes {sorted(_memory_less(want))} vs "
                   f"{sorted(_memory_less(got))}")
    if _distances(want) != _distances(got):
        out.append(f"distances {_distances(want)} vs {_distances(got)}")
    return out


def guest_topology(machine: LabMachine, name: str = "guest") -> Topology:
    """The topology an x86 guest of ``machine`` reports (QEMU 7.2, ``-cpu
    max``, the lab's Linux 7.2): CPU i in APIC order, each core its own L2
    (so its cluster), the L3 over a die, and two things the guest kernel does
    its own way, both seen on real boots (``data/lab/sweep/book``):

    * node ids: QEMU's SRAT lists the CPUs in APIC order before the memory
      ranges, and x86 Linux gives a proximity domain the next free node id
      when it first meets it (``acpi_map_pxm_to_node()``), so the guest's
      nodes are numbered in the order of their first CPU, CPU-less nodes
      after them (distances permuted alike);
    * dies: the lab's 7.2 guest reported one die per package for a
      ``die:2`` machine, so a guest's die is its package.

    >>> t = guest_topology(machine_from_text("pack:2 core:2 pu:2"))
    >>> format_cpulist(t.cpus[5].thread_siblings), format_cpulist(t.cpus[5].package_cpus)
    ('4-5', '4-7')
    >>> t = guest_topology(machine_from_text("pack:1 core:4 pu:1", node_cpus="2-3;0-1"))
    >>> format_cpulist(t.nodes[0].cpus), format_cpulist(t.nodes[1].cpus)
    ('0-1', '2-3')
    """
    m = machine
    per_die = m.cores * m.threads
    per_pkg = m.dies * per_die
    order: list[int] = []
    for i in range(m.ncpus):                 # SRAT: CPUs first, in APIC order
        if m.node_of[i] not in order:
            order.append(m.node_of[i])
    order += [n for n in range(m.nnodes) if n not in order]
    new_id = {old: new for new, old in enumerate(order)}
    cpus = {}
    for i in range(m.ncpus):
        sib = _block(i, m.threads)
        cpus[i] = CPU(id=i, node=new_id[m.node_of[i]], package=i // per_pkg, die=0,
                      core=(i % per_die) // m.threads,
                      thread_siblings=sib, cluster_cpus=sib, die_cpus=_block(i, per_pkg),
                      package_cpus=_block(i, per_pkg), llc_cpus=_block(i, per_die),
                      l2_cpus=sib, cluster_source="l2")
    nodes = {new_id[n]: Node(id=new_id[n], cpus=m.node_cpus(n),
                             memory_bytes=m.memory_mib[n] << 20) for n in range(m.nnodes)}
    nodes = dict(sorted(nodes.items()))
    dist = ([[m.distances[order[a]][order[b]] for b in range(m.nnodes)] for a in range(m.nnodes)]
            if m.distances else [])
    every = (1 << m.ncpus) - 1
    return Topology(name=name, source=name, arch="x86", possible=every, present=every,
                    online=every, cpus=cpus, nodes=nodes, distances=dist)


def _uniform(sizes: Counter, what: str, parent: str) -> str | None:
    if len(sizes) > 1:
        shown = " and ".join(str(s) for s in sorted(sizes))
        return (f"{what} per {parent} differ ({shown}); QEMU's -smp gives every {parent} "
                f"the same number")
    return None


def express(topo: Topology, name: str | None = None) -> Expression:
    """The lab machine that reproduces ``topo`` exactly, or why not.

    Input: a topology. Output: an :class:`Expression` (``exact`` True with
    ``args`` and ``machine``, else the ``reasons``). Pure: reads nothing
    but ``topo``.

    >>> from numalab.topology import load
    >>> e = express(load("pack:2 numa:1 core:4 pu:2"))
    >>> e.exact, e.args["topology"], e.args["node_cpus"]
    (True, 'pack:2 core:4 pu:2', '0-7;8-15')
    >>> print(express(load("pack:1 core:4 pu:2", numbering="smt-apart")).reasons[0])
    CPU numbering: CPU 0's SMT siblings are CPUs 0,4; a QEMU guest numbers the threads of a core next to each other (0-1)
    """
    name = name or topo.name
    reasons: list[str] = []
    notes: list[str] = []
    ncpus = len(topo.cpus)
    nnodes = max(1, len(topo.nodes))
    base = dict(name=name, arch=topo.arch, cpus=ncpus, nodes=nnodes)
    ids = _mask(topo.cpus)
    every = (1 << ncpus) - 1
    if not ncpus:
        return Expression(**base, reasons=("no CPUs",))
    if ncpus > MAX_VCPUS:
        reasons.append(f"{ncpus} vCPUs: more than the lab's {MAX_VCPUS} (beyond 255 APIC ids a "
                       "guest needs x2APIC, which QEMU 7.2 does not emulate under TCG)")
    if ids != every:
        reasons.append(f"CPU ids {format_cpulist(ids)} are not 0-{ncpus - 1}; a guest's are")
    hidden = (topo.possible | topo.present) & ~ids
    if hidden:
        reasons.append(f"CPUs {format_cpulist(hidden)} are possible but not described "
                       "(hot-pluggable); the lab's guests have every CPU present")
    if topo.present and ids & ~topo.present:
        reasons.append(f"CPUs {format_cpulist(ids & ~topo.present)} are not present; the "
                       "lab's guests have every CPU present")
    if topo.online and topo.present & ~topo.online:
        reasons.append(f"CPUs {format_cpulist(topo.present & ~topo.online)} are offline; "
                       "the lab's guests bring every CPU online")
    if reasons:
        return Expression(**base, reasons=tuple(reasons))

    cpu = topo.cpus
    cores = _groups(topo, lambda c: (c.thread_siblings or 1 << c.id) | 1 << c.id)
    threads = Counter(m.bit_count() for m in cores)
    if len(threads) > 1:
        reasons.append("heterogeneous cores: " + " and ".join(
            f"{n} core(s) of {t} thread(s)" for t, n in sorted(threads.items()))
            + "; QEMU's -smp gives every core the same threads")
    pkgs = _groups(topo, lambda c: c.package_cpus or 1 << c.id)
    dies = _groups(topo, lambda c: c.die_cpus or c.package_cpus or 1 << c.id)
    r = _uniform(Counter(m.bit_count() for m in pkgs), "CPUs", "package")
    if r:
        reasons.append(r)
    r = _uniform(Counter(sum(1 for d in dies if d & p == d) for p in pkgs), "dies", "package")
    if r:
        reasons.append(r)
    if any(not any(d & p == d for p in pkgs) for d in dies):
        reasons.append("a die spans two packages")
    if reasons:
        return Expression(**base, reasons=tuple(reasons))

    T = next(iter(threads))
    per_pkg = ncpus // len(pkgs)
    D = len(dies) // len(pkgs)
    per_die = per_pkg // D
    C = per_die // T
    S = len(pkgs)
    # the machine's numbering must be QEMU's APIC order
    checks = [("SMT siblings are", lambda c: (c.thread_siblings or 1 << c.id) | 1 << c.id, T,
               "the threads of a core next to each other"),
              ("package holds", lambda c: c.package_cpus or 1 << c.id, per_pkg,
               "each package's CPUs in one block")]
    if D > 1:
        checks.insert(1, ("die holds", lambda c: c.die_cpus or c.package_cpus or 1 << c.id,
                          per_die, "each die's CPUs in one block"))
    for what, key, size, how in checks:
        bad = next((c for c in sorted(cpu) if key(cpu[c]) != _block(c, size)), None)
        if bad is not None:
            reasons.append(f"CPU numbering: CPU {bad}'s {what} CPUs "
                           f"{format_cpulist(key(cpu[bad]))}; a QEMU guest numbers {how} "
                           f"({format_cpulist(_block(bad, size))})")
            break
    big = next((c for c in sorted(cpu) if _cluster(cpu[c]) != ((cpu[c].thread_siblings
                                                                or 1 << c) | 1 << c)), None)
    if big is not None:
        cl = _cluster(cpu[big])
        if cl & ~((cpu[big].thread_siblings or 1 << big) | 1 << big):
            reasons.append(f"clusters: CPUs {format_cpulist(cl)} share a cluster "
                           f"({cpu[big].cluster_source}); QEMU 7.2 has no cluster level on "
                           "x86 and gives each core its own L2")
        else:
            reasons.append(f"clusters: CPU {big}'s cluster is CPUs {format_cpulist(cl)}, less "
                           "than its core; an x86 guest's cluster is its core's L2")

    # nodes
    node_ids = topo.node_ids or [0]
    if topo.nodes and node_ids != list(range(len(node_ids))):
        reasons.append(f"node ids {','.join(map(str, node_ids))}: QEMU numbers nodes 0 to "
                       f"{len(node_ids) - 1} without gaps")
    if len(node_ids) > MAX_NODES:
        reasons.append(f"{len(node_ids)} nodes: QEMU builds at most {MAX_NODES}")
    masks = [topo.nodes[n].cpus for n in node_ids] if topo.nodes else [every]
    covered = 0
    for m in masks:
        covered |= m
    if covered != every:
        reasons.append(f"CPUs {format_cpulist(every & ~covered)} are in no node")
    for core in cores:
        split = [n for n, m in zip(node_ids, masks) if m & core]
        if len(split) > 1:
            reasons.append(f"core of CPUs {format_cpulist(core)} is split over nodes "
                           f"{', '.join(map(str, split))}")
            break
    mem = []
    for n in node_ids:
        node = topo.nodes.get(n)
        has_cpus = bool(node and node.cpus) or not topo.nodes
        mb = node.memory_bytes if node else None
        if mb == 0:
            if not has_cpus:
                reasons.append(f"node {n} has neither CPUs nor memory")
            mem.append(0)
        else:
            if mb is None:
                notes.append(f"node {n}: memory size unknown (given {DEFAULT_NODE_MIB} MiB)")
            mem.append(DEFAULT_NODE_MIB)
    if not any(mem):
        reasons.append("no node has memory")
    dist = None
    if topo.distances:
        rows = [list(r) for r in topo.distances]
        k = len(rows)
        asym = next(((i, j) for i in range(k) for j in range(i + 1, k)
                     if rows[i][j] != rows[j][i]), None)
        if asym:
            i, j = asym
            reasons.append(f"asymmetric distances: node{node_ids[i]}->node{node_ids[j]} is "
                           f"{rows[i][j]} but node{node_ids[j]}->node{node_ids[i]} is "
                           f"{rows[j][i]}; QEMU's SLIT is symmetric")
        def wrong(i: int, j: int) -> bool:
            return rows[i][j] != 10 if i == j else not 10 < rows[i][j] <= MAX_DISTANCE
        bad = next(((i, j) for i in range(k) for j in range(k) if wrong(i, j)), None)
        if bad:
            i, j = bad
            reasons.append(f"distance node{node_ids[i]}->node{node_ids[j]} is {rows[i][j]}; "
                           f"QEMU takes 10 on the diagonal and 11-{MAX_DISTANCE} elsewhere")
        dist = ";".join(",".join(map(str, r)) for r in rows)
    if reasons:
        return Expression(**base, reasons=tuple(dict.fromkeys(reasons)), notes=tuple(notes))

    levels = [f"pack:{S}"] + ([f"die:{D}"] if D > 1 else []) + [f"core:{C}", f"pu:{T}"]
    args = {"topology": " ".join(levels),
            "node_cpus": ";".join(format_cpulist(m) for m in masks) if len(masks) > 1 else None,
            "node_memory": ",".join(f"{x}M" for x in mem),
            "distances": dist}
    try:
        machine = machine_from_text(args["topology"], distances=dist, node_cpus=args["node_cpus"],
                                    node_memory=args["node_memory"])
    except LabError as e:          # APIC ids beyond 254, ...
        return Expression(**base, reasons=(str(e),), notes=tuple(notes))
    llc = {c.llc_cpus for c in cpu.values() if c.llc_cpus}
    if llc and any(m.bit_count() != per_die for m in llc):
        notes.append(f"last-level cache of {min(m.bit_count() for m in llc)} CPU(s) here, a "
                     f"die ({per_die}) in the guest")
    if topo.arch not in ("x86", "unknown"):
        notes.append(f"{topo.arch} machine, x86-64 guest")
    if any(n.memory_bytes for n in topo.nodes.values()):
        notes.append(f"memory sizes not kept ({DEFAULT_NODE_MIB} MiB per node with memory)")
    diff = shape_differences(topo, guest_topology(machine, name))
    if diff:                       # the checks above missed something: say it, do not claim exact
        return Expression(**base, reasons=tuple(f"guest differs: {d}" for d in diff),
                          notes=tuple(notes))
    return Expression(**base, args=args, machine=machine, notes=tuple(notes))


def express_table(datasets: list[str] | None = None):
    """One row per dataset (default: the hwloc collection): machine, arch,
    cpus, nodes, exact, reason (the first), reasons (all, ``; ``-joined),
    notes, lab_run (the options, when exact). A pandas DataFrame."""
    import pandas as pd
    from ..datasets import hwloc_datasets, label, load_cached
    rows = []
    for d in datasets if datasets is not None else hwloc_datasets():
        e = express(load_cached(d), label(d))
        rows.append({"machine": e.name, "arch": e.arch, "cpus": e.cpus, "nodes": e.nodes,
                     "exact": e.exact, "reason": e.reasons[0] if e.reasons else "",
                     "reasons": "; ".join(e.reasons), "notes": "; ".join(e.notes),
                     "lab_run": " ".join(_quote(a) for a in lab_run_arguments(e.args))})
    return pd.DataFrame(rows)


def _quote(arg: str) -> str:
    import shlex
    return shlex.quote(arg)
