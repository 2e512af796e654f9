"""Machine topologies: one model (:mod:`.model`), one reader per format.

``load(source)`` picks the reader from the path:

* a directory or ``.tar`` / ``.tar.bz2`` / ``.tar.gz`` in the
  hwloc-gather-topology layout -> :mod:`.sysfs`
* ``.xml`` (hwloc XML v1 or v2) -> :mod:`.hwloc_xml`
* ``.csv`` / ``.lscpu`` (``lscpu -p`` output) -> :mod:`.lscpu`
* ``.toml`` (a machine description: synthetic string, distances, source
  note) or a synthetic string such as ``"pack:2 numa:1 core:8 pu:2"``
  -> :mod:`.synthetic`
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import TopologyError
from .model import CPU, IRQ, Node, PCIDevice, Topology

__all__ = ["load", "Topology", "CPU", "Node", "PCIDevice", "IRQ", "TopologyError"]

_SYNTH = re.compile(r"^\s*(?:synthetic:)?\s*([A-Za-z0-9_]+:\d+)(\s+[A-Za-z0-9_]+:\d+)*\s*$")
_TAR = (".tar", ".tar.bz2", ".tbz2", ".tar.gz", ".tgz", ".tar.xz")


def is_synthetic(source: str) -> bool:
    """True when ``source`` reads as an hwloc synthetic description."""
    return bool(_SYNTH.match(source))


def load(source: str | Path, **options) -> Topology:
    """Read a topology from a dump path or a synthetic description.

    Raises :class:`~numalab.errors.TopologyError` for anything it cannot read.
    """
    text = str(source)
    path = Path(text)
    if not path.exists():
        if is_synthetic(text):
            from .synthetic import from_synthetic
            return from_synthetic(text.split("synthetic:", 1)[-1], **options)
        raise TopologyError(text, "no such file or directory, and not a synthetic description "
                                  "(for example \"numa:2 core:8 pu:2\")")
    name = path.name.lower()
    if path.is_dir():
        from .sysfs import read_dir
        return read_dir(path, **options)
    if name.endswith(_TAR):
        from .sysfs import read_tar
        return read_tar(path, **options)
    if name.endswith(".xml"):
        from .hwloc_xml import read_xml
        return read_xml(path, **options)
    if name.endswith((".csv", ".lscpu")):
        from .lscpu import read_lscpu
        return read_lscpu(path, **options)
    if name.endswith(".toml"):
        from .synthetic import read_description
        return read_description(path, **options)
    raise TopologyError(text, "unknown topology format (expected a sysfs dump directory or "
                              "tarball, hwloc .xml, lscpu .csv, or a .toml description)")
