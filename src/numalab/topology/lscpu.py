"""Read ``lscpu -p`` output (and optionally ``numactl --hardware``) into a Topology.

``lscpu -p`` prints one line per CPU, fields separated by commas, after
comment lines starting with ``#``; the last comment line names the
columns::

    # CPU,Core,Socket,Node,,L1d,L1i,L2,L3
    0,0,0,0,,0,0,0,0

``lscpu -p=CPU,CORE,SOCKET,NODE,CLUSTER,ONLINE`` chooses the columns. The
empty column name in the default output separates the caches; newer
util-linux writes a chosen CACHE column as one field ``L1d:L1i:L2`` with
``:``-separated values. Both forms are read. Fields may be empty (an
offline CPU has no core or socket; x86 has no cluster id).

What lscpu cannot say -- node memory and the distance matrix -- comes from
``numactl --hardware`` text when given: ``read_lscpu(path, numactl=...)``,
or automatically from a sibling file with the same stem and the suffix
``.numactl`` (``box.lscpu`` -> ``box.numactl``).

Cluster masks: the CLUSTER column when it has values (``cluster_source``
"lscpu"); else, when the caller says ``arch="x86"``, the CPUs sharing the
L2 column, or the SMT siblings without one (what x86 reports); else the
CPU alone. ``lscpu -p`` does not say
the architecture, so ``arch`` defaults to "unknown".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..cpumask import MAX_CPUS
from ..errors import TopologyError
from .model import CPU, Node, Topology
from .synthetic import group_masks

__all__ = ["read_lscpu", "parse_lscpu", "parse_numactl"]

_KNOWN = {"cpu", "core", "socket", "node", "cluster", "book", "drawer", "online",
          "configured", "polarization", "address", "maxmhz", "minmhz", "mhz",
          "scalmhz%", "modelname"}
_CACHE = re.compile(r"^l[1-5][di]?$")


def _read_text(path: Path, where: str) -> str:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TopologyError(where, f"cannot read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TopologyError(where, f"not UTF-8 text (byte {e.start})") from None


def _header(lines: list[str], where: str) -> tuple[int, list[str]]:
    """(line number, column names) of the ``# CPU,...`` header line."""
    found = None
    for i, line in enumerate(lines, 1):
        s = line.strip()
        if not s:
            continue
        if not s.startswith("#"):
            break
        names = [n.strip() for n in s.lstrip("#").split(",")]
        if names and names[0].lower() == "cpu":
            found = (i, names)
    if found is None:
        raise TopologyError(where, "no column header such as '# CPU,Core,Socket,Node' "
                                   "(is this lscpu -p output?)")
    return found


def _expand(names: list[str], where: str, lineno: int) -> list[tuple[str, int | None]]:
    """Column names -> [(name, sub-index)] where a ``L1d:L1i:L2`` column
    becomes one entry per cache, read from one ``:``-separated field."""
    out: list[tuple[str, int | None]] = []
    for n in names:
        low = n.lower()
        if ":" in low:
            parts = low.split(":")
            if not all(_CACHE.match(p) for p in parts):
                raise TopologyError(where, f"line {lineno}: unknown cache column {n!r}")
            out.extend((p, k) for k, p in enumerate(parts))
        elif low == "cache" or low == "":
            out.append(("", None))
        elif low in _KNOWN or _CACHE.match(low):
            out.append((low, None))
        else:
            raise TopologyError(where, f"line {lineno}: unknown column {n!r}")
    seen = [c for c, _ in out if c]
    dup = {c for c in seen if seen.count(c) > 1}
    if dup:
        raise TopologyError(where, f"line {lineno}: column {sorted(dup)[0]!r} appears twice")
    return out


