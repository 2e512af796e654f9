"""Ground truth: what real kernels did with ``group_cpus_evenly()``'s groups.

Two consumers of the groups leave traces in a sysfs/procfs dump:

* **blk-mq** -- ``blk_mq_map_queues()`` (``block/blk-mq-cpumap.c``) asks
  ``group_cpus_evenly(nr_queues, &nr_masks)`` and maps every CPU of group
  ``queue % nr_masks`` to hardware queue ``queue_offset + queue``. Drivers
  with managed interrupts (nvme, virtio-blk) map queues from the vectors'
  affinities instead (``blk_mq_map_hw_queues()``), which come from the same
  call (below), so for the default map the result is the same. The dump
  shows the map as ``/sys/block/DISK/mq/N/cpu_list`` (``topo.blk_mq``).
  Kernels before 6.3 used another algorithm (present CPUs round robin,
  then SMT siblings on their first sibling's queue):
  :func:`blk_mq_map_queues_legacy` ports it.
* **managed IRQs** -- ``irq_create_affinity_masks()`` (``kernel/irq/affinity.c``)
  gives the first ``pre_vectors`` and last ``post_vectors`` vectors
  ``irq_default_affinity``, and each interrupt set of the rest one call to
  ``group_cpus_evenly()``; vectors after the last mask it returned get the
  default too. The dump shows ``/proc/irq/N/smp_affinity`` (``topo.irqs``).

:func:`compare_blk_mq` and :func:`compare_irqs` set a dump against the
ports. Both ports are written from the mainline text that has the
``nummasks`` out-parameter (6.17 and later), the same text as
:mod:`numalab.kernel.lib.group_cpus`.

>>> from numalab.topology import load
>>> t = load("numa:2 core:2 pu:1")
>>> hctx_masks(blk_mq_map_queues(2, t), 2)
[3, 12]
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pandas as pd

from ...cpumask import format_cpulist
from ...kernel.lib.group_cpus import group_cpus_evenly
from ...topology.model import Topology
from .bound import cached_view

__all__ = ["blk_mq_map_queues", "blk_mq_map_queues_legacy", "hctx_masks",
           "irq_create_affinity_masks", "EINVAL", "ENOSPC", "alloc_descs", "irq_calc_affinity_vectors",
           "msix_allocation", "msix_losses", "compare_blk_mq", "managed_vectors", "compare_irqs"]


def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def blk_mq_map_queues(nr_queues: int, topo: Topology, queue_offset: int = 0,
                      variant: str = "mainline", spread_offset: int = 0) -> dict[int, int]:
    """``qmap->mq_map``: the hardware queue of every possible CPU.

    If ``group_cpus_evenly()`` returns NULL (``nr_queues == 0``) every CPU
    goes to ``queue_offset``, as in the kernel's fallback.

    >>> from numalab.topology import load
    >>> blk_mq_map_queues(3, load("numa:1 core:4 pu:1"))
    {0: 0, 1: 0, 2: 1, 3: 2}
    """
    view = cached_view(topo)
    masks = group_cpus_evenly(nr_queues, view, variant, spread_offset) if nr_queues else None
    if not masks:
        return {c: queue_offset for c in _bits(view.possible)}
    nr_masks = masks.nummasks or len(masks)
    mq_map: dict[int, int] = {}
    for queue in range(nr_queues):
        for cpu in _bits(masks[queue % nr_masks]):
            mq_map[cpu] = queue_offset + queue
    return dict(sorted(mq_map.items()))


def blk_mq_map_queues_legacy(nr_queues: int, topo: Topology, queue_offset: int = 0) -> dict[int, int]:
    """The pre-6.3 ``blk_mq_map_queues()``: present CPUs take queues round
    robin; then the other possible CPUs, each on a fresh queue while any is
    left, else on its first SMT sibling's queue (or a fresh one, wrapping,
    when it is its own first sibling).

    >>> from numalab.topology import load
    >>> blk_mq_map_queues_legacy(2, load("numa:1 core:2 pu:2"))   # 3 joins its sibling 2
    {0: 0, 1: 1, 2: 0, 3: 0}
    """
    view = cached_view(topo)
    mq: dict[int, int] = {c: -1 for c in _bits(view.possible)}

    def queue_index(q: int) -> int:
        return queue_offset + (q % nr_queues)

    q = 0
    for cpu in _bits(view.present):
        if q >= nr_queues:
            break
        mq[cpu] = queue_index(q)
        q += 1
    for cpu in list(mq):
        if mq[cpu] != -1:
            continue
        if q < nr_queues:
            mq[cpu] = queue_index(q)
            q += 1
        else:
            sib = view.sibling[cpu]
            first = (sib & -sib).bit_length() - 1 if sib else cpu
            if first == cpu:
                mq[cpu] = queue_index(q)
                q += 1
            else:
                mq[cpu] = mq[first]
    return mq


def hctx_masks(mq_map: dict[int, int], nr_queues: int, queue_offset: int = 0) -> list[int]:
    """Invert a map: the CPU mask of each hardware queue (``mq/N/cpu_list``).

    >>> hctx_masks({0: 0, 1: 1, 2: 0}, 2)
    [5, 2]
    """
    out = [0] * nr_queues
    for cpu, q in mq_map.items():
        if 0 <= q - queue_offset < nr_queues:
            out[q - queue_offset] |= 1 << cpu
    return out


def irq_create_affinity_masks(nvecs: int, topo: Topology, pre_vectors: int = 0,
                              post_vectors: int = 0, set_size: Sequence[int] | None = None,
                              default_affinity: int | None = None,
                              variant: str = "mainline", first_offset: int = 0
                              ) -> list[tuple[int, bool]] | None:
    """``(mask, is_managed)`` for each of ``nvecs`` vectors, or None when no
    vector is left to spread (the kernel returns NULL).

    ``set_size`` defaults to one set of all spread vectors
    (``default_calc_sets()``); ``default_affinity`` (``irq_default_affinity``)
    defaults to every possible CPU. Under ``variant="rotate"`` set ``i``'s
    call gets ``spread_offset = first_offset + i``.

    >>> from numalab.topology import load     # the kernel's heapsort puts CPU 1 first
    >>> [(bin(m), k) for m, k in irq_create_affinity_masks(3, load("numa:1 core:2 pu:1"), 1)]
    [('0b11', False), ('0b10', True), ('0b1', True)]
    """
    view = cached_view(topo)
    default = view.possible if default_affinity is None else default_affinity
    affvecs = nvecs - pre_vectors - post_vectors if nvecs > pre_vectors + post_vectors else 0
    sets = list(set_size) if set_size is not None else [affvecs]
    if not affvecs:
        return None
    masks = [0] * nvecs
    curvec = 0
    while curvec < pre_vectors:
        masks[curvec] = default
        curvec += 1
    usedvecs = 0
    for i, this_vecs in enumerate(sets):
        result = group_cpus_evenly(this_vecs, view, variant, first_offset + i)
        if result is None:
            return None
        nr_masks = result.nummasks
        for j in range(nr_masks):
            masks[curvec + j] = result[j]
        curvec += nr_masks
        usedvecs += nr_masks
    curvec = pre_vectors + (affvecs if usedvecs >= affvecs else usedvecs)
    while curvec < nvecs:
        masks[curvec] = default
        curvec += 1
    return [(m, pre_vectors <= i < nvecs - post_vectors) for i, m in enumerate(masks)]


EINVAL = 22


def alloc_descs(affinity: Sequence[tuple[int, bool]] | None) -> int:
    """The check that opens ``alloc_descs()`` (``kernel/irq/irqdesc.c``, Linux
    7.2): with affinity descriptors given, any empty mask makes it return
    ``-EINVAL`` before a descriptor is allocated; otherwise 0 here (the
    kernel goes on to allocate and returns the first IRQ number). MSI-X
    calls it once per vector (one descriptor each), so the first empty mask
    is where an allocation stops.

    >>> alloc_descs([(0b11, False), (0b01, True)]), alloc_descs([(0b11, False), (0, True)])
    (0, -22)
    >>> alloc_descs(None)
    0
    """
    if affinity is not None and any(not m for m, _ in affinity):
        return -EINVAL
    return 0


ENOSPC = 28


def irq_calc_affinity_vectors(minvec: int, maxvec: int, pre_vectors: int, post_vectors: int = 0,
                              calc_sets: bool = True, possible_cpus: int | None = None) -> int:
    """``irq_calc_affinity_vectors()`` (``kernel/irq/affinity.c``, Linux 7.2):
    how many vectors to ask for. A driver with a ``calc_sets`` callback
    (NVMe) keeps ``maxvec``; otherwise the spread vectors are capped at the
    possible CPUs (``possible_cpus``, required then). 0 if the reserved
    vectors exceed ``minvec``.

    >>> irq_calc_affinity_vectors(1, 9, 1), irq_calc_affinity_vectors(1, 9, 1, calc_sets=False, possible_cpus=4)
    (9, 5)
    """
    resv = pre_vectors + post_vectors
    if resv > minvec:
        return 0
    if calc_sets:
        set_vecs = maxvec - resv
    elif possible_cpus is None:
        raise ValueError("possible_cpus is needed without calc_sets")
    else:
        set_vecs = possible_cpus
    return resv + min(set_vecs, maxvec - resv)


def msix_allocation(nvecs: int, topo: Topology, pre_vectors: int = 1,
                    variant: str = "mainline", first_offset: int = 0, minvec: int = 1,
                    hwsize: int | None = None) -> dict:
    """What an MSI-X allocation asking for ``nvecs`` vectors (``pre_vectors``
    of them unmanaged, as NVMe's admin queue) ends with:
    ``__pci_enable_msix_range()`` (``drivers/pci/msi/msi.c``, Linux 7.2)
    and what it calls, each attempt in order.

    ``nvecs`` is first capped at the device's table size ``hwsize`` (if
    given). One attempt: ``irq_calc_affinity_vectors()`` (a driver with
    ``calc_sets``, as NVMe), then ``irq_create_affinity_masks()`` with one
    interrupt set (NVMe without write or poll queues: one
    ``group_cpus_evenly()`` call), then ``alloc_descs()`` vector by vector
    (:func:`alloc_descs`). At the first empty mask the descriptor fails with
    ``-EINVAL``; ``msi_handle_pci_fail()`` (``kernel/irq/msi.c``, PCI MSI
    domains only) turns it into the number of vectors allocated before it,
    or ``-ENOSPC`` if there were none; the failed attempt's vectors are
    freed, and ``__pci_enable_msix_range()`` loops with that many, or gives
    ``-ENOSPC`` below ``minvec`` (the MSI and INTx fallbacks of
    ``pci_alloc_irq_vectors_affinity()`` are not modelled). So an empty mask
    costs the vectors from it onward; the driver sees fewer vectors, not an
    error.

    Spread offsets: the first attempt's call gets ``first_offset``, each
    retry the next one, as when no other caller of ``group_cpus_evenly()``
    comes between (under rotate the offset is one global counter, and
    asynchronous probing can interleave other devices' calls).

    Returns ``vectors`` (granted, or a negative errno), ``masks`` (of the
    granted vectors), ``errno`` and ``empty`` (of the first attempt: what
    ``alloc_descs()`` made of it), and ``attempts`` (per attempt:
    ``vectors``, ``spread_offset``, ``empty``, ``errno``).

    >>> from numalab.models.irq.sweep import clustered_view
    >>> r = msix_allocation(6, clustered_view(1, (4, 1)), 1, "rotate", 1)  # clusters {0-3}, {4}
    >>> r["errno"], r["vectors"], [a["spread_offset"] for a in r["attempts"]]
    (-22, 5, [1, 2])
    """
    nvec, offset, attempts = nvecs, first_offset, []
    if hwsize is not None:
        nvec = min(nvec, hwsize)
    first = None
    while True:
        nvec = irq_calc_affinity_vectors(minvec, nvec, pre_vectors, 0, True)
        if nvec < minvec:
            return {"vectors": -ENOSPC, "masks": [], "attempts": attempts,
                    **(first or {"errno": 0, "empty": []})}
        masks = irq_create_affinity_masks(nvec, topo, pre_vectors, variant=variant,
                                          first_offset=offset)
        empty = [i for i, (m, _) in enumerate(masks or []) if not m]
        errno = alloc_descs(masks) if masks is not None else 0
        attempts.append({"vectors": nvec, "spread_offset": offset if masks is not None else None,
                         "empty": empty, "errno": errno})
        if first is None:
            first = {"errno": errno, "empty": empty}
        if masks is not None:
            offset += 1
        if not errno:
            return {"vectors": nvec, "masks": [m for m, _ in masks] if masks else [],
                    "attempts": attempts, **first}
        allocated = empty[0]                   # msi_handle_pci_fail(): vectors before it
        if allocated == 0 or allocated < minvec:
            return {"vectors": -ENOSPC, "masks": [], "attempts": attempts, **first}
        nvec = allocated


def msix_losses(topo: Topology, spread: Sequence[int], offsets: Sequence[int],
                pre_vectors: int = 1) -> pd.DataFrame:
    """For each count ``k`` of spread vectors in ``spread``: what
    :func:`msix_allocation` of ``k + pre_vectors`` vectors ends with under
    mainline, and under rotate at each first offset of ``offsets``.

    One row per ``k``: ``vectors spread``, ``mainline: vectors granted``,
    ``rotate: offsets losing vectors`` (how many of the offsets end with
    fewer vectors than asked), ``rotate: offsets whose first attempt
    fails``, and, over the offsets, the distinct ``rotate: vectors
    granted``, ``rotate: I/O queues lost`` and ``rotate: allocation
    attempts`` (joined by "or"), plus ``max lost`` (an int).

    >>> from numalab.models.irq.sweep import clustered_view
    >>> df = msix_losses(clustered_view(1, (4, 1)), [4, 5], [1, 2])
    >>> df[["vectors spread", "rotate: offsets losing vectors", "rotate: I/O queues lost"]].values.tolist()
    [[4, 0, '0'], [5, 2, '1']]
    """
    rows = []
    for k in spread:
        asked = k + pre_vectors
        main = msix_allocation(asked, topo, pre_vectors, "mainline")
        rot = [msix_allocation(asked, topo, pre_vectors, "rotate", o) for o in offsets]
        lost = sorted({asked - r["vectors"] for r in rot})
        rows.append({"vectors spread": k, "mainline: vectors granted": main["vectors"],
                     "rotate: offsets losing vectors": sum(1 for r in rot if r["vectors"] < asked),
                     "rotate: offsets whose first attempt fails": sum(1 for r in rot if r["errno"]),
                     "rotate: vectors granted": " or ".join(str(asked - x) for x in lost),
                     "rotate: I/O queues lost": " or ".join(map(str, lost)),
                     "rotate: allocation attempts": " or ".join(
                         str(x) for x in sorted({len(r["attempts"]) for r in rot})),
                     "max lost": max(lost)})
    return pd.DataFrame(rows)


def compare_blk_mq(topo: Topology, label: str | None = None) -> pd.DataFrame:
    """One row per disk of ``topo.blk_mq``: its hardware queue count, the
    observed ``cpu_list`` of each queue, and whether the current
    ``blk_mq_map_queues()`` (``match``) and the pre-6.3 one
    (``match_legacy``) predict exactly that map."""
    rows = []
    for disk, observed in sorted(topo.blk_mq.items()):
        n = len(observed)
        cur = hctx_masks(blk_mq_map_queues(n, topo), n)
        old = hctx_masks(blk_mq_map_queues_legacy(n, topo), n)
        rows.append({"dataset": label or topo.name, "kernel": topo.meta.get("kernel"),
                     "disk": disk, "hw_queues": n,
                     "observed": " | ".join(format_cpulist(m) for m in observed),
                     "predicted": " | ".join(format_cpulist(m) for m in cur),
                     "match": cur == list(observed), "match_legacy": old == list(observed)})
    return pd.DataFrame(rows, columns=["dataset", "kernel", "disk", "hw_queues", "observed",
                                       "predicted", "match", "match_legacy"])


# Names under which drivers register their managed queue vectors, and the
# vector index each name stands for (pre_vectors = 1: admin / config vector).
_QUEUE_IRQ = [
    (re.compile(r"^nvme\d+q(\d+)$"), lambda m: int(m.group(1))),
    (re.compile(r"^virtio\d+-req\.(\d+)$"), lambda m: int(m.group(1)) + 1),
]


def managed_vectors(topo: Topology) -> dict[str, dict[int, int]]:
    """For every PCI function whose IRQ names look like queue vectors
    (``nvmeXqY`` with Y >= 1, ``virtioN-req.K``): ``{vector index: observed
    smp_affinity}``, keyed by PCI address (from the IRQ chip name)."""
    out: dict[str, dict[int, int]] = {}
    for irq in topo.irqs:
        if irq.smp_affinity is None:
            continue
        addr = irq.chip.split("-", 2)[-1] if irq.chip.startswith("PCI-MSI") else None
        for name in irq.name.split(","):
            name = name.strip()
            for pat, index in _QUEUE_IRQ:
                m = pat.match(name)
                if m and addr and index(m) >= 1:
                    out.setdefault(addr, {})[index(m)] = irq.smp_affinity
    return out


def compare_irqs(topo: Topology, pre_vectors: int = 1, label: str | None = None) -> pd.DataFrame:
    """One row per queue vector found by :func:`managed_vectors`: the
    observed affinity, the one ``irq_create_affinity_masks(msi_vectors,
    pre_vectors)`` predicts, and whether they agree. ``msi_vectors`` comes
    from the PCI function (``msi_irqs/``)."""
    vec = {p.address: p.msi_vectors for p in topo.pci}
    rows = []
    for addr, seen in sorted(managed_vectors(topo).items()):
        n = vec.get(addr) or (max(seen) + 1)
        pred = irq_create_affinity_masks(n, topo, pre_vectors) or []
        for i, obs in sorted(seen.items()):
            p = pred[i][0] if i < len(pred) else None
            rows.append({"dataset": label or topo.name, "device": addr, "vectors": n,
                         "vector": i, "observed": format_cpulist(obs),
                         "predicted": format_cpulist(p) if p is not None else None,
                         "match": p == obs})
    return pd.DataFrame(rows, columns=["dataset", "device", "vectors", "vector", "observed",
                                       "predicted", "match"])
