"""Chapter 1's result sentences and checked claims, generated from the data.

Every sentence here is built from the machines of the build it runs in, so
the chapter says what *these* machines show. The kernel properties the
chapter states in its prose are checked by :func:`check_hop_claims` on every
machine of the build; a failure stops the build with the sentence quoted.

>>> from numalab.topology import load
>>> t = load("pack:2 numa:1 core:2 pu:2")
>>> describe_hierarchy("m", t)
'*m* has 8 CPUs in 2 packages and 2 NUMA nodes, 4 cores with 2 SMT threads each; its clusters are single cores (clusters from the SMT fallback).'
>>> dataset_role("data/machines/x.toml"), dataset_role("a/b.tar.bz2"), dataset_role("numa:2 core:2")
('published', 'measured', 'assumed')
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...evidence import claim, count_of, plural
from ...evidence.roles import fmt
from ...kernel.sched.topology import (for_each_node_numadist, for_each_numa_hop_mask,
                                     node_distance, sched_init_numa)
from ...topology.model import Topology

__all__ = ["dataset_role", "describe_hierarchy", "describe_distances", "describe_hops",
           "describe_walk", "describe_collection", "collection_facts", "check_hop_claims",
           "ROLE_NOTE"]

ROLE_NOTE = {
    "measured": "read from a dump of a real machine (sysfs, hwloc XML or lscpu)",
    "published": "described from a patch's published facts; values it does not give "
                 "(such as SLIT distances) are assumed, as its file says",
    "assumed": "a synthetic shape",
}


def dataset_role(source: str) -> str:
    """The role of a machine's facts: ``measured`` for a dump, ``published``
    for a ``.toml`` description of a patch's machine, ``assumed`` for a
    synthetic string."""
    s = str(source)
    if s.endswith(".toml"):
        return "published"
    if Path(s).suffix or "/" in s:
        return "measured"
    return "assumed"


def _sources(topo: Topology) -> str:
    srcs = sorted({c.cluster_source for c in topo.cpus.values()})
    return "+".join(srcs)


def describe_hierarchy(label: str, topo: Topology) -> str:
    """One sentence on the focus machine's levels, from its counts."""
    c = topo.counts()
    smt = max((m.bit_count() for m in topo.cores()), default=1)
    cl = max((m.bit_count() for m in topo.clusters()), default=1)
    cores = c["core"]
    parts = [f"*{label}* has {c['pu']} {plural(c['pu'], 'CPU')} in {c['package']} "
             f"{plural(c['package'], 'package')} and {c['numa']} NUMA "
             f"{plural(c['numa'], 'node')}, {cores} {plural(cores, 'core')}"]
    parts.append(f" with {smt} SMT threads each" if smt > 1 else " without SMT")
    if c["cluster"] == cores:
        tail = "; its clusters are single cores"
    else:
        tail = f"; {c['cluster']} clusters of up to {cl} CPUs"
    return "".join(parts) + tail + f" (clusters from the {_describe_source(_sources(topo))})."


def _describe_source(src: str) -> str:
    names = {"sysfs": "kernel's cluster files", "l2": "L2 cache fallback",
             "smt": "SMT fallback", "self": "one-CPU fallback",
             "synthetic": "synthetic description", "xml": "hwloc XML", "lscpu": "lscpu output"}
    return " and ".join(names.get(s, s) for s in src.split("+"))


def describe_distances(label: str, topo: Topology) -> str:
    """One sentence on a machine's distance table."""
    ids = topo.node_ids
    if len(ids) < 2:
        return f"*{label}* has one node: its table is the single local distance."
    off = sorted({node_distance(topo, a, b) for a in ids for b in ids if a != b})
    local = sorted({node_distance(topo, a, a) for a in ids})
    asym = any(node_distance(topo, a, b) != node_distance(topo, b, a) for a in ids for b in ids)
    where = ("distances as its data give them" if topo.distances
             else "no SLIT in its data, so the kernel default")
    s = (f"*{label}* ({where}): local distance {'/'.join(map(str, local))}, "
         f"{len(off)} distinct remote {plural(len(off), 'value')} "
         f"({', '.join(map(str, off))})")
    s += ", and the table is asymmetric." if asym else "."
    return s


