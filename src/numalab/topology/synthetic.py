"""Machines built from a description rather than read from a dump.

Two entry points:

* :func:`from_synthetic` reads hwloc's *synthetic* syntax, a list of
  ``level:count`` pairs from the top of the machine down to the PUs, e.g.
  ``"pack:2 numa:1 core:8 pu:2"`` (2 packages, one NUMA node in each, 8
  cores per node, 2 threads per core). The sweeps in the book build every
  machine shape this way.
* :func:`read_description` reads a ``.toml`` machine description (a
  synthetic string plus numbering, distances, and a note saying where the
  facts come from); ``data/machines/*.toml`` are such files.

Levels (case-insensitive; hwloc's aliases are accepted):

=====================  =====================================================
``pack`` ``package``   a package (``physical_package_id``); absent -> one
``socket``             package holding everything
``die``                a die inside a package (``die_id``)
``numa`` ``node``      a NUMA node; may sit at any depth above ``core``;
``numanode``           absent -> one node 0 holding every CPU
``group``              a grouping level that changes nothing the kernel
                       reports (hwloc uses it for boards, SNC halves...)
``l3`` ``l2`` ``l1d``  caches (``l2cache``, ``l3u`` ... also accepted): they
...                    only set the L2 span and the last-level-cache span
``cluster``            the kernel's cluster level
                       (``topology_cluster_cpumask()``)
``core``               a core; absent -> every PU is its own core
``pu``                 a hardware thread; must be last; absent -> one PU
                       per object of the last level
=====================  =====================================================

The cluster mask follows what a current kernel reports: the CPUs under the
same ``cluster`` object when there is a cluster level; otherwise, on x86,
the CPUs sharing the ``l2`` level (x86 fills the cluster mask from
``cpu_l2c_shared_mask``), or without an ``l2`` level the SMT siblings
(``match_l2c()`` falls back to ``match_smt()`` when the L2 id is unknown);
elsewhere the CPU alone (the generic ``cpumask_of(cpu)``).

hwloc's per-level attributes in parentheses (``numa:2(memory=...)``) and
its ``[numa]`` memory-child notation are not supported: they are refused
with a clear error. Distances are given as a separate matrix instead.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from ..cpumask import MAX_CPUS
from ..errors import TopologyError
from .model import CPU, Node, Topology

__all__ = ["from_synthetic", "read_description", "parse_levels", "group_masks",
           "check_slit", "DEFAULT_NODE_MEMORY"]

DEFAULT_NODE_MEMORY = 16 << 30   # bytes per node when a description gives none

_ALIASES = {
    "pack": "package", "package": "package", "socket": "package",
    "die": "die",
    "numa": "numa", "node": "numa", "numanode": "numa",
    "group": "group",
    "cluster": "cluster",
    "core": "core",
    "pu": "pu",
}
_CACHE = re.compile(r"^l([1-5])([diu]?)(?:cache)?$")
_TOKEN = re.compile(r"^([A-Za-z][A-Za-z0-9]*):(\S+)$")
# Levels whose relative order is fixed (a die inside a package, a core
# inside a cluster...). numa, group and caches may sit anywhere above pu.
_RANK = {"package": 0, "die": 1, "cluster": 2, "core": 3, "pu": 4}
NUMBERINGS = ("linear", "smt-apart")


def _level_name(word: str, where: str) -> str:
    """Normalise one level name (``"Pack"`` -> ``"package"``, ``"L3Cache"`` -> ``"l3"``)."""
    w = word.lower()
    if w in _ALIASES:
        return _ALIASES[w]
    if w.startswith("group") and w[5:].isdigit():
        return "group"
    m = _CACHE.match(w)
    if m:
        return f"l{m.group(1)}{m.group(2) if m.group(2) in ('d', 'i') else ''}"
    raise TopologyError(where, f"unknown level {word!r} (expected pack, die, numa, group, "
                               "l1/l2/l3, cluster, core or pu)")


def parse_levels(text: str, where: str | None = None) -> list[tuple[str, int]]:
    """Parse a synthetic string into ``[(level, count), ...]`` from the top down.

    Input: ``"pack:2 numa:1 core:8 pu:2"``. Output:
    ``[("package", 2), ("numa", 1), ("core", 8), ("pu", 2)]``. A missing
    ``pu`` level is added as ``("pu", 1)``.

    Raises TopologyError for an unknown level, a count that is not a
    positive integer, a repeated level, ``pu`` not last, or levels out of
    order (``core`` above ``package``, ``numa`` below ``core``).

    >>> parse_levels("socket:2 Core:4")
    [('package', 2), ('core', 4), ('pu', 1)]
    """
    where = where or text
    if not isinstance(text, str):
        raise TopologyError(where, f"a synthetic description is text, not {type(text).__name__}")
    words = text.split()
    if not words:
        raise TopologyError(where, "empty synthetic description")
    levels: list[tuple[str, int]] = []
    for word in words:
        if "(" in word or "[" in word or "{" in word:
            raise TopologyError(where, f"level attributes such as {word!r} are not supported; "
                                       "give distances and memory as separate options")
        m = _TOKEN.match(word)
        if not m:
            raise TopologyError(where, f"{word!r} is not a level:count pair")
        name = _level_name(m.group(1), where)
        try:
            count = int(m.group(2))
        except ValueError:
            raise TopologyError(where, f"count {m.group(2)!r} of level {word!r} is not an "
                                       "integer") from None
        if count <= 0:
            raise TopologyError(where, f"count of level {word!r} must be at least 1")
        if name != "group" and any(n == name for n, _ in levels):
            raise TopologyError(where, f"level {name!r} appears twice")
        if levels and levels[-1][0] == "pu":
            raise TopologyError(where, f"pu must be the last level (found {word!r} after it)")
        levels.append((name, count))
    if levels[-1][0] != "pu":
        levels.append(("pu", 1))
    ranked = [n for n, _ in levels if n in _RANK]
    if ranked != sorted(ranked, key=_RANK.__getitem__):
        raise TopologyError(where, "levels out of order: expected package above die above "
                                   f"cluster above core above pu, got {' '.join(ranked)}")
    names = [n for n, _ in levels]
    if "numa" in names and "core" in names and names.index("numa") > names.index("core"):
        raise TopologyError(where, "numa must be above core")
    return levels


def group_masks(keys: dict[int, Hashable | None]) -> dict[int, int]:
    """For each CPU, the mask of CPUs that share its key.

    Input: ``{cpu: key}``; a key of None means "unknown" and gives 0.
    Output: ``{cpu: mask}``.

    >>> group_masks({0: "a", 1: "a", 2: "b", 3: None})
    {0: 3, 1: 3, 2: 4, 3: 0}
    """
    spans: dict[Hashable, int] = {}
    for cpu, key in keys.items():
        if key is not None:
            spans[key] = spans.get(key, 0) | (1 << cpu)
    return {cpu: (spans[key] if key is not None else 0) for cpu, key in keys.items()}


def check_slit(matrix: Any, nnodes: int, where: str,
               allow_asymmetric: bool = False) -> list[list[int]]:
    """Check a SLIT-style distance matrix and return it as lists of ints.

    The rules are the ones ACPI's ``slit_valid()`` applies before the
    kernel trusts a SLIT (``drivers/acpi/numa/srat.c``): 10 on the
    diagonal, more than 10 elsewhere; plus square (``nnodes`` x ``nnodes``)
    and symmetric, which every description in the book is (unless
    ``allow_asymmetric``: ACPI allows an asymmetric SLIT).

    >>> check_slit([[10, 21], [21, 10]], 2, "x")
    [[10, 21], [21, 10]]
    """
    if isinstance(matrix, str):
        rows = [r for r in re.split(r"[;\n]", matrix) if r.strip()]
        matrix = [r.replace(",", " ").split() for r in rows]
    if not isinstance(matrix, Sequence) or isinstance(matrix, (str, bytes)):
        raise TopologyError(where, "distances must be a list of rows")
    out: list[list[int]] = []
    for i, row in enumerate(matrix):
        if not isinstance(row, Sequence) or isinstance(row, (str, bytes)):
            raise TopologyError(where, f"distance row {i} is not a list")
        vals = []
        for x in row:
            if isinstance(x, bool):
                raise TopologyError(where, f"distance {x!r} in row {i} is not an integer")
            try:
                v = int(x)
            except (TypeError, ValueError):
                raise TopologyError(where, f"distance {x!r} in row {i} is not an integer") from None
            if isinstance(x, float) and v != x:
                raise TopologyError(where, f"distance {x!r} in row {i} is not an integer")
            vals.append(v)
        out.append(vals)
    if len(out) != nnodes or any(len(r) != nnodes for r in out):
        raise TopologyError(where, f"distance matrix is not {nnodes}x{nnodes} for {nnodes} "
                                   f"node(s) (rows of {[len(r) for r in out]})")
    for i in range(nnodes):
        if out[i][i] != 10:
            raise TopologyError(where, f"distance node{i}->node{i} is {out[i][i]}, not 10")
        for j in range(nnodes):
            if i != j and out[i][j] <= 10:
                raise TopologyError(where, f"distance node{i}->node{j} is {out[i][j]}; "
                                           "a remote distance must be more than 10")
            if out[i][j] != out[j][i] and not allow_asymmetric:
                raise TopologyError(where, f"distance matrix is not symmetric: node{i}->node{j} "
                                           f"is {out[i][j]} but node{j}->node{i} is {out[j][i]}")
    return out


def _node_memory(memory: Any, nnodes: int, where: str) -> list[int]:
    """Bytes per node from an int (every node) or a list (one per node)."""
    if memory is None:
        return [DEFAULT_NODE_MEMORY] * nnodes
    if isinstance(memory, (int, float)) and not isinstance(memory, bool):
        memory = [memory] * nnodes
    if not isinstance(memory, Sequence) or isinstance(memory, str) or len(memory) != nnodes:
        raise TopologyError(where, f"memory must be a number or a list of {nnodes} numbers")
    out = []
    for m in memory:
        # not (m >= 0) also catches nan; inf would overflow int()
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not (0 <= m < math.inf):
            raise TopologyError(where, f"node memory {m!r} is not a finite non-negative number")
        out.append(int(m))
    return out


def from_synthetic(text: str, distances: Any = None, numbering: str = "linear",
                   arch: str = "x86", possible_extra: int = 0, name: str | None = None,
                   memory: Any = None, source: str | None = None,
                   allow_asymmetric: bool = False, **meta: Any) -> Topology:
    """Build a :class:`Topology` from an hwloc synthetic string.

    Inputs:

    * ``text``: e.g. ``"pack:2 numa:1 core:64 pu:2"`` (see the module doc).
    * ``distances``: a node x node matrix (list of lists, or text rows
      separated by ``;``); default 10 on the diagonal, 20 elsewhere (the
      kernel's own default without a SLIT).
    * ``numbering``: ``"linear"`` -- CPU ids in depth-first order, so the
      threads of a core are adjacent; ``"smt-apart"`` -- x86 style: the
      first thread of every core gets ids 0..ncores-1 in core order, then
      the second threads, and so on.
    * ``arch``: ``"x86"``, ``"arm64"``, ... (decides the cluster fallback).
    * ``possible_extra``: CPUs possible but not present; their ids follow
      the present ones. They appear only in ``possible``, not in ``cpus``
      or any node (the kernel gives them a node only when they arrive).
    * ``memory``: bytes per node (one number, or a list); default 16 GiB.
    * ``name`` / ``source``: labels (default: the string itself).
    * ``allow_asymmetric``: accept an asymmetric ``distances`` matrix.

    Output: a validated Topology. ``llc_cpus`` / ``l2_cpus`` are 0 (unknown)
    when the string has no such cache level.

    >>> t = from_synthetic("pack:2 numa:1 core:2 pu:2", numbering="smt-apart")
    >>> from numalab.cpumask import format_cpulist
    >>> [format_cpulist(t.nodes[n].cpus) for n in t.node_ids]
    ['0-1,4-5', '2-3,6-7']
    """
    where = source or (text if isinstance(text, str) else "synthetic")
    levels = parse_levels(text, where)
    if numbering not in NUMBERINGS:
        raise TopologyError(where, f"numbering {numbering!r} is not one of "
                                   f"{', '.join(NUMBERINGS)}")
    if (isinstance(possible_extra, bool) or not isinstance(possible_extra, int)
            or possible_extra < 0):
        raise TopologyError(where, f"possible_extra {possible_extra!r} is not a "
                                   "non-negative integer")
    if not isinstance(arch, str) or not arch:
        raise TopologyError(where, f"arch {arch!r} is not a name such as \"x86\"")
    names = [n for n, _ in levels]
    counts = [c for _, c in levels]
    total = math.prod(counts)
    if total > MAX_CPUS:
        raise TopologyError(where, f"{total} PUs is more than this model handles ({MAX_CPUS})")
    if total + possible_extra > MAX_CPUS:
        raise TopologyError(where, f"possible_extra {possible_extra} puts CPU ids beyond the "
                                   f"{MAX_CPUS} CPUs numalab handles")

    # below[k]: PUs under one object of level k; objects at level k are
    # numbered globally in depth-first order: pu_index // below[k].
    below = [math.prod(counts[k + 1:]) for k in range(len(counts))]

    def index_of(level: str, p: int) -> int | None:
        if level not in names:
            return None
        return p // below[names.index(level)]

    def per_parent(level: str, parent: str, p: int) -> int:
        """Index of the level's object inside its parent (e.g. core_id in its package)."""
        if level not in names:
            return 0
        k = names.index(level)
        if parent not in names:
            return p // below[k]
        return (p % below[names.index(parent)]) // below[k]

    ncores = total // below[names.index("core")] if "core" in names else total
    threads = total // ncores

    def cpu_id(p: int) -> int:
        if numbering == "linear":
            return p
        return (p % threads) * ncores + p // threads

    caches = sorted((n for n in names if n.startswith("l") and n[1:2].isdigit()),
                    key=lambda n: (int(n[1]), n))
    unified = [n for n in caches if len(n) == 2]          # l2, l3 (not l1d/l1i)
    llc_level = unified[-1] if unified else None
    if "cluster" in names:
        cluster_src = "synthetic"
    elif arch == "x86":
        cluster_src = "l2" if "l2" in names else "smt"
    else:
        cluster_src = "self"

    ids = {p: cpu_id(p) for p in range(total)}
    keys: dict[str, dict[int, Any]] = {k: {} for k in
                                       ("core", "cluster", "die", "package", "llc", "l2")}
    for p, c in ids.items():
        keys["core"][c] = index_of("core", p) if "core" in names else ("pu", p)
        keys["package"][c] = index_of("package", p) or 0
        keys["die"][c] = (keys["package"][c], per_parent("die", "package", p))
        keys["llc"][c] = index_of(llc_level, p) if llc_level else None
        keys["l2"][c] = index_of("l2", p)
        if cluster_src == "synthetic":
            keys["cluster"][c] = index_of("cluster", p)
        elif cluster_src == "l2":
            keys["cluster"][c] = index_of("l2", p)
        elif cluster_src == "smt":
            keys["cluster"][c] = keys["core"][c]
        else:
            keys["cluster"][c] = ("self", c)
    masks = {k: group_masks(v) for k, v in keys.items()}

    cpus: dict[int, CPU] = {}
    node_cpus: dict[int, int] = {}
    for p, c in sorted(ids.items(), key=lambda kv: kv[1]):
        node = index_of("numa", p) or 0
        node_cpus[node] = node_cpus.get(node, 0) | (1 << c)
        cpus[c] = CPU(
            id=c, node=node, package=keys["package"][c],
            die=per_parent("die", "package", p),
            core=per_parent("core" if "core" in names else "pu", "package", p),
            cluster=index_of("cluster", p) if "cluster" in names else (
                index_of("l2", p) if cluster_src == "l2" else -1),
            thread_siblings=masks["core"][c], cluster_cpus=masks["cluster"][c],
            die_cpus=masks["die"][c], package_cpus=masks["package"][c],
            llc_cpus=masks["llc"][c], l2_cpus=masks["l2"][c], cluster_source=cluster_src)
    nnodes = total // below[names.index("numa")] if "numa" in names else 1
    mem = _node_memory(memory, nnodes, where)
    nodes = {n: Node(id=n, cpus=node_cpus.get(n, 0), memory_bytes=mem[n]) for n in range(nnodes)}
    if distances is None:
        dist = [[10 if i == j else 20 for j in range(nnodes)] for i in range(nnodes)]
    else:
        dist = check_slit(distances, nnodes, where, allow_asymmetric)
    present = (1 << total) - 1
    possible = (1 << (total + possible_extra)) - 1
    label = name or (text.strip() if isinstance(text, str) else "synthetic")
    topo = Topology(name=label, source=source or f"synthetic:{' '.join(text.split())}",
                    arch=arch, possible=possible, present=present, online=present, cpus=cpus,
                    nodes=nodes, distances=dist,
                    meta={"synthetic": " ".join(text.split()), "levels": levels,
                          "numbering": numbering, "possible_extra": possible_extra, **meta})
    return topo.validate(allow_asymmetric=allow_asymmetric)


_TOML_KEYS = {"name": str, "synthetic": str, "numbering": str, "arch": str,
              "distances": (list, str), "possible_extra": int, "source": str, "note": str,
              "memory_gib": (int, float, list)}


def read_description(path: str | Path, **options: Any) -> Topology:
    """Read a ``.toml`` machine description.

    Keys: ``synthetic`` (required), ``name``, ``numbering``, ``arch``,
    ``distances`` (list of rows), ``possible_extra``, ``memory_gib`` (per
    node: a number or a list), ``source`` (where the facts come from),
    ``note`` (what is assumed). Unknown keys are refused, so a typo cannot
    silently fall back to a default. ``options`` override the file's values
    (same names as :func:`from_synthetic`).

    Output: a validated Topology whose ``meta`` holds the source and note.

    Example file::

        name = "two-socket"
        synthetic = "pack:2 numa:1 core:8 pu:2"
        numbering = "smt-apart"
        distances = [[10, 21], [21, 10]]
        source = "..."
    """
    p = Path(path)
    where = str(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise TopologyError(where, f"cannot read: {e.strerror or e}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise TopologyError(where, f"not UTF-8 text (byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise TopologyError(where, f"not valid TOML: {e}") from None
    for key, value in data.items():
        if key not in _TOML_KEYS:
            raise TopologyError(where, f"unknown key {key!r} (expected one of "
                                       f"{', '.join(sorted(_TOML_KEYS))})")
        if isinstance(value, bool) or not isinstance(value, _TOML_KEYS[key]):
            raise TopologyError(where, f"key {key!r} has the wrong type "
                                       f"({type(value).__name__})")
    if "synthetic" not in data:
        raise TopologyError(where, "missing key 'synthetic' (for example "
                                   "synthetic = \"pack:2 numa:1 core:8 pu:2\")")
    mem = data.get("memory_gib")
    if mem is not None:
        if isinstance(mem, list) and not all(
                isinstance(m, (int, float)) and not isinstance(m, bool) for m in mem):
            raise TopologyError(where, "memory_gib must hold numbers")
        mem = [m * (1 << 30) for m in mem] if isinstance(mem, list) else mem * (1 << 30)
    kwargs: dict[str, Any] = {
        "distances": data.get("distances"),
        "numbering": data.get("numbering", "linear"),
        "arch": data.get("arch", "x86"),
        "possible_extra": data.get("possible_extra", 0),
        "name": data.get("name", p.stem),
        "memory": mem,
    }
    kwargs.update(options)
    meta = {"description": where, "facts_source": data.get("source", ""),
            "note": data.get("note", "")}
    return from_synthetic(data["synthetic"], source=where, **kwargs, **meta)
