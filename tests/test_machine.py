"""Chapter 1's tidy tables about machines."""

import math

import pandas as pd
import pytest

from numalab.cpumask import parse_cpulist
from numalab.datasets import hwloc_dir
from numalab.kernel.sched.topology import for_each_numa_hop_mask, sched_init_numa
from numalab.models.machine.tables import (MACHINE_TABLE_COLUMNS, compare_machines, distance_table,
                                    hierarchy_rects, hierarchy_table, hop_order_table,
                                    level_order, machine_table, node_pair_table, pick_contrast,
                                    pick_focus)
from numalab.topology import load
from numalab.topology.model import CPU, Node, Topology

RING = [[10, 20, 30, 20], [20, 10, 20, 30], [30, 20, 10, 20], [20, 30, 20, 10]]


def smt_box(smt_apart=True):
    """2 packages x 1 node x 2 cores x 2 threads, x86 numbering (siblings
    n and n+4), cluster info from the L2 fallback."""
    cpus = {}
    for c in range(8):
        core = c % 4
        pkg = core // 2
        sib = (1 << core) | (1 << (core + 4))
        cpus[c] = CPU(id=c, node=pkg, package=pkg, die=0, core=core % 2,
                      thread_siblings=sib, cluster_cpus=sib, package_cpus=0x33 << (2 * pkg),
                      die_cpus=0x33 << (2 * pkg), cluster_source="l2")
    return Topology(name="smt", arch="x86", possible=0xFF, present=0xFF, online=0xFF,
                    cpus=cpus, nodes={0: Node(0, 0x33), 1: Node(1, 0xCC)},
                    distances=[[10, 21], [21, 10]]).validate()


def test_hierarchy_table_one_row_per_cpu_in_hierarchy_order():
    h = hierarchy_table(smt_box())
    assert len(h) == 8 and sorted(h["cpu"]) == list(range(8))
    assert h["cpu"].tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    row = h.set_index("cpu").loc[5]
    assert (row["package"], row["node"], row["core"], row["thread"]) == (0, 0, 1, 1)
    assert row["core_id"] == 1 and row["cluster"] == 1 and row["cluster_source"] == "l2"
    # core ids repeat across packages; the "core" column does not
    assert h.groupby("core")["package"].nunique().max() == 1
    assert h["core"].nunique() == 4


def test_level_order_puts_a_multi_package_node_on_top():
    assert level_order(smt_box())[:3] == ["package", "die", "node"]
    t = load("numa:2 pack:2 core:2 pu:1")
    assert level_order(t)[:2] == ["node", "package"]


def test_hierarchy_rects_tile_every_level_and_wrap():
    t = load("pack:2 numa:2 core:4 pu:2")       # 32 CPUs
    r = hierarchy_rects(t, per_row=12)
    assert r["row"].max() == 2                   # 12 + 12 + 8
    for (row, level), g in r.groupby(["row", "level"]):
        g = g.sort_values("x0")
        assert g["x0"].iloc[0] == 0
        assert (g["x0"].iloc[1:].values == g["x1"].iloc[:-1].values).all()   # no gaps
        assert (g["n"] == g["x1"] - g["x0"]).all()
    per_level = r.groupby("level")["n"].sum()
    assert (per_level == 32).all()
    # node 1 (CPUs 8-15) crosses the strip boundary at 12: cut in two
    nodes = r[(r["level"] == "node") & (r["value"] == 1)]
    assert nodes["n"].tolist() == [4, 4] and nodes["cpulist"].tolist() == ["8-11", "12-15"]
    assert nodes["shade"].nunique() == 1         # one node, one shade


def test_distance_table_long_form_keeps_direction():
    t = Topology("a", nodes={0: Node(0, 1), 1: Node(1, 2)}, distances=[[10, 12], [30, 10]])
    d = distance_table(t).set_index(["from_node", "to_node"])
    assert len(d) == 4
    assert d.loc[(0, 1), "distance"] == 12 and d.loc[(1, 0), "distance"] == 30
    assert d.loc[(1, 0), "relative"] == 3.0 and bool(d.loc[(1, 1), "local"])
    t2 = Topology("b", nodes={0: Node(0, 1), 1: Node(1, 2)})
    d2 = distance_table(t2)
    assert d2["defaulted"].all() and sorted(d2["distance"]) == [10, 10, 20, 20]


