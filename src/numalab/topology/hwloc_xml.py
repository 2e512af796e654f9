"""Read hwloc XML (v2, written by hwloc 2.x/3.x, and v1, hwloc 1.x) into a Topology.

What is taken from the XML:

* CPUs: the ``PU`` objects (``os_index`` is the kernel's CPU id), with the
  ``Core``, ``Die``, ``Package`` (v1: ``Socket``) and caches above them.
* Clusters: a ``Group`` with ``subtype="Cluster"`` (what hwloc builds from
  the kernel's ``cluster_cpus``). Without one, the reader fills in what a
  current kernel reports: on x86 (a ``CPUVendor`` of GenuineIntel or
  AuthenticAMD, or an x86 ``Architecture`` info) the CPUs sharing the L2
  cache, or the SMT siblings when the XML has no L2 (``match_l2c()`` falls
  back to ``match_smt()``); elsewhere the CPU alone. ``cluster_source``
  says which ("xml", "l2", "smt", "self").
* NUMA nodes: ``NUMANode`` objects (v2 writes them as memory children of
  the object whose CPUs are local to them; v1 puts them in the tree) with
  ``local_memory``. hwloc's node cpuset is a *locality*, and two nodes may
  share one (a DRAM node and an HBM node of the same package). The kernel
  gives each CPU exactly one node, so each CPU goes to the node with the
  smallest cpuset containing it (ties: a node without an HBM/NVM-like
  subtype, then the lowest id); the others become CPU-less nodes, as the
  kernel shows them.
* Distances: v2 ``<distances2 type="NUMANode">`` (a latency matrix is
  preferred over bandwidth), v1 ``<distances relative_depth latency_base>``
  with ``<latency value>`` factors scaled by ``latency_base``.
* PCI devices: ``PCIDev`` objects; the class is ``pci_type``'s class id
  (and prog-if when hwloc 3 writes it); the NUMA node is the single node
  local to the nearest ancestor that has a cpuset (-1 when that ancestor
  spans several nodes, like the kernel's ``NUMA_NO_NODE``). MSI vector
  counts are not in the XML: 0.
* possible / present / online: the top object's ``complete_cpuset`` /
  ``cpuset`` / ``online_cpuset`` (v1; else ``cpuset``).

Safety: a document with a DOCTYPE internal subset or an ENTITY declaration
is refused before parsing (entity expansion bombs), and every failure is a
TopologyError naming the file.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cpumask import MAX_CPUS, CpumaskSyntaxError, parse_hexmask
from ..errors import TopologyError
from .model import CPU, Node, PCIDevice, Topology
from .synthetic import group_masks

__all__ = ["read_xml", "parse_xml"]

_MAX_DEPTH = 200
_DOCTYPE = re.compile(rb"<!DOCTYPE[^>\[]*\[", re.IGNORECASE)
_ENTITY = re.compile(rb"<!ENTITY", re.IGNORECASE)
_PCI_TYPE = re.compile(r"^\s*([0-9a-fA-F]{1,4})\s*\[([0-9a-fA-F]{1,4}):([0-9a-fA-F]{1,4})\]"
                       r"(?:\s*\[[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}\])?"
                       r"(?:\s+([0-9a-fA-F]{1,2}))?(?:\s+([0-9a-fA-F]{1,2}))?")
_X86_VENDORS = {"GenuineIntel", "AuthenticAMD", "HygonGenuine", "CentaurHauls"}
_ARCH = {"x86_64": "x86", "i386": "x86", "i486": "x86", "i586": "x86", "i686": "x86",
         "aarch64": "arm64", "arm64": "arm64", "ia64": "ia64", "ppc64": "powerpc",
         "ppc64le": "powerpc", "ppc": "powerpc", "s390x": "s390", "s390": "s390",
         "riscv64": "riscv", "loongarch64": "loongarch", "sparc64": "sparc"}
_CACHE_V2 = re.compile(r"^L([1-5])(i?)Cache$")
_FAR_MEMORY = ("hbm", "mcdram", "nvm", "spm", "cxl", "gpu")


@dataclass
class _PU:
    """What the walk learns about one PU before the masks are built."""
    id: int
    package: Any = None
    package_id: int = 0
    die: Any = None
    die_id: int = 0
    core: Any = None
    core_id: int | None = None
    cluster: Any = None
    cluster_id: int = -1
    l2: Any = None
    llc: Any = None
    llc_level: int = 0


@dataclass
class _Walk:
    where: str
    pus: dict[int, _PU] = field(default_factory=dict)
    numa: list[dict[str, Any]] = field(default_factory=list)   # os, cpuset, memory, subtype, gp
    pci: list[tuple[ET.Element, int | None, int | None]] = field(default_factory=list)
    infos: dict[str, set[str]] = field(default_factory=dict)
    v1_distances: list[tuple[ET.Element, ET.Element]] = field(default_factory=list)


def _mask(el: ET.Element, attr: str, where: str) -> int | None:
    """Parse a hwloc bitmap attribute (``0x000000ff,0xffffffff``); None if absent.

    hwloc writes an infinite bitmap as ``0xf...f``; such a value is taken
    as its finite part (never seen on a cpuset of a real object).
    """
    text = el.get(attr)
    if text is None:
        return None
    text = text.strip()
    if text.startswith("0xf...f"):
        text = text[len("0xf...f"):].lstrip(",") or "0x0"
    # hwloc leaves a chunk empty when it is zero: "0x000000ff,,0x0"
    text = ",".join(chunk.strip() or "0" for chunk in text.split(","))
    try:
        return parse_hexmask(text)
    except CpumaskSyntaxError as e:
        raise TopologyError(where, f"bad {attr} on a {el.get('type')} object: {e}") from None


def _int(el: ET.Element, attr: str, where: str) -> int | None:
    text = el.get(attr)
    if text is None:
        return None
    try:
        v = int(text.strip())
    except ValueError:
        raise TopologyError(where, f"{attr}={text!r} on a {el.get('type')} object is not "
                                   "an integer") from None
    if v < 0:
        raise TopologyError(where, f"{attr}={text!r} on a {el.get('type')} object is negative")
    return v


def _cache_level(el: ET.Element, where: str) -> tuple[int, bool] | None:
    """(level, is_instruction_cache) for a cache object, None for others."""
    t = el.get("type", "")
    m = _CACHE_V2.match(t)
    if m:
        return int(m.group(1)), m.group(2) == "i"
    if t == "Cache":                                   # v1
        level = _int(el, "depth", where) or 0
        return level, el.get("cache_type") == "2"
    return None


def _walk(el: ET.Element, ctx: _PU, ancestor_cpuset: int | None, depth: int,
          w: _Walk) -> None:
    """Depth-first walk of ``<object>`` elements, carrying what is above."""
    if depth > _MAX_DEPTH:
        raise TopologyError(w.where, f"objects nested more than {_MAX_DEPTH} deep")
    t = el.get("type")
    if t is None:
        raise TopologyError(w.where, "an <object> without a type attribute")
    for info in el.findall("info"):
        w.infos.setdefault(info.get("name", ""), set()).add(info.get("value", ""))
    cpuset = _mask(el, "cpuset", w.where)
    here = _PU(**vars(ctx))
    if t in ("Package", "Socket"):
        here.package = el
        here.package_id = _int(el, "os_index", w.where) or 0
    elif t == "Die":
        here.die = el
        here.die_id = _int(el, "os_index", w.where) or 0
    elif t == "Core":
        here.core = el
        here.core_id = _int(el, "os_index", w.where)
    elif t == "Group" and (el.get("subtype") or "").lower() == "cluster":
        here.cluster = el
        os_index = _int(el, "os_index", w.where)
        here.cluster_id = os_index if os_index is not None else -1
    else:
        cache = _cache_level(el, w.where)
        if cache and not cache[1]:
            level = cache[0]
            if level == 2:
                here.l2 = el
            if level >= 2 and level >= here.llc_level:
                here.llc, here.llc_level = el, level
    if t == "NUMANode":
        os_index = _int(el, "os_index", w.where)
        if os_index is None:
            raise TopologyError(w.where, "a NUMANode without os_index")
        w.numa.append({"os": os_index, "cpuset": cpuset if cpuset is not None else 0,
                       "memory": _int(el, "local_memory", w.where),
                       "subtype": (el.get("subtype") or "").lower(), "gp": el.get("gp_index")})
    elif t == "PU":
        os_index = _int(el, "os_index", w.where)
        if os_index is None:
            if not cpuset:
                raise TopologyError(w.where, "a PU without os_index or cpuset")
            os_index = cpuset.bit_length() - 1
        if os_index >= MAX_CPUS:
            raise TopologyError(w.where, f"a PU's os_index {os_index} is beyond the {MAX_CPUS} "
                                         "CPUs numalab handles")
        if os_index in w.pus:
            raise TopologyError(w.where, f"two PUs with os_index {os_index}")
        here.id = os_index
        w.pus[os_index] = here
    elif t == "PCIDev":
        w.pci.append((el, ancestor_cpuset, None))
    for d in el.findall("distances"):
        w.v1_distances.append((el, d))
    nearest = cpuset if cpuset is not None and t not in ("PCIDev", "Bridge", "OSDev") \
        else ancestor_cpuset
    for child in el.findall("object"):
        _walk(child, here, nearest, depth + 1, w)


def _read_values(el: ET.Element, tag: str, where: str) -> list[int]:
    out = []
    for part in el.findall(tag):
        for tok in (part.text or "").split():
            try:
                out.append(int(tok))
            except ValueError:
                raise TopologyError(where, f"<{tag}> holds {tok!r}, not an integer") from None
    return out


def _distances_v2(root: ET.Element, node_ids: list[int], gp_to_os: dict[str, int],
                  where: str) -> tuple[list[list[int]], str]:
    """The NUMA distance matrix from ``<distances2>``, ordered by node id."""
    candidates = []
    for d in root.iter("distances2"):
        if d.get("type") != "NUMANode":
            continue
        kind = _int(d, "kind", where) or 0
        latency = d.get("name") == "NUMALatency" or bool(kind & 4) or not kind & 8
        candidates.append((0 if latency else 1, d))
    if not candidates:
        return [], ""
    candidates.sort(key=lambda c: c[0])
    d = candidates[0][1]
    n = _int(d, "nbobjs", where)
    if not n:
        raise TopologyError(where, "<distances2> without a positive nbobjs")
    idx = _read_values(d, "indexes", where)
    vals = _read_values(d, "u64values", where)
    if len(idx) != n:
        raise TopologyError(where, f"<distances2> lists {len(idx)} indexes for nbobjs={n}")
    if len(vals) != n * n:
        raise TopologyError(where, f"<distances2> holds {len(vals)} values, not {n}x{n}")
    if d.get("indexing", "os") == "gp":
        try:
            idx = [gp_to_os[str(i)] for i in idx]
        except KeyError as e:
            raise TopologyError(where, f"<distances2> names gp_index {e.args[0]}, "
                                       "which is no NUMANode") from None
    return _square(idx, [vals[i * n:(i + 1) * n] for i in range(n)], node_ids, where)


def _square(idx: list[int], rows: list[list[int]], node_ids: list[int],
            where: str) -> tuple[list[list[int]], str]:
    """Reorder a matrix given for nodes ``idx`` to ``node_ids`` order."""
    pos = {o: i for i, o in enumerate(idx)}
    if len(pos) != len(idx):
        raise TopologyError(where, "a distance matrix names the same node twice")
    missing = [o for o in node_ids if o not in pos]
    if missing:
        return [], f"distance matrix does not cover node(s) {missing}; not used"
    return [[rows[pos[a]][pos[b]] for b in node_ids] for a in node_ids], ""


def _distances_v1(w: _Walk, node_ids: list[int], top: ET.Element,
                  root: ET.Element) -> tuple[list[list[int]], str]:
    """The NUMA matrix from v1 ``<distances>`` (inside an object or the root)."""
    pairs = list(w.v1_distances) + [(top, d) for d in root.findall("distances")]
    for owner, d in pairs:
        n = _int(d, "nbobjs", w.where)
        rel = _int(d, "relative_depth", w.where)
        if not n or rel is None:
            raise TopologyError(w.where, "<distances> needs nbobjs and relative_depth")
        if rel > _MAX_DEPTH:
            raise TopologyError(w.where, f"<distances> relative_depth {rel} is deeper than "
                                         f"the {_MAX_DEPTH} levels a topology may have")
        try:
            base = float(d.get("latency_base", "1"))
            vals = [float(x.get("value", "")) for x in d.findall("latency")]
        except ValueError:
            raise TopologyError(w.where, "<distances> holds a latency that is not a "
                                         "number") from None
        # round() of inf or nan raises; 1e308 * 10 is inf
        if not all(math.isfinite(v * base) for v in vals) or not math.isfinite(base):
            raise TopologyError(w.where, "<distances> holds a latency that is not a finite "
                                         "number")
        if len(vals) != n * n:
            raise TopologyError(w.where, f"<distances> holds {len(vals)} latencies, "
                                         f"not {n}x{n}")
        level = [owner]
        for _ in range(rel):
            level = [c for o in level for c in o.findall("object")]
        if len(level) != n or any(o.get("type") != "NUMANode" for o in level):
            continue                     # distances between other objects
        idx = [_int(o, "os_index", w.where) for o in level]
        rows = [[round(vals[i * n + j] * base) for j in range(n)] for i in range(n)]
        return _square(idx, rows, node_ids, w.where)
    return [], ""


def _pci(el: ET.Element, local: int | None, node_masks: dict[int, int],
         where: str) -> PCIDevice:
    busid = el.get("pci_busid")
    if not busid:
        raise TopologyError(where, "a PCIDev without pci_busid")
    m = _PCI_TYPE.match(el.get("pci_type", ""))
    class_code, vendor, device = 0, None, None
    if m:
        class_code = int(m.group(1), 16) << 8
        if m.group(5) is not None:           # hwloc 3: "... revision prog_if"
            class_code |= int(m.group(5), 16)
        vendor, device = int(m.group(2), 16), int(m.group(3), 16)
    node = -1
    if local:
        near = [n for n, mask in node_masks.items() if mask & local]
        if len(near) == 1:
            node = near[0]
    return PCIDevice(address=busid, class_code=class_code, numa_node=node,
                     vendor=vendor, device=device)


def _assign_nodes(numa: list[dict[str, Any]], cpu_ids: list[int]) -> dict[int, int]:
    """The kernel's node cpumask for each node: every CPU to its tightest node."""
    out = {n["os"]: 0 for n in numa}

    def rank(n: dict[str, Any]) -> tuple:
        far = any(s in n["subtype"] for s in _FAR_MEMORY)
        return (n["cpuset"].bit_count(), far, n["os"])

    for c in cpu_ids:
        holders = [n for n in numa if n["cpuset"] >> c & 1]
        if holders:
            out[min(holders, key=rank)["os"]] |= 1 << c
    return out


