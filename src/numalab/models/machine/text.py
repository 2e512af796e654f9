"""Chapter 1's result sentences and checked claims, generated from the data.

Every sentence here is built from the machines of the build it runs in, so
the chapter says what *these* machines show. The kernel properties the
chapter states in its prose are checked by :func:`check_hop_claims` on every
machine of the build; a failure stops the build with the sentence quoted.

>>> from numalab.topology import load
>>> t = load("pack:2 numa:1 core:2 pu:2")
>>> describe_hierarchy("m", t)
'`m` has 8 CPUs in 2 packages and 2 NUMA nodes. They form 4 cores of 2 SMT threads each. Its clusters are single cores (clusters from the SMT fallback).'
>>> dataset_role("data/machines/x.toml"), dataset_role("a/b.tar.bz2"), dataset_role("numa:2 core:2")
('published', 'measured', 'assumed')
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ...evidence import claim, count_of, plural
from ...evidence.roles import fmt
from ...kernel.sched.topology import (for_each_node_numadist, for_each_numa_hop_mask,
                                     node_distance, sched_init_numa)
from ...topology.model import Topology

__all__ = ["dataset_role", "describe_hierarchy", "describe_distances", "describe_hops",
           "describe_walk", "describe_collection", "describe_details", "built_on", "role_counts",
           "collection_facts", "check_hop_claims", "ROLE_NOTE", "machine_key", "fact_roles_table", "fact_roles", "walk_ties"]

ROLE_NOTE = {
    "measured": "a dump of a real machine (sysfs, hwloc XML or lscpu)",
    "published": "a patch's published facts; what it does not give (such as SLIT distances) "
                 "is assumed, as its file says",
    "assumed": "a synthetic shape, or a dump hwloc's developers edited (fake in its name)",
}


def dataset_role(source: str) -> str:
    """The role of a machine's facts: ``measured`` for a dump, ``published``
    for a ``.toml`` description of a patch's machine, ``assumed`` for a
    synthetic string or a dump with ``fake`` anywhere in its file name
    (hwloc's developers edited those, data/hwloc/README.md says: besides
    ``fake...``, also ``4fake-4gr1nu1pu`` and ``64fake-4n2s2ca2c2t``).

    >>> dataset_role("data/hwloc/linux/fakeheterocpunuma.tar.bz2")
    'assumed'
    >>> dataset_role("data/hwloc/linux/64fake-4n2s2ca2c2t.tar.bz2")
    'assumed'
    """
    s = str(source)
    if s.endswith(".toml"):
        return "published"
    if Path(s).suffix or "/" in s:
        return "assumed" if "fake" in Path(s).name.lower() else "measured"
    return "assumed"


def machine_key(label: str, source: str = "") -> str:
    """The machine a dataset describes, to count distinct machines.

    Two datasets name one machine when their labels differ only by the
    primes ``'`` that :func:`numalab.datasets.load_datasets` appends to a
    repeated name (an hwloc XML export beside the sysfs dump of the same
    name), or, for dumps made by ``numalab collect`` (``collected`` in the
    path), only by the trailing ``-YYYYMMDD`` date of the collection.

    >>> machine_key("16em64t-4s2c2t'"), machine_key("x86-2cpu-1n-20261125", "data/collected/x.tar.bz2")
    ('16em64t-4s2c2t', 'x86-2cpu-1n')
    """
    key = label.rstrip("'")
    if "collected" in Path(str(source)).parts:
        key = re.sub(r"-\d{8}$", "", key)
    return key


def _sources(topo: Topology) -> str:
    srcs = sorted({c.cluster_source for c in topo.cpus.values()})
    return "+".join(srcs)


def _role_tag(role: str) -> str:
    """`` (measured)`` or `` (assumed)`` after a machine's name; nothing for a
    published machine, whose facts mix published and assumed values (its
    sentences say so instead) or when the role is not given."""
    return f" ({role})" if role in ("measured", "assumed") else ""


def describe_hierarchy(label: str, topo: Topology, role: str = "") -> str:
    """Three short sentences on the focus machine's levels, from its counts
    (each at most 3 numbers, the book's limit for a generated sentence).
    ``role``: the role of the machine's facts (:func:`dataset_role`); a
    published machine gets a fourth sentence pointing to the table of its
    facts by role (:func:`fact_roles_table`), which the chapter shows next.

    >>> from numalab.topology import load
    >>> describe_hierarchy("m", load("numa:2 core:2"), role="published").split(". ")[-1]
    'The table below gives which of these facts the patch published and which are assumed.'
    """
    c = topo.counts()
    smt = max((m.bit_count() for m in topo.cores()), default=1)
    cl = max((m.bit_count() for m in topo.clusters()), default=1)
    cores = c["core"]
    s = (f"`{label}`{_role_tag(role)} has {c['pu']} {plural(c['pu'], 'CPU')} in {c['package']} "
         f"{plural(c['package'], 'package')} and {c['numa']} NUMA {plural(c['numa'], 'node')}. ")
    s += (f"They form {cores} {plural(cores, 'core')} of {smt} SMT threads each. " if smt > 1
          else f"They form {cores} {plural(cores, 'core')}, without SMT. ")
    if c["cluster"] == cores:
        s += "Its clusters are single cores"
    else:
        s += f"They are grouped in {c['cluster']} clusters of up to {cl} CPUs"
    s += f" (clusters from the {_describe_source(_sources(topo))})."
    if role == "published":
        s += " The table below gives which of these facts the patch published and which are assumed."
    return s


def fact_roles(topo: Topology) -> dict[str, str]:
    """The facts of a machine file (``.toml``) by role, from its note: the
    text after each ``Published:``, ``Derived:`` or ``Assumed:`` label, up
    to the next label, with line breaks joined. ``{}`` for a machine
    without such a note (a dump, a synthetic string).

    >>> from numalab.topology import load
    >>> t = load("numa:2 core:1")
    >>> t.meta["note"] = "Published: 2 nodes.\\nAssumed: one core\\nper node."
    >>> fact_roles(t)
    {'published': '2 nodes.', 'assumed': 'one core per node.'}
    """
    import re
    note = str(topo.meta.get("note", "") or "")
    parts = re.split(r"(?:^|\n)(Published|Derived|Assumed):\s*", note)
    out: dict[str, str] = {}
    for name, text in zip(parts[1::2], parts[2::2]):
        out[name.lower()] = " ".join(text.split())
    return out


def fact_roles_table(topo: Topology) -> pd.DataFrame:
    """The facts of a machine file by role (published, derived, assumed), as
    its note states them: one row per role, columns ``role`` and ``facts``;
    empty for a machine without such a note (a dump, a synthetic string).

    >>> from numalab.topology import load
    >>> t = load("numa:2 core:1")
    >>> t.meta["note"] = "Published: 2 nodes.\\nAssumed: one core per node."
    >>> fact_roles_table(t).values.tolist()
    [['published', '2 nodes.'], ['assumed', 'one core per node.']]
    """
    roles = fact_roles(topo)
    rows = [{"role": r, "facts": roles[r]} for r in ("published", "derived", "assumed") if r in roles]
    return pd.DataFrame(rows, columns=["role", "facts"])


def _describe_source(src: str) -> str:
    names = {"sysfs": "kernel's cluster files", "l2": "L2 cache fallback",
             "smt": "SMT fallback", "self": "one-CPU fallback",
             "synthetic": "synthetic description", "xml": "hwloc XML", "lscpu": "lscpu output"}
    return " and ".join(names.get(s, s) for s in src.split("+"))


def describe_distances(label: str, topo: Topology, role: str = "") -> str:
    """Two short sentences on a machine's distance table. ``role``: the role
    of the machine's facts (:func:`dataset_role`). A published machine's
    table comes from its file, where what the patch does not give is assumed:
    the sentence says so rather than call it the machine's own SLIT.

    >>> from numalab.topology import load
    >>> describe_distances("d", load("numa:2 core:1", distances=[[10, 21], [21, 10]]),
    ...                    role="published").split(";")[0]
    '`d` has the distance table of its machine file (assumed where the patch gives none)'
    """
    ids = topo.node_ids
    tag = _role_tag(role)
    if len(ids) < 2:
        return f"`{label}`{tag} has one node: its table is the single local distance."
    off = sorted({node_distance(topo, a, b) for a in ids for b in ids if a != b})
    local = sorted({node_distance(topo, a, a) for a in ids})
    asym = any(node_distance(topo, a, b) != node_distance(topo, b, a) for a in ids for b in ids)
    if topo.distances and role == "published":
        where = "has the distance table of its machine file (assumed where the patch gives none)"
    elif topo.distances:
        where = "gives its own distance table (SLIT)"
    else:
        where = "gives no SLIT, so the kernel uses its default distances"
    s = f"`{label}`{tag} {where}; the local distance is {'/'.join(map(str, local))}. "
    if len(off) == 1:
        s += f"Every remote node is at {off[0]}"
    elif len(off) == 2:
        s += f"The remote distances take 2 values, {off[0]} and {off[1]}"
    else:
        s += f"The remote distances take {len(off)} distinct values, from {off[0]} to {off[-1]}"
    return s + (", and the table is asymmetric." if asym else ".")


def describe_hops(label: str, topo: Topology, node: int) -> str:
    """The hop masks of ``node``: how many levels, and how many add no CPU."""
    state = sched_init_numa(topo)
    masks = list(for_each_numa_hop_mask(state, node))
    if not masks:
        return f"Node {node} of `{label}` has no CPUs, so it has no hop masks."
    added, prev = [], 0
    for m in masks:
        added.append((m & ~prev).bit_count())
        prev = m
    empty = sum(1 for a in added if a == 0)
    s = (f"From node {node} of `{label}`, {len(masks)} hop {plural(len(masks), 'level')} "
         f"reach all {masks[-1].bit_count()} CPUs (port).")
    if empty:
        s += (f" {empty} of them {plural(empty, 'adds', 'add')} no CPU: a distance seen "
              "elsewhere in the machine.")
    return s


def walk_ties(topo: Topology) -> int:
    """How many times the node walks of ``topo`` (``for_each_node_numadist()``
    from every node) meet two nodes at the same distance in a row: the ties
    the walk breaks by node id.

    >>> from numalab.topology import load
    >>> walk_ties(load("numa:3 core:1")), walk_ties(load("numa:2 core:1"))
    (3, 0)
    """
    ties = 0
    for n in topo.node_ids:
        d = [node_distance(topo, n, m) for m in for_each_node_numadist(topo, n)]
        ties += sum(1 for a, b in zip(d, d[1:]) if a == b)
    return ties


def describe_walk(label: str, topo: Topology) -> str:
    """How many ties the node walk breaks by node id on this machine."""
    ids = list(topo.node_ids)
    ties = walk_ties(topo)
    if ties == 0:
        return (f"On `{label}`, no walk from its {len(ids)} nodes meets two nodes at the "
                "same distance, so node ids never decide the order.")
    return (f"On `{label}`, the walks from its {len(ids)} nodes meet {ties} "
            f"{plural(ties, 'tie')} of distance, each broken by node id.")


def _roles(cmp: pd.DataFrame) -> pd.Series:
    """The role of each row's facts (:func:`dataset_role` of its source)."""
    return pd.Series([dataset_role(x) for x in cmp["source"]], index=cmp.index)


def _repeats(cmp: pd.DataFrame) -> tuple[int, int]:
    """``(XML twins, repeated collections)``: datasets whose label ends with
    a prime (an hwloc XML export named like a sysfs dump already loaded),
    and dumps of ``numalab collect`` that repeat a machine collected before."""
    twins = int(cmp["machine"].str.endswith("'").sum())
    coll = cmp[[("collected" in Path(str(x)).parts) for x in cmp["source"]]]
    again = len(coll) - len({machine_key(m, x) for m, x in zip(coll["machine"], coll["source"])})
    return twins, again


def collection_facts(cmp: pd.DataFrame) -> dict[str, int]:
    """Counts over the compared machines (a :func:`compare_machines` table;
    one row per dataset, which :func:`machine_key` groups into machines)."""
    role = _roles(cmp)
    multi_dump = (role == "measured") & (cmp["nodes"] > 1)
    return {
        "machines": len(cmp),
        "distinct machines": len({machine_key(m, x) for m, x in zip(cmp["machine"], cmp["source"])}),
        "single-node machines": int((cmp["nodes"] == 1).sum()),
        "machines with memory-only nodes": int((cmp["memory_only_nodes"] > 0).sum()),
        "machines with more than 2 hop levels": int((cmp["distance_levels"] > 2).sum()),
        "machines with exactly 2 hop levels": int((cmp["distance_levels"] == 2).sum()),
        "machines with SMT": int((cmp["smt"] > 1).sum()),
        "machines whose clusters came from sysfs":
            int(cmp["cluster_source"].str.contains("sysfs").sum()),
        "machines without a SLIT (10/20 default)": int((~cmp["slit"]).sum()),
        "multi-node dumps": int(multi_dump.sum()),
        "multi-node dumps with distances other than 10/20":
            int((multi_dump & ~cmp["slit_default"]).sum()),
        "machines whose reader left notes": int((cmp.get("note_count", 0) > 0).sum())
        if "note_count" in cmp else 0,
    }


def describe_collection(cmp: pd.DataFrame) -> str:
    """The collection's node structure in short sentences, every count with
    its scope (the chapter's verdict for the reviewer's guide): datasets and
    the distinct machines they describe, how many have several nodes and
    more than one remote step, and which datasets repeat a machine."""
    f = collection_facts(cmp)
    n, k = f["machines"], f["distinct machines"]
    multi = n - f["single-node machines"]
    more = f["machines with more than 2 hop levels"]
    distinct = f" ({k} distinct {plural(k, 'machine')})" if k != n else ""
    s = (f"Of the {n} {plural(n, 'dataset')} of this build{distinct}, {multi} "
         f"{plural(multi, 'has', 'have')} more than one NUMA node. ")
    if more:
        s += (f"On {more} of them the kernel sees more than two distance levels, so more "
              "than one remote step exists.")
    else:
        s += ("None has more than two distance levels (local and remote): one remote step "
              "only.")
    twins, again = _repeats(cmp)
    parts = []
    if twins:
        parts.append(f"{twins} hwloc XML {plural(twins, 'export')} of a sysfs dump of the same "
                     "name (a prime, `'`, ends the label)")
    if again:
        parts.append(f"{again} more {plural(again, 'collection')} of the build machine")
    if parts:
        s += " The datasets that repeat a machine are " + " and ".join(parts) + "."
    return s


def describe_details(cmp: pd.DataFrame) -> str:
    """The rest of the collection's counts, in short sentences. The
    distances: how many multi-node dumps have a table other than the
    kernel's 10/20 default, that the published machines' tables are
    assumed, and which dumps hold a distance the kernel rejects."""
    f = collection_facts(cmp)
    n = f["machines"]
    two, smt = f["machines with exactly 2 hop levels"], f["machines with SMT"]
    mem = f["machines with memory-only nodes"]
    s = (f"{count_of(two, n, 'dataset').capitalize()} {plural(two, 'has', 'have')} exactly two "
         f"hop levels, local and remote. ")
    s += f"{count_of(smt, n, 'dataset').capitalize()} {plural(smt, 'has', 'have')} SMT. "
    s += f"{count_of(mem, n, 'dataset').capitalize()} {plural(mem, 'has', 'have')} memory-only nodes."
    dumps, other = f["multi-node dumps"], f["multi-node dumps with distances other than 10/20"]
    if dumps:
        s += (f" {count_of(other, dumps, 'multi-node dump').capitalize()} (measured) "
              f"{plural(other, 'has', 'have')} distances other than the kernel's default "
              "10/20.")
    pub = cmp[_roles(cmp) == "published"]
    assumed = int(pub["distances_assumed"].sum()) if "distances_assumed" in pub else 0
    if len(pub):
        s += (f" The tables of {count_of(assumed, len(pub), 'published machine')} are assumed"
              " (no patch gives one).")
    for label in cmp.loc[cmp.get("distance_invalid", False) == True, "machine"]:  # noqa: E712
        s += (f" `{label}` has a distance outside 10-255: 7.2's `sched_init_numa()` would build "
              "no NUMA levels from it (port), though its firmware checks, not ported, discard such a "
              "table earlier.")
    return s


def built_on(cmp: pd.DataFrame, labels: list[str]) -> str:
    """One or two sentences on the last collected dump among ``labels``
    (``numalab collect``'s machines, role measured), or "" when none."""
    rows = cmp[cmp["machine"].isin(labels)]
    if rows.empty:
        return ""
    r = rows.iloc[-1]
    s = (f"The machine collected for this book (`{r['machine']}`, measured) has {int(r['cpus'])} "
         f"{plural(int(r['cpus']), 'CPU')} in {int(r['nodes'])} NUMA {plural(int(r['nodes']), 'node')}.")
    if int(r["nodes"]) == 1:
        s += (" It shows no NUMA effect itself: the book's NUMA results come from the other "
              "machines' topologies and from real kernels booted on such shapes in the lab.")
    return s


def role_counts(cmp: pd.DataFrame) -> pd.DataFrame:
    """How many datasets of the build have each role (measured, published,
    assumed), how many of those have more than one node and more than two
    hop levels, with what the role means: a small table for the opening."""
    roles = _roles(cmp)
    rows = []
    for r in ("measured", "published", "assumed"):
        sel = cmp[roles == r]
        if len(sel):
            rows.append({"role": r, "datasets": len(sel),
                         "more than one node": int((sel["nodes"] > 1).sum()),
                         "more than two hop levels": int((sel["distance_levels"] > 2).sum()),
                         "what it is": ROLE_NOTE[r]})
    return pd.DataFrame(rows, columns=["role", "datasets", "more than one node",
                                       "more than two hop levels", "what it is"])


def check_hop_claims(machines: dict[str, Topology]) -> int:
    """Check, on every machine, the kernel properties chapter 1 states:

    * each hop mask contains the previous one;
    * memory-only nodes add no distance level and have no hop masks;
    * ``for_each_node_numadist()`` visits nodes in non-decreasing distance,
      breaking ties by lower node id first.

    Returns the number of machines checked; raises ClaimFailed otherwise.
    """
    for label, t in machines.items():
        state = sched_init_numa(t)
        cpu_nodes = [n for n in t.node_ids if t.nodes[n].cpus]
        for n in t.node_ids:
            masks = list(for_each_numa_hop_mask(state, n))
            if n not in cpu_nodes:
                claim(not masks, "memory-only nodes take no part: they have no masks",
                      f"{label}, node {n}")
                continue
            for a, b in zip(masks, masks[1:]):
                claim(a & ~b == 0, "each mask contains the previous one", f"{label}, node {n}")
            order = list(for_each_node_numadist(t, n))
            keys = [(node_distance(t, n, m), m) for m in order]
            claim(keys == sorted(keys),
                  "the walk visits nodes by distance, then by node id", f"{label}, node {n}")
        if len(cpu_nodes) == len(t.node_ids) or not cpu_nodes:
            continue
        levels = sorted({node_distance(t, a, b) for a in cpu_nodes for b in cpu_nodes})
        claim(state.levels == len(levels),
              "memory-only nodes add no levels", f"{label}: {state.levels} vs {len(levels)}")
    return len(machines)
