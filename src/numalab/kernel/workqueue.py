"""The CPU choices of ``kernel/workqueue.c`` that decide where a probe runs.

Only the choices are ported, not the pools themselves (the event-driven
pools live in :mod:`numalab.models.probe.sim`):

* :func:`work_on_cpu` target: ``work_on_cpu(cpu, fn, arg)`` queues ``fn`` on
  ``system_percpu_wq`` (formerly ``system_wq``) with ``queue_work_on(cpu)``
  and waits for it. The work runs in a *bound* kworker of ``cpu``'s per-CPU
  pool, named ``kworker/CPU:ID``; the caller sleeps meanwhile.
* :func:`select_numa_node_cpu`: what ``queue_work_node(node, wq, work)``
  passes to ``__queue_work()`` for an unbound workqueue.
* :func:`wq_unbound_cpumask`: the CPUs unbound workers may use: the
  ``HK_TYPE_WQ`` and ``HK_TYPE_DOMAIN`` housekeeping CPUs in 6.12
  (``nohz_full=`` and ``isolcpus=domain`` both shrink it), ``HK_TYPE_DOMAIN``
  only in 7.2 (``nohz_full=`` does not).
* :func:`unbound_pod_cpus`: the *pod* (affinity scope) whose pool serves a
  CPU; the default scope is ``cache`` (CPUs sharing the last-level cache).

* :func:`wq_node_max_active`: since Linux 6.9 an unbound workqueue's
  ``max_active`` is shared out per node (``wq_update_node_max_active()``),
  in proportion to the node's CPUs, never below ``min_active``
  (``min(max_active, WQ_DFL_MIN_ACTIVE)``, 8). :data:`WQ_LIMITS` gives
  ``WQ_MAX_ACTIVE`` / ``WQ_DFL_ACTIVE`` per kernel (``include/linux/workqueue.h``
  of Debian's ``linux-source-6.12`` and ``linux-source-7.2``); ``system_dfl_wq``
  (``events_unbound``) is allocated with ``WQ_MAX_ACTIVE``, ``async_wq`` with 0,
  i.e. ``WQ_DFL_ACTIVE``.

``WORK_CPU_UNBOUND`` is ``NR_CPUS`` in the kernel; here it is the string
``"unbound"`` so that it can never be mistaken for a CPU number.
"""

from __future__ import annotations

from numalab.topology.model import Topology
from numalab.kernel.sched.isolation import HK_TYPE_DOMAIN, HK_TYPE_WQ, Housekeeping, housekeeping_cpumask

__all__ = ["WORK_CPU_UNBOUND", "WQ_DFL_ACTIVE", "WQ_CPU_INTENSIVE_THRESH_US",
           "cpumask_any_and", "select_numa_node_cpu", "wq_unbound_cpumask",
           "unbound_pod_cpus", "AFFINITY_SCOPES", "WQ_DFL_MIN_ACTIVE", "WQ_LIMITS",
           "workqueue_max_active", "wq_node_max_active"]

WORK_CPU_UNBOUND = "unbound"
WQ_DFL_ACTIVE = 256                  # WQ_MAX_ACTIVE / 2: default max_active
WQ_CPU_INTENSIVE_THRESH_US = 10000   # workqueue.cpu_intensive_thresh_us default
AFFINITY_SCOPES = ("cpu", "smt", "cache", "numa", "system")
WQ_DFL_MIN_ACTIVE = 8                # per-node floor of an unbound wq's max_active (6.9+)
# kernel -> (WQ_MAX_ACTIVE, WQ_DFL_ACTIVE) in include/linux/workqueue.h
WQ_LIMITS = {"6.12": (512, 256), "7.2": (2048, 1024)}


def workqueue_max_active(wq: str, kernel: str = "6.12") -> int:
    """``max_active`` of the unbound workqueues the probe paths use:
    ``system_dfl_wq`` (``alloc_workqueue("events_unbound", WQ_UNBOUND,
    WQ_MAX_ACTIVE)``) and ``async_wq`` (``alloc_workqueue("async",
    WQ_UNBOUND, 0)``: 0 means ``WQ_DFL_ACTIVE``).

    >>> workqueue_max_active("system_dfl_wq"), workqueue_max_active("async", "7.2")
    (512, 1024)
    """
    if kernel not in WQ_LIMITS:
        raise ValueError(f"workqueue limits known for {', '.join(WQ_LIMITS)}, not {kernel!r}")
    mx, dfl = WQ_LIMITS[kernel]
    return mx if wq == "system_dfl_wq" else dfl


