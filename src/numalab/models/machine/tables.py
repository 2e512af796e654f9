"""Tidy tables about machines, for chapter 1 ("The machine") and its charts.

Every function takes a :class:`~numalab.topology.model.Topology` (or a
``{label: Topology}`` dict) and returns a pandas DataFrame with one fact per
row, ready for :mod:`numalab.charts`:

* :func:`hierarchy_table` -- one row per CPU: package, die, node, cluster,
  core, thread;
* :func:`hierarchy_rects` -- the same, cut into the rectangles of an icicle
  drawing (one per run of CPUs sharing a level);
* :func:`distance_table` -- the SLIT matrix in long form;
* :func:`hop_order_table` -- per node with CPUs and per scheduler hop level:
  the nodes and CPUs that join ``sched_numa_hop_mask(node, hop)``;
* :func:`node_pair_table` -- per pair of nodes: distance, the scheduler hop
  at which one reaches the other, the rank in ``for_each_node_numadist()``;
* :func:`compare_machines` -- one row per machine, with the reader's notes;
* :func:`machine_table` -- the columns of chapter 1's machine table.
"""

from __future__ import annotations

import pandas as pd

from ...cpumask import cpus as _cpus
from ...cpumask import format_cpulist
from ...kernel.sched.topology import (for_each_node_numadist, for_each_numa_hop_mask,
                                     node_distance, sched_init_numa)
from ...topology.model import Topology
from .text import fact_roles

__all__ = ["LEVELS", "level_order", "hierarchy_table", "hierarchy_rects", "distance_table",
           "hop_order_table", "node_pair_table", "compare_machines", "reader_notes",
           "MACHINE_TABLE_COLUMNS", "machine_table", "fact_roles", "pick_focus", "pick_contrast", "HEADERS",
           "readable"]

#: The levels of the hierarchy drawing, outermost first.
LEVELS = ["package", "die", "node", "cluster", "core", "thread"]


def level_order(topo: Topology) -> list[str]:
    """The hierarchy levels of ``topo``, outermost first.

    Usually ``package, die, node, cluster, core, thread``: a node sits inside
    a package (one node per socket, or several with sub-NUMA clustering).
    On machines where one node holds several whole packages (old ia64 and
    s390 boxes, some fake topologies) the node moves above the package.

    >>> from numalab.topology import load
    >>> level_order(load("numa:2 pack:2 core:2"))[:3]
    ['node', 'package', 'die']
    """
    node_of_pkg: dict[int, set[int]] = {}
    pkgs_of_node: dict[int, set[int]] = {}
    for c in topo.cpus.values():
        node_of_pkg.setdefault(c.package, set()).add(c.node)
        pkgs_of_node.setdefault(c.node, set()).add(c.package)
    if (all(len(v) == 1 for v in node_of_pkg.values())
            and any(len(v) > 1 for v in pkgs_of_node.values())):
        return ["node", "package", "die", "cluster", "core", "thread"]
    return list(LEVELS)


def _low(mask: int, default: int) -> int:
    """The lowest CPU of a mask (an id for the group it describes)."""
    return (mask & -mask).bit_length() - 1 if mask else default


def hierarchy_table(topo: Topology) -> pd.DataFrame:
    """One row per CPU the dump describes, sorted by the hierarchy
    (:func:`level_order`).

    Columns: ``cpu``; ``package`` (physical_package_id), ``die`` (die_id),
    ``node`` (-1 when unknown); ``cluster`` and ``core`` as the lowest CPU of
    the cluster / SMT-sibling mask (kernel core ids repeat across packages,
    so the lowest sibling is the unique name); ``thread`` (0 for the first
    SMT sibling, 1 for the second...); ``core_id`` and ``cluster_id`` as the
    kernel prints them; ``cluster_source``; ``online``.

    >>> from numalab.topology import load
    >>> hierarchy_table(load("pack:1 core:2 pu:2"))[["cpu", "core", "thread"]].values.tolist()
    [[0, 0, 0], [1, 0, 1], [2, 2, 0], [3, 2, 1]]
    """
    rows = []
    for c in topo.cpus.values():
        siblings = c.thread_siblings or (1 << c.id)
        rows.append({
            "cpu": c.id,
            "package": c.package,
            "die": c.die,
            "node": c.node,
            "cluster": _low(c.cluster_cpus, c.id),
            "core": _low(siblings, c.id),
            "thread": _cpus(siblings).index(c.id) if (siblings >> c.id) & 1 else 0,
            "core_id": c.core,
            "cluster_id": c.cluster,
            "cluster_source": c.cluster_source,
            "online": bool(not topo.online or (topo.online >> c.id) & 1),
        })
    order = level_order(topo)
    cols = ["cpu", *order, "core_id", "cluster_id", "cluster_source", "online"]
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values([*order, "cpu"], kind="stable").reset_index(drop=True)