def parse_numactl(text: str, where: str) -> tuple[dict[int, int], dict[int, int],
                                                    list[int], list[list[int]]]:
    """Parse ``numactl --hardware`` text.

    Output: ``(node -> cpu mask, node -> memory bytes, node ids of the
    distance table, distance rows)``. Sizes in MB are taken as MiB (what
    numactl means). Raises TopologyError naming the line for anything else.

    >>> parse_numactl("node 0 cpus: 0 1\\nnode 0 size: 1024 MB\\n"
    ...               "node distances:\\nnode 0\\n  0: 10\\n", "x")
    ({0: 3}, {0: 1073741824}, [0], [[10]])
    """
    cpus: dict[int, int] = {}
    mem: dict[int, int] = {}
    ids: list[int] = []
    rows: list[list[int]] = []
    in_table = False
    units = {"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40}
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        try:
            if line.startswith("node distances"):
                in_table = True
                continue
            if in_table:
                if line.startswith("node"):
                    ids = [int(x) for x in line.split()[1:]]
                    continue
                head, _, rest = line.partition(":")
                row_id = int(head)
                if len(rows) >= len(ids) or ids[len(rows)] != row_id:
                    raise TopologyError(where, f"line {i}: distance row for node {row_id} "
                                               "does not match the table header")
                row = [int(x) for x in rest.split()]
                if len(row) != len(ids):
                    raise TopologyError(where, f"line {i}: distance table is not square "
                                               f"({len(row)} values for {len(ids)} nodes)")
                rows.append(row)
                continue
            m = re.match(r"^node\s+(\d+)\s+(cpus|size|free):\s*(.*)$", line)
            if m:
                node, what, rest = int(m.group(1)), m.group(2), m.group(3)
                if what == "cpus":
                    mask = 0
                    for c in rest.split():
                        if int(c) >= MAX_CPUS:
                            raise TopologyError(where, f"line {i}: CPU {c} is beyond the "
                                                       f"{MAX_CPUS} CPUs numalab handles")
                        mask |= 1 << int(c)
                    cpus[node] = mask
                elif what == "size":
                    val, _, unit = rest.partition(" ")
                    factor = units.get(unit.strip().lower())
                    if factor is None:
                        raise TopologyError(where, f"line {i}: unknown size unit {unit!r}")
                    mem[node] = int(val) * factor
                continue
            if line.startswith(("available:", "No NUMA")):
                continue
        except ValueError:
            raise TopologyError(where, f"line {i}: cannot read {line!r}") from None
        # other lines (free memory, etc.) carry nothing the model needs
    if len(rows) != len(ids):
        raise TopologyError(where, f"distance table is not square ({len(rows)} rows for "
                                   f"{len(ids)} nodes)")
    return cpus, mem, ids, rows


def parse_lscpu(text: str, where: str, numactl_text: str | None = None,
                numactl_where: str | None = None, arch: str | None = None,
                name: str | None = None, allow_asymmetric: bool = False) -> Topology:
    """Parse ``lscpu -p`` text (and optional ``numactl --hardware`` text).

    Output: a validated Topology. See the module doc for the rules;
    ``allow_asymmetric`` keeps an asymmetric numactl matrix.

    >>> t = parse_lscpu("# CPU,Core,Socket,Node\\n0,0,0,0\\n1,0,0,0\\n", "x.lscpu")
    >>> t.counts()["core"], t.counts()["pu"]
    (1, 2)
    """
    lines = text.splitlines()
    hline, names = _header(lines, where)
    cols = _expand(names, where, hline)
    col_names = [c for c, _ in cols]
    if "cpu" not in col_names:
        raise TopologyError(where, f"line {hline}: no CPU column")
    # physical field positions: a ':' cache column is one field
    fields_per_line = len(names)
    field_of: list[int] = []
    k = 0
    for n in names:
        width = len(n.split(":")) if ":" in n else 1
        field_of.extend([k] * width)
        k += 1

    rows: dict[int, dict[str, Any]] = {}
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) != fields_per_line:
            raise TopologyError(where, f"line {lineno}: {len(fields)} fields, but the header "
                                       f"names {fields_per_line}")
        row: dict[str, Any] = {}
        for (col, sub), f in zip(cols, field_of):
            value = fields[f].strip()
            if sub is not None:
                parts = value.split(":") if value else []
                value = parts[sub].strip() if sub < len(parts) else ""
            if not col:
                continue
            if col in ("online", "configured"):
                if value.upper() not in ("Y", "N", "YES", "NO", ""):
                    raise TopologyError(where, f"line {lineno}: {col} is {value!r}, not Y or N")
                row[col] = value.upper().startswith("Y") if value else None
            elif col in ("cpu", "core", "socket", "node", "cluster", "book", "drawer") \
                    or _CACHE.match(col):
                if value == "" or value == "-":
                    row[col] = None
                elif value.isascii() and value.isdigit():   # int() refuses "\u00b2"
                    row[col] = int(value)
                else:
                    raise TopologyError(where, f"line {lineno}: {col} field {value!r} is not "
                                               "a non-negative integer")
        cpu = row.get("cpu")
        if cpu is None:
            raise TopologyError(where, f"line {lineno}: empty CPU field")
        if cpu >= MAX_CPUS:
            raise TopologyError(where, f"line {lineno}: CPU {cpu} is beyond the {MAX_CPUS} "
                                       "CPUs numalab handles")
        if cpu in rows:
            raise TopologyError(where, f"line {lineno}: CPU {cpu} listed twice")
        row["line"] = lineno
        rows[cpu] = row
    if not rows:
        raise TopologyError(where, "no CPU lines")

    numa_cpus: dict[int, int] = {}
    numa_mem: dict[int, int] = {}
    dist_ids: list[int] = []
    dist_rows: list[list[int]] = []
    if numactl_text is not None:
        numa_cpus, numa_mem, dist_ids, dist_rows = parse_numactl(
            numactl_text, numactl_where or where)

    caches = sorted({c for c in col_names if _CACHE.match(c)}, key=lambda c: (int(c[1]), c))
    unified = [c for c in caches if len(c) == 2 and c != "l1"]
    llc = unified[-1] if unified else None
    has_cluster = any(r.get("cluster") is not None for r in rows.values())
    arch = arch or "unknown"
    src = "lscpu" if has_cluster else ("l2" if arch == "x86" else "self")

    def key(cpu: int, col: str | None, scope: tuple = ()) -> Any:
        r = rows[cpu]
        if col is None or r.get(col) is None:
            return None
        return (*[r.get(s) for s in scope], r[col])

    cpu_ids = sorted(rows)
    core_k = {c: key(c, "core", ("drawer", "book", "socket")) or ("cpu", c) for c in cpu_ids}
    # no SOCKET column: one package; an empty socket field (offline CPU): unknown
    pkg_k = {c: key(c, "socket", ("drawer", "book")) if "socket" in col_names else "machine"
             for c in cpu_ids}
    l2_k = {c: key(c, "l2") for c in cpu_ids}
    if src == "lscpu":
        cl_k = {c: key(c, "cluster", ("drawer", "book", "socket")) or ("cpu", c) for c in cpu_ids}
    elif src == "l2":
        cl_k = {c: l2_k[c] or core_k[c] for c in cpu_ids}
    else:
        cl_k = {c: ("cpu", c) for c in cpu_ids}
    core_m, pkg_m, cl_m = group_masks(core_k), group_masks(pkg_k), group_masks(cl_k)
    l2_m, llc_m = group_masks(l2_k), group_masks({c: key(c, llc) for c in cpu_ids})

    has_node = any(r.get("node") is not None for r in rows.values())
    node_masks: dict[int, int] = {}
    for c in cpu_ids:
        n = rows[c].get("node")
        if n is None and not has_node:
            n = 0                                  # no NUMA column: the kernel's node 0
        if n is not None:
            node_masks[n] = node_masks.get(n, 0) | (1 << c)
    # a core is inside one node
    core_node: dict[Any, int] = {}
    for c in cpu_ids:
        n = rows[c].get("node")
        if n is None or core_k[c][0] == "cpu":
            continue
        prev = core_node.setdefault(core_k[c], n)
        if prev != n:
            raise TopologyError(where, f"line {rows[c]['line']}: CPU {c} is in node {n} but "
                                       f"another thread of its core is in node {prev}")
    if numactl_text is not None:
        nw = numactl_where or where
        for n, mask in numa_cpus.items():
            ours = node_masks.get(n, 0)
            if mask != ours:
                diff = (mask ^ ours) & -(mask ^ ours)
                raise TopologyError(nw, f"node {n}: numactl lists CPUs that lscpu puts "
                                        f"elsewhere (first: CPU {diff.bit_length() - 1})")
        for n in numa_cpus:
            node_masks.setdefault(n, 0)
        for n in numa_mem:
            node_masks.setdefault(n, 0)
    node_ids = sorted(node_masks)
    distances: list[list[int]] = []
    if dist_rows:
        if sorted(dist_ids) != node_ids:
            raise TopologyError(numactl_where or where,
                                f"distance table covers nodes {dist_ids}, but the machine "
                                f"has nodes {node_ids}")
        pos = {n: i for i, n in enumerate(dist_ids)}
        distances = [[dist_rows[pos[a]][pos[b]] for b in node_ids] for a in node_ids]

    cl_order: dict[int, int] = {}
    core_order: dict[Any, dict[Any, int]] = {}
    cpus: dict[int, CPU] = {}
    for c in cpu_ids:
        r = rows[c]
        cl_order.setdefault(cl_m[c], len(cl_order))
        co = core_order.setdefault(pkg_k[c], {})
        co.setdefault(core_k[c], len(co))
        cpus[c] = CPU(
            id=c, node=r.get("node") if r.get("node") is not None else (-1 if has_node else 0),
            package=r.get("socket") or 0, die=0,
            core=r["core"] if r.get("core") is not None else co[core_k[c]],
            cluster=(r["cluster"] if src == "lscpu" and r.get("cluster") is not None
                     else cl_order[cl_m[c]] if src == "l2" else -1),
            thread_siblings=core_m[c], cluster_cpus=cl_m[c],
            die_cpus=pkg_m[c] or (1 << c), package_cpus=pkg_m[c] or (1 << c),
            llc_cpus=llc_m[c], l2_cpus=l2_m[c],
            cluster_source="smt" if src == "l2" and l2_k[c] is None else src)
    present = sum(1 << c for c in cpu_ids)
    online = sum(1 << c for c in cpu_ids if rows[c].get("online") is not False)
    nodes = {n: Node(id=n, cpus=node_masks[n], memory_bytes=numa_mem.get(n)) for n in node_ids}
    meta = {"format": "lscpu", "numactl": numactl_where}
    if distances:
        # the matrix's checks name the numactl file it came from
        Topology(name="", source=numactl_where or where, nodes=nodes, distances=distances,
                 meta=meta).validate(allow_asymmetric=allow_asymmetric)
    topo = Topology(name=name or Path(where).stem, source=where, arch=arch, possible=present,
                    present=present, online=online, cpus=cpus, nodes=nodes,
                    distances=distances, meta=meta)
    return topo.validate(allow_asymmetric=allow_asymmetric)


def read_lscpu(path: str | Path, numactl: str | Path | None = None, arch: str | None = None,
               name: str | None = None, allow_asymmetric: bool = False,
               **options: Any) -> Topology:
    """Read an ``lscpu -p`` file, with ``numactl --hardware`` text when available.

    Inputs: ``path``; ``numactl`` -- a file of ``numactl --hardware``
    output (default: ``path`` with the suffix ``.numactl`` if it exists;
    pass ``False`` to ignore it); ``arch`` -- "x86", "arm64", ... (lscpu -p
    does not record it; it decides the cluster fallback).
    Output: a validated Topology. Raises TopologyError naming the file and
    line for anything it cannot read.
    """
    where = str(path)
    if options:
        raise TopologyError(where, f"unknown option(s) for lscpu: {', '.join(options)}")
    p = Path(path)
    text = _read_text(p, where)
    nt = nw = None
    if numactl is None:
        sibling = p.with_suffix(".numactl")
        if sibling.is_file():
            numactl = sibling
    if numactl:
        nw = str(numactl)
        nt = _read_text(Path(numactl), nw)
    return parse_lscpu(text, where, nt, nw, arch=arch, name=name,
                       allow_asymmetric=allow_asymmetric)
