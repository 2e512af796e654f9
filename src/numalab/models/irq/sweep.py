"""Sweeps: how IRQ stacking grows with machine shape, vectors and devices.

One *configuration* is a machine, a vector count per device, a device count
and a placement rule (``variant``):

* ``mainline`` / ``rotate`` -- the port of ``lib/group_cpus.c`` without and
  with the seed patch; under ``rotate`` device ``d`` gets
  ``spread_offset = first_offset + d * offset_step`` (``offset_step`` > 1
  models other ``group_cpus_evenly()`` calls between two devices: a second
  interrupt set, a blk-mq map, another driver);
* ``block`` / ``balance`` -- the alternatives of
  :mod:`numalab.models.irq.alternative` (``block`` reads the same offsets).

Every configuration gives one row of figures (see :func:`evaluate`): the
largest and mean number of dedicated vectors per CPU, their ratio and
coefficient of variation, how many CPUs carry the largest count, the 1/k
"share" load, groups crossing a cluster or a node, groups the rule left
empty, and the lower bound of :mod:`numalab.models.irq.bound`.

Machines come from hwloc synthetic strings
(``"numa:N cluster:C core:S pu:1"``: ``N`` nodes, ``C`` clusters of ``S``
CPUs per node), from real dumps (:func:`sweep_datasets`), and from the
devices a dump lists with their MSI-X vector counts
(:func:`machine_devices`).

Big sweeps run on a process pool (``processes``, default 2: the book's
machine has two cores); rows come back in configuration order, so the same
inputs give the same DataFrame.

>>> df = sweep_synthetic(nodes=[2], clusters=[24], cluster_sizes=[2],
...                      vectors=[62], devices=[6], variants=["mainline", "rotate"])
>>> df[["variant", "max_dedicated", "bound"]].values.tolist()
[['mainline', 6, 2], ['rotate', 2, 2]]
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable, Sequence
from functools import lru_cache

import pandas as pd

from ...kernel.lib.group_cpus import group_cpus_evenly
from ...topology import load
from ...topology.model import Topology
from .alternative import balance_devices, block_devices
from .bound import bound_closed_form, bound_milp, cached_view
from .load import group_metrics, irq_load

__all__ = ["VARIANTS", "offsets_for", "device_groups", "evaluate", "shape_string",
           "synthetic_configs", "sweep_synthetic", "sweep_datasets", "machine_devices",
           "sweep_machine_devices", "per_cpu_table", "crossing",
           "is_managed_queue_device"]

VARIANTS = ("mainline", "rotate", "block", "balance")


def offsets_for(devices: int, first_offset: int = 0, offset_step: int = 1) -> list[int]:
    """The ``spread_offset`` of each device: ``first + d * step``.

    >>> offsets_for(3, 5, 2)
    [5, 7, 9]
    """
    return [first_offset + d * offset_step for d in range(devices)]


def device_groups(topo: Topology, vectors: int, devices: int, variant: str = "mainline",
                  offsets: Sequence[int] | None = None) -> list[list[int]]:
    """The masks ``devices`` callers asking for ``vectors`` groups get under
    ``variant`` (one list of masks per device)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    if devices <= 0:
        return []
    offsets = list(offsets) if offsets is not None else offsets_for(devices)
    view = cached_view(topo)
    if variant == "mainline":
        g = list(group_cpus_evenly(vectors, view) or [])
        return [g[:] for _ in range(devices)]     # deterministic: same for every caller
    if variant == "rotate":
        return [list(group_cpus_evenly(vectors, view, "rotate", o) or [])
                for o in offsets[:devices]]
    if variant == "block":
        return block_devices(topo, vectors, devices, offsets)
    return balance_devices(topo, vectors, devices)


def crossing(devs: Sequence[Sequence[int]], domain_of: Sequence[int]) -> int:
    """Non-empty masks not inside the domain (cluster or node mask) of their
    lowest CPU; ``domain_of[cpu]`` is that CPU's domain mask. Same count as
    :func:`numalab.models.irq.load.crossing_groups` when the domains
    partition the CPUs, in one pass.

    >>> crossing([[0b0011, 0b0110]], [0b0011, 0b0011, 0b1100, 0b1100])
    1
    """
    n = 0
    for masks in devs:
        for m in masks:
            if m:
                low = (m & -m).bit_length() - 1
                dom = (domain_of[low] if low < len(domain_of) else 0) or (1 << low)
                if m & ~dom:
                    n += 1
    return n