def hierarchy_rects(topo: Topology, per_row: int = 64) -> pd.DataFrame:
    """The hierarchy as icicle rectangles: CPUs laid out left to right in
    hierarchy order, one band per level, one rectangle per run of adjacent
    CPUs that share that level *and every level above it*.

    Long machines are wrapped: ``row`` numbers strips of ``per_row`` CPUs,
    and a run crossing a strip boundary is cut in two. Columns: ``row``,
    ``level``, ``depth`` (0 = package), ``value`` (the level's id), ``x0`` /
    ``x1`` (CPU positions in the strip, x1 exclusive), ``n`` (CPUs),
    ``cpulist``, ``label`` (text short enough to print inside), ``shade``
    (0/1 alternating between neighbours, to tell them apart), ``row_title``.
    """
    h = hierarchy_table(topo)
    order = level_order(topo)
    out = []
    if h.empty:
        return pd.DataFrame(columns=["row", "level", "depth", "value", "x0", "x1", "n",
                                     "cpulist", "label", "shade", "row_title"])
    cpu_list = h["cpu"].tolist()
    nrows = (len(cpu_list) + per_row - 1) // per_row
    for depth, level in enumerate(order):
        keys = list(zip(*(h[lv] for lv in order[: depth + 1])))
        start = 0
        shade = 0
        for i in range(1, len(keys) + 1):
            if i < len(keys) and keys[i] == keys[start] and i % per_row != 0:
                continue
            members = cpu_list[start:i]
            value = keys[start][-1]
            row = start // per_row
            n = i - start
            mask = 0
            for c in members:
                mask |= 1 << c
            name = {"thread": "t", "core": "core ", "cluster": "cl ", "node": "node ",
                    "die": "die ", "package": "pkg "}[level]
            label = f"{name}{value}"
            out.append({
                "row": row, "level": level, "depth": depth, "value": int(value),
                "x0": start - row * per_row, "x1": i - row * per_row, "n": n,
                "cpulist": format_cpulist(mask),
                "label": label if len(label) <= 1.6 * n + 1 else "",
                "shade": shade,
            })
            # keep one shade across a strip cut, alternate between true neighbours
            if i < len(keys) and keys[i] != keys[start]:
                shade ^= 1
            start = i
    df = pd.DataFrame(out)
    df["row_title"] = df["row"].map(
        lambda r: f"strip {r + 1} of {nrows}: positions {r * per_row}-"
                  f"{min(len(cpu_list), (r + 1) * per_row) - 1}")
    return df


def distance_table(topo: Topology) -> pd.DataFrame:
    """The node distance matrix in long form.

    Columns: ``from_node``, ``to_node``, ``distance`` (``node_distance()``:
    SLIT units, 10 = local; the kernel's 10/20 default without a table),
    ``relative`` (distance / local distance of ``from_node``), ``local``,
    ``from_cpus`` / ``to_cpus`` (CPU counts), ``defaulted`` (no table given).
    """
    rows = []
    for a in topo.node_ids:
        local = node_distance(topo, a, a) or 10
        for b in topo.node_ids:
            d = node_distance(topo, a, b)
            rows.append({"from_node": a, "to_node": b, "distance": d,
                         "relative": d / local, "local": a == b,
                         "from_cpus": topo.nodes[a].cpus.bit_count(),
                         "to_cpus": topo.nodes[b].cpus.bit_count(),
                         "defaulted": not topo.distances})
    return pd.DataFrame(rows, columns=["from_node", "to_node", "distance", "relative", "local",
                                       "from_cpus", "to_cpus", "defaulted"])