def parse_xml(data: bytes, where: str, name: str | None = None,
              arch: str | None = None, allow_asymmetric: bool = False) -> Topology:
    """Parse hwloc XML bytes into a validated Topology (see the module doc).

    ``where`` names the input in errors; ``arch`` overrides the architecture
    found in the XML (many hwloc test files carry no CPUVendor or
    Architecture info, and the cluster fallback depends on it);
    ``allow_asymmetric`` keeps an asymmetric matrix (Topology.validate).

    >>> t = parse_xml(b'<topology><object type="Machine" cpuset="0x3">'
    ...   b'<object type="NUMANode" os_index="0" cpuset="0x3" local_memory="1024"/>'
    ...   b'<object type="Core" os_index="0" cpuset="0x3"><object type="PU" os_index="0"/>'
    ...   b'<object type="PU" os_index="1"/></object></object></topology>', "x.xml")
    >>> t.counts()["core"], t.nodes[0].cpus
    (1, 3)
    """
    if _ENTITY.search(data) or _DOCTYPE.search(data):
        raise TopologyError(where, "refusing XML with a DOCTYPE internal subset or ENTITY "
                                   "declarations (hwloc never writes them)")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        line, col = e.position
        raise TopologyError(where, f"not well-formed XML at line {line}, column {col}: "
                                   f"{str(e).split(':')[0]}") from None
    except (ValueError, UnicodeError, LookupError) as e:   # LookupError: unknown encoding=
        raise TopologyError(where, f"cannot decode the XML: {e}") from None
    if root.tag != "topology":
        raise TopologyError(where, f"not an hwloc topology (root element is <{root.tag}>)")
    top = root.find("object")
    if top is None:
        raise TopologyError(where, "hwloc topology without any <object>")
    version = "v2" if root.get("version") else "v1"
    try:
        w = _Walk(where)
        _walk(top, _PU(id=-1), _mask(top, "cpuset", where), 0, w)
    except RecursionError:
        raise TopologyError(where, "objects nested too deep") from None
    for key in ("Architecture",):
        for info in root.findall("info"):
            if info.get("name") == key:
                w.infos.setdefault(key, set()).add(info.get("value", ""))
    if not w.pus:
        raise TopologyError(where, "no PU objects: nothing to model")

    arches = {_ARCH.get(a, a) for a in w.infos.get("Architecture", set()) if a}
    if arch:
        pass
    elif len(arches) == 1:
        arch = arches.pop()
    elif w.infos.get("CPUVendor", set()) & _X86_VENDORS:
        arch = "x86"
    else:
        arch = "unknown"
    has_cluster = any(p.cluster is not None for p in w.pus.values())
    src = "xml" if has_cluster else ("l2" if arch == "x86" else "self")

    cpu_ids = sorted(w.pus)
    def key_of(attr: str):
        return {c: (id(getattr(w.pus[c], attr)) if getattr(w.pus[c], attr) is not None else None)
                for c in cpu_ids}

    core_keys = {c: (id(w.pus[c].core) if w.pus[c].core is not None else ("pu", c))
                 for c in cpu_ids}
    pkg_keys = {c: (id(w.pus[c].package) if w.pus[c].package is not None else "machine")
                for c in cpu_ids}
    die_keys = {c: (id(w.pus[c].die) if w.pus[c].die is not None else pkg_keys[c])
                for c in cpu_ids}
    l2_keys = key_of("l2")
    if src == "xml":
        cl_keys = {c: (id(w.pus[c].cluster) if w.pus[c].cluster is not None else ("pu", c))
                   for c in cpu_ids}
    elif src == "l2":
        cl_keys = {c: (l2_keys[c] if l2_keys[c] is not None else core_keys[c]) for c in cpu_ids}
    else:
        cl_keys = {c: ("pu", c) for c in cpu_ids}
    core_m, pkg_m, die_m = group_masks(core_keys), group_masks(pkg_keys), group_masks(die_keys)
    l2_m, llc_m, cl_m = group_masks(l2_keys), group_masks(key_of("llc")), group_masks(cl_keys)

    # cluster ids: hwloc's os_index when given, else the order of first appearance
    cl_order: dict[int, int] = {}
    for c in cpu_ids:
        cl_order.setdefault(cl_m[c], len(cl_order))

    node_masks = _assign_nodes(w.numa, cpu_ids)
    if not w.numa:
        # no NUMA information: the kernel's single fake node 0
        node_masks = {0: sum(1 << c for c in cpu_ids)}
    cpu_node = {c: n for n, m in node_masks.items() for c in cpu_ids if m >> c & 1}
    # core ids are unique only inside a package; fall back to the order in it
    core_in_pkg: dict[Any, dict[Any, int]] = {}
    cpus: dict[int, CPU] = {}
    for c in cpu_ids:
        p = w.pus[c]
        ck = core_in_pkg.setdefault(pkg_keys[c], {})
        ck.setdefault(core_keys[c], len(ck))
        cpus[c] = CPU(
            id=c, node=cpu_node.get(c, -1), package=p.package_id, die=p.die_id,
            core=p.core_id if p.core_id is not None else ck[core_keys[c]],
            cluster=(p.cluster_id if src == "xml" and p.cluster_id >= 0 else
                     cl_order[cl_m[c]] if src != "self" else -1),
            thread_siblings=core_m[c], cluster_cpus=cl_m[c], die_cpus=die_m[c],
            package_cpus=pkg_m[c], llc_cpus=llc_m[c], l2_cpus=l2_m[c],
            cluster_source="smt" if src == "l2" and l2_keys[c] is None else src)

    seen_nodes: dict[int, Node] = {}
    for n in w.numa:
        if n["os"] in seen_nodes:
            raise TopologyError(where, f"two NUMANode objects with os_index {n['os']}")
        seen_nodes[n["os"]] = Node(id=n["os"], cpus=node_masks[n["os"]], memory_bytes=n["memory"])
    nodes = seen_nodes or {0: Node(id=0, cpus=node_masks[0], memory_bytes=None)}
    node_ids = sorted(nodes)
    gp_to_os = {n["gp"]: n["os"] for n in w.numa if n["gp"] is not None}
    if version == "v2":
        distances, note = _distances_v2(root, node_ids, gp_to_os, where)
    else:
        distances, note = _distances_v1(w, node_ids, top, root)

    possible = _mask(top, "complete_cpuset", where)
    present = _mask(top, "cpuset", where)
    online = _mask(top, "online_cpuset", where)
    all_pus = sum(1 << c for c in cpu_ids)
    present = present if present is not None else all_pus
    possible = (possible if possible is not None else present) | present
    online = online if online is not None else present
    pci = [_pci(el, local, node_masks, where) for el, local, _ in w.pci]
    meta: dict[str, Any] = {"format": f"hwloc-xml-{version}",
                            "hwloc_version": root.get("version", "1.x")}
    if note:
        meta["distances_note"] = note
    topo = Topology(name=name or Path(where).name.removesuffix(".xml"), source=where, arch=arch,
                    possible=possible, present=present, online=online, cpus=cpus, nodes=nodes,
                    distances=distances, pci=pci, meta=meta)
    return topo.validate(allow_asymmetric=allow_asymmetric)


def read_xml(path: str | Path, name: str | None = None, arch: str | None = None,
             allow_asymmetric: bool = False, **options: Any) -> Topology:
    """Read an hwloc XML file (v1 or v2) into a validated Topology.

    Input: the path of a file written by ``lstopo foo.xml`` or
    ``hwloc_topology_export_xml()``. Output: a Topology (see the module
    doc for what is read); ``arch`` ("x86", "arm64", ...) overrides the
    architecture found in the XML; ``allow_asymmetric`` keeps an asymmetric
    distance matrix. Raises TopologyError for anything unreadable. Unknown
    ``options`` are refused.
    """
    where = str(path)
    if options:
        raise TopologyError(where, f"unknown option(s) for hwloc XML: {', '.join(options)}")
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise TopologyError(where, f"cannot read: {e.strerror or e}") from None
    return parse_xml(data, where, name, arch, allow_asymmetric)
