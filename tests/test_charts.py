"""The shared chart builders: every chart has a title, axis titles with
units, tooltips, and a spec that Vega-Lite's schema accepts."""

import altair as alt
import pandas as pd
import pytest

from numalab import charts
from numalab.datasets import hwloc_dir
from numalab.topology import load
from numalab.topology.model import CPU, Node, Topology

UNIT_WORDS = ("(", "count", "CPUs", "node", "level", "distance", "unit", "machine")


def walk(spec):
    """Yield every (sub)spec dict of a chart."""
    if isinstance(spec, dict):
        yield spec
        for v in spec.values():
            yield from walk(v)
    elif isinstance(spec, list):
        for v in spec:
            yield from walk(v)


def check(chart):
    d = chart.to_dict(validate=True)           # raises on an invalid spec
    assert d.get("title"), "chart has no title"
    axes = 0
    tooltips = 0
    for s in walk(d):
        enc = s.get("encoding")
        if not isinstance(enc, dict):
            continue
        for ch in ("x", "y"):
            e = enc.get(ch)
            if isinstance(e, dict) and "field" in e:
                axes += 1
                assert e.get("title"), f"{ch} axis of {e['field']} has no title"
                assert any(w in e["title"] for w in UNIT_WORDS), e["title"]
        if "tooltip" in enc:
            tooltips += 1
    assert axes >= 2 and tooltips >= 1
    return d


def small():
    return load("pack:2 numa:2 cluster:2 core:2 pu:2",
                distances=[[10, 12, 32, 32], [12, 10, 32, 32], [32, 32, 10, 12], [32, 32, 12, 10]])


def test_generic_builders():
    df = pd.DataFrame({"a": [1, 2, 3, 1], "b": [0, 0, 1, 1], "v": [1.0, 2.5, 3.0, 0.5],
                       "g": ["x", "y", "x", "y"]})
    check(charts.heatmap(df, "a", "b", "v", "H", x_title="a (CPU)", y_title="b (node)",
                         color_title="v (ns)"))
    check(charts.bar(df, "g", "v", "B", x_title="group (machine)", y_title="v (count)", color="g"))
    check(charts.bar(df, "g", "v", "B", x_title="group (machine)", y_title="v (count)",
                     horizontal=True))
    check(charts.line(df, "a", "v", "L", x_title="a (CPUs)", y_title="v (ns)", color="g"))
    check(charts.scatter(df, "a", "v", "S", x_title="a (CPUs)", y_title="v (ns)",
                         color="g", size="b", log_x=True))


def test_heatmap_text_is_readable_on_both_ends():
    df = pd.DataFrame({"a": [0, 1], "b": [0, 0], "v": [10, 30]})
    d = charts.heatmap(df, "a", "b", "v", "H", x_title="a (node)", y_title="b (node)",
                       color_title="v (SLIT)").to_dict()
    text = [layer for layer in d["layer"] if layer["mark"]["type"] == "text"][0]
    cond = text["encoding"]["color"]["condition"]
    assert "20.0" in cond["test"]               # the midpoint of 10 and 30


def test_chapter_one_charts_on_a_small_machine():
    t = small()
    check(charts.hierarchy_chart(t))
    d = check(charts.distance_heatmap(t))
    values = {r["distance"] for r in d["datasets"][next(iter(d["datasets"]))]}
    assert values == {10, 12, 32}
    check(charts.node_graph_chart(t))
    check(charts.hop_heatmap(t))
    check(charts.hop_heatmap(t, by="rank"))
    check(charts.compare_chart({"a": t, "b": load("numa:1 core:4 pu:2")}))


def test_hierarchy_chart_wraps_256_cpus_into_strips():
    t = load("pack:4 numa:2 core:16 pu:2")
    d = check(charts.hierarchy_chart(t, per_row=64))
    assert "facet" in d and "256 CPUs" in d["title"]
    rects = d["datasets"][next(iter(d["datasets"]))]
    rows = {r["row"] for r in rects}
    assert rows == {0, 1, 2, 3}
    # thread labels in the first strip only: the chart's text does not grow with the CPUs
    labelled = [r for r in rects if r["level"] == "thread" and r["label"]]
    assert len(labelled) == 64 and {r["row"] for r in labelled} == {0}


def test_node_graph_is_deterministic_and_puts_near_nodes_closer():
    t = small()
    n1, e1 = charts.node_graph_table(t, seed=3)
    n2, e2 = charts.node_graph_table(t, seed=3)
    pd.testing.assert_frame_equal(n1, n2)
    pos = n1.set_index("node")[["x", "y"]]
    def dist(a, b):
        return ((pos.loc[a] - pos.loc[b]) ** 2).sum() ** 0.5
    assert dist(0, 1) < dist(0, 2) and dist(2, 3) < dist(1, 3)
    assert len(e1) == 6


def test_node_graph_keeps_only_nearest_edges_on_big_machines():
    n = 12
    d = [[10 if i == j else (12 if abs(i - j) == 1 else 30) for j in range(n)] for i in range(n)]
    t = Topology("line", nodes={i: Node(i, 1 << i) for i in range(n)}, distances=d,
                 cpus={i: CPU(id=i, node=i) for i in range(n)}, online=(1 << n) - 1)
    nodes, edges = charts.node_graph_table(t)
    assert len(edges) == n - 1 and (edges["distance"] == 12).all()
    check(charts.node_graph_chart(t))


def test_single_node_and_cpuless_machines_draw():
    check(charts.node_graph_chart(load("numa:1 core:2")))
    t = Topology("cpuless", nodes={0: Node(0, 0b11), 1: Node(1, 0)},
                 cpus={0: CPU(id=0, node=0), 1: CPU(id=1, node=0)}, online=0b11,
                 distances=[[10, 17], [17, 10]])
    check(charts.distance_heatmap(t))
    check(charts.hop_heatmap(t))
    check(charts.node_graph_chart(t))


def test_real_machine_charts():
    t = load(hwloc_dir() / "linux" / "256ia64-64n2s2c.tar.bz2")
    d = check(charts.hierarchy_chart(t))
    assert "facet" in d
    check(charts.distance_heatmap(t))
    check(charts.node_graph_chart(t))
