"""Where the book's datasets are, and how a notebook loads them.

A *dataset* is anything :func:`numalab.topology.load` reads: a sysfs dump
(directory or tarball), hwloc XML, lscpu CSV, a ``.toml`` machine
description, or a synthetic string. The book's data are part of the book:
everything the default set names is under ``data/`` in the checkout.

* ``data/collected/*.tar.bz2``: machines collected with ``numalab collect``;
* ``data/machines/*.toml``: machines described from the patches' published facts;
* ``data/hwloc/linux/*.tar.bz2`` and ``data/hwloc/xml/*.xml``: the hwloc
  project's real machines (BSD-3-Clause, ``data/hwloc/COPYING``). The
  expected-output files beside the tarballs (``.console``, ``.xml``,
  ``.test``) are hwloc's answers for those dumps, used by the oracle tests,
  not machines of their own.

Lab dumps (``data/lab/``, made by ``numalab lab``) are a separate set,
:func:`lab_datasets`, used where a chapter compares with real kernels, so no
machine is counted twice. ``numalab build --data PATH ...`` replaces the
default set with the given paths (any folder, ``../shared`` included).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

from .errors import NumalabError
from .topology import is_synthetic, load
from .topology.model import Topology

__all__ = ["repo_root", "data_dir", "hwloc_dir", "project_datasets", "hwloc_datasets",
           "lab_datasets", "lab_archives", "default_datasets", "load_datasets", "load_cached",
           "load_options",
           "label"]


def repo_root(start: Path | None = None) -> Path:
    """The project checkout: the nearest folder above ``start`` (default: the
    current directory, then this package) holding ``pyproject.toml`` and
    ``notebooks/``."""
    candidates = [Path(start or Path.cwd()).resolve(), Path(__file__).resolve()]
    for base in candidates:
        for d in [base, *base.parents]:
            if (d / "pyproject.toml").is_file() and (d / "notebooks").is_dir():
                return d
    raise NumalabError("cannot find the numalab checkout (a folder with pyproject.toml "
                       "and notebooks/); run from inside it")


def data_dir(root: Path | None = None) -> Path:
    """The checkout's ``data/`` folder."""
    return (root or repo_root()) / "data"


def hwloc_dir(root: Path | None = None) -> Path:
    """The hwloc collection carried by the project: ``data/hwloc``."""
    return data_dir(root) / "hwloc"


def project_datasets(root: Path | None = None) -> list[str]:
    """The project's own machines: ``data/collected`` dumps, then
    ``data/machines`` descriptions, each sorted."""
    base = data_dir(root)
    found = sorted(base.glob("collected/*.tar.bz2")) + sorted(base.glob("machines/*.toml"))
    return [str(p) for p in found]


def hwloc_datasets(root: Path | None = None) -> list[str]:
    """The hwloc collection's machines: its sysfs dumps, then its XML exports,
    each sorted (the expected-output files beside the dumps are not machines)."""
    base = hwloc_dir(root)
    found = sorted(base.glob("linux/*.tar.bz2")) + sorted(base.glob("xml/*.xml"))
    return [str(p) for p in found]


def lab_datasets(root: Path | None = None) -> list[str]:
    """Dumps of real kernels booted by ``numalab lab`` (``data/lab/*.tar.bz2``),
    sorted; not part of :func:`default_datasets`."""
    return [str(p) for p in sorted(data_dir(root).glob("lab/*.tar.bz2"))]


def lab_archives(root: Path | None = None) -> list[str]:
    """Every lab dump under ``data/lab`` (the chapters' dumps of
    :func:`lab_datasets`, the sched_ext runs, the arm64 boots and the sweep
    matrices), sorted: what a build parses once before the chapters start."""
    return [str(p) for p in sorted(data_dir(root).glob("lab/**/*.tar.bz2"))]


def default_datasets(root: Path | None = None) -> list[str]:
    """The book's default machines: :func:`project_datasets` then
    :func:`hwloc_datasets`, all under ``data/``."""
    return project_datasets(root) + hwloc_datasets(root)


def label(dataset: str) -> str:
    """A short name for a dataset: the file name without its extensions, or
    the synthetic string itself.

    >>> label("/x/linux/16amd64-8n2c.tar.bz2")
    '16amd64-8n2c'
    """
    if is_synthetic(dataset) and not Path(dataset).exists():
        return dataset.strip()
    name = Path(dataset).name
    for ext in (".tar.bz2", ".tar.gz", ".tar.xz", ".tar", ".tgz", ".xml", ".toml", ".csv", ".lscpu"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name


def load_options(dataset: str) -> dict:
    """Reader options for a dataset (``{}`` for all but the hwloc collection).

    numalab refuses by default an asymmetric distance matrix and node
    cpulists that overlap with no ``cpuN/nodeM`` link to settle them. The
    hwloc collection holds one hand-made dump with both on purpose
    (fakeheterocpunuma; hwloc itself reads it only with
    HWLOC_DEBUG_ALLOW_OVERLAPPING_NODE_CPUSETS=1), so the files under
    ``data/hwloc`` are read with both allowed; the readers record a note when
    they use the leeway. Any other file, and a copy of the collection kept
    elsewhere, is read strictly.
    """
    if is_synthetic(dataset) and not Path(dataset).exists():
        return {}
    path = Path(dataset).resolve()
    try:
        path.relative_to(hwloc_dir(repo_root(path.parent)).resolve())
    except (ValueError, NumalabError):
        return {}
    if dataset.endswith(".xml"):
        return {"allow_asymmetric": True}
    return {"allow_asymmetric": True, "allow_overlapping_nodes": True}


def _reader_digest() -> str:
    """Hash of the topology readers' source: a parsed dump cached by an older
    reader is never reused."""
    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parent
    for f in sorted([pkg / "cpumask.py", *(pkg / "topology").glob("*.py")]):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _cache_path(path: Path, options: dict | None = None) -> Path | None:
    """Where the parsed form of a dump file is cached (None: don't cache)."""
    if not path.is_file():
        return None
    try:
        root = repo_root()
    except NumalabError:
        return None
    h = hashlib.sha256(path.read_bytes())
    h.update(_reader_digest().encode())
    h.update(repr(sorted((options or {}).items())).encode())
    return root / ".numalab-cache" / "topologies" / f"{h.hexdigest()[:32]}.pickle"


def load_cached(dataset: str) -> Topology:
    """:func:`numalab.topology.load`, with the parsed result of a *file* cached
    under ``.numalab-cache/topologies`` keyed on the file's content and the
    readers' source. Synthetic strings and directories are read every time."""
    options = load_options(dataset)
    cache = _cache_path(Path(dataset), options)
    if cache is not None and cache.is_file():
        try:
            with cache.open("rb") as f:
                topo = pickle.load(f)
            if isinstance(topo, Topology):
                return topo.replace(source=dataset)
        except Exception:  # a damaged cache entry is only a miss
            pass
    topo = load(dataset, **options)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as f:
            pickle.dump(topo, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, cache)
    return topo


def load_datasets(datasets: list[str] | None = None) -> dict[str, Topology]:
    """Load datasets (default: :func:`default_datasets`) as ``{label: Topology}``.

    A dataset that cannot be read raises its TopologyError: a chapter never
    silently drops a machine it was given. Parsed files are cached (see
    :func:`load_cached`), so the chapters after the first read them quickly.
    """
    paths = list(datasets) if datasets else default_datasets()
    out: dict[str, Topology] = {}
    for p in paths:
        name = label(p)
        while name in out:
            name += "'"
        out[name] = load_cached(p)
    return out
