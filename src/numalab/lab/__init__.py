"""The kernel lab: boot a real Debian kernel in QEMU on a described topology
and collect what it did.

* :mod:`.kernels` -- fetch Debian kernel packages into a private cache
  (``apt-get download`` under a private apt configuration; never installed
  into the host), list what is cached and fetchable.
* :mod:`.spec` -- the lab's machine (topology string, distances, uneven
  nodes) and its NVMe devices, checked against what QEMU can express.
* :mod:`.qemu` -- the QEMU command line, a pure function of the spec.
* :mod:`.initramfs` -- a busybox initramfs whose ``/init`` traces the probe,
  loads nvme, optionally runs pinned reads, and writes the dump.
* :mod:`.run` -- orchestration: fetch, boot, collect, publish.
* :mod:`.dump` -- read a lab dump back (kernel, NVMe IRQ masks, blk-mq
  maps, probe trace, interrupt deltas).
* :mod:`.scx` / :mod:`.scxbuild` -- sched_ext runs (``--sched-ext``): the
  guest's probes and workloads, the reader of what they recorded, the port
  run on it; the build of ``scx_simple`` and the workload program.

The cache is ``$NUMALAB_CACHE`` or ``~/.cache/numalab/lab``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import NumalabError

__all__ = ["cache_root", "LabError"]


class LabError(NumalabError):
    """A lab run that cannot be done as asked (unknown kernel, a topology
    QEMU cannot express, QEMU missing, a VM that timed out...)."""


def cache_root() -> Path:
    """The lab's cache folder: ``$NUMALAB_CACHE`` when set, else
    ``~/.cache/numalab/lab``. Not created here.

    >>> import os
    >>> old = os.environ.get("NUMALAB_CACHE")
    >>> os.environ["NUMALAB_CACHE"] = "/tmp/x"
    >>> str(cache_root())
    '/tmp/x'
    >>> _ = os.environ.pop("NUMALAB_CACHE") if old is None else os.environ.update(NUMALAB_CACHE=old)
    """
    env = os.environ.get("NUMALAB_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "numalab" / "lab"