def describe_hops(label: str, topo: Topology, node: int) -> str:
    """The hop masks of ``node``: how many levels and CPUs each adds."""
    state = sched_init_numa(topo)
    masks = list(for_each_numa_hop_mask(state, node))
    if not masks:
        return f"Node {node} of *{label}* has no CPUs, so it has no hop masks."
    added, prev = [], 0
    for m in masks:
        added.append((m & ~prev).bit_count())
        prev = m
    gains = ", ".join(str(a) for a in added)
    empty = sum(1 for a in added if a == 0)
    s = (f"From node {node} of *{label}*, {len(masks)} hop "
         f"{plural(len(masks), 'level')} add {gains} CPUs in turn")
    if empty:
        s += f"; {empty} of them add{'s' if empty == 1 else ''} none (a level seen elsewhere)"
    return s + "."


def describe_walk(label: str, topo: Topology) -> str:
    """How many ties the node walk breaks by node id on this machine."""
    ids = [n for n in topo.node_ids]
    ties = 0
    for n in ids:
        order = list(for_each_node_numadist(topo, n))
        d = [node_distance(topo, n, m) for m in order]
        ties += sum(1 for a, b in zip(d, d[1:]) if a == b)
    if ties == 0:
        return (f"On *{label}*, no walk from its {len(ids)} nodes meets two nodes at the "
                "same distance, so node ids never decide the order.")
    return (f"On *{label}*, the walks from its {len(ids)} nodes meet {ties} "
            f"{plural(ties, 'tie')} of distance, each broken by node id.")


def collection_facts(cmp: pd.DataFrame) -> dict[str, int]:
    """Counts over the compared machines (a :func:`compare_machines` table)."""
    return {
        "machines": len(cmp),
        "single-node machines": int((cmp["nodes"] == 1).sum()),
        "machines with memory-only nodes": int((cmp["memory_only_nodes"] > 0).sum()),
        "machines with more than 2 hop levels": int((cmp["distance_levels"] > 2).sum()),
        "machines with exactly 2 hop levels": int((cmp["distance_levels"] == 2).sum()),
        "machines with SMT": int((cmp["smt"] > 1).sum()),
        "machines whose clusters came from sysfs":
            int(cmp["cluster_source"].str.contains("sysfs").sum()),
        "machines without a SLIT (10/20 default)": int((~cmp["slit"]).sum()),
        "machines whose reader left notes": int((cmp.get("note_count", 0) > 0).sum())
        if "note_count" in cmp else 0,
    }


def describe_collection(cmp: pd.DataFrame) -> str:
    """The collection in two sentences, every count with its scope."""
    f = collection_facts(cmp)
    n = f["machines"]
    multi = n - f["single-node machines"]
    two, more = f["machines with exactly 2 hop levels"], f["machines with more than 2 hop levels"]
    s = (f"Of the {n} {plural(n, 'machine')} of this build, {multi} "
         f"{plural(multi, 'has', 'have')} more than one node; "
         f"{count_of(two, n, 'machine')} {plural(two, 'has', 'have')} exactly two hop levels "
         f"(local and remote) and {count_of(more, n, 'machine')} "
         f"{plural(more, 'has', 'have')} more, where the order of the walk matters. ")
    smt = f["machines with SMT"]
    slit = n - f["machines without a SLIT (10/20 default)"]
    s += (f"{count_of(smt, n, 'machine').capitalize()} {plural(smt, 'has', 'have')} SMT, and "
          f"the data of {count_of(slit, n, 'machine')} give a SLIT")
    s += "." if slit == n else " (the others get the kernel's 10/20 default)."
    return s


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