def hop_order_table(topo: Topology) -> pd.DataFrame:
    """What ``for_each_numa_hop_mask(mask, node)`` yields, node by node.

    One row per node with online CPUs and per hop level of
    ``sched_init_numa()``. Columns: ``node``, ``hop``, ``distance`` (the
    level's distance, ``sched_domains_numa_distance[hop]``), ``nodes`` (the
    nodes whose CPUs join the mask at this hop, as "1,3"; "" when none do),
    ``new_cpus`` (how many), ``cpus`` (weight of the whole hop mask),
    ``cpulist`` (the new CPUs). Memory-only nodes have no rows: the kernel
    keeps no hop masks for them.
    """
    state = sched_init_numa(topo)
    rows = []
    for node in topo.node_ids:
        prev = 0
        reached: set[int] = set()
        for hop, mask in enumerate(for_each_numa_hop_mask(state, node)):
            new = mask & ~prev
            dist = state.distances[hop]
            joined = [k for k in topo.node_ids
                      if k not in reached and (state.cpu_nodes >> k) & 1
                      and node_distance(topo, node, k) <= dist]
            reached.update(joined)
            rows.append({"node": node, "hop": hop, "distance": dist,
                         "nodes": ",".join(map(str, joined)), "n_nodes": len(joined),
                         "new_cpus": new.bit_count(), "cpus": mask.bit_count(),
                         "cpulist": format_cpulist(new)})
            prev = mask
    return pd.DataFrame(rows, columns=["node", "hop", "distance", "nodes", "n_nodes",
                                       "new_cpus", "cpus", "cpulist"])


def node_pair_table(topo: Topology) -> pd.DataFrame:
    """One row per ordered pair of online nodes.

    Columns: ``from_node``, ``to_node``, ``distance``; ``hop`` -- the first
    scheduler level whose ``sched_numa_hop_mask(from_node, hop)`` holds
    ``to_node``'s CPUs (None when either node has no online CPUs);
    ``rank`` -- the position of ``to_node`` in
    ``for_each_node_numadist(from_node)`` (0 = the start node itself).
    """
    state = sched_init_numa(topo)
    rows = []
    for a in topo.node_ids:
        rank = {n: i for i, n in enumerate(for_each_node_numadist(topo, a))}
        for b in topo.node_ids:
            d = node_distance(topo, a, b)
            hop = None
            if (state.cpu_nodes >> a) & 1 and (state.cpu_nodes >> b) & 1:
                hop = next((i for i, lv in enumerate(state.distances) if d <= lv), None)
            rows.append({"from_node": a, "to_node": b, "distance": d,
                         "hop": hop, "rank": rank.get(b)})
    df = pd.DataFrame(rows, columns=["from_node", "to_node", "distance", "hop", "rank"])
    df["hop"] = df["hop"].astype("Int64")
    df["rank"] = df["rank"].astype("Int64")
    return df


def _sizes(masks: set[int]) -> list[int]:
    return sorted(m.bit_count() for m in masks)


