"""Small Altair chart builders shared by every chapter.

Data in: a tidy pandas DataFrame (one fact per row). Out: an ``alt.Chart``
(or a layered / concatenated chart) that always has a title, axis titles
that name their unit, and tooltips. The generic builders are
:func:`heatmap`, :func:`bar`, :func:`line` and :func:`scatter`; chapter 1
adds :func:`hierarchy_chart`, :func:`distance_heatmap`,
:func:`node_graph_chart`, :func:`hop_heatmap` and :func:`compare_chart`.

Titles are required arguments on purpose: a chart without a title or
without units is a bug in this book.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from .models.machine.tables import (LEVELS, compare_machines, distance_table, hierarchy_rects,
                             level_order, node_pair_table)
from .topology.model import Topology

__all__ = ["heatmap", "bar", "line", "scatter", "hierarchy_chart", "distance_heatmap",
           "node_graph_chart", "hop_heatmap", "compare_chart", "LEVEL_COLORS"]

#: One colour pair (darker, lighter) per hierarchy level, outermost first.
LEVEL_COLORS = {
    "package": ("#4c72b0", "#7f9fd0"),
    "die": ("#55a868", "#8cc79a"),
    "node": ("#c44e52", "#e08a8d"),
    "cluster": ("#8172b2", "#b0a6d6"),
    "core": ("#ccb974", "#e5d9a8"),
    "thread": ("#64b5cd", "#a3d6e6"),
}


def _tooltip(df: pd.DataFrame, tooltip: Sequence | None) -> list:
    return list(tooltip) if tooltip is not None else list(df.columns)


def heatmap(df: pd.DataFrame, x: str, y: str, color: str, title: str, *,
            x_title: str, y_title: str, color_title: str, tooltip: Sequence | None = None,
            text: bool | None = None, scheme: str = "viridis", reverse: bool = False,
            width: int | None = None, height: int | None = None,
            color_type: str = "quantitative") -> alt.LayerChart:
    """A rect heatmap of ``color`` over ordinal ``x`` and ``y``.

    ``text`` prints the value in every cell (default: when there are at most
    16 distinct x values). Hovering a cell highlights its row and column.
    """
    nx = df[x].nunique() if len(df) else 0
    if text is None:
        text = nx <= 16
    cell = 28 if nx <= 16 else max(4, 480 // max(nx, 1))
    width = width or max(160, cell * nx)
    height = height or max(160, cell * (df[y].nunique() if len(df) else 0))
    hover = alt.selection_point(fields=[x, y], on="pointerover", clear="pointerout",
                                empty=False)
    base = alt.Chart(df).encode(
        x=alt.X(f"{x}:O", title=x_title, axis=alt.Axis(labelAngle=0, labelOverlap="parity")),
        y=alt.Y(f"{y}:O", title=y_title, axis=alt.Axis(labelOverlap="parity")),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(f"{color}:{color_type[0].upper()}", title=color_title,
                        scale=alt.Scale(scheme=scheme, reverse=reverse)),
        stroke=alt.condition(hover, alt.value("black"), alt.value(None)),
        strokeWidth=alt.condition(hover, alt.value(2), alt.value(0)),
        tooltip=_tooltip(df, tooltip),
    ).add_params(hover)
    layers = [rect]
    if text and len(df):
        # dark text on the light end of the scale, white on the dark end
        vals = pd.to_numeric(df[color], errors="coerce")
        mid = (vals.min() + vals.max()) / 2 if vals.notna().any() else 0
        dark_high = not reverse
        test = f"datum['{color}'] {'>' if dark_high else '<'} {float(mid)!r}"
        layers.append(base.mark_text(fontSize=10).encode(
            text=alt.Text(f"{color}:{color_type[0].upper()}"),
            color=alt.condition(test, alt.value("white"), alt.value("black")),
        ))
    return alt.layer(*layers, title=title).properties(width=width, height=height)


def bar(df: pd.DataFrame, x: str, y: str, title: str, *, x_title: str, y_title: str,
        color: str | None = None, color_title: str | None = None,
        tooltip: Sequence | None = None, sort: str | None = None,
        horizontal: bool = False, width: int = 480, height: int = 240,
        legend_select: alt.Parameter | None = None) -> alt.Chart:
    """Bars of quantitative ``y`` per category ``x`` (``horizontal`` swaps the
    axes; ``sort`` is an Altair sort such as ``"-x"``). Clicking a legend
    entry highlights its bars; pass ``legend_select`` (a selection defined
    on another chart of the same figure) to share that highlight."""
    enc = {}
    params = []
    if color is not None:
        sel = legend_select
        if sel is None:
            sel = alt.selection_point(fields=[color], bind="legend")
            params.append(sel)
        enc["color"] = alt.Color(f"{color}:N", title=color_title or color)
        enc["opacity"] = alt.condition(sel, alt.value(1.0), alt.value(0.25))
    cat = alt.X(f"{x}:N", title=x_title, sort=sort) if not horizontal else \
        alt.Y(f"{x}:N", title=x_title, sort=sort)
    val = alt.Y(f"{y}:Q", title=y_title) if not horizontal else alt.X(f"{y}:Q", title=y_title)
    ch = alt.Chart(df, title=title).mark_bar().encode(
        cat, val, tooltip=_tooltip(df, tooltip), **enc)
    if params:
        ch = ch.add_params(*params)
    return ch.properties(width=width, height=height)


def line(df: pd.DataFrame, x: str, y: str, title: str, *, x_title: str, y_title: str,
         color: str | None = None, color_title: str | None = None,
         tooltip: Sequence | None = None, points: bool = True,
         x_type: str = "quantitative", width: int = 480, height: int = 240) -> alt.Chart:
    """Lines of ``y`` against ``x``, one per ``color`` group; zoom and pan
    with the mouse, click a legend entry to highlight a line."""
    enc = {}
    ch = alt.Chart(df, title=title).mark_line(point=points).encode(
        x=alt.X(f"{x}:{x_type[0].upper()}", title=x_title),
        y=alt.Y(f"{y}:Q", title=y_title),
        tooltip=_tooltip(df, tooltip))
    if color is not None:
        sel = alt.selection_point(fields=[color], bind="legend")
        enc["color"] = alt.Color(f"{color}:N", title=color_title or color)
        enc["opacity"] = alt.condition(sel, alt.value(1.0), alt.value(0.2))
        ch = ch.encode(**enc).add_params(sel)
    return ch.properties(width=width, height=height).interactive()


def scatter(df: pd.DataFrame, x: str, y: str, title: str, *, x_title: str, y_title: str,
            color: str | None = None, color_title: str | None = None,
            size: str | None = None, size_title: str | None = None,
            tooltip: Sequence | None = None, log_x: bool = False, log_y: bool = False,
            width: int = 480, height: int = 300,
            legend_select: alt.Parameter | None = None) -> alt.Chart:
    """Points of ``y`` against ``x``; optional colour / size fields; log
    scales on request; zoom and pan; legend click highlights a group."""
    sx = alt.Scale(type="log") if log_x else alt.Scale(zero=False)
    sy = alt.Scale(type="log") if log_y else alt.Scale(zero=False)
    ch = alt.Chart(df, title=title).mark_circle(opacity=0.8).encode(
        x=alt.X(f"{x}:Q", title=x_title, scale=sx),
        y=alt.Y(f"{y}:Q", title=y_title, scale=sy),
        tooltip=_tooltip(df, tooltip))
    if size is not None:
        values = sorted(pd.to_numeric(df[size], errors="coerce").dropna().unique().tolist())
        ch = ch.encode(size=alt.Size(f"{size}:Q", title=size_title or size,
                                     legend=alt.Legend(values=values[:6])))
    if color is not None:
        sel = legend_select or alt.selection_point(fields=[color], bind="legend")
        ch = ch.encode(color=alt.Color(f"{color}:N", title=color_title or color),
                       opacity=alt.condition(sel, alt.value(0.85), alt.value(0.1)))
        if legend_select is None:
            ch = ch.add_params(sel)
    return ch.properties(width=width, height=height).interactive()


# -- chapter 1 ---------------------------------------------------------------

def hierarchy_chart(topo: Topology, per_row: int | None = None, max_per_row: int = 64,
                    px_per_cpu: int | None = None, title: str | None = None) -> alt.Chart:
    """An icicle drawing of ``topo``: package, die, node, cluster, core and
    thread bands from top to bottom, CPUs left to right in hierarchy order.

    Machines with more than ``max_per_row`` CPUs are wrapped into strips of
    equal length (one facet row each; ``per_row`` forces a length), so 256
    CPUs stay readable. Hover a rectangle for its CPUs. Thread labels
    (``t0``, ``t1``) are printed in the first strip only: the pattern repeats,
    and a label per CPU would make a big machine's page grow with its CPU
    count (the book's word limit counts a chart's text).
    """
    if per_row is None:
        n = max(len(topo.cpus), 1)
        strips = -(-n // max_per_row)
        per_row = -(-n // strips)
    df = hierarchy_rects(topo, per_row=per_row)
    df.loc[(df["row"] > 0) & (df["level"] == "thread"), "label"] = ""
    ncols = int(df["x1"].max()) if len(df) else 1
    px = px_per_cpu or max(8, min(40, 720 // max(ncols, 1)))
    width = px * ncols
    df = df.assign(color_key=df["level"] + df["shade"].map({0: "", 1: " (alt)"}))
    domain = [k for lv in LEVELS for k in (lv, lv + " (alt)")]
    rng = [c for lv in LEVELS for c in LEVEL_COLORS[lv]]
    title = title or f"CPU hierarchy of {topo.name} ({len(topo.cpus)} CPUs)"
    x = alt.X("x0:Q", title="CPU position in hierarchy order (CPUs)",
              scale=alt.Scale(domain=[0, ncols], nice=False),
              axis=alt.Axis(tickMinStep=1))
    y = alt.Y("level:N", title="level (outermost on top)", sort=level_order(topo))
    base = alt.Chart(df).encode(x=x, y=y)
    rect = base.mark_rect(stroke="white", strokeWidth=0.5).encode(
        x2="x1:Q",
        color=alt.Color("color_key:N", scale=alt.Scale(domain=domain, range=rng), legend=None),
        tooltip=[alt.Tooltip("level:N"), alt.Tooltip("value:Q", title="id"),
                 alt.Tooltip("n:Q", title="CPUs"), alt.Tooltip("cpulist:N", title="cpulist")],
    )
    text = base.mark_text(align="left", dx=2, fontSize=9, color="black").encode(
        text="label:N")
    nrows = df["row"].nunique() if len(df) else 1
    layer = alt.layer(rect, text, data=df).properties(width=width, height=6 * 22)
    if nrows > 1:
        return layer.facet(
            row=alt.Row("row_title:N", title=None, sort=alt.SortField("row"),
                        header=alt.Header(labelAngle=0, labelAlign="left",
                                          labelOrient="top")),
        ).properties(title=title)
    return layer.properties(title=title)


def distance_heatmap(topo: Topology, title: str | None = None) -> alt.LayerChart:
    """The SLIT matrix as a heatmap: row = the node the CPU is on, column =
    the node the memory is on, colour = ``node_distance()`` (10 = local)."""
    df = distance_table(topo)
    note = " (no table: kernel default 10/20)" if not topo.distances else ""
    return heatmap(
        df, x="to_node", y="from_node", color="distance",
        title=title or f"NUMA distances of {topo.name}{note}",
        x_title="to node (memory)", y_title="from node (CPU)",
        color_title="SLIT distance (10 = local)",
        tooltip=["from_node", "to_node", "distance",
                 alt.Tooltip("relative:Q", format=".2f", title="x local"),
                 "from_cpus", "to_cpus"],
        scheme="orangered")


def hop_heatmap(topo: Topology, by: str = "hop", title: str | None = None) -> alt.LayerChart:
    """For every pair of nodes, the scheduler hop at which ``to_node``'s CPUs
    join ``sched_numa_hop_mask(from_node, hop)`` (``by="hop"``), or the
    position of ``to_node`` in ``for_each_node_numadist(from_node)``
    (``by="rank"``)."""
    df = node_pair_table(topo)
    if by == "hop":
        df = df.dropna(subset=["hop"]).astype({"hop": int})
        ct, t = "hop level (0 = own node)", f"Scheduler hop level between nodes of {topo.name}"
    else:
        df = df.astype({"rank": int})
        ct, t = "visit order (0 = start)", f"for_each_node_numadist() visit order on {topo.name}"
    return heatmap(df, x="to_node", y="from_node", color=by, title=title or t,
                   x_title="to node", y_title="from node (start)", color_title=ct,
                   tooltip=["from_node", "to_node", "distance", "hop", "rank"],
                   scheme="blues", color_type="ordinal")


def node_graph_table(topo: Topology, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Node positions and edges for :func:`node_graph_chart`.

    The layout places nodes so that drawn lengths follow SLIT distances
    (Kamada-Kawai on ``distance - 10``, symmetrised, started from a seeded
    spring layout): same topology and seed, same picture. Edges: every pair
    when there are at most 8 nodes, else each node's nearest remote nodes.
    """
    import networkx as nx

    ids = topo.node_ids
    g = nx.Graph()
    g.add_nodes_from(ids)
    dist = {}
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            d = (topo.distance(a, b) + topo.distance(b, a)) / 2
            dist[(a, b)] = d
            g.add_edge(a, b, distance=d, weight=1.0 / max(d - 9, 1))
    if len(ids) == 1:
        pos = {ids[0]: (0.0, 0.0)}
    else:
        start = nx.spring_layout(g, seed=seed, weight="weight")
        spl = {a: {b: (0.0 if a == b else max(dist.get((a, b), dist.get((b, a), 20)) - 10, 1))
                   for b in ids} for a in ids}
        pos = nx.kamada_kawai_layout(g, dist=spl, pos=start)
    nodes = pd.DataFrame([{
        "node": n, "x": float(pos[n][0]), "y": float(pos[n][1]),
        "cpus": topo.nodes[n].cpus.bit_count(),
        "kind": "CPUs and memory" if topo.nodes[n].cpus else "memory only",
        "memory_gib": (topo.nodes[n].memory_bytes or 0) / 2**30,
    } for n in ids])
    keep = set(dist)
    if len(ids) > 8:
        keep = set()
        for a in ids:
            others = [b for b in ids if b != a]
            near = min(topo.distance(a, b) for b in others)
            keep |= {tuple(sorted((a, b))) for b in others if topo.distance(a, b) == near}
    edges = pd.DataFrame([{
        "a": a, "b": b, "distance": dist[(a, b)],
        "x": float(pos[a][0]), "y": float(pos[a][1]),
        "x2": float(pos[b][0]), "y2": float(pos[b][1]),
    } for (a, b) in sorted(keep)], columns=["a", "b", "distance", "x", "y", "x2", "y2"])
    return nodes, edges