def evaluate(topo: Topology, vectors: int, devices: int, variant: str = "mainline",
             offsets: Sequence[int] | None = None, exact_bound: bool = False) -> dict:
    """One row of figures for one configuration.

    Keys: those of :func:`numalab.models.irq.load.metrics` (on the machine's
    present CPUs) without ``worst_cpus``, its ``vectors`` and ``cpus``
    renamed ``nonempty_groups`` and ``load_cpus``, plus ``dedicated_cv`` (population
    standard deviation / mean of dedicated vectors per CPU, 0 when none),
    ``empty_groups`` (masks left empty although the CPUs would have allowed
    them), ``bound`` (:func:`~numalab.models.irq.bound.bound_closed_form`,
    or the MILP with ``exact_bound``) and ``gap`` (``max_dedicated - bound``).
    """
    devs = device_groups(topo, vectors, devices, variant, offsets)
    view = cached_view(topo)
    present = view.present
    m, load_ = _group_metrics(devs, view)
    d = load_.dedicated
    mean = sum(d) / len(d) if d else 0.0
    m["dedicated_cv"] = statistics.pstdev(d) / mean if mean else 0.0
    wanted = min(vectors, present.bit_count())
    m["empty_groups"] = sum(max(0, wanted - sum(1 for x in g if x & present)) for g in devs)
    if devices:
        b = bound_milp(topo, vectors, devices).value if exact_bound else \
            bound_closed_form(topo, vectors, devices)
    else:
        b = 0
    m["bound"] = b
    m["gap"] = m["max_dedicated"] - b
    return m


def _group_metrics(devs, view):
    """:func:`numalab.models.irq.load.group_metrics` with the sweep's column
    names (``nonempty_groups``, ``load_cpus``; no ``worst_cpus``)."""
    m, load_ = group_metrics(devs, view)
    m.pop("worst_cpus")
    # keep the configuration's own "vectors" and "cpus" columns intact
    m["nonempty_groups"] = m.pop("vectors")
    m["load_cpus"] = m.pop("cpus")
    return m, load_


def shape_string(nodes: int, clusters: int, cluster_size: int) -> str:
    """``"numa:N cluster:C core:S pu:1"``.

    >>> shape_string(2, 24, 2)
    'numa:2 cluster:24 core:2 pu:1'
    """
    return f"numa:{nodes} cluster:{clusters} core:{cluster_size} pu:1"


@lru_cache(maxsize=256)
def _machine(shape: str) -> Topology:
    return load(shape)


def synthetic_configs(nodes: Iterable[int], clusters: Iterable[int],
                      cluster_sizes: Iterable[int], vectors: Iterable[int] | None,
                      devices: Iterable[int], variants: Iterable[str] = VARIANTS,
                      vectors_per_cpu: Iterable[float] | None = None,
                      offset_step: int = 1) -> list[tuple]:
    """The configurations of a synthetic sweep, in a fixed order.

    Give ``vectors`` (absolute counts) or ``vectors_per_cpu`` (fractions of
    the machine's CPU count, rounded, at least 1; the sweep's "1 to 2x the
    CPUs"). Each item: ``(shape, nodes, clusters, cluster_size, vectors,
    devices, variant, offset_step)``.
    """
    out = []
    for n, c, s in itertools.product(nodes, clusters, cluster_sizes):
        cpus = n * c * s
        if vectors_per_cpu is not None:
            vs = sorted({max(1, round(f * cpus)) for f in vectors_per_cpu})
        else:
            vs = list(vectors)
        for v, d, var in itertools.product(vs, devices, variants):
            out.append((shape_string(n, c, s), n, c, s, v, d, var, offset_step))
    return out


def _run_config(cfg: tuple) -> dict:
    shape, n, c, s, v, d, var, step = cfg
    t = _machine(shape)
    row = {"shape": shape, "nodes": n, "clusters_per_node": c, "cluster_size": s,
           "cpus": n * c * s, "vectors": v, "devices": d, "variant": var,
           "offset_step": step}
    row.update(evaluate(t, v, d, var, offsets_for(d, 0, step)))
    return row


