"""``kernel/sched/isolation.c``: the housekeeping CPU masks.

``isolcpus=domain,...`` (or a cpuset isolated partition) removes CPUs from
``HK_TYPE_DOMAIN``; ``nohz_full=`` removes them from ``HK_TYPE_KERNEL_NOISE``,
of which ``HK_TYPE_WQ`` is an alias in current kernels. A CPU outside a
type's mask must not be given that kind of kernel work. Without either
option every possible CPU is a housekeeping CPU.

Masks are ints (bit i = CPU i), as in :mod:`numalab.cpumask`.

Linux 7.2 (Debian ``linux-source-7.2`` 7.2.13) also lets a cpuset isolated
partition change ``HK_TYPE_DOMAIN`` at runtime (``HK_TYPE_DOMAIN_BOOT`` keeps
the boot-time mask): :func:`housekeeping_update` ports the checks of
``housekeeping_update()``, and :data:`HOUSEKEEPING_UPDATE_STEPS` its steps
in order. The v2 driver-core series removes the ``pci_probe_flush_workqueue()``
step (``kernel/sched/isolation.c | 2 -``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HK_TYPE_DOMAIN", "HK_TYPE_WQ", "Housekeeping", "housekeeping_cpumask", "from_cmdline",
           "HOUSEKEEPING_UPDATE_STEPS", "housekeeping_update_steps", "housekeeping_update"]

HK_TYPE_DOMAIN = "domain"
HK_TYPE_WQ = "wq"


@dataclass(frozen=True)
class Housekeeping:
    """The boot options that shape the housekeeping masks.

    possible:    ``cpu_possible_mask``
    isolcpus:    CPUs given to ``isolcpus=domain,...`` (0: none)
    nohz_full:   CPUs given to ``nohz_full=`` (0: none). A sane setup also
                 isolates them from the domains; the kernel does not force it.
    """

    possible: int
    isolcpus: int = 0
    nohz_full: int = 0


def housekeeping_cpumask(hk: Housekeeping, type_: str) -> int:
    """The CPUs that may do housekeeping work of ``type_``.

    Input: the boot options and ``HK_TYPE_DOMAIN`` or ``HK_TYPE_WQ``.
    Output: a mask (the possible CPUs when the type is not restricted).

    >>> hk = Housekeeping(possible=0xff, isolcpus=0xf0, nohz_full=0xc0)
    >>> hex(housekeeping_cpumask(hk, HK_TYPE_DOMAIN)), hex(housekeeping_cpumask(hk, HK_TYPE_WQ))
    ('0xf', '0x3f')
    """
    if type_ == HK_TYPE_DOMAIN:
        removed = hk.isolcpus
    elif type_ == HK_TYPE_WQ:
        removed = hk.nohz_full
    else:
        raise ValueError(f"unknown housekeeping type {type_!r}")
    mask = hk.possible & ~removed
    # housekeeping_setup() refuses to isolate every CPU: it keeps the boot
    # CPU (the lowest possible one here) as the one housekeeper.
    return mask or (hk.possible & -hk.possible)


# housekeeping_update() in Linux 7.2, in order, after the trial mask is checked:
# publish the new HK_TYPE_DOMAIN mask, wait for every RCU reader (pci_call_probe()
# elects its CPU inside one), flush the workqueues whose work was targeted with the
# old mask, then move the unbound workqueues, timers and kthreads.
HOUSEKEEPING_UPDATE_STEPS = ("rcu_assign_pointer", "synchronize_rcu", "pci_probe_flush_workqueue",
                             "mem_cgroup_flush_workqueue", "vmstat_flush_workqueue",
                             "workqueue_unbound_housekeeping_update",
                             "tmigr_isolated_exclude_cpumask", "kthreads_update_housekeeping")


def housekeeping_update_steps(pci_flush: bool = True) -> tuple[str, ...]:
    """The steps of ``housekeeping_update()``: 7.2's, or without the PCI flush
    (``pci_flush=False``: the v2 driver-core series, which deletes
    ``pci_probe_flush_workqueue()``).

    >>> housekeeping_update_steps(False)[:3]
    ('rcu_assign_pointer', 'synchronize_rcu', 'mem_cgroup_flush_workqueue')
    """
    return tuple(s for s in HOUSEKEEPING_UPDATE_STEPS
                 if pci_flush or s != "pci_probe_flush_workqueue")


def housekeeping_update(hk: Housekeeping, isol_mask: int, online: int) -> Housekeeping:
    """The housekeeping masks after a cpuset isolated partition of ``isol_mask``.

    ``housekeeping_update()``: the new ``HK_TYPE_DOMAIN`` is the boot-time
    mask (``HK_TYPE_DOMAIN_BOOT``, i.e. without ``hk.isolcpus``) minus
    ``isol_mask``; when that leaves no online CPU the kernel refuses with
    ``-EINVAL`` (here ValueError). Input: the boot options, the partition's
    isolated CPUs, the online mask. Output: the options that give the new masks.

    >>> hk = Housekeeping(possible=0xff, isolcpus=0x01)
    >>> hex(housekeeping_cpumask(housekeeping_update(hk, 0x30, 0xff), HK_TYPE_DOMAIN))
    '0xce'
    >>> housekeeping_update(hk, 0xfe, 0xff)
    Traceback (most recent call last):
    ...
    ValueError: housekeeping_update(): no online housekeeping CPU would be left (-EINVAL)
    """
    trial = hk.possible & ~hk.isolcpus & ~isol_mask
    if not trial & online:
        raise ValueError("housekeeping_update(): no online housekeeping CPU would be left "
                         "(-EINVAL)")
    return Housekeeping(possible=hk.possible, isolcpus=hk.isolcpus | isol_mask,
                        nohz_full=hk.nohz_full)


def from_cmdline(cmdline: str, possible: int) -> Housekeeping:
    """The boot options of a kernel command line: ``isolcpus=`` with the
    ``domain`` flag (or no flag, which means domain) and ``nohz_full=``;
    other ``isolcpus`` flags (``managed_irq``, ``nohz``) add no domain CPUs.
    Input: the command line, ``cpu_possible_mask``. Output: :class:`Housekeeping`.

    >>> hk = from_cmdline("console=ttyS0 isolcpus=domain,8-15 nohz_full=4-5", 0xffff)
    >>> hex(hk.isolcpus), hex(hk.nohz_full)
    ('0xff00', '0x30')
    """
    from ...cpumask import parse_cpulist
    iso = nohz = 0
    for word in cmdline.split():
        key, _, val = word.partition("=")
        if key == "isolcpus" and val:
            parts = val.split(",")
            flags = []
            while parts and parts[0] and not parts[0][0].isdigit():
                flags.append(parts.pop(0))
            if not flags or "domain" in flags:
                iso |= parse_cpulist(",".join(parts))
        elif key == "nohz_full" and val:
            nohz |= parse_cpulist(val)
    return Housekeeping(possible=possible, isolcpus=iso & possible, nohz_full=nohz & possible)