def compare_machines(machines: dict[str, Topology]) -> pd.DataFrame:
    """One row per machine, in the order given.

    Columns: ``machine``, ``arch``, ``cpus``, ``packages``, ``dies``,
    ``nodes``, ``cpu_nodes`` (nodes with CPUs), ``memory_only_nodes``,
    ``clusters``, ``cores``, ``cpus_per_node_min`` / ``_max`` (over nodes
    with CPUs), ``smt`` (most threads per core), ``cluster_size`` (most CPUs
    per cluster), ``distance_levels`` (``sched_domains_numa_levels``),
    ``distance_min`` / ``distance_max`` (off-diagonal; NaN with one node),
    ``distance_ratio`` (max / min off-diagonal; over every node, memory-only
    nodes included), ``slit`` (True when the dump gave a table, False for
    the 10/20 default), ``slit_default`` (every distance equals the kernel's
    default, 10 local and 20 remote, whether given or not),
    ``distance_invalid`` (``sched_init_numa()`` rejected a distance outside
    [10, 255] and built no levels), ``distances_assumed`` (a machine file
    whose note lists its distances under "Assumed:"), ``cluster_source`` (where
    the cluster masks came from: "sysfs", or a fallback such as "l2" or
    "self"; several joined with "+"), ``source``, ``note_count`` and
    ``notes`` (the reader's notes, ``meta["notes"]``: the quirks it read
    instead of refusing, such as a distance row with one entry per possible
    node; joined with " | ", "" when none).

    >>> from numalab.topology import load
    >>> t = load("numa:2 core:2")
    >>> t.meta["notes"] = ["a quirk", "another"]
    >>> compare_machines({"m": t})[["note_count", "notes"]].values.tolist()
    [[2, 'a quirk | another']]
    """
    rows = []
    for label, t in machines.items():
        counts = t.counts()
        cpu_node_sizes = [t.nodes[n].cpus.bit_count() for n in t.node_ids if t.nodes[n].cpus]
        off = [node_distance(t, a, b) for a in t.node_ids for b in t.node_ids if a != b]
        state = sched_init_numa(t)
        sources = sorted({c.cluster_source for c in t.cpus.values()})
        rows.append({
            "machine": label,
            "arch": t.arch,
            "cpus": counts["pu"],
            "packages": counts["package"],
            "dies": counts["die"],
            "nodes": counts["numa"],
            "cpu_nodes": len(cpu_node_sizes),
            "memory_only_nodes": counts["numa"] - len(cpu_node_sizes),
            "clusters": counts["cluster"],
            "cores": counts["core"],
            "cpus_per_node_min": min(cpu_node_sizes) if cpu_node_sizes else 0,
            "cpus_per_node_max": max(cpu_node_sizes) if cpu_node_sizes else 0,
            "smt": max(_sizes(t.cores()), default=0),
            "cluster_size": max(_sizes(t.clusters()), default=0),
            "distance_levels": state.levels,
            "distance_min": min(off) if off else float("nan"),
            "distance_max": max(off) if off else float("nan"),
            "distance_ratio": (max(off) / min(off)) if off else float("nan"),
            "slit": bool(t.distances),
            "slit_default": all(node_distance(t, a, b) == (10 if a == b else 20)
                                for a in t.node_ids for b in t.node_ids),
            "distance_invalid": "Invalid distance value range" in state.warnings,
            "distances_assumed": _distances_assumed(t),
            "cluster_source": "+".join(sources),
            "source": t.source,
            **reader_notes(t),
        })
    return pd.DataFrame(rows)


def _distances_assumed(topo: Topology) -> bool:
    """True for a machine file whose note lists the distances among the
    assumed facts (no patch publishes a SLIT)."""
    return "distance" in fact_roles(topo).get("assumed", "").lower()


def reader_notes(topo: Topology) -> dict[str, object]:
    """The reader's notes on one machine, as two table cells: ``note_count``
    and ``notes`` (joined with " | ", "" when none).

    >>> from numalab.topology import load
    >>> reader_notes(load("core:2"))
    {'note_count': 0, 'notes': ''}
    """
    notes = [str(n) for n in topo.meta.get("notes", [])]
    return {"note_count": len(notes), "notes": " | ".join(notes)}


#: The columns of chapter 1's machine table, the reader's notes last.
MACHINE_TABLE_COLUMNS = ["machine", "role", "arch", "cpus", "packages", "dies", "nodes",
                         "memory_only_nodes", "clusters", "cores", "smt", "cluster_size",
                         "distance_levels", "distance_ratio", "slit", "cluster_source",
                         "note_count", "notes"]


