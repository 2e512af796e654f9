"""``numalab show PATH [--json]``: a topology at a glance."""

from __future__ import annotations

import json

from ..cpumask import format_cpulist
from ..topology import load
from ..topology.model import Topology


def add_parser(sub) -> None:
    p = sub.add_parser("show", help="summarise a topology dump or description",
                       description="Print a machine's topology: counts per level, each "
                                   "node's CPUs and memory, clusters per node, the distance "
                                   "matrix. TOPOLOGY is a sysfs dump (directory or tarball), "
                                   "hwloc XML, lscpu CSV, a .toml description, or a synthetic "
                                   "string such as \"pack:2 numa:1 core:8 pu:2\".")
    p.add_argument("topology", metavar="TOPOLOGY")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--allow-asymmetric", action="store_true",
                   help="keep an asymmetric distance matrix (refused by default)")
    p.set_defaults(func=run)


def _size(nbytes: int | None) -> str:
    if nbytes is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return "?"


def render(topo: Topology) -> str:
    """The human-readable summary printed by ``numalab show``."""
    d = topo.to_dict()
    c = d["counts"]
    lines = [
        f"{topo.name}  ({topo.arch}; source: {topo.source})",
        "  " + "  ".join(f"{k}: {c[k]}" for k in ("package", "die", "numa", "cluster", "core", "pu")),
        f"  possible: {format_cpulist(topo.possible)}   present: {format_cpulist(topo.present)}"
        f"   online: {format_cpulist(topo.online)}",
        "  nodes:",
    ]
    for n in d["nodes"]:
        lines.append(f"    node{n['id']}: cpus {n['cpulist'] or '(none)'}; memory "
                     f"{_size(n['memory_bytes'])}; {n['clusters']} clusters")
    if topo.distances:
        ids = topo.node_ids
        width = max(4, max(len(str(x)) for r in topo.distances for x in r) + 1)
        lines.append("  distances:")
        lines.append("    " + " " * 7 + "".join(f"{'n' + str(i):>{width}}" for i in ids))
        for i, row in zip(ids, topo.distances):
            lines.append(f"    {'node' + str(i):<7}" + "".join(f"{x:>{width}}" for x in row))
    if topo.pci:
        lines.append(f"  pci devices: {len(topo.pci)}")
    if topo.blk_mq:
        lines.append(f"  blk-mq disks: {', '.join(sorted(topo.blk_mq))}")
    if topo.irqs:
        lines.append(f"  irqs: {len(topo.irqs)}")
    # what the reader assumed or settled (a dump without node folders read
    # as one node, overlapping node masks...): never silent
    for note in topo.meta.get("notes", []):
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def run(args) -> int:
    topo = load(args.topology, **({"allow_asymmetric": True} if args.allow_asymmetric else {}))
    if args.json:
        print(json.dumps(topo.to_dict(), indent=1, sort_keys=True))
    else:
        print(render(topo))
    return 0
