"""``drivers/pci/pci-driver.c``: where ``pci_call_probe()`` runs a PCI probe.

Mainline (before either patch of the probing chapter), the rule is::

    node = dev_to_node(&dev->dev);
    if (node < 0 || node >= MAX_NUMNODES || !node_online(node) ||
        pci_physfn_is_probed(dev))
            cpu = nr_cpu_ids;                      /* probe right here */
    else
            cpu = cpumask_any_and(cpumask_of_node(node),
                                  HK_TYPE_WQ & HK_TYPE_DOMAIN);
    if (cpu < nr_cpu_ids)
            work_on_cpu(cpu, local_pci_probe, &ddi);   /* bound kworker */
    else
            local_pci_probe(&ddi);

``cpumask_any_and()`` is the *first* CPU of the intersection, so every probe
of a node lands on the same CPU. The PF_WQ_WORKER fix ("PCI: skip
work_on_cpu() in an unbound async probe worker"-style patch) adds
``|| (current->flags & PF_WQ_WORKER)`` to the first condition.

Linux 7.2 (Debian ``linux-source-7.2`` 7.2.13, ``drivers/pci/pci-driver.c``)
has the code of Frederic Weisbecker's housekeeping series instead, the
"before" that the v2 driver-core series was rebased on::

    rcu_read_lock();
    cpu = cpumask_any_and(cpumask_of_node(node),
                          housekeeping_cpumask(HK_TYPE_DOMAIN));
    if (cpu < nr_cpu_ids) {
            queue_work_on(cpu, pci_probe_wq, &arg.work);  /* WQ_PERCPU "sync_wq" */
            rcu_read_unlock();
            flush_work(&arg.work);
    } else {
            rcu_read_unlock();
            error = local_pci_probe(&ddi);
    }

``HK_TYPE_WQ`` is gone from the choice, the target election and the enqueue
sit in one RCU read section, and ``housekeeping_update()`` (a cpuset
isolated partition changing at runtime) calls ``pci_probe_flush_workqueue()``
after ``synchronize_rcu()``: once the partition write returns, no PCI probe
elected with the old mask is still running (see
:mod:`numalab.kernel.sched.isolation`). ``pci_probe_wq`` is a per-CPU
workqueue, so its work runs in the same bound ``kworker/CPU:ID`` pool as
``work_on_cpu()``'s.

The v2 driver-core series ("[PATCH v2 0/3] Add NUMA-node-aware synchronous
probing to driver core") deletes this code and the flush hook
(``include/linux/pci.h | 4 --``, ``kernel/sched/isolation.c | 2 -``): PCI
then always probes locally.
"""

from __future__ import annotations

from numalab.topology.model import Topology
from numalab.kernel.sched.isolation import HK_TYPE_DOMAIN, HK_TYPE_WQ, Housekeeping, housekeeping_cpumask
from numalab.kernel.workqueue import cpumask_any_and, node_online

__all__ = ["MAX_NUMNODES", "PCI_PROBE_WQ", "PCI_CALL_PROBE_KERNELS", "pci_physfn_is_probed",
           "pci_call_probe_cpu"]

MAX_NUMNODES = 1 << 10   # CONFIG_NODES_SHIFT=10, the x86_64 distribution default
PCI_PROBE_WQ = "sync_wq"  # 7.2: alloc_workqueue("sync_wq", WQ_PERCPU, 0) in pci_driver_init()
# The two versions of pci_call_probe() ported here: 6.12 (work_on_cpu(), HK_TYPE_WQ and
# HK_TYPE_DOMAIN) and 7.2 (queue_work_on(pci_probe_wq), HK_TYPE_DOMAIN only).
PCI_CALL_PROBE_KERNELS = ("6.12", "7.2")


def pci_physfn_is_probed(is_virtfn: bool, physfn_is_probed: bool) -> bool:
    """True for a VF whose PF is inside ``pci_call_probe()`` right now
    (``dev->is_virtfn && dev->physfn->is_probed`` with CONFIG_PCI_IOV)."""
    return bool(is_virtfn and physfn_is_probed)


def pci_call_probe_cpu(topo: Topology, hk: Housekeeping, node: int, *,
                       is_virtfn: bool = False, physfn_is_probed: bool = False,
                       in_wq_worker: bool = False, pf_wq_worker_fix: bool = False,
                       kernel: str = "6.12") -> int:
    """The CPU ``pci_call_probe()`` hands the probe to, or ``nr_cpu_ids`` for
    "probe in the calling thread".

    Inputs: the machine and its housekeeping options; the device's node
    (``dev_to_node()``, -1 for none); whether it is a VF whose PF is being
    probed; whether the caller is a workqueue worker (``PF_WQ_WORKER``, set
    for bound and unbound kworkers alike) and whether the fix that tests it
    is applied (a 6.12 patch: ``kernel="7.2"`` refuses it); ``kernel`` picks
    the housekeeping mask of that version (see the module docstring).

    >>> from numalab.topology.model import Topology, Node, CPU
    >>> t = Topology("t", possible=0xff, online=0xff,
    ...              cpus={i: CPU(i, node=i // 4) for i in range(8)},
    ...              nodes={0: Node(0, 0x0f), 1: Node(1, 0xf0)})
    >>> hk = Housekeeping(possible=0xff, isolcpus=0x30)      # CPUs 4,5 isolated
    >>> pci_call_probe_cpu(t, hk, 1), pci_call_probe_cpu(t, hk, -1)
    (6, 8)
    >>> pci_call_probe_cpu(t, hk, 1, in_wq_worker=True, pf_wq_worker_fix=True)
    8
    >>> nohz = Housekeeping(possible=0xff, nohz_full=0x10)   # CPU 4: nohz_full only
    >>> pci_call_probe_cpu(t, nohz, 1), pci_call_probe_cpu(t, nohz, 1, kernel="7.2")
    (5, 4)
    """
    if kernel not in PCI_CALL_PROBE_KERNELS:
        raise ValueError(f"pci_call_probe() is ported for {', '.join(PCI_CALL_PROBE_KERNELS)}, "
                         f"not {kernel!r}")
    if kernel == "7.2" and pf_wq_worker_fix:
        raise ValueError("the PF_WQ_WORKER fix was posted against the 6.12 code (work_on_cpu())")
    nr_cpu_ids = topo.nr_cpu_ids
    if (node < 0 or node >= MAX_NUMNODES or not node_online(topo, node)
            or pci_physfn_is_probed(is_virtfn, physfn_is_probed)
            or (pf_wq_worker_fix and in_wq_worker)):
        return nr_cpu_ids
    if kernel == "7.2":
        wq_domain_mask = housekeeping_cpumask(hk, HK_TYPE_DOMAIN)
    else:
        wq_domain_mask = (housekeeping_cpumask(hk, HK_TYPE_WQ)
                          & housekeeping_cpumask(hk, HK_TYPE_DOMAIN))
    # The kernel's cpumask_of_node() holds online CPUs only (x86 and the generic
    # code update it at CPU online/offline), while a dump's nodeN/cpulist may be
    # older than the online map; intersecting keeps that difference out.
    return cpumask_any_and(topo.cpumask_of_node(node) & topo.online, wq_domain_mask, nr_cpu_ids)