def _map(fn, items: list, processes: int) -> list:
    if processes <= 1 or len(items) < 64:
        return [fn(x) for x in items]
    import multiprocessing as mp
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    with ctx.Pool(processes) as pool:
        # contiguous chunks keep one shape in one worker (its caches stay warm)
        return pool.map(fn, items, chunksize=max(1, len(items) // (8 * processes)))


def sweep_synthetic(nodes: Iterable[int] = (1, 2, 4, 8), clusters: Iterable[int] = (8,),
                    cluster_sizes: Iterable[int] = range(1, 9),
                    vectors: Iterable[int] | None = None, devices: Iterable[int] = (1, 4, 16),
                    variants: Iterable[str] = VARIANTS,
                    vectors_per_cpu: Iterable[float] | None = None, offset_step: int = 1,
                    processes: int = 2) -> pd.DataFrame:
    """A tidy DataFrame, one row per configuration (see :func:`evaluate`).

    Default vectors: ``vectors_per_cpu=(0.25, 0.5, 0.75, 1, 1.5, 2)`` when
    neither ``vectors`` nor ``vectors_per_cpu`` is given.
    """
    if vectors is None and vectors_per_cpu is None:
        vectors_per_cpu = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
    cfgs = synthetic_configs(nodes, clusters, cluster_sizes, vectors, devices, variants,
                             vectors_per_cpu, offset_step)
    return pd.DataFrame(_map(_run_config, cfgs, processes))


def _dataset_rows(args: tuple) -> list[dict]:
    path, vectors, devices, variants, label, fracs = args
    from ...datasets import load_cached
    try:
        t = load_cached(path)    # with each dataset's reader options, as chapter 1 reads it
    except Exception as e:   # a broken dump is reported, not fatal to the sweep
        return [{"dataset": label, "error": str(e)}]
    ncpu = cached_view(t).present.bit_count()
    rows = []
    if vectors is not None:
        vs = vectors
    elif fracs is not None:
        vs = sorted({max(1, round(f * ncpu)) for f in fracs})
    else:
        vs = sorted({max(1, ncpu // 2), ncpu, 2 * ncpu})
    for v, d, var in itertools.product(vs, devices, variants):
        row = {"dataset": label, "cpus": ncpu, "nodes": len(t.nodes) or 1,
               "clusters": len(t.clusters()), "vectors": v, "devices": d, "variant": var}
        row.update(evaluate(t, v, d, var))
        rows.append(row)
    return rows


def sweep_datasets(paths: Sequence[str], vectors: Sequence[int] | None = None,
                   devices: Sequence[int] = (6,), variants: Iterable[str] = VARIANTS,
                   processes: int = 2, vectors_per_cpu: Sequence[float] | None = None
                   ) -> pd.DataFrame:
    """The same figures on real machines (any :func:`numalab.topology.load`
    source). Without ``vectors``: ``vectors_per_cpu`` fractions of each
    machine's present CPUs (rounded, at least 1), or else half, once and
    twice its CPUs."""
    from ...datasets import label as _label
    labels: list[str] = []
    for p in paths:                # same rule as datasets.load_datasets: unique labels
        name = _label(p)
        while name in labels:
            name += "'"
        labels.append(name)
    fr = tuple(vectors_per_cpu) if vectors_per_cpu is not None else None
    args = [(p, vectors, tuple(devices), tuple(variants), name, fr)
            for p, name in zip(paths, labels)]
    if processes > 1 and len(args) > 2:
        import multiprocessing as mp
        with mp.get_context("fork").Pool(processes) as pool:
            parts = pool.map(_dataset_rows, args, chunksize=1)
    else:
        parts = [_dataset_rows(a) for a in args]
    return pd.DataFrame([r for part in parts for r in part])


# PCI functions whose drivers ask for managed (group_cpus_evenly) affinity:
# NVMe, and virtio block / SCSI (vendor 0x1af4; legacy and modern ids).
_VIRTIO_MANAGED = {0x1001, 0x1004, 0x1042, 0x1048}


def is_managed_queue_device(p) -> bool:
    """True for NVMe controllers and virtio-blk / virtio-scsi functions."""
    if p.driver == "nvme" or p.class_code >> 8 == 0x0108:
        return True
    return p.vendor == 0x1AF4 and p.device in _VIRTIO_MANAGED


def machine_devices(topo: Topology, min_vectors: int = 2,
                    managed_only: bool = True) -> list[tuple[str, str, int]]:
    """The dump's PCI functions with at least ``min_vectors`` MSI/MSI-X
    vectors, as ``(address, driver, vectors)``; with ``managed_only`` only
    those whose drivers use managed affinity (:func:`is_managed_queue_device`:
    network drivers, for one, set their own affinity hints instead). These
    drivers keep one vector out of the spreading (``pre_vectors = 1``: the
    admin or config vector), which :func:`sweep_machine_devices` does.

    >>> from numalab.topology.model import PCIDevice
    >>> t = Topology(name="x", pci=[PCIDevice("0000:01:00.0", msi_vectors=9, driver="nvme"),
    ...                             PCIDevice("0000:02:00.0", msi_vectors=9, driver="ixgbe")])
    >>> machine_devices(t)
    [('0000:01:00.0', 'nvme', 9)]
    """
    return [(p.address, p.driver or "?", p.msi_vectors) for p in topo.pci
            if p.msi_vectors >= min_vectors and (not managed_only or is_managed_queue_device(p))]


def sweep_machine_devices(topo: Topology, variants: Iterable[str] = VARIANTS,
                          pre_vectors: int = 1, label: str | None = None) -> pd.DataFrame:
    """The machine's own multi-vector devices, all probed in address order:
    device ``i`` asks for ``msi_vectors - pre_vectors`` groups. One row per
    variant with the figures of :func:`evaluate` computed over all devices."""
    devs = machine_devices(topo)
    rows = []
    if not devs:
        return pd.DataFrame(rows)
    view = cached_view(topo)
    for var in variants:
        groups = []
        for i, (addr, drv, n) in enumerate(devs):
            v = max(1, n - pre_vectors)
            groups.extend(device_groups(topo, v, 1, var, [i]) if var != "balance" else [])
        if var == "balance":
            from .alternative import Balancer
            b = Balancer(topo)
            groups = [b.groups(max(1, n - pre_vectors)) for _, _, n in devs]
        m, _ = _group_metrics(groups, view)
        rows.append({"dataset": label or topo.name, "variant": var, "devices": len(devs),
                     "vectors": ",".join(str(max(1, n - pre_vectors)) for *_, n in devs),
                     **m})
    return pd.DataFrame(rows)


def per_cpu_table(topo: Topology, groups: Sequence[Sequence[int]], variant: str) -> pd.DataFrame:
    """One row per present CPU: node, cluster (its lowest CPU), dedicated,
    shared and 1/k share load, for per-CPU charts."""
    view = cached_view(topo)
    load_ = irq_load([[m & view.present for m in g] for g in groups], view.present)
    rows = []
    for r in load_.rows():
        c = r["cpu"]
        cl = view.cluster[c] if c < len(view.cluster) else 0
        rows.append({"variant": variant, **r,
                     "node": view.cpu_to_node[c] if c < len(view.cpu_to_node) else -1,
                     "cluster": (cl & -cl).bit_length() - 1 if cl else c})
    return pd.DataFrame(rows)


def clustered_view(nodes: int, cluster_sizes: Sequence[int]):
    """A machine with ``nodes`` nodes, each made of clusters of the given
    sizes (one CPU per core, no SMT), as the :class:`CpuTopo` view
    ``group_cpus.c`` reads: the shape hwloc's synthetic strings cannot
    write (clusters of unequal size, as on hybrid CPUs).

    >>> v = clustered_view(1, [4, 1])
    >>> v.nr_cpu_ids, [bin(m) for m in v.cluster]
    (5, ['0b1111', '0b1111', '0b1111', '0b1111', '0b10000'])
    """
    from ...kernel.lib.group_cpus import CpuTopo, build_node_to_cpumask
    cpu_to_node, cluster = [], []
    c = 0
    for n in range(nodes):
        for size in cluster_sizes:
            m = ((1 << size) - 1) << c
            cluster += [m] * size
            cpu_to_node += [n] * size
            c += size
    full = (1 << c) - 1
    base = CpuTopo(nr_cpu_ids=c, nr_node_ids=nodes, possible=full, present=full,
                   node_possible=tuple(range(nodes)), cpu_to_node=tuple(cpu_to_node),
                   sibling=tuple(1 << i for i in range(c)), cluster=tuple(cluster))
    return CpuTopo(**{**base.__dict__, "node_to_cpumask": tuple(build_node_to_cpumask(base))})


def sweep_uneven(cluster_layouts: Iterable[Sequence[int]], nodes: Iterable[int] = (1, 2),
                 vectors_per_cpu: Iterable[float] = (0.55, 0.65, 0.75, 0.85, 0.95),
                 devices: Iterable[int] = (6,), variants: Iterable[str] = ("mainline", "rotate")
                 ) -> pd.DataFrame:
    """Mainline and rotate on machines with unequal clusters
    (:func:`clustered_view`), vectors a fraction of the CPUs: one row per
    configuration with ``max_dedicated``, ``cpus_at_max_dedicated`` and
    ``empty_masks`` (masks the call left empty: the MSI-X attempt that
    ``alloc_descs()`` refuses, after which the kernel retries with fewer
    vectors, :func:`numalab.models.irq.blkmq.msix_allocation`). The rows
    score each device's first call; rotate's devices get offsets 0, 1, 2...

    >>> df = sweep_uneven([(4, 1)], nodes=[1], vectors_per_cpu=[1.0], devices=[1])
    >>> df[["variant", "vectors", "empty_masks"]].values.tolist()
    [['mainline', 5, 0], ['rotate', 5, 1]]
    """
    from ...kernel.lib.group_cpus import group_cpus_evenly
    from .load import group_metrics
    rows = []
    for layout in cluster_layouts:
        for n in nodes:
            view = clustered_view(n, layout)
            ncpu = view.present.bit_count()
            for v in sorted({max(1, round(f * ncpu)) for f in vectors_per_cpu}):
                for d in devices:
                    for var in variants:
                        devs = [list(group_cpus_evenly(v, view, var, o) or [])
                                for o in range(d)]
                        m, _ = group_metrics(devs, view)
                        rows.append({"clusters": "+".join(map(str, layout)), "nodes": n,
                                     "cpus": ncpu, "vectors": v, "devices": d, "variant": var,
                                     "max_dedicated": m["max_dedicated"],
                                     "cpus_at_max_dedicated": m["cpus_at_max_dedicated"],
                                     "empty_masks": m["empty_masks"],
                                     "failing_devices": sum(1 for g in devs
                                                            if any(not x for x in g))})
    return pd.DataFrame(rows)


def offset_distribution(topo: Topology, vectors: int, devices: int, sets: int = 200,
                        max_offset: int | None = None, seed: int = 0) -> pd.DataFrame:
    """Rotate's largest dedicated load over ``sets`` random offset sets: each
    set draws ``devices`` distinct offsets uniformly from ``[0, max_offset)``
    (default: 3 x the vectors; the counter is global, so a device's offset
    is whatever number of calls came before it), seeded. One row per set
    (``offsets`` as text, ``max_dedicated``).

    >>> from numalab.topology import load
    >>> df = offset_distribution(load("numa:1 cluster:4 core:2 pu:1"), 6, 2, sets=3)
    >>> len(df), sorted(df.columns)
    (3, ['max_dedicated', 'offsets', 'set'])
    """
    import random as _random
    view = cached_view(topo)
    rng = _random.Random(seed)
    hi = max_offset if max_offset is not None else 3 * vectors
    rows = []
    for s in range(sets):
        offs = sorted(rng.sample(range(hi), devices)) if devices <= hi else \
            [rng.randrange(hi) for _ in range(devices)]
        devs = [list(group_cpus_evenly(vectors, view, "rotate", o) or []) for o in offs]
        load_ = irq_load([[m & view.present for m in g] for g in devs], view.present)
        rows.append({"set": s, "offsets": ",".join(map(str, offs)),
                     "max_dedicated": max(load_.dedicated, default=0)})
    return pd.DataFrame(rows)
