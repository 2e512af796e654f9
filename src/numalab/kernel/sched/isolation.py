"""``kernel/sched/isolation.c``: the housekeeping CPU masks.

``isolcpus=domain,...`` (or a cpuset isolated partition) removes CPUs from
``HK_TYPE_DOMAIN``; ``nohz_full=`` removes them from ``HK_TYPE_KERNEL_NOISE``,
of which ``HK_TYPE_WQ`` is an alias in current kernels. A CPU outside a
type's mask must not be given that kind of kernel work. Without either
option every possible CPU is a housekeeping CPU.

Masks are ints (bit i = CPU i), as in :mod:`numalab.cpumask`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HK_TYPE_DOMAIN", "HK_TYPE_WQ", "Housekeeping", "housekeeping_cpumask"]

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
