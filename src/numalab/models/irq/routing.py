"""Where an I/O's completion interrupt fires: blk-mq routing and the x86 effective CPU.

Two kernel facts decide which CPU takes the interrupt of an I/O submitted on
CPU ``c`` to an NVMe disk (Linux 7.2, read in the Debian source):

1. **Queue.** ``nvme_pci_map_queues()`` calls ``blk_mq_map_hw_queues()``
   (``block/blk-mq-cpumap.c``): for each hardware queue ``q`` in order, every
   CPU of the managed mask of vector ``q + 1`` (vector 0 is the admin queue)
   maps to ``q``. The I/O goes to the queue whose mask holds ``c``, and its
   completion raises that queue's vector. :func:`hw_queue_map`.
2. **Effective CPU.** A managed vector's interrupt is delivered to one CPU
   of its mask, chosen when the vector is activated by
   ``matrix_find_best_cpu_managed()`` (``kernel/irq/matrix.c``, x86): the
   online CPU of the mask with the fewest managed vectors already allocated,
   ties going to the *last* such CPU (the loop skips only a CPU with more).
   :func:`effective_cpus`.

So the interrupt rate of a vector is the rate of submissions from the CPUs
mapped to it, and all of it lands on the vector's effective CPU
(:func:`interrupt_counts`). :func:`lab_routing_table` checks both facts
against a lab dump made with ``numalab lab run --io`` (each CPU reads
``count`` blocks from each disk with ``dd iflag=direct``, pinned with
``taskset``; the dump holds ``/proc/interrupts`` before and after), and
:func:`effective_consistency` checks rule 2 on any lab dump's effective CPUs.

>>> hw_queue_map([0b0011, 0b1100])
{0: 0, 1: 0, 2: 1, 3: 1}
>>> effective_cpus([[0b0011, 0b1100], [0b0011, 0b1100]])
[[1, 3], [0, 2]]
>>> interrupt_counts([[0b0011, 0b1100]], [[1, 3]], [{0: 16, 1: 16, 2: 16}])
{1: 32, 3: 16}
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["hw_queue_map", "effective_cpus", "interrupt_counts", "effective_consistency",
           "lab_io_counts", "lab_routing_table"]


def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def hw_queue_map(masks: Sequence[int]) -> dict[int, int]:
    """``blk_mq_map_hw_queues()``: ``{cpu: queue}`` from the queues' masks in
    queue order (a CPU in two masks ends on the later queue, as in the
    kernel's loop). CPUs in no mask are absent.

    >>> hw_queue_map([0b110, 0b011])
    {1: 1, 2: 0, 0: 1}
    """
    out: dict[int, int] = {}
    for q, m in enumerate(masks):
        for c in _bits(m):
            out[c] = q
    return out


def _best(mask: int, allocated: dict[int, int], online: int | None) -> int | None:
    best, fewest = None, None
    for c in _bits(mask):
        if online is not None and not online >> c & 1:
            continue
        n = allocated.get(c, 0)
        if fewest is not None and n > fewest:
            continue
        best, fewest = c, n
    return best


def effective_cpus(devices: Sequence[Sequence[int]], online: int | None = None,
                   order: Sequence[tuple[int, int]] | None = None,
                   allocated: dict[int, int] | None = None) -> list[list[int | None]]:
    """The effective CPU of every vector (``matrix_find_best_cpu_managed()``).

    ``devices[d][q]`` is the managed mask of device ``d``'s vector ``q``;
    vectors are activated in ``order`` (``(d, q)`` pairs; default device
    after device, each in queue order); ``allocated`` (updated in place) is
    the managed vectors each CPU already had. An empty mask, or one with no
    online CPU, gets None (the kernel's ``-ENOSPC``).

    >>> effective_cpus([[0b11, 0b01]])      # CPU 1 wins the tie; then CPU 0 is alone
    [[1, 0]]
    >>> effective_cpus([[0b11], [0b11]], order=[(1, 0), (0, 0)])
    [[0], [1]]
    """
    alloc = allocated if allocated is not None else {}
    out: list[list[int | None]] = [[None] * len(m) for m in devices]
    seq = order if order is not None else [(d, q) for d, m in enumerate(devices)
                                           for q in range(len(m))]
    for d, q in seq:
        c = _best(devices[d][q], alloc, online)
        out[d][q] = c
        if c is not None:
            alloc[c] = alloc.get(c, 0) + 1
    return out


def interrupt_counts(devices: Sequence[Sequence[int]], effective: Sequence[Sequence[int | None]],
                     submissions: Sequence[dict[int, float]]) -> dict[int, float]:
    """Interrupts per CPU: each I/O that CPU ``c`` submits to device ``d``
    (``submissions[d][c]``) goes to the queue whose mask holds ``c``
    (:func:`hw_queue_map`) and completes on that vector's effective CPU.
    I/O from a CPU in no mask is dropped (blk-mq would have used its
    fallback map). Returns ``{cpu: interrupts}`` for CPUs that take any.

    >>> interrupt_counts([[0b01, 0b10]], [[0, 1]], [{0: 5.0, 1: 2.0}])
    {0: 5.0, 1: 2.0}
    """
    out: dict[int, float] = {}
    for masks, eff, subs in zip(devices, effective, submissions):
        qmap = hw_queue_map(masks)
        for c, n in subs.items():
            q = qmap.get(c)
            if q is None or not n or eff[q] is None:
                continue
            e = eff[q]
            out[e] = out.get(e, 0) + n
    return dict(sorted(out.items()))


def effective_consistency(controllers: Sequence[Sequence[tuple[int, int]]]) -> tuple[int, int]:
    """How many observed effective CPUs the x86 rule reproduces, and of how many.

    ``controllers[k]`` lists controller ``k``'s vectors in queue order as
    ``(mask, observed effective CPU)``. Controllers probe in parallel, so
    their activations interleave in an order the dump does not record; this
    replays them greedily, at each step activating a controller's next
    vector that the rule assigns to its observed CPU (the lowest controller
    index among those), or, when none fits, the first controller's next
    vector (counted as a miss). A full count means the observed CPUs are
    consistent with the rule for the interleaving found.

    >>> effective_consistency([[(0b11, 1)], [(0b11, 0)]])
    (2, 2)
    >>> effective_consistency([[(0b11, 0)]])
    (0, 1)
    """
    pos = [0] * len(controllers)
    alloc: dict[int, int] = {}
    hits = total = 0
    while True:
        live = [k for k, s in enumerate(controllers) if pos[k] < len(s)]
        if not live:
            return hits, total
        fit = [k for k in live
               if _best(controllers[k][pos[k]][0], alloc, None) == controllers[k][pos[k]][1]]
        k = (fit or live)[0]
        mask, seen = controllers[k][pos[k]]
        c = _best(mask, alloc, None)
        if c is not None:
            alloc[c] = alloc.get(c, 0) + 1
        hits += c == seen
        total += 1
        pos[k] += 1


def lab_io_counts(dump: str) -> dict[str, int] | None:
    """The ``--io`` parameters a lab dump recorded (``cpus``, ``count`` reads
    of ``bs`` bytes per CPU and disk), or None for a dump made without it."""
    from ...topology.safetar import read_archive
    tree = read_archive(dump)
    top = sorted(tree.children.get("", ()))[0]
    raw = tree.read(f"{top}/numalab/lab/io")
    if raw is None:
        return None
    out = {}
    for item in raw.decode().split():
        k, _, v = item.partition("=")
        out[k] = int(v)
    return out


def lab_routing_table(dump: str):
    """One row per NVMe I/O queue of an ``--io`` lab dump: its managed mask
    and effective CPU as the kernel set them (measured), the CPUs blk-mq
    maps to it (measured, ``/sys/block/*/mq``), the interrupts the routing
    predicts on each CPU (``count`` reads from each mapped CPU, all on the
    effective CPU) and the interrupts ``/proc/interrupts`` counted during
    the reads (measured), with their equality."""
    import pandas as pd

    from ...cpumask import format_cpulist
    from ...lab.dump import read_lab_dump
    d = read_lab_dump(dump)
    io = lab_io_counts(dump)
    if io is None or d.io_deltas is None:
        raise ValueError(f"{dump}: not made with --io (no interrupt counts)")
    rows = []
    for ctrl in d.nvme:
        qs = [q for q in ctrl.irqs if q.queue is not None and q.queue >= 1]
        masks = [q.smp_affinity or 0 for q in qs]
        eff = [[(q.effective_affinity.bit_length() - 1) if q.effective_affinity else None
                for q in qs]]
        blk = {}
        for disk in ctrl.disks:
            for h, m in d.blk_mq.get(disk, {}).items():
                blk[h] = blk.get(h, 0) | m
        for i, q in enumerate(qs):
            mapped = sum(1 << c for c, h in hw_queue_map(masks).items() if h == i)
            subs = {c: io["count"] for c in _bits(mapped)}
            pred = interrupt_counts([[masks[i]]], [[eff[0][i]]], [subs])
            seen = {c: n for c, n in enumerate(d.io_deltas.get(str(q.irq), ())) if n}
            rows.append({"dump": d.name, "controller": ctrl.controller, "queue": q.queue,
                         "irq": q.irq, "mask": q.smp_affinity_list,
                         "effective_cpu": q.effective_affinity_list,
                         "blk_mq_cpus": format_cpulist(blk.get(i, 0)),
                         "mapped_cpus": format_cpulist(mapped),
                         "predicted": ", ".join(f"cpu{c}:{int(n)}" for c, n in pred.items()),
                         "measured": ", ".join(f"cpu{c}:{n}" for c, n in seen.items()),
                         "equal": {c: int(n) for c, n in pred.items()} == seen
                                  and blk.get(i, 0) == mapped})
    return pd.DataFrame(rows)