def ring():
    nodes = {n: Node(n, 0b11 << (2 * n)) for n in range(4)}
    cpus = {c: CPU(id=c, node=c // 2, thread_siblings=1 << c) for c in range(8)}
    return Topology("ring", possible=0xFF, present=0xFF, online=0xFF, cpus=cpus,
                    nodes=nodes, distances=RING).validate()


def test_hop_order_table_matches_the_hop_masks():
    t = ring()
    h = hop_order_table(t)
    assert len(h) == 4 * 3
    n0 = h[h["node"] == 0]
    assert n0["nodes"].tolist() == ["0", "1,3", "2"]
    assert n0["distance"].tolist() == [10, 20, 30]
    assert n0["new_cpus"].tolist() == [2, 4, 2] and n0["cpus"].tolist() == [2, 6, 8]
    assert n0["cpulist"].tolist() == ["0-1", "2-3,6-7", "4-5"]
    s = sched_init_numa(t)
    for node, g in h.groupby("node"):
        weights = [m.bit_count() for m in for_each_numa_hop_mask(s, node)]
        assert g["cpus"].tolist() == weights


def test_hop_order_table_skips_cpuless_nodes_and_shows_empty_hops():
    t = ring()
    t = t.replace(nodes={**t.nodes, 4: Node(4, 0)},
                  distances=[r + [40] for r in RING] + [[40, 40, 40, 40, 10]])
    h = hop_order_table(t)
    assert 4 not in set(h["node"])
    pairs = node_pair_table(t)
    assert pairs[(pairs["from_node"] == 4)]["hop"].isna().all()
    assert pairs[(pairs["from_node"] == 4) & (pairs["to_node"] == 4)]["rank"].item() == 0
    # asymmetric case: node 1 gains nothing at the middle level
    d = [[10, 15, 30], [30, 10, 30], [30, 30, 10]]
    t3 = Topology("asym", online=0b111, cpus={c: CPU(id=c, node=c) for c in range(3)},
                  nodes={n: Node(n, 1 << n) for n in range(3)}, distances=d)
    h3 = hop_order_table(t3)
    assert h3[h3["node"] == 1]["nodes"].tolist() == ["1", "", "0,2"]
    assert h3[h3["node"] == 1]["new_cpus"].tolist() == [1, 0, 2]


def test_node_pair_table_hop_and_rank():
    p = node_pair_table(ring()).set_index(["from_node", "to_node"])
    assert p.loc[(0, 2), "hop"] == 2 and p.loc[(0, 3), "hop"] == 1
    assert [p.loc[(0, n), "rank"] for n in range(4)] == [0, 1, 3, 2]


def test_compare_machines_counts():
    machines = {"smt": smt_box(), "ring": ring(), "one": load("numa:1 core:4 pu:2")}
    df = compare_machines(machines).set_index("machine")
    assert list(df.index) == ["smt", "ring", "one"]
    s = df.loc["smt"]
    assert (s["cpus"], s["packages"], s["nodes"], s["cores"], s["smt"]) == (8, 2, 2, 4, 2)
    assert s["cluster_source"] == "l2" and s["cluster_size"] == 2
    assert s["distance_ratio"] == 1.0 and s["distance_levels"] == 2
    r = df.loc["ring"]
    assert r["distance_ratio"] == 1.5 and r["distance_levels"] == 3
    assert r["cpus_per_node_min"] == r["cpus_per_node_max"] == 2
    o = df.loc["one"]
    assert math.isnan(o["distance_ratio"]) and o["smt"] == 2 and o["cpu_nodes"] == 1


def test_compare_machines_memory_only_nodes():
    t = ring()
    t = t.replace(nodes={**t.nodes, 4: Node(4, 0)},
                  distances=[r + [40] for r in RING] + [[40, 40, 40, 40, 10]])
    row = compare_machines({"x": t}).iloc[0]
    assert row["nodes"] == 5 and row["cpu_nodes"] == 4 and row["memory_only_nodes"] == 1
    assert row["distance_max"] == 40 and row["distance_levels"] == 3   # 40 involves node 4 only


def test_real_machines_load_and_compare():
    t = load(hwloc_dir() / "linux" / "128arm-2pa2n8cluster4co.tar.bz2")
    df = compare_machines({"arm": t}).iloc[0]
    assert df["cpus"] == 128 and df["nodes"] == 4 and df["cluster_size"] == 4
    assert df["cluster_source"] == "sysfs"
    h = hierarchy_table(t)
    assert len(h) == 128 and h.groupby("node")["cpu"].count().tolist() == [32] * 4
    ho = hop_order_table(t)
    assert (ho.groupby("node")["cpus"].max() == 128).all()
    assert isinstance(ho, pd.DataFrame)


def test_pick_focus_and_contrast():
    m = {"one": load("numa:1 core:2"), "two": ring(), "three": smt_box()}
    assert pick_focus(m, "", ["one", "three"]) == "three"      # first project machine with 2+ nodes
    assert pick_focus(m, "", ["one"]) == "one"
    assert pick_focus(m, "", []) == "one"
    assert pick_focus(m, "two", ["one"]) == "two"
    with pytest.raises(ValueError, match="not one of"):
        pick_focus(m, "nope")
    assert pick_contrast(m) == "two"                            # 3 levels beats 2
    assert pick_contrast(m, max_nodes=2) == "three"


def test_machine_table_shows_reader_notes(tmp_path):
    """Chapter 1's table: a dump read with a quirk carries the reader's note,
    a clean description carries none."""
    from bad_corpus import CPU, NODE, _write_tree, good_files, good_links

    files = good_files()
    del files[f"{CPU}/online"]
    files[f"{CPU}/cpu0/online"] = b""                     # the Superdome quirk
    files[f"{NODE}/node1/distance"] = b""                 # a copy that lost its content
    _write_tree(tmp_path / "box", files, good_links())
    machines = {"quirky": load(tmp_path / "box"), "clean": load("numa:2 core:2")}
    table = machine_table(machines).set_index("machine")
    assert list(table.columns) == MACHINE_TABLE_COLUMNS[1:]
    q = table.loc["quirky"]
    assert q["note_count"] == len(machines["quirky"].meta["notes"]) >= 2
    assert "empty cpuN/online file for CPU(s) 0" in q["notes"]
    assert "distance file missing or empty for node(s) 1" in q["notes"]
    assert not q["slit"]                                  # the matrix was dropped
    c = table.loc["clean"]
    assert c["note_count"] == 0 and c["notes"] == ""
    # the same frame whether given the machines or compare_machines()'s output
    assert machine_table(compare_machines(machines)).equals(machine_table(machines))


# -- the C chapter 1 quotes beside its port ---------------------------------

def _quoted_c() -> str:
    """The ```c block of chapter 1's Markdown (the node walk, Linux 7.2)."""
    import json
    import re
    from numalab.datasets import repo_root
    nb = json.loads((repo_root() / "notebooks" / "01-machine.ipynb").read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    blocks = re.findall(r"```c\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1, "chapter 1 quotes one C block"
    return blocks[0]


def _c_lines(text: str) -> list[str]:
    """C without comments and blank lines, each line's whitespace collapsed."""
    import re
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()]


def test_chapter_one_quotes_linux_7_2s_node_walk():
    """The C beside the port is Linux 7.2's nearest_node_nodemask() and
    for_each_node_numadist(), comments left out (as the chapter says). Runs
    whenever a 7.2 tree with those files is found ($NUMALAB_LINUX_7_2 or the
    lab cache)."""
    import re
    from numalab.kernel.facts import find_tree
    tree = find_tree("7.2")
    if tree is None or not (tree / "mm" / "mempolicy.c").is_file():
        pytest.skip("no Linux 7.2 tree with mm/mempolicy.c: set NUMALAB_LINUX_7_2")
    mempolicy = (tree / "mm" / "mempolicy.c").read_text()
    func = re.search(r"^int nearest_node_nodemask\(.*?^}\n", mempolicy, flags=re.S | re.M).group(0)
    header = (tree / "include" / "linux" / "topology.h").read_text()
    macro = re.search(r"^#define for_each_node_numadist\(.*?[^\\]\n", header,
                      flags=re.S | re.M).group(0)
    assert _c_lines(_quoted_c()) == _c_lines(func) + _c_lines(macro)


def test_quoted_c_is_parsed():
    lines = _c_lines(_quoted_c())
    assert lines[0] == "int nearest_node_nodemask(int node, nodemask_t *mask)"
    assert "if (dist < min_dist) {" in lines      # the strict < the port keeps


def test_dataset_role_finds_fake_anywhere_in_the_name():
    """hwloc's edited dumps are assumed wherever "fake" sits in the file name
    (4fake-4gr1nu1pu, 64fake-4n2s2ca2c2t were labelled measured when only the
    name's start was checked)."""
    from numalab.models.machine.text import dataset_role
    assert dataset_role("data/hwloc/linux/4fake-4gr1nu1pu.tar.bz2") == "assumed"
    assert dataset_role("data/hwloc/linux/64fake-4n2s2ca2c2t.tar.bz2") == "assumed"
    assert dataset_role("data/hwloc/linux/fakeheterocpunuma.tar.bz2") == "assumed"
    assert dataset_role("data/hwloc/linux/16amd64-8n2c.tar.bz2") == "measured"
    assert dataset_role("data/machines/dgx-1.toml") == "published"


def test_collection_counts_distinct_machines_and_splits_by_role():
    """Datasets that repeat a machine (an XML twin with a prime, a second
    collection of the build machine) are one machine; the role table splits
    the node counts by role; the distance sentence counts only multi-node
    dumps with a table other than 10/20 and names a rejected distance."""
    from numalab.models.machine import text as T
    ring = load("numa:4 core:1", distances=RING)
    two = load("numa:2 core:1")
    one = load("core:2")
    machines = {"a-20261123": two.replace(source="data/collected/a-20261123.tar.bz2"),
                "a-20261125": two.replace(source="data/collected/a-20261125.tar.bz2"),
                "r": ring.replace(source="data/hwloc/linux/r.tar.bz2"),
                "r'": ring.replace(source="data/hwloc/xml/r.xml"),
                "z": one.replace(source="data/hwloc/linux/z.tar.bz2", distances=[[0]]),
                "f": ring.replace(source="data/hwloc/linux/4fake-x.tar.bz2")}
    cmp = compare_machines(machines)
    f = T.collection_facts(cmp)
    assert (f["machines"], f["distinct machines"]) == (6, 4)
    assert (f["multi-node dumps"], f["multi-node dumps with distances other than 10/20"]) == (4, 2)
    text = T.describe_collection(cmp)
    assert text.startswith("Of the 6 datasets of this build (4 distinct machines), 5 have more")
    assert "1 hwloc XML export of a sysfs dump" in text and "1 more collection" in text
    details = T.describe_details(cmp)
    assert "2 of 4 multi-node dumps (measured) have distances other than" in details
    assert "`z` has a distance outside 10-255" in details
    roles = T.role_counts(cmp).set_index("role")
    assert roles.loc["measured", "datasets"] == 5 and roles.loc["assumed", "more than two hop levels"] == 1
    assert T.machine_key("x-20261125", "data/collected/x.tar.bz2") == "x"
    assert T.machine_key("x-20261125", "data/hwloc/linux/x.tar.bz2") == "x-20261125"


def test_published_machine_facts_by_role():
    """The focus machine's facts by role come from its file's note; the
    distances of every project machine file are listed as assumed."""
    from numalab.datasets import data_dir, load_cached
    from numalab.models.machine import text as T
    from numalab.models.machine.tables import fact_roles
    dgx = load_cached(str(data_dir() / "machines" / "dgx-1.toml"))
    table = T.fact_roles_table(dgx)
    assert table["role"].tolist() == ["published", "assumed"]
    assert "40 physical cores" in table["facts"].iloc[0] and "80 threads" in table["facts"].iloc[1]
    for toml in sorted((data_dir() / "machines").glob("*.toml")):
        t = load_cached(str(toml))
        assert "distance" in fact_roles(t).get("assumed", "").lower(), toml.name
    assert T.fact_roles_table(load("numa:2 core:1")).empty


def test_walk_ties_counts_the_ties_the_node_id_breaks():
    from numalab.models.machine.text import walk_ties
    assert walk_ties(load("numa:4 core:1", distances=RING)) == 4
    assert walk_ties(load("numa:2 core:1")) == 0