def node_graph_chart(topo: Topology, seed: int = 0, title: str | None = None) -> alt.LayerChart:
    """NUMA nodes as points (size = CPUs, shape = memory-only or not) joined
    by rules coloured by distance; nearer nodes are drawn closer."""
    nodes, edges = node_graph_table(topo, seed=seed)
    x_title = "layout x (arbitrary units; closer = smaller SLIT distance)"
    y_title = "layout y (arbitrary units)"
    ax = alt.Axis(labels=False, ticks=False, grid=False)
    sc = alt.Scale(zero=False, padding=30, nice=False)
    rules = alt.Chart(edges).mark_rule(strokeWidth=2, opacity=0.7).encode(
        x=alt.X("x:Q", title=x_title, axis=ax, scale=sc),
        y=alt.Y("y:Q", title=y_title, axis=ax, scale=sc),
        x2="x2:Q", y2="y2:Q",
        color=alt.Color("distance:Q", title="SLIT distance (10 = local)",
                        scale=alt.Scale(scheme="orangered")),
        tooltip=[alt.Tooltip("a:O", title="node"), alt.Tooltip("b:O", title="node"),
                 alt.Tooltip("distance:Q", title="SLIT distance")])
    pts = alt.Chart(nodes).mark_point(filled=True, opacity=1, color="#333").encode(
        x=alt.X("x:Q", title=x_title, axis=ax, scale=sc),
        y=alt.Y("y:Q", title=y_title, axis=ax, scale=sc),
        size=alt.Size("cpus:Q", title="CPUs in node", scale=alt.Scale(range=[80, 600]),
                      legend=alt.Legend(values=sorted(nodes["cpus"].unique().tolist())[:6])),
        shape=alt.Shape("kind:N", title="node kind"),
        tooltip=["node:O", "cpus:Q", "kind:N", alt.Tooltip("memory_gib:Q", format=".1f",
                                                     title="memory (GiB)")])
    labels = alt.Chart(nodes).mark_text(dx=12, dy=-12, fontSize=12, fontWeight="bold").encode(
        x=alt.X("x:Q", title=x_title, axis=ax, scale=sc),
        y=alt.Y("y:Q", title=y_title, axis=ax, scale=sc), text="node:N")
    return alt.layer(rules, pts, labels).properties(
        title=title or f"NUMA nodes of {topo.name} by distance", width=360, height=300
    ).resolve_scale(color="independent").interactive()