def wq_node_max_active(max_active: int, node_cpus: int, total_cpus: int) -> int:
    """A node's share of an unbound workqueue's ``max_active``
    (``wq_update_node_max_active()``, Linux 6.9+): ``clamp(DIV_ROUND_UP(
    max_active * node_cpus, total_cpus), min_active, max_active)`` with
    ``min_active = min(max_active, WQ_DFL_MIN_ACTIVE)``; ``min_active`` for
    every node when no CPU of the workqueue is online.

    >>> wq_node_max_active(512, 16, 32), wq_node_max_active(512, 1, 256), wq_node_max_active(4, 1, 2)
    (256, 8, 4)
    """
    min_active = min(max_active, WQ_DFL_MIN_ACTIVE)
    if total_cpus <= 0:
        return min_active
    share = -(-max_active * node_cpus // total_cpus)
    return max(min_active, min(share, max_active))


def cpumask_any_and(a: int, b: int, nr_cpu_ids: int) -> int:
    """``cpumask_any_and()``: the kernel defines "any" as the *first* CPU.

    Returns ``nr_cpu_ids`` when the intersection is empty, as the kernel does.

    >>> cpumask_any_and(0b1100, 0b0110, 4)
    2
    >>> cpumask_any_and(0b1000, 0b0110, 4)
    4
    """
    m = a & b
    return (m & -m).bit_length() - 1 if m else nr_cpu_ids


def node_online(topo: Topology, node: int) -> bool:
    """``node_online()`` for a node id: a node the topology knows.

    A node that exists but has no CPUs (memory-only) is online too: the
    kernel then finds no CPU in it and falls back, which the callers model.
    """
    return node in topo.nodes


def select_numa_node_cpu(topo: Topology, node: int, current_cpu: int) -> int | str:
    """The CPU ``queue_work_node()`` queues on, for a caller on ``current_cpu``.

    Kernel rule, in order: an invalid or offline node -> ``WORK_CPU_UNBOUND``;
    the caller's own CPU when it already is on ``node``; else the first
    online CPU of ``node`` (the kernel's comment calls it "random"; it is
    ``cpumask_any_and()``, i.e. the first); none -> ``WORK_CPU_UNBOUND``.

    >>> from numalab.topology.model import Topology, Node, CPU
    >>> t = Topology("t", possible=0xff, online=0xff,
    ...              cpus={i: CPU(i, node=i // 4) for i in range(8)},
    ...              nodes={0: Node(0, 0x0f), 1: Node(1, 0xf0)})
    >>> select_numa_node_cpu(t, 1, 2), select_numa_node_cpu(t, 1, 6), select_numa_node_cpu(t, -1, 2)
    (4, 6, 'unbound')
    """
    if node < 0 or not node_online(topo, node):
        return WORK_CPU_UNBOUND
    if topo.cpu_to_node(current_cpu) == node:
        return current_cpu
    cpu = cpumask_any_and(topo.cpumask_of_node(node), _online(topo), topo.nr_cpu_ids)
    return cpu if cpu < topo.nr_cpu_ids else WORK_CPU_UNBOUND


def _online(topo: Topology) -> int:
    return topo.online or topo.present or topo.possible or sum(1 << c for c in topo.cpus)


def wq_unbound_cpumask(topo: Topology, hk: Housekeeping, kernel: str = "7.2") -> int:
    """CPUs unbound workqueue workers may use (``wq_unbound_cpumask`` at boot).

    ``workqueue_init_early()`` starts from the possible CPUs and restricts
    them with ``restrict_unbound_cpumask()``, which skips a mask that would
    leave nothing. Linux 6.12 restricts with ``housekeeping_cpumask(HK_TYPE_WQ)``
    then ``HK_TYPE_DOMAIN`` (workqueue.c 6.12:7805-7806), so ``nohz_full=``
    (which clears ``HK_TYPE_WQ``) shrinks it; Linux 7.2 with ``HK_TYPE_DOMAIN``
    only (7.2:8030; its ``HK_TYPE_WQ`` is an alias of ``HK_TYPE_KERNEL_NOISE``
    that workqueue.c no longer reads), so only ``isolcpus=domain`` does.
    Only online CPUs are returned (the model's CPUs are all online).

    >>> from numalab.topology.model import Topology, CPU, Node
    >>> t = Topology("t", possible=0xff, online=0xff, cpus={i: CPU(i, node=0) for i in range(8)},
    ...              nodes={0: Node(0, 0xff)})
    >>> hk = Housekeeping(possible=0xff, isolcpus=0x03, nohz_full=0xf0)
    >>> hex(wq_unbound_cpumask(t, hk, "6.12")), hex(wq_unbound_cpumask(t, hk, "7.2"))
    ('0xc', '0xfc')
    """
    if kernel not in ("6.12", "7.2"):
        raise ValueError(f"wq_unbound_cpumask() is ported for 6.12 and 7.2, not {kernel!r}")
    m = hk.possible or _online(topo)
    types = (HK_TYPE_WQ, HK_TYPE_DOMAIN) if kernel == "6.12" else (HK_TYPE_DOMAIN,)
    for type_ in types:
        r = housekeeping_cpumask(hk, type_)
        if m & r:                      # restrict_unbound_cpumask(): never to nothing
            m &= r
    return (m & _online(topo)) or _online(topo)


def unbound_pod_cpus(topo: Topology, cpu: int, scope: str = "cache") -> int:
    """The CPUs of ``cpu``'s pod for an unbound workqueue's affinity scope.

    ``cache`` (the default, ``workqueue.default_affinity_scope``) groups CPUs
    sharing the last-level cache; ``numa`` the node; ``smt`` the core;
    ``cpu`` the CPU alone; ``system`` everything. A topology without cache
    information falls back to the node, then to every CPU.
    """
    if scope not in AFFINITY_SCOPES:
        raise ValueError(f"unknown affinity scope {scope!r} (one of {', '.join(AFFINITY_SCOPES)})")
    c = topo.cpus.get(cpu)
    everything = _online(topo)
    if scope == "system" or c is None:
        return everything
    if scope == "cpu":
        return 1 << cpu
    if scope == "smt":
        return c.thread_siblings or (1 << cpu)
    if scope == "cache" and c.llc_cpus:
        return c.llc_cpus
    node_cpus = topo.cpumask_of_node(c.node)
    return node_cpus or everything
