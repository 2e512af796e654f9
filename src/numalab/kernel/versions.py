"""Which kernel a port models: the kernel versions numalab knows, and what
differs between their texts.

The ports in this package follow one kernel's text each time they run.
Where the text changed between releases in a way that changes results, the
port takes the version it models (``kernel="7.2"``) and this module says
what that version's text is. Every modelled version was read from Debian's
``linux-source-X`` package of that version (listed in :data:`SOURCES`); the
kernel-C cross-check (``tools/kernel_c/``) compiles those same files.

What changed, and when (upstream commits, first release that has them):

* ``lib/sort.c``: the heapsort pops one element per round and picks the
  left child on ties (``>= 0 ? c : d``) up to 6.8. 0e02ca29a563 ("lib/sort:
  optimize heapsort with double-pop variation") and db946a422260
  ("lib/sort: optimize heapsort for equal elements in sift-down path",
  ``> 0 ? c : d``) are in 6.9; 0bc0c43eafb3 ("lib/sort: optimize heapsort
  for handling final 2 or 3 elements", the final swap) in 6.11. 6.9 and
  6.10 therefore have an intermediate text that no modelled version has.
  Equal keys come out in a different order from each text.
* ``lib/group_cpus.c``: the cluster path (89802ca36c96, "lib/group_cpus:
  make group CPU cluster aware") reached mainline on 2026-02-12 with merge
  136114e0abf0 ("Merge tag 'mm-nonmm-stable-2026-02-12-10-48'"), so 7.0 is
  the first release with it. The ``*nummasks`` out-parameter (b6139a6abf67,
  "lib/group_cpus: Let group_cpu_evenly() return the number of initialized
  masks") came through the block tree for 6.17; before it the function
  ends with ``WARN_ON(nr_present + nr_others < numgrps)``. The
  ``numgrps == 0`` early return is in Debian's 6.12 but not in its 6.1.
* Debian's 6.1 (6.1.192) carries ``lib/group_cpus.c`` although upstream
  6.1 had the code in ``kernel/irq/affinity.c``: a backport, without the
  cluster path or ``nummasks``, and with 6.1's single-pop sort.

>>> parse_release("7.2.13+deb14-amd64"), resolve(None), resolve("6.12.117")
('7.2', '7.2', '6.12')
>>> text("6.1").heapsort, text("7.2").cluster_path
('single-pop', True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import NumalabError

__all__ = ["KNOWN", "NEWEST", "SOURCES", "KernelText", "UnknownKernelError",
           "parse_release", "resolve", "text", "newest"]

KNOWN = ("6.1", "6.12", "7.2")
"""The modelled kernel versions, oldest first."""

NEWEST = KNOWN[-1]
"""What ``kernel=None`` means: the newest modelled kernel."""


@dataclass(frozen=True)
class KernelText:
    """What one modelled kernel's ``lib/sort.c`` and ``lib/group_cpus.c`` are.

    * ``heapsort``: ``"single-pop"`` (``sort_r()`` up to 6.8) or
      ``"double-pop"`` (6.11 and later), see :mod:`numalab.kernel.lib.sort`;
    * ``cluster_path``: ``__try_group_cluster_cpus()`` exists;
    * ``nummasks``: ``group_cpus_evenly()`` has the ``*nummasks`` out-parameter
      (else it ends with ``WARN_ON(nr_present + nr_others < numgrps)``);
    * ``zero_check``: ``group_cpus_evenly(0)`` returns NULL (else the
      kernel writes through the ``ZERO_SIZE_PTR`` that ``kcalloc(0)`` gave);
    * ``source``: the Debian package the text was read from.
    """

    version: str
    heapsort: str
    cluster_path: bool
    nummasks: bool
    zero_check: bool
    source: str


SOURCES = {
    "6.1": KernelText("6.1", "single-pop", False, False, False,
                      "Debian linux-source-6.1 6.1.192-2"),
    "6.12": KernelText("6.12", "double-pop", False, False, True,
                       "Debian linux-source-6.12 6.12.117-1~deb12u1"),
    "7.2": KernelText("7.2", "double-pop", True, True, True,
                      "Debian linux-source-7.2 7.2.13-1"),
}


class UnknownKernelError(NumalabError, ValueError):
    """A kernel version or release string that names no modelled kernel."""


_RELEASE = re.compile(r"(?:linux-(?:image|source|binary|modules|headers)-)?(\d+)\.(\d+)(?:[.+\-~_].*)?")


def parse_release(release: str) -> str:
    """The ``MAJOR.MINOR`` of a kernel release or package name.

    Input: ``uname -r`` output (``"7.2.13+deb14-amd64"``), a version
    (``"6.12"``, ``"6.12.117"``) or a Debian package name
    (``"linux-image-6.1.0-31-amd64"``). Output: ``"7.2"``. Raises
    :class:`UnknownKernelError` when the string has no version.

    >>> parse_release("6.1.0-31-amd64"), parse_release("linux-image-6.12.100+deb12-amd64")
    ('6.1', '6.12')
    """
    m = _RELEASE.fullmatch(str(release).strip())
    if not m:
        raise UnknownKernelError(f"not a kernel release: {release!r} "
                                 f"(modelled kernels: {', '.join(KNOWN)})")
    return f"{int(m.group(1))}.{int(m.group(2))}"


def resolve(kernel: str | None) -> str:
    """The modelled version for ``kernel`` (``None``: :data:`NEWEST`).

    Input: ``None``, a version, a release string or a package name (see
    :func:`parse_release`). Output: one of :data:`KNOWN`. A version that is
    not modelled raises :class:`UnknownKernelError` naming the modelled ones:
    a result for another kernel's text is not something the port can claim.

    >>> resolve("linux-image-6.1.0-31-amd64")
    '6.1'
    """
    if kernel is None:
        return NEWEST
    if kernel in SOURCES:
        return kernel
    version = parse_release(kernel)
    if version not in SOURCES:
        raise UnknownKernelError(f"kernel {kernel} is not modelled "
                                 f"(modelled kernels: {', '.join(KNOWN)})")
    return version


def text(kernel: str | None) -> KernelText:
    """The :class:`KernelText` of ``kernel`` (``None``: the newest).

    >>> text(None).version
    '7.2'
    """
    return SOURCES[resolve(kernel)]


def newest() -> str:
    """The newest modelled kernel version (:data:`NEWEST`).

    >>> newest()
    '7.2'
    """
    return NEWEST