def compare_chart(machines: dict[str, Topology] | pd.DataFrame,
                  title: str = "The machines side by side") -> alt.HConcatChart:
    """Two panels: CPUs against NUMA nodes (log scales, colour = arch, size =
    SMT ways), and the far/near distance ratio per machine."""
    df = machines if isinstance(machines, pd.DataFrame) else compare_machines(machines)
    tip = ["machine", "arch", "cpus", "nodes", "packages", "cores", "clusters", "smt",
           alt.Tooltip("distance_ratio:Q", format=".2f"), "distance_levels", "cluster_source"]
    sel = alt.selection_point(fields=["arch"], bind="legend")
    left = scatter(df, "cpus", "nodes", "CPUs and NUMA nodes per machine",
                   x_title="CPUs (count, log scale)", y_title="NUMA nodes (count, log scale)",
                   color="arch", color_title="architecture", size="smt",
                   size_title="SMT threads per core", tooltip=tip, log_x=True, log_y=True,
                   legend_select=sel,
                   width=360, height=300).add_params(sel)
    multi = df[df["nodes"] > 1]
    right = bar(multi, "machine", "distance_ratio",
                "Farthest / nearest remote distance (machines with 2+ nodes)",
                x_title="machine", y_title="distance ratio (max / min off-diagonal, no unit)",
                color="arch", color_title="architecture", tooltip=tip, sort="-x",
                horizontal=True, width=260, height=max(120, 14 * len(multi)),
                legend_select=sel)
    return alt.hconcat(left, right, title=title).resolve_scale(color="shared")