def machine_table(machines: dict[str, Topology] | pd.DataFrame) -> pd.DataFrame:
    """Chapter 1's table of the machines: :func:`compare_machines` cut to
    :data:`MACHINE_TABLE_COLUMNS`, so that each machine shows what the reader
    noted about its dump (``note_count``, ``notes``) and the role of its
    facts (``role``: measured, published or assumed; see
    :func:`numalab.models.machine.text.dataset_role`).

    Input: ``{label: Topology}`` or the frame :func:`compare_machines`
    returned. Output: one row per machine.

    >>> from numalab.topology import load
    >>> list(machine_table({"m": load("numa:2 core:2")}).columns[-2:])
    ['note_count', 'notes']
    """
    from .text import dataset_role
    df = machines if isinstance(machines, pd.DataFrame) else compare_machines(machines)
    df = df.assign(role=[dataset_role(s) for s in df["source"]])
    return df[MACHINE_TABLE_COLUMNS]


def pick_focus(machines: dict[str, Topology], focus: str = "",
               project_labels: list[str] | None = None) -> str:
    """The label of the machine a chapter shows in detail.

    ``focus`` wins when given (a KeyError-free check: an unknown label raises
    ValueError listing the known ones). Otherwise: the first of
    ``project_labels`` (the project's own datasets) that has more than one
    NUMA node, else the first project dataset, else the first machine.
    """
    if focus:
        if focus not in machines:
            raise ValueError(f"focus {focus!r} is not one of the loaded machines: "
                             + ", ".join(machines))
        return focus
    mine = [m for m in (project_labels or []) if m in machines]
    for m in mine:
        if len(machines[m].nodes) > 1:
            return m
    if mine:
        return mine[0]
    if not machines:
        raise ValueError("no machines loaded")
    return next(iter(machines))


def pick_contrast(machines: dict[str, Topology], max_nodes: int = 16) -> str:
    """The machine with the most scheduler distance levels (ties: more CPUs,
    then the first loaded) among those with at most ``max_nodes`` nodes --
    the richest hop order that still fits on a page."""
    best, key = None, None
    for label, t in machines.items():
        if len(t.nodes) > max_nodes:
            continue
        k = (sched_init_numa(t).levels, len(t.cpus))
        if key is None or k > key:
            best, key = label, k
    if best is None:
        raise ValueError("no machines loaded")
    return best


#: Column names as the book shows them: words with units, not code names.
HEADERS = {
    "from_node": "from node", "to_node": "to node", "distance": "distance (SLIT units)",
    "relative": "relative to local", "from_cpus": "CPUs in from node", "to_cpus": "CPUs in to node",
    "defaulted": "kernel default (no SLIT)", "n_nodes": "nodes joining", "new_cpus": "new CPUs",
    "cpulist": "new CPU list", "core_id": "kernel core id", "cluster_id": "kernel cluster id",
    "cluster_source": "clusters from", "memory_only_nodes": "memory-only nodes",
    "cluster_size": "CPUs per cluster (most)", "distance_levels": "hop levels",
    "distance_ratio": "farthest / nearest remote distance", "note_count": "reader's notes",
    "smt": "threads per core (most)", "slit": "SLIT given", "cpus": "CPUs",
    "cpu_nodes": "nodes with CPUs", "cpus_per_node_min": "CPUs per node (fewest)",
    "cpus_per_node_max": "CPUs per node (most)", "distance_min": "nearest remote distance",
    "distance_max": "farthest remote distance",
}


def readable(df: pd.DataFrame, **extra: str) -> pd.DataFrame:
    """``df`` with its columns (and index and column-axis names) renamed for a
    reader (:data:`HEADERS`; ``extra`` overrides, e.g. ``cpus="CPUs in the
    mask"``). Input and output: a DataFrame; the values are not touched.

    >>> readable(pd.DataFrame({"from_node": [0], "cpus": [2]}), cpus="CPUs in the mask").columns.tolist()
    ['from node', 'CPUs in the mask']
    """
    names = {**HEADERS, **extra}
    out = df.rename(columns=lambda c: names.get(c, c))
    out.index = out.index.set_names([names.get(n, n) if n else n for n in out.index.names])
    out.columns = out.columns.set_names([names.get(n, n) if n else n for n in out.columns.names])
    return out
